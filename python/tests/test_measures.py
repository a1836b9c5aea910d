"""Measures on numpy arrays and torch tensors: each against its definition computed here with numpy, and `measure`
against the command line's measures.csv on the same data."""
import warnings

import numpy as np
import pytest
import torch

import rankscope as rs
from conftest import FIXTURES, assert_table_equals_csv, cli_error, composite_norm, relative_residual_reference, run_cli


def norm_reference(m, norm):
    if norm == "l1":
        return np.abs(m).sum(-2).max(-1)
    if norm == "linf":
        return np.abs(m).sum(-1).max(-1)
    if norm == "composite":
        return composite_norm(m)
    if norm == "frobenius":
        return np.sqrt((m ** 2).sum((-2, -1)))
    return np.linalg.svd(m, compute_uv=False)[..., 0]


def rank1_residual_reference(x):
    u, s, vt = np.linalg.svd(x, full_matrices=False)
    return x - s[..., :1, None] * u[..., :, :1] @ vt[..., :1, :]


@pytest.fixture
def batch(rng):
    # [2, 3, n, d]: partly aligned rows (a shared offset), as a hidden state is.
    return rng.normal(size=(2, 3, 1, 6)) * 2 + rng.normal(size=(2, 3, 9, 6))


@pytest.mark.parametrize("norm", ["l1", "linf", "composite", "frobenius", "spectral"])
def test_norms_and_mean_median_rank1_residuals_match_their_definitions(batch, norm):
    np.testing.assert_allclose(rs.matrix_norm(batch, norm), norm_reference(batch, norm), rtol=1e-12)
    centred = {"mean": batch - batch.mean(-2, keepdims=True),
               "median": batch - np.median(batch, axis=-2, keepdims=True),
               "rank1": rank1_residual_reference(batch)}
    for center, reference in centred.items():
        expected = norm_reference(reference, norm)
        np.testing.assert_allclose(rs.residual_norm(batch, norm, center), expected, rtol=1e-10, err_msg=center)
        np.testing.assert_allclose(rs.relative_residual(batch, norm, center), expected / norm_reference(batch, norm),
                                   rtol=1e-10, err_msg=center)
        np.testing.assert_allclose(rs.residual(batch, norm, center), reference, atol=1e-12, err_msg=center)


def test_paper_measure_on_float32_and_torch_matches_numpy_and_keeps_the_kind(batch):
    x32 = batch.astype(np.float32)
    expected = relative_residual_reference(x32.astype(np.float64))
    np.testing.assert_allclose(rs.relative_residual(x32), expected, rtol=1e-12)
    t = torch.from_numpy(x32)
    got = rs.relative_residual(t)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float64 and tuple(got.shape) == (2, 3)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12)
    # requires_grad, non-contiguous (transposed twice) and float16 inputs are accepted too.
    np.testing.assert_allclose(rs.relative_residual(t.clone().requires_grad_(True)).numpy(), expected, rtol=1e-12)
    strided = np.asfortranarray(batch)
    np.testing.assert_allclose(rs.relative_residual(strided), relative_residual_reference(batch), rtol=1e-12)
    reversed_rows = batch[:, :, ::-1]  # negative strides (copied: ATen has none)
    np.testing.assert_allclose(rs.relative_residual(reversed_rows), relative_residual_reference(reversed_rows),
                               rtol=1e-12)
    big_endian = batch.astype(">f8")
    np.testing.assert_allclose(rs.relative_residual(big_endian), relative_residual_reference(batch), rtol=1e-12)
    half = batch.astype(np.float16)
    np.testing.assert_allclose(rs.relative_residual(half), relative_residual_reference(half.astype(np.float64)),
                               rtol=1e-12)


