"""rankscope's warnings, the engine's (a vocabulary that does not fit the text, tensors a checkpoint holds that the model
does not read, a figure gnuplot could not draw) and the package's, as RankscopeWarning at the caller's line."""
from __future__ import annotations

import contextlib
import os
import sys
import warnings
from typing import Dict, Iterator

from . import _rankscope


class RankscopeWarning(UserWarning):
    """Something about a result that you should know and that is not an error; the text is the command line's
    "rankscope: warning: ..." line. Catch it with warnings.catch_warnings or pytest.warns; the filter "error" raises
    it out of the call."""


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


_NAMES: Dict[str, str] = {}


@contextlib.contextmanager
def naming(path: str, name: str) -> Iterator[None]:
    """Within the block, warnings say `name` where they would say `path` (a scratch file the user never made, e.g.
    the sentences of a list written one per line)."""
    _NAMES[path] = name
    try:
        yield
    finally:
        _NAMES.pop(path, None)


def warn(message: str) -> None:
    """warnings.warn(message, RankscopeWarning) at the first frame outside this package: the line of the user's that
    called rankscope, not the package's own wrapper."""
    for path, name in list(_NAMES.items()):
        message = message.replace(path, name)
    frame, level = sys._getframe(1), 2
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, RankscopeWarning, stacklevel=level)


_rankscope._set_warning_handler(warn)
