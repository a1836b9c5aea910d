"""What each experiment found against the paper's claims (findings.hpp): checks with verdicts computed from this
run's numbers ('reproduced', 'not reproduced', 'not comparable at these settings'), key numbers and a reading."""
from __future__ import annotations

import os
from typing import Any, Sequence

from . import _rankscope
from ._tables import as_table

Findings = _rankscope.Findings
Check = _rankscope.Check


def read_findings(path: "str | os.PathLike[str]") -> Findings:
    """A findings.json written by any rankscope command or `reproduce` cell (E1–E6, theory), e.g. of a trained task."""
    return _rankscope.read_findings(os.fspath(path))


def verdicts(findings: Sequence[Findings], frame: bool = False) -> Any:
    """verdicts.csv's columns (experiment, subject, claim, paper, measured, criterion, verdict, settings, basis) for
    any number of findings."""
    return as_table(_rankscope.verdicts_table(list(findings)), frame)