def test_centres_exact_centre_and_its_optimality(rng):
    x = rng.normal(size=(3, 7, 4)) + rng.normal(size=(3, 1, 4))
    np.testing.assert_allclose(rs.center_of(x, "frobenius", "mean"), x.mean(-2), atol=1e-14)
    np.testing.assert_allclose(rs.center_of(x, "l1", "median"), np.median(x, axis=-2), atol=1e-14)
    # l1's exact centre is the median (columns separate); Frobenius's the mean.
    np.testing.assert_allclose(rs.exact_center(x, "l1").center, np.median(x, axis=-2), atol=1e-12)
    np.testing.assert_allclose(rs.exact_center(x, "frobenius").center, x.mean(-2), atol=1e-12)
    for norm in ("linf", "composite"):
        best = rs.exact_center(x, norm)
        assert best.center.shape == (3, 4) and best.linear_programs.dtype == np.int64
        assert (best.linear_programs > 0).all()
        residual = norm_reference(x - best.center[:, None, :], norm)
        np.testing.assert_allclose(best.residual, residual, rtol=1e-12)
        np.testing.assert_allclose(rs.residual_norm(x, norm, "exact"), residual, rtol=1e-9)
        # No other centre does better: the mean, the median, and 2000 random perturbations of the optimum.
        assert (residual <= norm_reference(x - x.mean(-2, keepdims=True), norm) + 1e-12).all()
        assert (residual <= norm_reference(x - np.median(x, axis=-2, keepdims=True), norm) + 1e-12).all()
        for scale in (1e-1, 1e-3):
            trial = best.center[:, None, None, :] + scale * rng.normal(size=(3, 2000, 1, 4))
            others = norm_reference(x[:, None] - trial, norm)
            assert (others >= residual[:, None] * (1 - 1e-9)).all(), (norm, scale, (others / residual[:, None]).min())
    # Above 64 x 64 entries the linear programs run for minutes to hours (and a call in C++ ignores Ctrl-C): an error.
    large = rng.normal(size=(65, 64))
    for norm in ("linf", "composite"):
        with pytest.raises(rs.Error, match=r"^the exact \w+ centre of a 65 x 64 matrix \(4160 entries\) is a linear program") \
                as raised:
            rs.exact_center(large, norm)
        assert raised.value.where == "x"  # the argument (it named none)
        for call in (rs.relative_residual, rs.residual_norm, rs.residual, rs.center_of):
            with pytest.raises(rs.Error, match="linear program too large") as raised:
                call(large, norm=norm, center="exact")
            assert raised.value.where == "x"
    np.testing.assert_allclose(rs.exact_center(large, "l1").center, np.median(large, axis=-2), atol=1e-12)


def test_rank_measures_match_their_definitions(batch, rng):
    s = np.linalg.svd(batch, compute_uv=False)
    np.testing.assert_allclose(rs.singular_values(batch), s, rtol=1e-10)
    p = s / s.sum(-1, keepdims=True)
    np.testing.assert_allclose(rs.effective_rank(batch), np.exp(-(p * np.log(p)).sum(-1)), rtol=1e-10)
    np.testing.assert_allclose(rs.stable_rank(batch), (s ** 2).sum(-1) / s[..., 0] ** 2, rtol=1e-10)
    low_rank = rng.normal(size=(4, 10, 2)) @ rng.normal(size=(4, 2, 8))
    assert (rs.numerical_rank(low_rank) == np.linalg.matrix_rank(low_rank)).all()
    assert (rs.numerical_rank(low_rank.astype(np.float32)) == np.linalg.matrix_rank(low_rank.astype(np.float32))).all()
    assert (rs.numerical_rank(low_rank, rank_tol=0.5) <= 2).all()
    # Half precision: the default tolerance is the bound of the rounding, u * ||X||_F / s_1 (u = eps / 2 of the stored
    # dtype), never below max(n, d) * 2^-23; numpy.linalg.matrix_rank with that tol on the stored values agrees, and
    # float32's tolerance would count the rounding as rank.
    for stored, epsilon, given in [(low_rank.astype(np.float16), 2.0 ** -10, low_rank.astype(np.float16)),
                                   (torch.from_numpy(low_rank).to(torch.bfloat16).float().numpy(), 2.0 ** -7,
                                    torch.from_numpy(low_rank).to(torch.bfloat16))]:
        values = stored.astype(np.float64)
        s = np.linalg.svd(values, compute_uv=False)
        tolerance = np.maximum(10 * 2.0 ** -23, epsilon / 2 * np.sqrt((s ** 2).sum(-1)) / s[..., 0])
        expected = [np.linalg.matrix_rank(m, tol=t * s_m[0]) for m, t, s_m in zip(values, tolerance, s)]
        assert np.asarray(rs.numerical_rank(given)).tolist() == expected == [2] * 4
        assert (s[..., 2] > 10 * 2.0 ** -23 * s[..., 0]).all()  # float32's tolerance would count it
        table = rs.measure(given[0])
        got = list(table["value"])[list(table["measure"]).index("numerical_rank_tolerance")]
        assert abs(got - tolerance[0]) <= 1e-12 * tolerance[0]
    unit = batch / np.linalg.norm(batch, axis=-1, keepdims=True)
    gram = unit @ np.swapaxes(unit, -1, -2)
    n = batch.shape[-2]
    pairs = (gram.sum((-2, -1)) - np.trace(gram, axis1=-2, axis2=-1)) / (n * (n - 1))
    np.testing.assert_allclose(rs.mean_pairwise_cosine(batch), pairs, rtol=1e-10)


