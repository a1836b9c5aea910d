"""Beyond the paper: run_trainability and run_failure_modes against the command line's files (the same tables and
findings); the first layer's token cosine against numpy on the same torch draw; the failure-modes summary against the
mean over its rows and the regime rule. (Gradient norms and entropies against independent references: the C++ unit
tests test_trainability.cpp and test_failure_modes.cpp.)"""
import json
import math

import numpy as np
import pytest

import rankscope as rs
from conftest import assert_table_equals_csv, run_cli


def findings_equal_file(findings, path):
    with open(path) as f:
        document = json.load(f)
    assert [(c.claim, c.measured, c.verdict) for c in findings.checks] == \
           [(c["claim"], c["measured"], c["verdict"]) for c in document["checks"]]
    assert findings.reading == document["reading"]


def test_trainability_equals_the_commands_files(tmp_path):
    run_cli("trainability", "--depths", "2,8", "--d-model", 16, "--heads", 2, "--tokens", 6, "--samples", 2, "--seeds",
            2, "--seed", 5, "--out", tmp_path)
    run = rs.run_trainability(depths=(2, 8), d_model=16, heads=2, tokens=6, samples=2, seeds=2, seed=5)
    assert_table_equals_csv(run.layers, tmp_path / "trainability.csv")
    assert_table_equals_csv(run.runs, tmp_path / "trainability_runs.csv")
    assert_table_equals_csv(run.summary, tmp_path / "trainability_summary.csv")
    findings_equal_file(run.findings, tmp_path / "findings.json")
    # 2 placements x 2 scalings x (2 + 8 layers) x 2 seeds rows; ratios are the quotients of the norms.
    assert len(run.layers["layer"]) == 2 * 2 * 10 * 2
    np.testing.assert_allclose(run.layers["query_over_value"], run.layers["grad_W_Q"] / run.layers["grad_W_V"], rtol=1e-15)
    assert np.all(run.layers["grad_W_V"] > 0)


def test_trainability_first_layer_cosine_is_the_inputs(tmp_path):
    # Layer 0's input is the seed's N(0, 1) draw (float32 widened): its mean pairwise cosine, from numpy.
    import torch
    run = rs.run_trainability(depths=(2,), layer_norms=("post",), scalings=("plain",), d_model=16, heads=2, tokens=6,
                              samples=3, seeds=1, seed=11)
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(11)
    x = torch.randn(3, 6, 16).double().numpy()
    torch.random.set_rng_state(generator_state)
    unit = x / np.linalg.norm(x, axis=-1, keepdims=True)
    gram = unit @ np.swapaxes(unit, -1, -2)
    expected = np.mean([(g.sum() - np.trace(g)) / (6 * 5) for g in gram])
    assert math.isclose(run.layers["input_cosine"][0], expected, rel_tol=1e-12)


def test_failure_modes_equals_the_commands_files(tmp_path):
    run_cli("failure-modes", "--query-key-scales", "0.5,3", "--layers", 4, "--d-model", 16, "--heads", 2, "--tokens", 8,
            "--samples", 2, "--seeds", 2, "--seed", 3, "--out", tmp_path)
    run = rs.run_failure_modes(query_key_scales=(0.5, 3), layers=4, d_model=16, heads=2, tokens=8, samples=2, seeds=2,
                               seed=3)
    assert_table_equals_csv(run.rows, tmp_path / "failure_modes.csv")
    assert_table_equals_csv(run.summary, tmp_path / "failure_modes_summary.csv")
    findings_equal_file(run.findings, tmp_path / "findings.json")
    assert math.isclose(run.freezing_scale, (2 * math.log(8)) ** 0.25, rel_tol=1e-15)


def test_failure_modes_summary_is_the_mean_over_seeds_and_its_regimes_follow_the_thresholds():
    run = rs.run_failure_modes(query_key_scales=(0.3, 4.0), layers=5, d_model=16, heads=2, tokens=8, samples=2, seeds=3,
                               seed=1, entropy_threshold=0.3, rank_threshold=1e-2)
    rows, summary = run.rows, run.summary
    for i in range(len(summary["layer"])):
        same = (rows["variant"] == summary["variant"][i]) & (rows["query_key_scale"] == summary["query_key_scale"][i]) & \
               (rows["layer"] == summary["layer"][i])
        assert same.sum() == 3
        entropy = rows["normalized_entropy"][same].mean()
        residual = rows["relative_residual"][same].mean()
        assert math.isclose(summary["normalized_entropy_mean"][i], entropy, rel_tol=1e-12)
        assert math.isclose(summary["relative_residual_mean"][i], residual, rel_tol=1e-12)
        rank, flat = residual < 1e-2, entropy < 0.3
        expected = "both" if rank and flat else "rank collapse" if rank else "entropy collapse" if flat else "neither"
        assert summary["regime"][i] == expected


def test_one_name_or_number_stands_for_a_list_of_one():
    """README: a list of names takes one name as a string. variants="SAN" ran as ["S", "A", "N"] ("unknown variant
    'S'"), layer_norms="pre" likewise, and depths=4 was "'int' object is not iterable"."""
    small = dict(d_model=8, heads=2, tokens=4, samples=1, seeds=1)
    one = rs.run_trainability(depths=2, layer_norms="pre", scalings="plain", **small)
    listed = rs.run_trainability(depths=[2], layer_norms=["pre"], scalings=["plain"], **small)
    np.testing.assert_array_equal(one.layers["input_cosine"], listed.layers["input_cosine"])
    one = rs.run_failure_modes(query_key_scales=0.5, variants="SAN", layers=2, **small)
    listed = rs.run_failure_modes(query_key_scales=[0.5], variants=["SAN"], layers=2, **small)
    np.testing.assert_array_equal(one.rows["relative_residual"], listed.rows["relative_residual"])
    assert set(one.rows["variant"]) == {"SAN"}
    with pytest.raises(rs.Error, match=r"^no depths given \(depths\)$"):
        rs.run_trainability(depths=[], **small)
