"""What each experiment found against the paper's claims (findings.hpp): checks with verdicts computed from this
run's numbers ('reproduced', 'not reproduced', 'not comparable at these settings'), key numbers and a reading."""
from __future__ import annotations

import os
from typing import Any, Sequence

from . import _rankscope
from ._arrays import error
from ._tables import as_table

Findings = _rankscope.Findings
Check = _rankscope.Check


def read_findings(path: "str | os.PathLike[str]") -> Findings:
    """A findings.json written by any rankscope command or `reproduce` cell (E1–E6, theory), e.g. of a trained task."""
    return _rankscope.read_findings(os.fspath(path))


def verdicts(findings: "Findings | Sequence[Findings]", frame: bool = False) -> Any:
    """verdicts.csv's columns (experiment, subject, claim, paper, measured, criterion, verdict, settings, basis) for
    one findings or any number of them. (Findings.to_json() gives findings.json's content; Findings pickle.)"""
    listed = [findings] if isinstance(findings, Findings) else list(findings)
    for number, entry in enumerate(listed, 1):
        if not isinstance(entry, Findings):  # path_counts(layers=...).findings is None: pybind11 listed the whole input
            raise error(f"entry {number} is {type(entry).__name__}, not Findings", "findings")
    return as_table(_rankscope.verdicts_table(listed), frame)