def test_measure_takes_one_centre_as_a_string_and_refuses_none(rng):
    x = rng.normal(size=(6, 4))
    np.testing.assert_array_equal(rs.measure(x, centers="mean")["value"], rs.measure(x, centers=["mean"])["value"])
    with pytest.raises(rs.Error, match=r"^no centers given \(leave it out for every one\) \(centers\)$"):
        rs.measure(x, centers=[])


def test_attention_measures_match_their_definitions(rng):
    logits = rng.normal(size=(2, 5, 6, 6)) * 2
    p = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    got = rs.attention_measures(p)
    entropy = -(p * np.log(p)).sum(-1)
    s = np.linalg.svd(p, compute_uv=False)
    np.testing.assert_allclose(got["mean_row_entropy"], entropy.mean(-1), rtol=1e-10)
    np.testing.assert_allclose(got["max_row_entropy"], entropy.max(-1), rtol=1e-10)
    np.testing.assert_allclose(got["first_token_share"], p[..., 0].mean(-1), rtol=1e-10)
    np.testing.assert_allclose(got["sigma2"], s[..., 1], rtol=1e-10)
    np.testing.assert_allclose(got["spectral_gap"], 1 - s[..., 1] / s[..., 0], rtol=1e-10)
    with pytest.raises(rs.Error, match=r"^row 0 of matrix \[0, 0\] is not an attention row \(sum 2, "):
        rs.attention_measures(p * 2)
    # The first row that is not attention is named by its index (the message named no matrix and no row).
    bad = p.copy()
    bad[1, 3, 4] *= 0.5
    with pytest.raises(rs.Error, match=r"^row 4 of matrix \[1, 3\] is not an attention row \(sum 0\.5, smallest entry "
                                       r".*within 0\.0001\) \(p\)$"):
        rs.attention_measures(bad)
    # One matrix: the row alone ("row 0 of matrix []" read as an empty matrix).
    with pytest.raises(rs.Error, match=r"^row 0 is not an attention row \(sum 1, smallest entry -0\.5; "):
        rs.attention_measures(np.array([[1.5, -0.5], [0.5, 0.5]]))
    # Stored in float16, rows sum to 1 within float16's epsilon only: measured, as the command line measures them.
    logits = np.random.default_rng(4).normal(size=(2, 12, 12))
    half = (np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)).astype(np.float16)
    assert np.abs(half.astype(np.float64).sum(-1) - 1).max() > 1e-4
    np.testing.assert_allclose(rs.attention_measures(half)["first_token_share"], half[..., 0].astype(np.float64).mean(-1),
                               rtol=1e-12)
    with pytest.raises(rs.Error, match=r"within 0\.000976562"):
        rs.attention_measures(half * 2)
    # A bfloat16 tensor reaches the engine as float32, and is still held to bfloat16's epsilon (it was held to 1e-4).
    brain = torch.softmax(torch.from_numpy(logits) * 2, -1).bfloat16()
    assert (brain.double().sum(-1) - 1).abs().max().item() > 1e-4
    np.testing.assert_allclose(rs.attention_measures(brain)["first_token_share"].double().numpy(),
                               brain[..., 0].double().mean(-1).numpy(), rtol=1e-6)
    with pytest.raises(rs.Error, match=r"within 0\.0078125"):
        rs.attention_measures(brain * 2)


