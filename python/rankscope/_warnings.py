"""rankscope's warnings, the engine's (a vocabulary that does not fit the text, tensors a checkpoint holds that the model
does not read, a figure gnuplot could not draw) and the package's, as RankscopeWarning at the caller's line."""
from __future__ import annotations

import os
import sys
import warnings

from . import _rankscope


class RankscopeWarning(UserWarning):
    """Something about a result that you should know and that is not an error; the text is the command line's
    "rankscope: warning: ..." line. Catch it with warnings.catch_warnings or pytest.warns; the filter "error" raises
    it out of the call."""


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn(message: str) -> None:
    """warnings.warn(message, RankscopeWarning) at the first frame outside this package: the line of the user's that
    called rankscope, not the package's own wrapper."""
    frame, level = sys._getframe(1), 2
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, RankscopeWarning, stacklevel=level)


_rankscope._set_warning_handler(warn)
