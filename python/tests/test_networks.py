"""The SAN laboratory: a network's forward against a numpy implementation of SPEC.md §1 with the same weights, the
path decomposition, theory runs and path counts against the command line's files and closed forms, path products
against numpy."""
import copy
import json
import math
import pickle
import re
from itertools import product

import numpy as np
import pandas as pd
import pytest
import torch

import rankscope as rs
from conftest import assert_table_equals_csv, cli_error, composite_norm, relative_residual_reference, run_cli, \
    write_safetensors


def layer_norm(x, w, b, affine_model):
    axes = (-2, -1) if affine_model else (-1,)
    mean = x.mean(axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axes, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * w + b


def san_reference(x, params, config):
    """SPEC.md §1 in numpy: P_h = softmax((X W_Q,h + b_Q)(X W_K,h + b_K)^T / sqrt(k)); SA(X) = Σ_h P_h (X W_V,h +
    b_V) W_O,h + b_O; then the skip, post-LN, the MLP block as configured."""
    block = config.block
    hooks = {"hook_embed": x}
    h = x
    for l in range(config.layers):
        p = {name[len(f"blocks.{l}."):]: value for name, value in params.items() if name.startswith(f"blocks.{l}.")}
        k = p["attn.W_Q"].shape[-1]
        q = np.einsum("bnd,hdk->bhnk", h, p["attn.W_Q"]) + p["attn.b_Q"][:, None]
        key = np.einsum("bnd,hdk->bhnk", h, p["attn.W_K"]) + p["attn.b_K"][:, None]
        scores = q @ np.swapaxes(key, -1, -2) / math.sqrt(k)
        pattern = np.exp(scores - scores.max(-1, keepdims=True))
        pattern /= pattern.sum(-1, keepdims=True)
        value = np.einsum("bnd,hdv->bhnv", h, p["attn.W_V"]) + p["attn.b_V"][:, None]
        attention = np.einsum("bhnv,hvd->bnd", pattern @ value, p["attn.W_O"]) + p["attn.b_O"]
        hooks[f"blocks.{l}.attn.hook_pattern"] = pattern
        mid = h + attention if block.attention_skip else attention
        if block.layer_norm in ("post", "affine"):
            mid = layer_norm(mid, p["ln1.w"], p["ln1.b"], block.layer_norm == "affine")
        out = mid
        if block.mlp:
            hidden = mid @ p["mlp.W_in"] + p["mlp.b_in"]
            activated = np.maximum(hidden, 0) if block.activation == "relu" else \
                0.5 * hidden * (1 + np.vectorize(math.erf)(hidden / math.sqrt(2)))
            mlp_out = activated @ p["mlp.W_out"] + p["mlp.b_out"]
            out = mid + mlp_out if block.mlp_skip else mlp_out
            if block.layer_norm in ("post", "affine"):
                out = layer_norm(out, p["ln2.w"], p["ln2.b"], block.layer_norm == "affine")
        hooks[f"blocks.{l}.hook_resid_post"] = out
        h = out
    return h, hooks


@pytest.mark.parametrize("block", [
    rs.BlockConfig(),
    rs.BlockConfig(attention_skip=True),
    rs.BlockConfig(attention_skip=True, mlp=True, mlp_skip=True, activation="gelu", layer_norm="post"),
    rs.BlockConfig(mlp=True, layer_norm="affine"),
])
def test_san_forward_matches_numpy_with_the_same_weights(rng, block):
    config = rs.SanConfig(layers=3, heads=2, d_model=8, tokens=5, biases=True, block=block)
    net = rs.San(config, seed=3)
    params = {name: np.array(value) for name, value in net.parameters().items()}
    assert params["blocks.0.attn.W_Q"].shape == (2, 8, 4) and params["blocks.2.attn.W_O"].shape == (2, 4, 8)
    x = rng.normal(size=(2, 5, 8))
    y, hooks = net.forward(x)
    expected, expected_hooks = san_reference(x, params, config)
    np.testing.assert_allclose(y, expected, rtol=1e-10, atol=1e-12)
    for name, value in expected_hooks.items():
        np.testing.assert_allclose(hooks[name], value, rtol=1e-10, atol=1e-12, err_msg=name)
    # Loading other weights changes the forward accordingly; torch in, torch out.
    params["blocks.1.attn.W_V"] = params["blocks.1.attn.W_V"] * 2
    net.load_parameters({"blocks.1.attn.W_V": torch.from_numpy(params["blocks.1.attn.W_V"])})
    y_torch, _ = net.forward(torch.from_numpy(x))
    assert isinstance(y_torch, torch.Tensor)
    np.testing.assert_allclose(y_torch.numpy(), san_reference(x, params, config)[0], rtol=1e-10, atol=1e-12)
    with pytest.raises(rs.Error, match="no parameter named 'nope'"):
        net.load_parameters({"nope": np.zeros(3)})


def test_nonfinite_inputs_and_weights_are_refused_with_their_name(rng):
    net = rs.San(rs.SanConfig(layers=2, heads=2, d_model=8), seed=0)
    x = rng.normal(size=(1, 4, 8))
    x[0, 1, 2] = np.nan
    for call in (net.forward, net.check_path_decomposition):
        with pytest.raises(rs.Error, match=r"^has NaN or Inf entries \(x\)$"):
            call(x)
    with pytest.raises(rs.Error, match=r"^has NaN or Inf entries or entries beyond float32's range \(x\)$"):
        rs.San(rs.SanConfig(layers=2, heads=2, d_model=8), seed=0, dtype="float32").forward(np.full((3, 8), 1e300))
    before = np.array(net.parameters()["blocks.0.attn.W_Q"])
    with pytest.raises(rs.Error, match=r"^has NaN or Inf entries \(blocks.0.attn.W_Q\)$"):
        net.load_parameters({"blocks.0.attn.W_Q": np.full(before.shape, np.inf)})
    np.testing.assert_array_equal(net.parameters()["blocks.0.attn.W_Q"], before)
    # All or nothing: a bad value leaves the good ones before it uncopied.
    before_k = np.array(net.parameters()["blocks.0.attn.W_K"])
    for bad in (np.full(before.shape, np.nan), np.zeros((1, 2))):
        with pytest.raises(rs.Error, match=r"\(blocks.0.attn.W_V\)$"):
            net.load_parameters({"blocks.0.attn.W_K": np.full(before_k.shape, 7.0), "blocks.0.attn.W_V": bad})
        np.testing.assert_array_equal(net.parameters()["blocks.0.attn.W_K"], before_k)
    # Weights drawn beyond the dtype's range are refused when the network is made.
    with pytest.raises(rs.Error, match=r"^init_scale 1e\+40 draws NaN or Inf weights in float32 \(blocks.0.attn.W_Q\)$"):
        rs.San(rs.SanConfig(layers=1, heads=1, d_model=4, init_scale=1e40), seed=0, dtype="float32")
    # parameters() are writable views: a NaN written there is found at the next use.
    net.parameters()["blocks.1.attn.W_V"][0, 0, 0] = np.nan
    for call in (net.forward, net.check_path_decomposition):
        with pytest.raises(rs.Error, match=r"^has NaN or Inf entries \(blocks.1.attn.W_V\)$"):
            call(rng.normal(size=(4, 8)))


def test_whole_number_settings_are_checked_before_the_binding_sees_them():
    # A float, a bool or a negative seed was pybind's TypeError listing every signature; now one line naming it.
    config = rs.SanConfig(layers=1, heads=1, d_model=4)
    cases = [
        (lambda: rs.run_theory(layers=2.5), r"^2\.5 is not a whole number \(layers\)$"),
        (lambda: rs.run_theory(layers=2, seeds="1"), r"^'1' is not a whole number \(seeds\)$"),
        (lambda: rs.San(config, seed=-1), r"^-1 is outside \[0, 18446744073709551615\] \(seed\)$"),
        (lambda: rs.San(config, seed=True), r"^True is not a whole number \(seed\)$"),
        (lambda: rs.sample_path_products([np.full((1, 1, 2, 2), 0.5)], seed=1.0),
         r"^1\.0 is not a whole number \(seed\)$"),
        (lambda: rs.run_trainability(depths=[2], samples=1.5), r"^1\.5 is not a whole number \(samples\)$"),
        (lambda: rs.run_failure_modes(seed=2**64), r"^18446744073709551616 is outside \[0, 18446744073709551615\] "
                                                   r"\(seed\)$"),
        (lambda: rs.run_theory(layers=10**400), r"^1{1}0{400} is outside \[1, 100\] \(layers\)$"),
        # seed, seed + 1, ... stop at 2^64 - 1 (they wrapped to 0 before).
        (lambda: rs.run_theory(layers=1, seed=2**64 - 2, seeds=3),
         r"^seeds 18446744073709551614 to 18446744073709551616 pass the largest seed, 18446744073709551615 "
         r"\(at most 2 seeds from 18446744073709551614\) \(seeds\)$"),
        (lambda: rs.run_trainability(depths=[2], seed=2**64 - 1, seeds=2), r"^seeds .* \(at most 1 seed from "),
        (lambda: rs.run_failure_modes(seed=2**64 - 1, seeds=2), r"^seeds 18446744073709551615 to 18446744073709551616 "),
        (lambda: rs.run_theory(layers=1, input=np.ones((8, 4)), tokens="8"), r"^'8' is not a whole number \(tokens\)$"),
        (lambda: rs.sample_path_products([np.full((1, 1, 3, 3), 1 / 3)], draws=2, attention_mask=[[1, 0.5, 1]]),
         r"^entries other than 0 and 1"),
    ]
    for call, message in cases:
        with pytest.raises(rs.Error, match=message):
            call()
    # numpy integers are whole numbers.
    run = rs.run_theory(layers=np.int64(1), heads=np.int32(1), d_model=4, tokens=3, seeds=np.uint8(1), seed=np.int64(5))
    assert set(run.rows["seed"]) == {5}


def test_same_seed_same_network_and_the_callers_torch_stream_is_untouched():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    a = rs.San(rs.SanConfig(layers=2, heads=2, d_model=8), seed=9)
    rs.run_theory(layers=2, d_model=8, tokens=4, heads=2, seeds=1)
    assert torch.equal(torch.rand(3), expected)
    b = rs.San(rs.SanConfig(layers=2, heads=2, d_model=8), seed=9)
    c = rs.San(rs.SanConfig(layers=2, heads=2, d_model=8), seed=10)
    assert all(np.array_equal(a.parameters()[n], b.parameters()[n]) for n in a.parameters())
    assert not np.array_equal(a.parameters()["blocks.0.attn.W_Q"], c.parameters()["blocks.0.attn.W_Q"])


def test_path_decomposition_reproduces_the_forward_as_the_command_checks_it(rng):
    for skip in (False, True):
        net = rs.San(rs.SanConfig(layers=3, heads=2, d_model=12, tokens=8, biases=True,
                                  block=rs.BlockConfig(attention_skip=skip)), seed=0)
        check = net.check_path_decomposition(rng.normal(size=(2, 8, 12)))
        assert check["paths"] == (3 if skip else 2) ** 3
        assert check["max_abs_error"] < 1e-12 * max(1.0, check["max_abs_output"])
    with pytest.raises(rs.Error):
        rs.San(rs.SanConfig(layers=1, d_model=4, block=rs.BlockConfig(mlp=True)), seed=0).check_path_decomposition(
            np.ones((1, 3, 4)))


def test_theory_run_equals_the_commands_files(tmp_path):
    settings = dict(layers=3, heads=2, d_model=8, tokens=6, seeds=2, seed=7)
    run_cli("theory", "--layers", 3, "--heads", 2, "--d-model", 8, "--tokens", 6, "--seeds", 2, "--seed", 7,
            "--out", tmp_path)
    run = rs.run_theory(**settings)
    assert_table_equals_csv(run.rows, tmp_path / "theory.csv")
    assert_table_equals_csv(run.summary, tmp_path / "theory_summary.csv")
    with open(tmp_path / "theory.json") as f:
        document = json.load(f)
    assert run.bound_violations == document["bound_violations"] == 0
    assert run.bound_rows_checked == document["bound_rows_checked"] > 0
    assert run.bound_definition == document["bound_definition"]
    for i, variant in enumerate(document["variants"]):
        assert run.variants["variant"][i] == variant["variant"]
        for key in ("fitted_slope_log_neg_log_r", "fitted_base", "fitted_exponent", "final_relative_residual",
                    "bound_over_measured_log10_mean", "fitted_exponent_min", "fitted_exponent_max",
                    "exponent_seeds_fitted", "fitted_exponent_rms_max", "final_relative_residual_min", "final_relative_residual_max",
                    "exponent_steps_min", "exponent_steps_max"):
            expected = np.nan if variant[key] is None else variant[key]
            np.testing.assert_equal(run.variants[key][i], expected)
    with open(tmp_path / "findings.json") as f:
        findings = json.load(f)
    assert [(c.claim, c.measured, c.verdict) for c in run.findings.checks] == \
           [(c["claim"], c["measured"], c["verdict"]) for c in findings["checks"]]
    assert run.findings.reading == findings["reading"]
    frame = rs.run_theory(**settings, frame=True).rows
    assert list(frame.columns) == list(run.rows.keys()) and len(frame) == len(run.rows["layer"])


def test_theory_on_a_given_input_starts_from_its_measured_residual(tmp_path, rng):
    x = rng.normal(size=(6, 8)) + 3 * rng.normal(size=(1, 8))
    np.save(tmp_path / "x.npy", x)
    run_cli("theory", "--input", tmp_path / "x.npy", "--layers", 2, "--heads", 2, "--seeds", 1, "--out", tmp_path / "o")
    run = rs.run_theory(input=x, layers=2, heads=2, seeds=1)
    assert_table_equals_csv(run.rows, tmp_path / "o" / "theory.csv")
    layer0 = run.rows["layer"] == 0
    np.testing.assert_allclose(run.rows["relative_residual"][layer0], relative_residual_reference(x), rtol=1e-12)
    # r_0 is the exact-centre composite residual: at most the mean centre's.
    assert (run.rows["residual"][layer0] <= composite_norm(x - x.mean(0)) * (1 + 1e-12)).all()
    with pytest.raises(rs.Error, match=r"^the input needs at least 2 rows \(tokens\) \(input\)$"):
        rs.run_theory(input=x[:1], layers=2, seeds=1)
    with pytest.raises(rs.Error, match=r"^0 is outside \[1, 100\] \(layers\)$"):
        rs.run_theory(layers=0)
    # The input sets n and d: a tokens or d_model that says otherwise is refused, as the command line refuses it.
    message = cli_error("theory", "--input", tmp_path / "x.npy", "--tokens", 5, "--layers", 2, "--seeds", 1)
    assert message == f"--tokens 5 disagrees with the input's 6 rows (leave --tokens out: the file sets it) ({tmp_path / 'x.npy'})"
    with pytest.raises(rs.Error, match=r"^tokens 5 disagrees with the input's 6 rows \(leave tokens out: the input sets "
                                       r"it\) \(tokens\)$"):
        rs.run_theory(input=x, tokens=5, layers=2, seeds=1)
    with pytest.raises(rs.Error, match=r"d_model 16 disagrees with the input's 8 columns"):
        rs.run_theory(input=x, d_model=16, layers=2, seeds=1)
    assert_table_equals_csv(rs.run_theory(input=x, tokens=6, d_model=8, layers=2, heads=2, seeds=1).rows,
                            tmp_path / "o" / "theory.csv")


def test_theory_with_per_head_widths_equals_the_command(tmp_path):
    # 3 heads do not divide d_model 8: the per-head widths d_qk and d_v are given, as the command line takes them.
    run_cli("theory", "--layers", 2, "--heads", 3, "--d-model", 8, "--d-qk", 2, "--d-v", 2, "--tokens", 6, "--seeds", 1,
            "--out", tmp_path)
    run = rs.run_theory(layers=2, heads=3, d_model=8, d_qk=2, d_v=2, tokens=6, seeds=1)
    assert_table_equals_csv(run.rows, tmp_path / "theory.csv")


def test_path_counts_equal_the_command_and_the_closed_form(tmp_path):
    run_cli("paths", "count", "--out", tmp_path / "e6")
    counts = rs.path_counts()
    assert_table_equals_csv(counts.table, tmp_path / "e6" / "path_counts.csv")
    with open(tmp_path / "e6" / "path_counts.json") as f:
        for entry in json.load(f)["architectures"]:
            assert counts.mean_lengths[entry["architecture"]] == entry["mean_length"]
            L, H = entry["layers"], entry["heads"]
            assert math.isclose(entry["mean_length"], L * H / (H + 1), rel_tol=1e-12)
    assert counts.findings.experiment == "E6" and counts.findings.checks[0].verdict == "reproduced"
    table = counts.table
    for row in range(len(table["length"])):
        L, H, k = (int(table[name][row]) for name in ("layers", "heads", "length"))  # Python ints: no overflow
        assert math.isclose(table["count"][row], math.comb(L, k) * H ** k, rel_tol=1e-12)
        assert math.isclose(table["share"][row], math.comb(L, k) * H ** k / (H + 1) ** L, rel_tol=1e-9)
    # α-weighted: every path enumerated, Π_l (skip ? α_l : (1 − α_l)/H), summed by length.
    alpha = [0.9, 0.5, 0.7]
    run_cli("paths", "count", "--layers", 3, "--heads", 2, "--alpha", "0.9,0.5,0.7", "--out", tmp_path / "a")
    weighted = rs.path_counts(layers=3, heads=2, alpha=alpha)
    assert_table_equals_csv(weighted.table, tmp_path / "a" / "path_counts.csv")
    expected = np.zeros(4)
    for choice in product(range(3), repeat=3):  # 0 = skip, 1..H = a head
        weight = np.prod([alpha[l] if c == 0 else (1 - alpha[l]) / 2 for l, c in enumerate(choice)])
        expected[sum(c > 0 for c in choice)] += weight
    np.testing.assert_allclose(weighted.table["alpha_share"], expected, rtol=1e-12)
    assert math.isclose(weighted.alpha_mean_lengths["custom"], float((np.arange(4) * expected).sum()), rel_tol=1e-12)
    with pytest.raises(rs.Error, match="need layers"):
        rs.path_counts(heads=3)


def test_path_products_equal_the_command_and_numpy(tmp_path, rng):
    net = rs.San(rs.SanConfig(layers=4, heads=3, d_model=12, tokens=7), seed=2)
    _, hooks = net.forward(rng.normal(size=(3, 7, 12)))
    patterns = [hooks[f"blocks.{l}.attn.hook_pattern"] for l in range(4)]
    # A recorded run in float32 (as `model --dump` writes): the same float32 arithmetic on both sides.
    patterns32 = [p.astype(np.float32) for p in patterns]
    write_safetensors(tmp_path / "p32.safetensors", {f"blocks.{l}.attn.hook_pattern": p for l, p in enumerate(patterns32)})
    run_cli("paths", "sample", "--patterns", tmp_path / "p32.safetensors", "--draws", 5, "--out", tmp_path / "f32")
    assert_table_equals_csv(rs.sample_path_products(patterns32, draws=5), tmp_path / "f32" / "paths.csv")
    # A half-precision model's hooks (float16 numpy, bfloat16 torch), each as the command reads the same file. The
    # rows are checked within the stored dtype's rounding: a bfloat16 row (sum 0.99902) was refused against float32's.
    import safetensors.torch
    for dtype in (torch.float16, torch.bfloat16):
        half = [torch.from_numpy(p).to(dtype) for p in patterns]
        safetensors.torch.save_file({f"blocks.{l}.attn.hook_pattern": p for l, p in enumerate(half)},
                                    str(tmp_path / "half.safetensors"))
        run_cli("paths", "sample", "--patterns", tmp_path / "half.safetensors", "--draws", 5, "--out", tmp_path / "half")
        given = half if dtype == torch.bfloat16 else [p.numpy() for p in half]
        assert_table_equals_csv(rs.sample_path_products(given, draws=5), tmp_path / "half" / "paths.csv")
    write_safetensors(tmp_path / "p.safetensors", {f"blocks.{l}.attn.hook_pattern": p for l, p in enumerate(patterns)})
    run_cli("paths", "sample", "--patterns", tmp_path / "p.safetensors", "--draws", 6, "--seed", 4, "--out", tmp_path)
    table = rs.sample_path_products(patterns, draws=6, seed=4)
    assert_table_equals_csv(table, tmp_path / "paths.csv")
    # One layer's array where the list of layers belongs: said, not read as a list of samples.
    with pytest.raises(rs.Error, match=r"^one array of shape \(3, 3, 7, 7\): pass a list with one \[B, H, n, n\] array "
                                       r"per layer \(e\.g\. \[p\] for one layer\) \(patterns\)$"):
        rs.sample_path_products(patterns[0])
    for row in range(len(table["length"])):
        layers = [int(v) for v in table["layers"][row].split()]
        heads = [int(v) for v in table["heads"][row].split()]
        product_matrix = np.eye(7)
        for l, h in zip(layers, heads):  # forward order: later layers on the left
            product_matrix = patterns[l][table["sample"][row], h] @ product_matrix
        u, s, vt = np.linalg.svd(product_matrix)
        rank1 = s[0] * np.outer(u[:, 0], vt[0])
        np.testing.assert_allclose(table["relative_residual"][row],
                                   composite_norm(product_matrix - rank1) / composite_norm(product_matrix), rtol=1e-9,
                                   atol=1e-13)  # round-off of the SVD near rank 1
        np.testing.assert_allclose(table["relative_residual_frobenius"][row],
                                   np.linalg.norm(product_matrix - rank1) / np.linalg.norm(product_matrix), rtol=1e-9,
                                   atol=1e-13)


def test_path_products_take_attention_patterns_only():
    """sample_path_products checks its patterns as `paths sample --patterns` does: NaN rows gave relative residuals of
    0, rows that are not attention were sampled, a mask of the wrong shape was accepted, and layers of different n
    failed inside libtorch ("mat1 and mat2 shapes cannot be multiplied")."""
    uniform = np.full((2, 1, 4, 4), 0.25)
    nan = uniform.copy()
    nan[0, 0, 1, 2] = np.nan
    doubled = uniform.copy()
    doubled[1, 0, 3] *= 2
    for patterns, mask, message in [
            ([uniform, nan], None, r"^has NaN or Inf entries \(patterns\[1\]\)$"),
            ([np.full((1, 1, 4, 4), np.nan)], None, r"^has NaN or Inf entries \(patterns\[0\]\)$"),
            ([uniform, doubled], None, r"^row 3 of head 0 of sample 1 is not an attention row \(sum 2, .*\(patterns\[1\]\)$"),
            ([np.ones((1, 1, 4, 4))], None, r"not an attention row \(sum 4,"),
            # A negative entry is not rounding, whatever the dtype (rounding keeps a probability's sign): in float16
            # it passed within the sums' tolerance of n * eps.
            ([np.tile(np.array([0.5005, 0.5, -0.0005, 0], np.float16), (1, 1, 4, 1))], None,
             r"^row 0 of head 0 of sample 0 is not an attention row \(sum 0\.999988, smallest entry -0\.000500202; .* within "
             r"0\.00390625\) \(patterns\[0\]\)$"),
            ([uniform], np.ones((2, 3)), r"^shape \[2, 3\] is not the patterns' \[batch, n\] = \[2, 4\] \(attention_mask\)$"),
            # One real token is a 1 x 1 product, residual 0 whatever the patterns: refused, as `paths sample` refuses it.
            ([uniform], np.array([[1, 1, 1, 1], [0, 0, 1, 0]]),
             r"^sample 1 has 1 real token; the measures need at least 2 \(one row has no spread\) \(attention_mask\)$"),
            ([uniform, np.full((2, 1, 5, 5), 0.2)], None,
             r"^shape \[2, 1, 5, 5\] differs from the first layer's \[2, 1, 4, 4\] \(patterns\[1\]\)$")]:
        with pytest.raises(rs.Error, match=message):
            rs.sample_path_products(patterns, draws=2, attention_mask=mask)
    # A padded token's row is not checked (the command's rule): here row 3 of sample 1 is padding.
    mask = np.array([[1, 1, 1, 1], [1, 1, 1, 0]])
    assert len(rs.sample_path_products([uniform, doubled], draws=2, attention_mask=mask)["length"]) == 4


def test_progress_is_drawn_on_pythons_stderr_where_the_engines_bar_cannot_be_seen(monkeypatch):
    """The engine draws its bar on a terminal's stderr, which a notebook's cell never shows: there ("auto" in an
    ipykernel stream, or "on") the same line is drawn on sys.stderr while the call runs, and ends finished."""
    import contextlib
    import io
    import os
    import re
    monkeypatch.setattr(os, "isatty", lambda fd: False)  # wherever pytest runs, as a notebook's kernel sees it
    settings = dict(layers=2, heads=2, d_model=8, tokens=6, seeds=3)
    jobs = len(rs.run_theory(**settings).variants["variant"]) * 3

    def drawn(stream):
        with contextlib.redirect_stderr(stream):
            rs.run_theory(**settings)
        return stream.getvalue()

    class OutStream(io.StringIO):  # what ipykernel puts in sys.stderr
        pass
    OutStream.__module__ = "ipykernel.iostream"
    assert drawn(io.StringIO()) == ""  # "auto", not a notebook: quiet
    for mode, stream in (("auto", OutStream()), ("on", io.StringIO())):
        try:
            rs.set_progress(mode)
            text = drawn(stream)
        finally:
            rs.set_progress("auto")
        assert re.search(rf"\rtheory +\[#{{30}}\] {jobs}/{jobs} [0-9.]+/s ETA 0s +\n$", text), (mode, text)
        assert text.count("\n") == 1
    try:
        rs.set_progress("off")
        assert drawn(OutStream()) == ""
    finally:
        rs.set_progress("auto")
    with pytest.raises(rs.Error, match=r"^'yes' is not one of auto, on, off \(mode\)$"):
        rs.set_progress("yes")


def test_impossible_sizes_are_refused_and_edits_that_cannot_stick_say_so():
    # A negative per-head or MLP width was read as 0 (d_model / heads, 4 · d_model) and kept in the config.
    with pytest.raises(rs.Error, match=r"^per-head widths must be 0 \(d_model / heads\) or positive: d_qk -4, d_v 4 "
                                       r"\(d_qk, d_v\)$"):
        rs.SanConfig(layers=1, d_model=8, heads=2, d_qk=-4, d_v=4)
    with pytest.raises(rs.Error, match=r"^mlp_width must be 0 \(4 · d_model\) or positive, got -3 \(mlp_width\)$"):
        rs.SanConfig(layers=1, d_model=8, heads=2, block=rs.BlockConfig(mlp=True, mlp_width=-3))
    config = rs.SanConfig(layers=1, d_model=8, heads=2)
    config.d_qk = -1  # set after construction: the network checks it again
    with pytest.raises(rs.Error, match=r"^per-head widths must be 0"):
        rs.San(config)
    # per_layer is a tuple: per_layer.append(...) changed a copy and said nothing.
    config = rs.SanConfig(layers=2, d_model=8, heads=2)
    assert config.per_layer == ()
    with pytest.raises(AttributeError):
        config.per_layer.append(rs.BlockConfig(mlp=True))
    config.per_layer = [rs.BlockConfig(mlp=True), rs.BlockConfig(attention_skip=True)]
    assert [block.mlp for block in config.per_layer] == [True, False]
    assert "blocks.0.mlp.W_in" in rs.San(config).parameters() and "blocks.1.mlp.W_in" not in rs.San(config).parameters()
    # ...and its items are copies: per_layer[0].mlp = False changed one and said nothing.
    with pytest.raises(AttributeError, match=r"^per_layer\[0\]\.mlp cannot be set: per_layer hands out copies of its "
                                             r"blocks; assign a new list \(cfg\.per_layer = \[\.\.\.\]\)$"):
        config.per_layer[0].mlp = False
    assert config.per_layer[0].mlp
    # net.config is what the network was built from: net.config.layers = 7 edited a copy, and the next forward still
    # ran 2 layers. Every set on it (or on its block or per_layer) is refused; copy.copy(net.config) is editable.
    net = rs.San(config, seed=1)
    edits = {"layers": lambda c: setattr(c, "layers", 7), "block.mlp": lambda c: setattr(c.block, "mlp", True),
             "per_layer[1].mlp": lambda c: setattr(c.per_layer[1], "mlp", True),
             "per_layer": lambda c: setattr(c, "per_layer", []), "lyers": lambda c: setattr(c, "lyers", 7)}
    for name, edit in edits.items():
        with pytest.raises(AttributeError, match=r"^net\.config\." + re.escape(name) + r" cannot be set: the network was "
                                                 r"built from it and does not read it again; edit a copy \(cfg = "
                                                 r"copy\.copy\(net\.config\)\) and build San\(cfg, seed\)$"):
            edit(net.config)
    assert net.config == config and isinstance(net.config, rs.SanConfig)
    assert len(net.forward(np.ones((4, 8)))[1]) == len(rs.San(config, seed=1).forward(np.ones((4, 8)))[1])
    for editable in (copy.copy(net.config), copy.deepcopy(net.config), pickle.loads(pickle.dumps(net.config))):
        assert type(editable) is rs.SanConfig and editable == config
        editable.layers = 3
        editable.block.mlp_width = 16  # the copy's own block: edited in place
        editable.per_layer = [rs.BlockConfig(), rs.BlockConfig(), rs.BlockConfig(mlp=True)]
        assert editable.block.mlp_width == 16
        assert "blocks.2.mlp.W_in" in rs.San(editable).parameters()
    block = copy.copy(config.per_layer[0])
    assert type(block) is rs.BlockConfig and block == config.per_layer[0]
    block.mlp = False


def test_number_settings_take_arrays_and_series_and_refuse_text():
    # The paper's workflow: measured skip ratios fed back into the path count (a Series or an array was "truth value
    # ... is ambiguous"; one number for one layer was "'float' object is not iterable").
    alpha = np.array([0.9, 0.5, 0.7])
    expected = rs.path_counts(layers=3, heads=2, alpha=list(alpha)).table["alpha_share"]
    for given in (alpha, pd.Series(alpha), tuple(alpha)):
        np.testing.assert_array_equal(rs.path_counts(layers=3, heads=2, alpha=given).table["alpha_share"], expected)
    np.testing.assert_allclose(rs.path_counts(layers=1, heads=2, alpha=0.25).table["alpha_share"], [0.25, 0.75])
    for call, message in ((lambda: rs.path_counts(layers=1, heads=2, alpha="0.5"), r"^'0\.5' is text, not a number"),
                          (lambda: rs.path_counts(layers=2, heads=2, alpha=[0.5, 1.5]), r"^1\.5 is outside \[0, 1\]"),
                          (lambda: rs.measure(np.eye(3), rank_tol="1e-3"), r"^'1e-3' is not a number \(rank_tol\)$"),
                          (lambda: rs.run_failure_modes(query_key_scales="1"), r"^'1' is text, not a number"),
                          (lambda: rs.run_failure_modes(entropy_threshold=None),
                           r"^None is not a number \(entropy_threshold\)$")):
        with pytest.raises(rs.Error, match=message):
            call()


def test_configurations_copy_pickle_and_compare_by_value():
    # deepcopy and pickle raised "cannot pickle 'SanConfig'"; SanConfig(layers=3) == SanConfig(layers=3) was False.
    config = rs.SanConfig(layers=2, d_model=8, heads=2, query_key_scale=0.5, block=rs.BlockConfig(mlp=True),
                          per_layer=[rs.BlockConfig(mlp=True, activation="gelu"), rs.BlockConfig(layer_norm="affine")])
    for copied in (copy.deepcopy(config), pickle.loads(pickle.dumps(config))):
        assert copied == config and copied is not config
        assert [b.layer_norm for b in copied.per_layer] == ["none", "affine"] and copied.query_key_scale == 0.5
        np.testing.assert_array_equal(rs.San(copied, seed=3).parameters()["blocks.0.attn.W_Q"],
                                      rs.San(config, seed=3).parameters()["blocks.0.attn.W_Q"])
    assert rs.SanConfig(layers=3) == rs.SanConfig(layers=3) and rs.SanConfig(layers=3) != rs.SanConfig(layers=4)
    assert rs.BlockConfig(mlp=True) == rs.BlockConfig(mlp=True) != rs.BlockConfig(mlp=True, mlp_width=8)
    assert rs.SanConfig() != "SanConfig"
    # Wrong types are named, not passed to pybind11 (whose TypeError printed the whole array).
    for call, message in ((lambda: rs.relative_residual(np.ones((2, 3)), norm=None), r"^None is not a norm name"),
                          (lambda: rs.center_of(np.ones((2, 3)), center=1), r"^1 is not a centre name"),
                          (lambda: rs.set_threads("2"), r"^'2' is not a whole number \(threads\)$"),
                          (lambda: rs.San(config).check_path_decomposition(np.ones((4, 8)), max_paths="10"),
                           r"^'10' is not a number \(max_paths\)$")):
        with pytest.raises(rs.Error, match=message):
            call()