def test_masked_measures_are_each_matrix_over_its_real_rows(rng):
    x = rng.normal(size=(2, 3, 7, 5))
    real = np.ones((2, 3, 7), dtype=bool)
    real[0, 1, 5:] = False           # right padding
    real[1, 0, :3] = False           # left padding
    real[1, 2, [0, 2, 6]] = False    # holes
    real[0, 2, 1:] = False           # one real row
    x[~real] = np.nan                # the padding plays no part, NaN included
    rows = [(index, x[index][real[index]]) for index in np.ndindex(2, 3)]

    def each(function, **settings):
        return [np.asarray(function(matrix, **settings)) for _, matrix in rows]

    # Against numpy's definitions on the real rows.
    got = rs.relative_residual(x, attention_mask=real)
    for (index, matrix) in rows:
        np.testing.assert_allclose(got[index], relative_residual_reference(matrix), rtol=1e-12, atol=1e-15)
    values = rs.singular_values(x, attention_mask=real)
    for (index, matrix) in rows:
        expected = np.linalg.svd(matrix, compute_uv=False)
        np.testing.assert_allclose(values[index][:len(expected)], expected, rtol=1e-12)
        assert (values[index][len(expected):] == 0).all()
    res = rs.residual(x, attention_mask=real)
    assert res.shape == x.shape and (res[~real] == 0).all()
    for (index, matrix) in rows:
        np.testing.assert_allclose(res[index][real[index]], matrix - matrix.mean(0), rtol=1e-12, atol=1e-15)
    # Every other measure equals its unmasked self on each matrix of real rows (each tested against its definition
    # above), in one call over the batch.
    for function, settings in ((rs.matrix_norm, {"norm": "l1"}), (rs.residual_norm, {"center": "median"}),
                               (rs.relative_residual, {"norm": "spectral", "center": "rank1"}),
                               (rs.center_of, {"norm": "linf", "center": "exact"}), (rs.effective_rank, {}),
                               (rs.stable_rank, {}), (rs.numerical_rank, {}), (rs.mean_pairwise_cosine, {})):
        got = function(x, attention_mask=real, **settings)
        for (index, _), expected in zip(rows, each(function, **settings)):
            np.testing.assert_array_equal(got[index], expected, err_msg=function.__name__)
    exact = rs.exact_center(x, attention_mask=real)
    for (index, matrix) in rows:
        one = rs.exact_center(matrix)
        np.testing.assert_array_equal(exact.center[index], one.center)
        assert exact.residual[index] == one.residual and exact.linear_programs[index] == one.linear_programs
    # Every norm of the masked residual is the masked residual norm (its padding rows are zero).
    np.testing.assert_allclose(rs.matrix_norm(rs.residual(x, attention_mask=real)),
                               rs.residual_norm(x, attention_mask=real), rtol=1e-14)
    # A 0/1 mask is the boolean one; torch in, torch out; an all-real mask is the unmasked call, bit for bit.
    np.testing.assert_array_equal(rs.stable_rank(x, attention_mask=real.astype(np.int64)),
                                  rs.stable_rank(x, attention_mask=real))
    as_torch = rs.relative_residual(torch.from_numpy(x), attention_mask=torch.from_numpy(real))
    assert isinstance(as_torch, torch.Tensor)
    np.testing.assert_array_equal(as_torch.numpy(), rs.relative_residual(x, attention_mask=real))
    clean = rng.normal(size=(3, 6, 4))
    np.testing.assert_array_equal(rs.relative_residual(clean, attention_mask=np.ones((3, 6))),
                                  rs.relative_residual(clean))


