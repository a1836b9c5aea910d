"""Beyond the paper (SPEC.md §7): claims of the follow-up literature measured at initialisation, as the command line's
`rankscope trainability` and `rankscope failure-modes` compute them (the same tables, the same findings)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from . import _rankscope
from ._arrays import check_count, check_range, names, values
from ._progress import shown as progress_shown
from ._tables import as_table
from .findings import Findings


def _check_sizes(d_model: int, heads: int, tokens: int, samples: int, seeds: int, seed: int) -> None:
    """The ranges both commands give these flags (trainability.cpp, failure_modes.cpp)."""
    check_count(d_model, 1, 1024, "d_model")
    check_count(heads, 1, 64, "heads")
    check_count(tokens, 2, 1024, "tokens")
    check_count(samples, 1, 1024, "samples")
    check_count(seeds, 1, 1000, "seeds")
    check_count(seed, 0, 2**64 - 1, "seed")


@dataclass
class TrainabilityRun:
    """Noci et al. 2022: token alignment and query/key/value gradient norms at init (`rankscope trainability`)."""
    layers: Any        # trainability.csv: per run and layer, input cosine, ‖∂L/∂W_Q‖, ‖∂L/∂W_K‖, ‖∂L/∂W_V‖, ratios
    runs: Any          # trainability_runs.csv: per run, last-layer cosine and relative residual, q/v ratios
    summary: Any       # trainability_summary.csv: per configuration, over seeds
    findings: Findings


def run_trainability(depths: Sequence[int] = (2, 4, 8, 16, 32, 64), layer_norms: Sequence[str] = ("post", "pre"),
                     scalings: Sequence[str] = ("plain", "inverse-sqrt-depth"), d_model: int = 64, heads: int = 4,
                     tokens: int = 32, samples: int = 8, seeds: int = 3, seed: int = 0,
                     frame: bool = False) -> TrainabilityRun:
    """Post-LN and pre-LN blocks (attention + ReLU MLP, both skips scaled by α = 1 or 1/√L) at every depth, float64,
    on random tokens with a linear read-out loss: the mean token cosine per layer and the Frobenius norms of the
    gradients of W_Q, W_K and W_V of every layer. About 8 s at the defaults on 2 cores."""
    depths = values(depths, "depths")
    for depth in depths:
        check_count(depth, 1, 256, "depths")
    _check_sizes(d_model, heads, tokens, samples, seeds, seed)
    with progress_shown():
        result = _rankscope.run_trainability(depths, names(layer_norms, "layer_norms"), names(scalings, "scalings"),
                                             d_model, heads, tokens, samples, seeds, seed)
    return TrainabilityRun(layers=as_table(result["layers"], frame), runs=as_table(result["runs"], frame),
                           summary=as_table(result["summary"], frame), findings=result["findings"])


@dataclass
class FailureModesRun:
    """Rank collapse vs entropy collapse over the query/key scale and depth (`rankscope failure-modes`)."""
    rows: Any             # failure_modes.csv: variant × scale × seed × layer: entropy / ln n, relative residual, cosine
    summary: Any          # failure_modes_summary.csv: means over seeds and the regime of each cell
    freezing_scale: float  # s_c = (2 ln n)^(1/4)
    findings: Findings


def run_failure_modes(query_key_scales: Sequence[float] = (0.25, 0.35, 0.5, 0.71, 1, 1.41, 2, 2.83, 4),
                      variants: Sequence[str] = ("SAN", "transformer"), layers: int = 24, d_model: int = 64,
                      heads: int = 4, tokens: int = 32, samples: int = 8, seeds: int = 3, seed: int = 0,
                      entropy_threshold: float = 0.2, rank_threshold: float = 1e-3,
                      frame: bool = False) -> FailureModesRun:
    """W_Q, W_K ~ N(0, s²/d) for each scale s; pure attention ("SAN") and post-LN blocks with MLP and skips
    ("transformer"); every layer's normalised attention entropy, relative residual and token cosine, float64. About
    3 s at the defaults on 2 cores."""
    query_key_scales = values(query_key_scales, "query_key_scales")
    for scale in query_key_scales:
        check_range(scale, 0, 100, "query_key_scales", low_open=True)
    check_count(layers, 1, 256, "layers")
    _check_sizes(d_model, heads, tokens, samples, seeds, seed)
    check_range(entropy_threshold, 0, 1, "entropy_threshold", low_open=True)
    check_range(rank_threshold, 0, 1, "rank_threshold", low_open=True)
    with progress_shown():
        result = _rankscope.run_failure_modes([float(s) for s in query_key_scales], names(variants, "variants"), layers,
                                              d_model, heads, tokens, samples, seeds, seed, entropy_threshold,
                                              rank_threshold)
    return FailureModesRun(rows=as_table(result["rows"], frame), summary=as_table(result["summary"], frame),
                           freezing_scale=result["freezing_scale"], findings=result["findings"])
