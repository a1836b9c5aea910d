"""The measures of SPEC.md §2 on numpy arrays or torch tensors X [..., n, d] (n tokens × d features), batched over
the leading dimensions. A numpy input gives numpy results, a torch input torch results (float64).

Inputs are viewed, not copied, on the way in (with an attention_mask that pads some matrix, their real rows are
gathered: a copy); float32 and float64 batches in C order reach the C++ kernels as they are
(other dtypes are converted to float64). Every input is checked as the command line checks a matrix file: rank >= 2,
no empty matrix, no NaN/Inf (rankscope.Error naming the flat index).

attention_mask (x.shape[:-1], or a tokenizer's [batch, tokens] for x [batch, ..., tokens, d]; 1 or True for a real
token, 0 or False for padding) measures each matrix over its real rows only, as `rankscope model` measures a padded
batch: the padding's values play no part (NaN there is allowed; for an attention map, the padding's rows and columns,
while the real rows must still sum to 1 over the real columns, as when the model gave padding no attention). Every
matrix needs one real row at least.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, NamedTuple, Optional, Sequence

import numpy as np

from . import _rankscope
from ._arrays import check_range, error, flag, from_engine, names, stored_epsilon, to_engine, zero_one_mask
from ._tables import as_table
from ._warnings import warn

NORMS = _rankscope.NORMS  # ('l1', 'linf', 'composite', 'frobenius', 'spectral')
CENTERS = _rankscope.CENTERS  # ('mean', 'median', 'exact', 'rank1')


def _real_rows(attention_mask: Any, rows_shape: tuple) -> np.ndarray:
    """attention_mask as booleans of shape x.shape[:-1] (True or 1: a real token; False or 0: padding). A [B, n] mask
    (a tokenizer's) is taken for every matrix of sample b when x is [B, ..., n, d] (the heads of a [B, H, n, n] map)."""
    mask = zero_one_mask(attention_mask)
    if mask.ndim == 2 and len(rows_shape) > 2 and mask.shape == (rows_shape[0], rows_shape[-1]):
        mask = np.broadcast_to(mask.reshape((rows_shape[0],) + (1,) * (len(rows_shape) - 2) + (rows_shape[-1],)),
                               rows_shape)
    if mask.shape != rows_shape:
        raise error(f"shape {tuple(mask.shape)} differs from x's rows {rows_shape} (x.shape[:-1], or [batch, tokens] "
                    "for x [batch, ..., tokens, d])", "attention_mask")
    return mask


def _check_real_entries_finite(array: np.ndarray, real: np.ndarray, name: str, square: bool) -> None:
    """The engine's NaN/Inf check on the real entries only (padding may hold anything: for an attention map, the rows
    and the columns of padding tokens), with x's own flat index."""
    if not np.issubdtype(array.dtype, np.floating):
        return
    used = real[..., :, None] & real[..., None, :] if square else real[..., None]
    bad = ~np.isfinite(array) & used
    if bad.any():
        index = int(np.flatnonzero(bad)[0])
        position = ", ".join(str(int(i)) for i in np.unravel_index(index, array.shape))
        raise error(f"{'NaN' if np.isnan(array.flat[index]) else 'Inf'} at [{position}] (flat index {index})", name)


def _per_matrix(x: Any, attention_mask: Any, compute: Callable[[np.ndarray], Any], name: str = "x",
                placement: str = "fixed") -> Any:
    """compute(array [..., k, d]) on x, or with attention_mask [...] on each matrix's real rows only, as E1 measures a
    padded batch (the command line's per-sample loop over real tokens). Matrices with the same number of real rows go
    to the engine together. `placement` says where each matrix's result goes: "fixed" (a scalar or a [d] centre: as
    it is), "leading" (singular values [min(k, d)]: first, zeros after, which are exactly the singular values of x
    with its padding rows zeroed), "rows" (the residual [k, d]: at the real rows, zero rows at the padding, so every
    norm of it is the masked residual's), "square" (x is an attention map [..., n, n]: the rows and columns of the
    real tokens are kept)."""
    array, torch_out = to_engine(x, name)
    if attention_mask is None or array.size == 0:  # (an empty matrix or batch: the engine's own error)
        results = compute(array)
    else:
        if array.ndim < 2:
            raise error(f"need a matrix (rank >= 2), got an array of rank {array.ndim}", name)
        if placement == "square" and array.shape[-1] != array.shape[-2]:
            raise error(f"attention matrices must be square, got {array.shape[-2]} x {array.shape[-1]}", name)
        real = _real_rows(attention_mask, array.shape[:-1])
        _check_real_entries_finite(array, real, name, placement == "square")
        results = compute(array) if real.all() else _masked(array, real, compute, placement, name)
    if isinstance(results, tuple):
        return tuple(from_engine(np.asarray(r), torch_out) for r in results)
    return from_engine(np.asarray(results), torch_out)


def _masked(array: np.ndarray, real: np.ndarray, compute: Callable[[np.ndarray], Any], placement: str,
            name: str) -> Any:
    n, d = array.shape[-2:]
    matrices = array.reshape(-1, n, d)
    rows = real.reshape(-1, n)
    counts = rows.sum(axis=1)
    if counts.min() == 0:
        where = np.unravel_index(int(np.argmin(counts)), array.shape[:-2])
        raise error(f"matrix {tuple(int(i) for i in where)} of {name} has no real row", "attention_mask")
    full_shape = {"rows": (n, d), "leading": (min(n, d),)}
    outputs: list = []
    for count in np.unique(counts):
        members = np.flatnonzero(counts == count)
        real_rows = rows[members]  # [m, n], `count` True per row
        # Boolean indexing keeps row-major order: each member's real rows, in order, `count` of them.
        group = matrices[members][real_rows].reshape(len(members), count, d)
        if placement == "square":  # and the real columns
            columns = np.nonzero(real_rows)[1].reshape(len(members), 1, count)
            group = np.take_along_axis(group, columns, axis=2)
        results = compute(group)
        parts = [np.asarray(part) for part in (results if isinstance(results, tuple) else (results,))]
        if not outputs:
            outputs = [np.zeros((len(matrices),) + full_shape.get(placement, part.shape[1:]), dtype=part.dtype)
                       for part in parts]
        for output, part in zip(outputs, parts):
            if placement == "rows":
                placed = np.zeros((len(members),) + output.shape[1:], dtype=output.dtype)
                placed[real_rows] = part.reshape(-1, d)
                output[members] = placed
            else:
                output[(members,) + tuple(slice(0, size) for size in part.shape[1:])] = part
    shaped = tuple(output.reshape(array.shape[:-2] + output.shape[1:]) for output in outputs)
    return shaped if len(shaped) > 1 else shaped[0]


def _norm_name(norm: Any) -> str:
    """A norm's name, checked before the binding sees it (None reached pybind11, whose TypeError printed the array)."""
    if not isinstance(norm, str):
        raise error(f"{norm!r} is not a norm name (expected {', '.join(_rankscope.NORMS)})", "norm")
    return norm


def _center_name(center: Any) -> str:
    if not isinstance(center, str):
        raise error(f"{center!r} is not a centre name (expected {', '.join(_rankscope.CENTERS)})", "center")
    return center


def matrix_norm(x: Any, norm: str = "composite", attention_mask: Any = None) -> Any:
    """||X|| per matrix: l1 (max column abs sum), linf (max row abs sum), composite sqrt(l1*linf), frobenius,
    spectral. [..., n, d] -> [...].
    attention_mask: each matrix over its real rows only (see the module docstring).
    """
    norm = _norm_name(norm)
    return _per_matrix(x, attention_mask, lambda a: _rankscope.matrix_norm(a, norm))


def residual_norm(x: Any, norm: str = "composite", center: str = "mean", attention_mask: Any = None) -> Any:
    """||res(X)|| with res(X) = X - 1 c^T, c the `center` (mean, median, exact = the true argmin for the norm) or, for
    rank1, X minus its best rank-1 matrix. [..., n, d] -> [...].
    attention_mask: each matrix over its real rows only (see the module docstring).
    """
    norm, center = _norm_name(norm), _center_name(center)
    return _per_matrix(x, attention_mask, lambda a: _rankscope.residual_norm(a, norm, center))


def relative_residual(x: Any, norm: str = "composite", center: str = "mean", attention_mask: Any = None) -> Any:
    """||res(X)|| / ||X|| (0 when X = 0): the paper's plotted quantity with the defaults. [..., n, d] -> [...].
    attention_mask: each matrix over its real rows only (see the module docstring).
    """
    norm, center = _norm_name(norm), _center_name(center)
    return _per_matrix(x, attention_mask, lambda a: _rankscope.relative_residual(a, norm, center))


def residual(x: Any, norm: str = "composite", center: str = "mean", attention_mask: Any = None) -> Any:
    """res(X) itself. [..., n, d] -> [..., n, d] (with attention_mask: zero rows at the padding)."""
    norm, center = _norm_name(norm), _center_name(center)
    return _per_matrix(x, attention_mask, lambda a: _rankscope.residual(a, norm, center), placement="rows")


def center_of(x: Any, norm: str = "composite", center: str = "mean", attention_mask: Any = None) -> Any:
    """The centre row c of res(X) = X - 1 c^T (mean, median, or exact: the true argmin of ||X - 1 c^T|| for the norm,
    an LP for linf and composite). [..., n, d] -> [..., d].
    attention_mask: each matrix over its real rows only (see the module docstring).
    """
    norm, center = _norm_name(norm), _center_name(center)
    return _per_matrix(x, attention_mask, lambda a: _rankscope.center(a, norm, center))


class ExactCenter(NamedTuple):
    center: Any           # [..., d] the minimising centre
    residual: Any         # [...] ||X - 1 c^T|| at it
    linear_programs: Any  # [...] int64, LP solves used (0 for closed forms)


def exact_center(x: Any, norm: str = "composite", attention_mask: Any = None) -> ExactCenter:
    """The true argmin over centres of ||X - 1 c^T|| (GLPK for linf and the composite norm: at most 4096 entries per
    matrix, 64 x 64, an Error beyond, since the linear programs grow steeply with the size).
    attention_mask: each matrix over its real rows only (see the module docstring).
    """
    norm = _norm_name(norm)
    return ExactCenter(*_per_matrix(x, attention_mask, lambda a: tuple(_rankscope.exact_center(a, norm))))


def singular_values(x: Any, attention_mask: Any = None) -> Any:
    """Descending singular values. [..., n, d] -> [..., min(n, d)] (with attention_mask: zeros after a matrix's
    min(real rows, d) values)."""
    return _per_matrix(x, attention_mask, _rankscope.singular_values, placement="leading")


def effective_rank(x: Any, attention_mask: Any = None) -> Any:
    """exp(-sum p_i log p_i), p_i = s_i / sum s (Roy & Vetterli). [..., n, d] -> [...].
    attention_mask: each matrix over its real rows only (see the module docstring).
    """
    return _per_matrix(x, attention_mask, _rankscope.effective_rank)


def stable_rank(x: Any, attention_mask: Any = None) -> Any:
    """sum s_i^2 / s_1^2. [..., n, d] -> [...].
    attention_mask: each matrix over its real rows only (see the module docstring).
    """
    return _per_matrix(x, attention_mask, _rankscope.stable_rank)


def _rank_tol(rank_tol: Optional[float]) -> float:
    """rank_tol as the engine takes it: -1 for its default."""
    if rank_tol is None:
        return -1.0
    check_range(rank_tol, 0, 1, "rank_tol")
    return float(rank_tol)


def numerical_rank(x: Any, rank_tol: Optional[float] = None, attention_mask: Any = None) -> Any:
    """#{s_i > rank_tol * s_1}. rank_tol=None: for float32/float64 numpy.linalg.matrix_rank's default, max(n, d) * eps;
    for float16/bfloat16 the bound of their rounding, u * ||X||_F / s_1 (u = eps / 2: 2^-11, 2^-8), never below the
    float32 default (numpy computes float16 in float32 and counts its rounding as rank). [..., n, d] -> [...] int64.
    attention_mask: each matrix over its real rows only (see the module docstring).
    """
    tolerance = _rank_tol(rank_tol)
    return _per_matrix(x, attention_mask,
                       lambda a: _rankscope.numerical_rank(a, tolerance, stored_epsilon(x, a)))


def mean_pairwise_cosine(x: Any, attention_mask: Any = None) -> Any:
    """Mean cos(x_i, x_j) over token pairs i < j (zero rows left out; NaN with fewer than 2). [..., n, d] -> [...].
    attention_mask: each matrix over its real rows only (see the module docstring).
    """
    return _per_matrix(x, attention_mask, _rankscope.mean_pairwise_cosine)


def attention_measures(p: Any, attention_mask: Any = None) -> Dict[str, Any]:
    """For row-stochastic P [..., n, n]: mean_row_entropy and max_row_entropy (nats; ln n is uniform),
    first_token_share (the sink rate), sigma2, spectral_gap = 1 - sigma2/sigma1, each [...]. With attention_mask
    [..., n], on the rows and columns of the real tokens (first_token_share: the first real token's); those rows must
    still sum to 1 (the model gave the padding no attention)."""
    names_in_order: list = []

    def compute(array: np.ndarray) -> tuple:
        # Rows stored in float16 or bfloat16 sum to 1 within that dtype's epsilon (a bfloat16 tensor reaches the engine
        # as float32: the epsilon comes from what it was).
        measures = _rankscope.attention_measures(array, stored_epsilon(p, array))
        names_in_order[:] = list(measures)
        return tuple(measures.values())

    values = _per_matrix(p, attention_mask, compute, name="p", placement="square")
    return dict(zip(names_in_order, values))


def measure(x: Any, centers: Optional[Sequence[str]] = None, rank_tol: Optional[float] = None,
            allow_nonfinite: bool = False, frame: bool = False) -> Any:
    """Every measure of every matrix, exactly as `rankscope measure FILE` computes them: the rows of measures.csv
    (matrix, measure, norm, center, index, value; index NaN for scalar measures). centers=None measures every centre,
    leaving out the LP-based `exact` for matrices above 4096 entries (with a warning) as the command does.
    The default rank tolerance is numerical_rank's, from the dtype the values were stored in."""
    array, _ = to_engine(x)
    columns, exact_skipped = _rankscope.measure(array, names(centers, "centers") or [], _rank_tol(rank_tol),
                                                stored_epsilon(x, array), flag(allow_nonfinite, "allow_nonfinite"),
                                                "x")
    if exact_skipped:
        warn(f"the exact centre (an LP) is skipped for matrices above {_rankscope.EXACT_DEFAULT_LIMIT} entries "
             "(64 x 64): its linear program would take minutes to hours")
    return as_table(columns, frame)