def test_masked_attention_measures_keep_the_real_rows_and_columns(rng):
    # A padded batch's attention [B, H, n, n]: padded keys get no weight; a tokenizer's [B, n] mask covers every head.
    real = np.ones((2, 7), dtype=np.int64)
    real[1, :2] = 0  # left padding: the first real token is at 2
    real[0, [1, 4]] = 0  # holes (packed sequences)
    logits = rng.normal(size=(2, 3, 7, 7)) * 2 + np.where(real[:, None, None, :] == 1, 0.0, -np.inf)
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    got = rs.attention_measures(p, attention_mask=real)
    for b in range(2):
        keep = real[b] == 1
        inner = p[b][:, keep][:, :, keep]  # [H, k, k], row-stochastic
        entropy = -(inner * np.log(inner)).sum(-1)
        np.testing.assert_allclose(got["mean_row_entropy"][b], entropy.mean(-1), rtol=1e-12)
        np.testing.assert_allclose(got["first_token_share"][b], inner[..., 0].mean(-1), rtol=1e-12)
        s = np.linalg.svd(inner, compute_uv=False)
        np.testing.assert_allclose(got["spectral_gap"][b], 1 - s[:, 1] / s[:, 0], rtol=1e-10)
    # A 3 x 5 batch of maps, one mask each: equal to each map's real rows and columns measured alone.
    maps = np.exp(rng.normal(size=(3, 5, 6, 6)))
    each = rng.random((3, 5, 6)) < 0.6
    each[..., 0] = True
    maps = maps * each[..., None, :]
    maps /= maps.sum(-1, keepdims=True)
    batched = rs.attention_measures(maps, attention_mask=each)
    for index in np.ndindex(3, 5):
        keep = each[index]
        alone = rs.attention_measures(maps[index][keep][:, keep])
        for name, values in alone.items():
            assert batched[name][index] == values, (name, index)
    # Unmasked, sample 1's "first token" is padding, which no query attends to.
    assert (rs.attention_measures(p)["first_token_share"][1] == 0).all() and (got["first_token_share"][1] > 0).all()
    # The padding's rows and columns play no part, NaN included.
    p[1][:, :2, :] = np.nan
    p[1][:, :, :2] = np.nan
    again = rs.attention_measures(p, attention_mask=real.astype(np.float32))  # 0/1 floats are a mask too
    for name, values in got.items():
        np.testing.assert_array_equal(again[name], values, err_msg=name)
    with pytest.raises(rs.Error, match=r"^attention matrices must be square, got 7 x 6 \(p\)$"):
        rs.attention_measures(p[..., :6], attention_mask=real)


def test_masked_measure_errors_name_the_mask_or_the_real_entry(rng):
    x = rng.normal(size=(2, 4, 3))
    real = np.ones((2, 4), dtype=bool)
    real[1, 3] = False
    x[1, 3, 0] = np.nan  # padding: ignored
    x[1, 1, 2] = np.inf  # a real entry: flat index 1*12 + 1*3 + 2 = 17 of x
    with pytest.raises(rs.Error, match=r"^Inf at \[1, 1, 2\] \(flat index 17\) \(x\)$"):
        rs.relative_residual(x, attention_mask=real)
    x[1, 1, 2] = 0
    cases = [(np.ones((2, 3)), r"^shape \(2, 3\) differs from x's rows \(2, 4\)"),
             (np.full((2, 4), 2), r"^entries other than 0 and 1"),
             (np.array([[1, 1, 1, 1], [0, 0, 0, 0]]), r"^matrix \(1,\) of x has no real row")]
    for mask, message in cases:
        with pytest.raises(rs.Error, match=message) as raised:
            rs.relative_residual(x, attention_mask=mask)
        assert raised.value.where == "attention_mask"
    with pytest.raises(rs.Error, match=r"^empty matrix \(4 x 0\) \(x\)$"):
        rs.relative_residual(np.zeros((2, 4, 0)), attention_mask=real)
    # A [batch, tokens] mask on [batch, heads, n, n] maps: a sample without a real token is named with its head.
    uniform = np.full((2, 3, 4, 4), 0.25)
    with pytest.raises(rs.Error, match=r"^matrix \(1, 0\) of p has no real row"):
        rs.attention_measures(uniform, attention_mask=np.array([[1, 1, 0, 0], [0, 0, 0, 0]]))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_measure_table_equals_the_command_lines_measures_csv(tmp_path, rng, dtype):
    x = (rng.normal(size=(2, 8, 5)) + rng.normal(size=(1, 1, 5))).astype(dtype)
    np.save(tmp_path / "x.npy", x)
    run_cli("measure", tmp_path / "x.npy", "--out", tmp_path / "out")
    table = rs.measure(x)
    assert_table_equals_csv(table, tmp_path / "out" / "measures.csv")
    # The fast batched path of the paper's measure agrees with the command's value to round-off.
    rows = (table["measure"] == "relative_residual") & (table["norm"] == "composite") & (table["center"] == "mean")
    np.testing.assert_allclose(rs.relative_residual(x), table["value"][rows].reshape(2), rtol=1e-13)
    # And a square row-stochastic matrix gets the attention measures, as a DataFrame on request.
    p = np.full((4, 4), 0.25)
    np.save(tmp_path / "p.npy", p)
    run_cli("measure", tmp_path / "p.npy", "--centers", "mean,rank1", "--rank-tol", "0.001", "--out", tmp_path / "p")
    frame = rs.measure(p, centers=["mean", "rank1"], rank_tol=0.001, frame=True)
    assert "attention_spectral_gap" in set(frame["measure"])
    assert_table_equals_csv({name: frame[name].to_numpy() for name in frame.columns}, tmp_path / "p" / "measures.csv")


