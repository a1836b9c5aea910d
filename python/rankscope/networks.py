"""The SAN laboratory (SPEC.md §1, §3): self-attention networks with TransformerLens names, the path decomposition,
attention products along random paths (E2 on any patterns), the theory experiment, and path counts (E6).

Networks are float64 torch::nn modules in the C++ engine. Building one seeds torch's global generator with `seed`
and then restores the caller's generator state (python torch shares that generator: one libtorch).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np

from . import _rankscope
from ._arrays import (attention_mask_ids, check_count, check_range, error, flag, from_engine, is_torch, map_arrays,
                      stored_epsilon, to_engine, values)
from ._progress import shown as progress_shown
from ._tables import as_table
from .findings import Findings

BlockConfig = _rankscope.BlockConfig
SanConfig = _rankscope.SanConfig


class San:
    """A self-attention network (pure SAN and its variants) built from a SanConfig with weights drawn from `seed`.

    >>> net = San(SanConfig(layers=3, heads=2, d_model=16), seed=0)
    >>> y, hooks = net.forward(x)            # x [batch, n, 16] or [n, 16]; hooks['blocks.0.attn.hook_pattern']
    """

    def __init__(self, config: SanConfig, seed: int = 0, dtype: str = "float64"):
        check_count(seed, 0, 2**64 - 1, "seed")
        self._engine = _rankscope.San(config, seed, dtype)

    @property
    def config(self) -> SanConfig:
        """The configuration the network was built from, reading only: setting a field raises (the network does not
        read it again). copy.copy(net.config) is a plain SanConfig to edit and build a new San from."""
        return self._engine.config

    def forward(self, x: Any, record: bool = True) -> Tuple[Any, Dict[str, Any]]:
        """(output [B, n, d], {hook name: activation}): hook_embed, blocks.{l}.hook_resid_pre|mid|post,
        blocks.{l}.hook_attn_out, blocks.{l}.hook_mlp_out, blocks.{l}.attn.hook_pattern [B, H, n, n]."""
        array, torch_out = to_engine(x)
        output, hooks = self._engine.forward(array, record)
        return from_engine(output, torch_out), map_arrays(hooks, torch_out)

    __call__ = forward

    def parameters(self) -> Dict[str, Any]:
        """{name: array} viewing the weights (blocks.{l}.attn.W_Q [H, d, d_qk], ...); writing into them changes the
        network, and from then on each forward refuses NaN or Inf weights by name."""
        return self._engine.parameters()

    def load_parameters(self, values: Dict[str, Any]) -> None:
        """Copies arrays (numpy or torch) into parameters by name; shapes must match."""
        self._engine.load_parameters({name: to_engine(value, name)[0] for name, value in values.items()})

    def check_path_decomposition(self, x: Any, max_paths: float = 1e6) -> Dict[str, float]:
        """Theorem 2.1: the sum over all H^L (with skips (H+1)^L) paths against the forward output: paths,
        max_abs_error, max_abs_output. Needs a network without LayerNorm and MLP."""
        check_range(max_paths, 1, float("inf"), "max_paths")
        return self._engine.check_path_decomposition(to_engine(x)[0], max_paths)


def sample_path_products(patterns: Sequence[Any], draws: int = 100, seed: int = 0, attention_mask: Any = None,
                         allow_nonfinite: bool = False, frame: bool = False) -> Any:
    """E2 on any recorded attention (patterns[l]: [B, H, n, n] of layer l): for k = 1..L, `draws` times, k distinct
    layers with one random head each and a random sample, the product A_{l_k} ... A_{l_1} in forward order and its
    rank-1 relative residual (composite). The columns of `rankscope paths sample`'s paths.csv. Each real token's row
    must be an attention row (>= 0, summing to 1); attention_mask [B, n] (1 or True: a real token) leaves padding out of
    the products and gives each sample at least 2 real tokens."""
    check_count(draws, 1, 100000, "draws")
    check_count(seed, 0, 2**64 - 1, "seed")
    if isinstance(patterns, np.ndarray) or is_torch(patterns):
        raise error(f"one array of shape {tuple(patterns.shape)}: pass a list with one [B, H, n, n] array per layer "
                    "(e.g. [p] for one layer)", "patterns")
    arrays = [to_engine(p, f"patterns[{l}]")[0] for l, p in enumerate(patterns)]
    # Each layer's rows are checked within the rounding of the dtype it was stored in (bfloat16 arrives as float32).
    epsilons = [stored_epsilon(p, array) for p, array in zip(patterns, arrays)]
    return as_table(_rankscope.sample_path_products(arrays, epsilons, draws, seed, attention_mask_ids(attention_mask),
                                                    flag(allow_nonfinite, "allow_nonfinite")), frame)


@dataclass
class TheoryRun:
    """The theory experiment's outputs (the files of `rankscope theory`)."""
    rows: Any              # theory.csv: variant × seed × layer (residual, relative residual, γ, β, λ, c, bounds)
    summary: Any           # theory_summary.csv: per variant and layer, means over seeds
    variants: Any          # theory.json's variants: fitted slope, base, step exponent, final residual, bound tightness
    bound_rows_checked: int
    bound_violations: int
    bound_definition: str
    findings: Findings     # the paper's §3 claims with computed verdicts
    network: SanConfig     # the base configuration run (sizes from `input` when given)


