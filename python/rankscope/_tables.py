"""Tables as the command line writes them: a dict {column: numpy array} in the CSV's column order (int64, uint64,
float64, and object arrays of str for text), or a pandas DataFrame with `frame=True` (needs python3-pandas)."""
from __future__ import annotations

from typing import Any, Dict

import numpy as np

Table = Dict[str, np.ndarray]


def as_table(columns: Table, frame: bool) -> Any:
    if not frame:
        return columns
    try:
        import pandas
    except ImportError as missing:
        raise ImportError("frame=True returns a pandas DataFrame and needs pandas "
                          "(Debian: apt-get install python3-pandas)") from missing
    return pandas.DataFrame(columns)