def test_measure_leaves_out_the_exact_centre_on_large_matrices_as_the_command_does(tmp_path, rng):
    x = rng.normal(size=(70, 64))  # 4480 entries > 4096
    np.save(tmp_path / "big.npy", x)
    # At the module's thread count: PyPI torch's MKL LAPACK (the spectral norm's SVD) can differ in the last bit
    # between 1 and 2 threads, and the command line's default is every core.
    run_cli("measure", tmp_path / "big.npy", "--out", tmp_path / "out", "--threads", rs.get_threads())
    with pytest.warns(rs.RankscopeWarning, match="exact centre") as warned:
        table = rs.measure(x)
    assert warned[0].filename == __file__  # the caller's line, not the package's
    assert "exact" not in set(table["center"])
    # The warning gives no advice that fails: it once said to pass centers=[..., 'exact', ...], which is refused here.
    assert "centers=" not in str(warned[0].message)
    with pytest.raises(rs.Error, match="too large"):
        rs.measure(x, centers=["exact"])
    assert_table_equals_csv(table, tmp_path / "out" / "measures.csv")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert "exact" in set(rs.measure(x[:8, :8], centers=["exact"])["center"])


def test_errors_carry_the_command_lines_messages(tmp_path):
    bad = np.arange(12, dtype=np.float64).reshape(3, 4)
    bad[1, 2] = np.nan
    np.save(tmp_path / "nan.npy", bad)
    message = cli_error("measure", tmp_path / "nan.npy")
    assert message == f"NaN at [1, 2] (flat index 6) ({tmp_path / 'nan.npy'})"  # the entry's index, not only its flat one
    for call in (lambda: rs.measure(bad), lambda: rs.relative_residual(bad), lambda: rs.singular_values(bad)):
        with pytest.raises(rs.Error) as raised:
            call()
        assert str(raised.value) == "NaN at [1, 2] (flat index 6) (x)" and raised.value.where == "x"
        assert isinstance(raised.value, ValueError)
    np.save(tmp_path / "vector.npy", np.ones(3))
    assert cli_error("measure", tmp_path / "vector.npy").startswith("need a matrix (rank >= 2), got an array of rank 1")
    with pytest.raises(rs.Error, match=r"^need a matrix \(rank >= 2\), got an array of rank 1 \(x\)$"):
        rs.measure(np.ones(3))
    with pytest.raises(rs.Error, match=r"^empty matrix \(0 x 3\) \(x\)$"):
        rs.relative_residual(np.ones((0, 3)))
    with pytest.raises(rs.Error) as raised:
        rs.relative_residual(np.ones((3, 3)), norm="l2")
    assert str(raised.value).startswith("unknown norm 'l2'") and raised.value.where == "norm"
    # Every unknown name says which setting it was given to.
    for call, where in ((lambda: rs.relative_residual(np.ones((3, 3)), center="middle"), "center"),
                        (lambda: rs.BlockConfig(layer_norm="sideways"), "layer_norm"),
                        (lambda: rs.run_trainability(depths=[2], scalings=["none"]), "scalings"),
                        (lambda: rs.run_trainability(depths=[2], layer_norms=["affine"]), "layer_norms"),
                        (lambda: rs.SanConfig(layers=-1), "layers, heads, d_model, tokens"),
                        (lambda: rs.SanConfig(d_model=10, heads=3), "d_model, heads"),
                        (lambda: rs.load_model(FIXTURES + "/bert-tiny", stream="yes"), "stream")):
        with pytest.raises(rs.Error) as raised:
            call()
        assert raised.value.where == where, (str(raised.value), where)
        assert str(raised.value).endswith(f" ({where})")
    # measure's argument is `centers` (the single-matrix functions' is `center`).
    with pytest.raises(rs.Error) as raised:
        rs.measure(np.ones((3, 3)), centers=["mean", "foo"])
    assert raised.value.where == "centers" and str(raised.value).startswith("unknown centre 'foo'")
    assert cli_error("measure", tmp_path / "nan.npy", "--rank-tol", "2") == "2 is outside [0, 1] (--rank-tol)"
    with pytest.raises(rs.Error, match=r"^2 is outside \[0, 1\] \(rank_tol\)$"):
        rs.measure(np.ones((3, 3)), rank_tol=2)
    # A library check that names command-line flags names the keyword arguments here ("(--tokens, --d-model)" before).
    with pytest.raises(rs.Error) as raised:
        rs.run_theory(tokens=128, d_model=128)
    assert str(raised.value).endswith("(tokens, d_model)"), str(raised.value)
    assert raised.value.where == "tokens, d_model"


