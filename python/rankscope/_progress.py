"""Progress of long calls where the engine's own bar cannot be seen. The engine draws rate and ETA on stderr when
that is a terminal; a notebook's cell never shows what C++ writes to stderr. There, while a long call runs (it
releases the GIL), a thread of this module reads the engine's latest bar every quarter second and draws the same line
on sys.stderr, which the cell shows."""
from __future__ import annotations

import contextlib
import os
import sys
import threading
from typing import Iterator

from . import _rankscope
from ._arrays import error

_MODES = ("auto", "on", "off")
_mode = "auto"


def set_progress(mode: str) -> None:
    """Where long calls (run_model, run_theory, run_trainability, run_failure_modes, a streamed Model's forward) show
    progress: "auto" (the default) in a notebook's cell, the engine's own bar on a terminal, nothing otherwise; "on"
    also on a sys.stderr that is neither (a log file); "off" nothing from Python (the engine still draws on a
    terminal)."""
    global _mode
    if mode not in _MODES:
        raise error(f"{mode!r} is not one of {', '.join(_MODES)}", "mode")
    _mode = mode


def _in_notebook() -> bool:
    return type(sys.stderr).__module__.split(".")[0] == "ipykernel"


def _shown_here() -> bool:
    if _mode == "off":
        return False
    try:
        if os.isatty(2):
            return False  # the engine draws its bar there itself
    except OSError:
        pass
    return _mode == "on" or _in_notebook()


@contextlib.contextmanager
def shown() -> Iterator[None]:
    """Draws the engine's bars on sys.stderr while the block runs, if they are to be shown here (set_progress)."""
    if not _shown_here():
        yield
        return
    stream = sys.stderr
    first = _rankscope._progress()[0] + 1  # bars made before the block are not its own
    state = {"serial": 0}
    lock = threading.Lock()

    def draw() -> None:
        serial, _, line = _rankscope._progress()
        with lock:
            if serial < first:
                return
            if state["serial"] and serial != state["serial"]:
                stream.write("\n")  # the next bar on a line of its own
            state["serial"] = serial
            stream.write("\r" + line)
            stream.flush()

    stop = threading.Event()

    def poll() -> None:
        while not stop.wait(0.25):
            draw()

    thread = threading.Thread(target=poll, name="rankscope-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        draw()  # the bar as it ended
        if state["serial"]:
            stream.write("\n")
            stream.flush()
