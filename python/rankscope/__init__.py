"""rankscope: measure and explain rank collapse in attention networks (Dong, Cordonnier & Loukas 2021), with the
C++ engine of the `rankscope` command line. See README.md, "Python".

    import rankscope as rs
    rs.relative_residual(hidden)                  # [..., n, d] numpy or torch -> [...]: the paper's measure
    rs.relative_residual(hidden, attention_mask=mask)   # a padded batch: each sample over its real tokens
    rs.measure(hidden, frame=True)                # every measure, as `rankscope measure` (a DataFrame)
    run = rs.run_theory(layers=6, seeds=2)        # the SAN laboratory: run.rows, run.findings.checks
    run = rs.run_model("models/all-MiniLM-L6-v2", samples=8, tokens=32)   # E1/E2: run.residual, run.paths
                                                  # (a Hugging Face folder; make deps installs this one under the
                                                  # repository's models/; a relative path is from the working directory)
    rs.path_counts().table                        # E6
    rs.run_trainability().findings                # beyond the paper: Noci et al. 2022 (query/key gradients at init)
    rs.run_failure_modes().summary                # beyond the paper: rank vs entropy collapse over the query/key scale

Errors: rankscope.Error (a ValueError) carries the command line's one-line message; Ctrl-C interrupts long calls.
Warnings (a vocabulary that does not fit the text, ...): rankscope.RankscopeWarning, a UserWarning, at your line.
Progress of long calls: on a terminal, and in a notebook's cell (set_progress).
Threads: ATen's intra-op threads are set to all cores on import, as the command line's default (--threads 0),
unless OMP_NUM_THREADS is set; change with set_threads(n).
"""
from __future__ import annotations

import os as _os

from . import _find
from ._progress import set_progress
from ._warnings import RankscopeWarning
from . import _rankscope
from ._arrays import check_count
from ._rankscope import Error, configure_allocator, get_threads, version
from .beyond import FailureModesRun, TrainabilityRun, run_failure_modes, run_trainability
from .findings import Check, Findings, read_findings, verdicts
from .measures import (CENTERS, NORMS, ExactCenter, attention_measures, center_of, effective_rank, exact_center,
                       matrix_norm, mean_pairwise_cosine, measure, numerical_rank, relative_residual, residual,
                       residual_norm, singular_values, stable_rank)
from .models import VARIANTS, Model, ModelRun, ModelSource, load_model, model_source, run_model, text_batch
from .networks import (BlockConfig, PathCounts, San, SanConfig, TheoryRun, known_architectures, path_counts,
                       run_theory, sample_path_products)

__version__ = version().split()[1]


def set_threads(threads: int) -> int:
    """Sets ATen's intra-op threads (0 = all cores) and holds OpenBLAS's own pool at one thread, as --threads does;
    returns the number in use. Process-wide (torch's BLAS calls in this process are affected too). A whole number in
    [0, 256] ("2" and True were passed on, or met pybind11's TypeError)."""
    check_count(threads, 0, 256, "threads")
    return _rankscope.set_threads(int(threads))


_find.configure_environment()
if "OMP_NUM_THREADS" not in _os.environ:
    set_threads(0)

__all__ = [
    "CENTERS", "NORMS", "VARIANTS", "BlockConfig", "Check", "Error", "ExactCenter", "FailureModesRun", "Findings",
    "Model", "ModelRun", "RankscopeWarning", "TrainabilityRun", "run_failure_modes", "run_trainability",
    "ModelSource", "PathCounts", "San", "SanConfig", "TheoryRun", "attention_measures", "center_of",
    "configure_allocator", "effective_rank", "exact_center", "get_threads", "known_architectures", "load_model",
    "matrix_norm", "mean_pairwise_cosine", "measure", "model_source", "numerical_rank", "path_counts",
    "read_findings", "relative_residual", "residual", "residual_norm", "run_model", "run_theory",
    "sample_path_products", "set_progress", "set_threads", "singular_values", "stable_rank", "text_batch", "verdicts", "version",
]