def test_inputs_are_viewed_not_copied_and_outputs_view_engine_memory(rng):
    x = rng.normal(size=(4, 6, 5))
    address = rs._rankscope._data_address
    assert address(x) == x.__array_interface__["data"][0]
    strided = x[:, ::2, 1:]
    assert address(strided) == strided.__array_interface__["data"][0]
    x32 = x.astype(np.float32)
    assert address(x32) == x32.__array_interface__["data"][0]
    t = torch.from_numpy(x32.copy())
    from rankscope._arrays import to_engine
    assert address(to_engine(t)[0]) == t.data_ptr()
    assert address(to_engine(t.t() if t.dim() == 2 else t.transpose(1, 2))[0]) == t.data_ptr()
    # Results view memory the engine allocated: a network's parameters come back as views of its own weights.
    net = rs.San(rs.SanConfig(layers=1, heads=1, d_model=4), seed=0)
    first, second = net.parameters(), net.parameters()
    assert np.shares_memory(first["blocks.0.attn.W_Q"], second["blocks.0.attn.W_Q"])
    # A bfloat16 tensor has no numpy dtype: converted to float32 (documented copy), same numbers.
    bf = torch.from_numpy(x).to(torch.bfloat16)
    np.testing.assert_allclose(rs.relative_residual(bf).numpy(), relative_residual_reference(bf.float().numpy().astype(np.float64)),
                               rtol=1e-12)


def test_set_threads_holds_openblas_at_one_thread_as_the_command_line_does():
    import ctypes
    openblas = ctypes.CDLL("libopenblas.so.0")  # the instance already loaded under torch and rankscope
    openblas.openblas_set_num_threads(2)
    assert openblas.openblas_get_num_threads() == 2
    try:
        assert rs.set_threads(2) == 2
        assert rs.get_threads() == 2
        assert openblas.openblas_get_num_threads() == 1
    finally:
        rs.set_threads(0)


def test_an_array_that_cannot_be_copied_raises_instead_of_crashing_python():
    # A broadcast view of 2^58 float64 elements: measure needs a C-contiguous copy (2^61 bytes), which numpy cannot
    # allocate. The binding once used the null handle py::array::ensure returns then, and Python died with SIGSEGV.
    huge = np.broadcast_to(np.ones((1, 1, 4)), (2 ** 28, 2 ** 28, 4))
    with pytest.raises(MemoryError):
        rs.measure(huge)
    with pytest.raises(MemoryError):
        rs._rankscope.measure(huge, [], -1.0, -1.0, False, "x")
    # Objects numpy cannot make an array of reach Python as numpy's exception, not a crash.
    net = rs.San(rs.SanConfig(layers=1, heads=1, d_model=4), seed=0)
    with pytest.raises(ValueError):
        net._engine.load_parameters({"blocks.0.attn.W_Q": [[1.0, 2.0], [3.0]]})
    with pytest.raises(rs.Error, match=r"unsupported dtype"):
        net._engine.load_parameters({"blocks.0.attn.W_Q": "text"})
    with pytest.raises(MemoryError):
        rs._rankscope.run_theory(rs.SanConfig(layers=1, heads=1, d_model=4), 1, 1, 0, huge, False, "cpu")


