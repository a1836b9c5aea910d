"""Findings and verdicts: the binding's Findings objects against the findings.json and verdicts.csv the command line
writes, and read_findings on those files."""
import json
import pickle

import numpy as np
import pytest

import rankscope as rs
from conftest import FIXTURES, assert_table_equals_csv, run_cli


def test_findings_and_verdicts_equal_the_commands_files(tmp_path):
    run_cli("paths", "count", "--out", tmp_path / "e6")
    run_cli("theory", "--layers", 3, "--heads", 2, "--seeds", 1, "--d-model", 8, "--tokens", 5, "--out", tmp_path / "t")
    e6 = rs.path_counts().findings
    theory = rs.run_theory(layers=3, heads=2, seeds=1, d_model=8, tokens=5).findings
    for findings, folder in ((e6, "e6"), (theory, "t")):
        assert_table_equals_csv(rs.verdicts([findings]), tmp_path / folder / "verdicts.csv")
        read = rs.read_findings(tmp_path / folder / "findings.json")
        assert (read.experiment, read.subject, read.reading, read.notes) == \
               (findings.experiment, findings.subject, findings.reading, findings.notes)
        assert [(c.claim, c.measured, c.criterion, c.verdict, c.basis) for c in read.checks] == \
               [(c.claim, c.measured, c.criterion, c.verdict, c.basis) for c in findings.checks]
        assert read.key_numbers == findings.key_numbers
        with open(tmp_path / folder / "findings.json") as f:
            document = json.load(f)
        assert [(k["what"], k["value"]) for k in document["key_numbers"]] == [tuple(k) for k in findings.key_numbers]
    # E6's mean path length is a closed form: its check tests the arithmetic, and says so (verdicts.csv's basis).
    assert {c.basis for c in e6.checks} == {"computation"}
    both = rs.verdicts([e6, theory], frame=True)
    assert list(both["experiment"].unique()) == ["E6", "theory"]
    # The docstring lists the columns there are (it left out basis).
    documented = rs.verdicts.__doc__.split("(", 1)[1].split(")", 1)[0]
    assert documented.split(", ") == list(both.columns)
    assert set(both["verdict"]) <= {"reproduced", "not reproduced", "not comparable at these settings"}


def test_verdicts_are_computed_from_the_run():
    # Two layers cannot show collapse "with depth" (3 needed): "not comparable"; four layers of the same networks
    # show that an MLP does not stop it (relative residual at float64 round-off): "reproduced".
    sizes = dict(heads=2, seeds=1, d_model=16, tokens=16)
    shallow = {c.claim: c for c in rs.run_theory(layers=2, **sizes).findings.checks}
    deep = {c.claim: c for c in rs.run_theory(layers=4, **sizes).findings.checks}
    claim = "An MLP does not stop the collapse"
    assert shallow[claim].verdict == "not comparable at these settings"
    assert deep[claim].verdict == "reproduced"
    assert shallow[claim].measured != deep[claim].measured
    run = rs.run_model(f"{FIXTURES}/bert-tiny", samples=2, tokens=12, draws=2)
    assert run.findings.experiment == "E1" and len(run.findings.checks) > 0
    assert all(isinstance(c, rs.Check) for c in run.findings.checks)
    assert np.all([c.verdict in ("reproduced", "not reproduced", "not comparable at these settings")
                   for c in run.findings.checks])


def test_findings_pickle_and_write_as_findings_json(tmp_path):
    # Results could not be saved from Python ("cannot pickle 'Findings'"), nor written as findings.json.
    findings = rs.path_counts().findings
    again = pickle.loads(pickle.dumps(findings))
    assert again.to_json() == findings.to_json()
    assert [c.verdict for c in again.checks] == [c.verdict for c in findings.checks] == ["reproduced"]
    (tmp_path / "findings.json").write_text(findings.to_json())
    read = rs.read_findings(tmp_path / "findings.json")
    assert read.to_json() == findings.to_json() and json.loads(findings.to_json())["experiment"] == "E6"
    # They compare by value, as the README says (it was identity: the same file read twice was unequal), and so do
    # their checks; another run's findings differ.
    import copy
    assert read == findings and again == findings and copy.deepcopy(findings) == findings
    assert rs.read_findings(tmp_path / "findings.json") == read and read.checks == findings.checks
    other = rs.path_counts(layers=3, heads=2).findings
    assert (other is None or other != findings) and rs.run_theory(layers=2, seeds=1, tokens=4, d_model=4).findings != findings
    assert findings != "findings" and not (findings.checks[0] != findings.checks[0])
    with pytest.raises(TypeError):
        hash(findings)
    # One findings is a list of one; anything else is named (None reached pybind11, which printed the whole list).
    assert list(rs.verdicts(findings)["claim"]) == list(rs.verdicts([findings])["claim"])
    with pytest.raises(rs.Error, match=r"^entry 2 is NoneType, not Findings \(findings\)$"):
        rs.verdicts([findings, rs.path_counts(layers=2, heads=2).findings])


def test_manifest_names_the_libtorch_and_blas_that_computed_it(tmp_path):
    # The numbers' last digits depend on libtorch's version and linear path (docs/performance.md); the manifest said
    # rankscope's version only. The command line links the torch this Python imports (the project venv's, or
    # python3-torch's with TORCH=system), so torch itself is the reference.
    import torch

    run_cli("paths", "count", "--out", tmp_path)
    with open(tmp_path / "manifest.json") as f:
        build = json.load(f)["build"]
    assert build["libtorch"] == torch.__version__.split("+")[0]
    assert build["mkl"] == torch.backends.mkl.is_available()
    assert build["cuda"] == torch.backends.cuda.is_built()
    assert build["compiler"].startswith("g++ ")