def run_theory(layers: int = 12, heads: int = 4, d_model: Optional[int] = None, tokens: Optional[int] = None,
               d_qk: int = 0, d_v: int = 0, biases: bool = False, init_scale: float = 1.0, seeds: int = 5, seed: int = 0,
               input: Any = None, allow_nonfinite: bool = False, frame: bool = False, device: str = "cpu") -> TheoryRun:
    """`rankscope theory`: twelve random SAN variants (SAN, +skip, +MLP, +skip+MLP, +LN, +affine-LN; 1 and `heads`
    heads) on random N(0, 1) input (or `input`, one n × d matrix) for seeds seed..seed+seeds-1, float64, with the
    per-layer bound c_l r_(l-1)^3 beside each measured residual. d_model and tokens are 32 unless given; with `input`
    its shape sets them, and one given that disagrees is an error. d_qk and d_v are per head (0: d_model / heads).
    `device` (cpu, cuda, cuda:N) runs the forwards there, as --device does. Takes ~40 s at the defaults on 2 cores;
    Ctrl-C stops it between jobs."""
    check_count(layers, 1, 100, "layers")
    check_count(heads, 1, 64, "heads")
    array = None if input is None else to_engine(input, "input")[0]
    if array is not None and array.ndim == 2:
        for name, given, used, what in (("tokens", tokens, array.shape[0], "rows"),
                                        ("d_model", d_model, array.shape[1], "columns")):
            if given is not None:
                check_count(given, 1, 2**31 - 1, name)
            if given is not None and given != used:
                raise error(f"{name} {given} disagrees with the input's {used} {what} (leave {name} out: the input "
                            "sets it)", name)
    d_model = 32 if d_model is None else d_model
    tokens = 32 if tokens is None else tokens
    check_count(d_model, 1, 512, "d_model")
    check_count(tokens, 2, 512, "tokens")
    check_count(d_qk, 0, 512, "d_qk")
    check_count(d_v, 0, 512, "d_v")
    check_range(init_scale, 0, 100, "init_scale", low_open=True)
    check_count(seeds, 1, 1000, "seeds")
    check_count(seed, 0, 2**64 - 1, "seed")
    # heads and the blocks are set per variant; with `input`, tokens and d_model come from its shape.
    network = SanConfig(layers=layers, heads=1, d_model=d_model, d_qk=d_qk, d_v=d_v, tokens=tokens, biases=biases,
                        init_scale=init_scale)
    with progress_shown():
        result = _rankscope.run_theory(network, heads, seeds, seed, array, flag(allow_nonfinite, "allow_nonfinite"),
                                       device)
    return TheoryRun(rows=as_table(result["rows"], frame), summary=as_table(result["summary"], frame),
                     variants=as_table(result["variants"], frame), bound_rows_checked=result["bound_rows_checked"],
                     bound_violations=result["bound_violations"], bound_definition=result["bound_definition"],
                     findings=result["findings"], network=result["network"])


@dataclass
class PathCounts:
    """Path-length distributions with skips (SPEC.md §3): N(k) = C(L, k) H^k paths of length k."""
    table: Any                            # path_counts.csv: architecture, layers, heads, length, count, share, alpha_share
    mean_lengths: Dict[str, float]        # L H / (H + 1) per architecture
    alpha_mean_lengths: Dict[str, float]  # α-weighted mean length (with alpha)
    findings: Optional[Findings]          # E6 judged against the paper (the built-in table only)


def path_counts(layers: Optional[int] = None, heads: Optional[int] = None, alpha: Optional[Sequence[float]] = None,
                frame: bool = False) -> PathCounts:
    """`rankscope paths count`: without `layers` the E6 table of BERT-base, DistilBERT, ... GPT-3; with `layers` and
    `heads` one architecture, α-weighted when `alpha` (one skip ratio per layer, each in [0, 1]) is given."""
    if layers is None:
        if heads is not None or alpha is not None:
            raise error("heads and alpha need layers (without it: the built-in E6 table)", "heads")
        result = _rankscope.path_counts(0, 0, [])
    else:
        if heads is None:
            raise error("layers needs heads", "heads")
        check_count(layers, 1, 100, "layers")
        check_count(heads, 1, 128, "heads")
        alphas = [] if alpha is None else values(alpha, "alpha")  # a Series or array of measured skip ratios too
        for a in alphas:
            check_range(a, 0, 1, "alpha")
        result = _rankscope.path_counts(layers, heads, [float(a) for a in alphas])
    return PathCounts(table=as_table(result["table"], frame), mean_lengths=dict(result["mean_lengths"]),
                      alpha_mean_lengths=dict(result["alpha_mean_lengths"]), findings=result["findings"])


def known_architectures() -> list:
    """[(name, layers, heads)] of the E6 table."""
    return _rankscope.known_architectures()