def test_out_of_memory_is_memory_error_whichever_module_was_imported_first():
    """torch registers its own exception translators when imported: imported after rankscope, they turned libtorch's
    allocation failure inside rankscope into a bare RuntimeError ("[enforce fail at alloc_cpu.cpp:127] ..."). The
    process starts fresh, so that the order is the one under test."""
    import subprocess
    import sys
    script = ("import rankscope as rs, torch\n"
              "try:\n"
              "    rs.San(rs.SanConfig(layers=1, d_model=100000, heads=1))\n"
              "except MemoryError as e:\n"
              "    print('MemoryError', e)\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("MemoryError out of memory: "), result.stdout


def test_nonfinite_result_advice_names_the_keyword_argument():
    # The command line's "pass --allow-nonfinite to write it anyway" is, here, the keyword argument.
    huge = np.full((3, 3), 1e308)  # its norms overflow
    with pytest.raises(rs.Error) as raised:
        rs.measure(huge)
    assert "pass allow_nonfinite=True" in str(raised.value) and "--allow-nonfinite" not in str(raised.value)
    assert np.isinf(rs.measure(huge, allow_nonfinite=True)["value"]).any()
    # The cosine of a zero matrix is undefined, not broken: left out, with a warning (it stopped the measurement).
    with pytest.warns(rs.RankscopeWarning, match=r"^mean_pairwise_cosine is undefined for the matrix \(fewer than 2 "):
        assert "mean_pairwise_cosine" not in set(rs.measure(np.zeros((3, 3)))["measure"])
    assert "mean_pairwise_cosine" in set(rs.measure(np.zeros((3, 3)), allow_nonfinite=True)["measure"])


def test_a_true_or_false_setting_takes_only_true_or_false():
    # "yes" reached the binding, whose TypeError listed its whole private signature.
    for call in (lambda: rs.measure(np.ones((3, 3)), allow_nonfinite="yes"),
                 lambda: rs.run_theory(layers=2, seeds=1, allow_nonfinite=1),
                 lambda: rs.sample_path_products([np.full((1, 1, 2, 2), 0.5)], allow_nonfinite="no")):
        with pytest.raises(rs.Error, match=r" is not True or False \(allow_nonfinite\)$"):
            call()
    assert len(rs.measure(np.eye(3), allow_nonfinite=np.bool_(True))["value"]) > 0


@pytest.mark.parametrize("scale", [1e160, 1e-170])
def test_scale_free_measures_do_not_depend_on_the_scale(rng, scale):
    # Frobenius sums of squares overflowed near 1e160 (NaN) and underflowed near 1e-170 (0, read as total collapse), and
    # measure() then left out the cosine of a matrix whose squared row norms underflowed, as if it were zero.
    x = rng.standard_normal((2, 4, 5))
    for norm in ("frobenius", "composite", "l1", "linf"):
        np.testing.assert_allclose(rs.relative_residual(x * scale, norm), rs.relative_residual(x, norm), rtol=1e-12)
    np.testing.assert_allclose(rs.mean_pairwise_cosine(x * scale), rs.mean_pairwise_cosine(x), rtol=1e-12)
    plain, scaled = rs.measure(x[0]), rs.measure(x[0] * scale)
    scale_free = [i for i, name in enumerate(plain["measure"])
                  if name in ("relative_residual", "mean_pairwise_cosine", "stable_rank", "effective_rank", "numerical_rank")]
    assert len(scale_free) > 10 and list(scaled["measure"]) == list(plain["measure"])
    np.testing.assert_allclose(np.asarray(scaled["value"])[scale_free], np.asarray(plain["value"])[scale_free], rtol=1e-9)
