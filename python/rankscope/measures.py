"""The measures of SPEC.md §2 on numpy arrays or torch tensors X [..., n, d] (n tokens × d features), batched over
the leading dimensions. A numpy input gives numpy results, a torch input torch results (float64).

Inputs are viewed, not copied, on the way in; float32 and float64 batches in C order reach the C++ kernels as they are
(other dtypes are converted to float64). Every input is checked as the command line checks a matrix file: rank >= 2,
no empty matrix, no NaN/Inf (rankscope.Error naming the flat index).
"""
from __future__ import annotations

import sys
import warnings
from typing import Any, Dict, NamedTuple, Optional, Sequence

import numpy as np

from . import _rankscope
from ._arrays import check_range, from_engine, is_torch, names, to_engine
from ._tables import as_table

NORMS = _rankscope.NORMS  # ('l1', 'linf', 'composite', 'frobenius', 'spectral')
CENTERS = _rankscope.CENTERS  # ('mean', 'median', 'exact', 'rank1')


def matrix_norm(x: Any, norm: str = "composite") -> Any:
    """||X|| per matrix: l1 (max column abs sum), linf (max row abs sum), composite sqrt(l1*linf), frobenius,
    spectral. [..., n, d] -> [...]."""
    array, torch_out = to_engine(x)
    return from_engine(_rankscope.matrix_norm(array, norm), torch_out)


def residual_norm(x: Any, norm: str = "composite", center: str = "mean") -> Any:
    """||res(X)|| with res(X) = X - 1 c^T, c the `center` (mean, median, exact = the true argmin for the norm) or, for
    rank1, X minus its best rank-1 matrix. [..., n, d] -> [...]."""
    array, torch_out = to_engine(x)
    return from_engine(_rankscope.residual_norm(array, norm, center), torch_out)


def relative_residual(x: Any, norm: str = "composite", center: str = "mean") -> Any:
    """||res(X)|| / ||X|| (0 when X = 0): the paper's plotted quantity with the defaults. [..., n, d] -> [...]."""
    array, torch_out = to_engine(x)
    return from_engine(_rankscope.relative_residual(array, norm, center), torch_out)


def residual(x: Any, norm: str = "composite", center: str = "mean") -> Any:
    """res(X) itself. [..., n, d] -> [..., n, d]."""
    array, torch_out = to_engine(x)
    return from_engine(_rankscope.residual(array, norm, center), torch_out)


def center_of(x: Any, norm: str = "composite", center: str = "mean") -> Any:
    """The centre row c of res(X) = X - 1 c^T (mean, median, or exact: the true argmin of ||X - 1 c^T|| for the norm,
    an LP for linf and composite). [..., n, d] -> [..., d]."""
    array, torch_out = to_engine(x)
    return from_engine(_rankscope.center(array, norm, center), torch_out)


class ExactCenter(NamedTuple):
    center: Any           # [..., d] the minimising centre
    residual: Any         # [...] ||X - 1 c^T|| at it
    linear_programs: Any  # [...] int64, LP solves used (0 for closed forms)


def exact_center(x: Any, norm: str = "composite") -> ExactCenter:
    """The true argmin over centres of ||X - 1 c^T|| (GLPK for linf and the composite norm)."""
    array, torch_out = to_engine(x)
    center, value, programs = _rankscope.exact_center(array, norm)
    return ExactCenter(from_engine(center, torch_out), from_engine(value, torch_out), from_engine(programs, torch_out))


def singular_values(x: Any) -> Any:
    """Descending singular values. [..., n, d] -> [..., min(n, d)]."""
    array, torch_out = to_engine(x)
    return from_engine(_rankscope.singular_values(array), torch_out)


def effective_rank(x: Any) -> Any:
    """exp(-sum p_i log p_i), p_i = s_i / sum s (Roy & Vetterli). [..., n, d] -> [...]."""
    array, torch_out = to_engine(x)
    return from_engine(_rankscope.effective_rank(array), torch_out)


def stable_rank(x: Any) -> Any:
    """sum s_i^2 / s_1^2. [..., n, d] -> [...]."""
    array, torch_out = to_engine(x)
    return from_engine(_rankscope.stable_rank(array), torch_out)


def _rank_tol(rank_tol: Optional[float]) -> float:
    """rank_tol as the engine takes it: -1 for its default."""
    if rank_tol is None:
        return -1.0
    check_range(rank_tol, 0, 1, "rank_tol")
    return float(rank_tol)


def _stored_epsilon(x: Any, array: np.ndarray) -> float:
    """The machine epsilon of the dtype x's values are stored in (a bfloat16 tensor reaches the engine as float32);
    float64's for integers."""
    if is_torch(x) and x.dtype.is_floating_point:
        return float(sys.modules["torch"].finfo(x.dtype).eps)
    return float(np.finfo(array.dtype if np.issubdtype(array.dtype, np.floating) else np.float64).eps)


def numerical_rank(x: Any, rank_tol: Optional[float] = None) -> Any:
    """#{s_i > rank_tol * s_1}. rank_tol=None: for float32/float64 numpy.linalg.matrix_rank's default, max(n, d) * eps;
    for float16/bfloat16 the bound of their rounding, u * ||X||_F / s_1 (u = eps / 2: 2^-11, 2^-8), never below the
    float32 default (numpy computes float16 in float32 and counts its rounding as rank). [..., n, d] -> [...] int64."""
    array, torch_out = to_engine(x)
    return from_engine(_rankscope.numerical_rank(array, _rank_tol(rank_tol), _stored_epsilon(x, array)), torch_out)


def mean_pairwise_cosine(x: Any) -> Any:
    """Mean cos(x_i, x_j) over token pairs i < j (zero rows left out; NaN with fewer than 2). [..., n, d] -> [...]."""
    array, torch_out = to_engine(x)
    return from_engine(_rankscope.mean_pairwise_cosine(array), torch_out)


def attention_measures(p: Any) -> Dict[str, Any]:
    """For row-stochastic P [..., n, n]: mean_row_entropy and max_row_entropy (nats; ln n is uniform),
    first_token_share (the sink rate), sigma2, spectral_gap = 1 - sigma2/sigma1, each [...]."""
    array, torch_out = to_engine(p, "p")
    # Rows stored in float16 or bfloat16 sum to 1 within that dtype's epsilon (a bfloat16 tensor reaches the engine as
    # float32: the epsilon comes from what it was).
    return {name: from_engine(value, torch_out)
            for name, value in _rankscope.attention_measures(array, _stored_epsilon(p, array)).items()}


def measure(x: Any, centers: Optional[Sequence[str]] = None, rank_tol: Optional[float] = None,
            allow_nonfinite: bool = False, frame: bool = False) -> Any:
    """Every measure of every matrix, exactly as `rankscope measure FILE` computes them: the rows of measures.csv
    (matrix, measure, norm, center, index, value; index NaN for scalar measures). centers=None measures every centre,
    leaving out the LP-based `exact` for matrices above 4096 entries (with a warning) as the command does.
    The default rank tolerance is numerical_rank's, from the dtype the values were stored in."""
    array, _ = to_engine(x)
    columns, exact_skipped = _rankscope.measure(array, names(centers, "centers") or [], _rank_tol(rank_tol),
                                                _stored_epsilon(x, array), allow_nonfinite, "x")
    if exact_skipped:
        warnings.warn(f"the exact centre (an LP) is skipped for matrices above {_rankscope.EXACT_DEFAULT_LIMIT} entries; "
                      "ask for it with centers=['mean', 'median', 'exact', 'rank1']", stacklevel=2)
    return as_table(columns, frame)
