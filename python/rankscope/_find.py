"""Where the module's companions live: the SentencePiece helper and the default text (data/RTE/train.tsv).

Installed (pip or `cmake --install`), both sit inside the package (rankscope/bin, rankscope/data); in the build tree the
helper is build/bin/rankscope-spm and the text is the source tree's data/RTE/train.tsv.
"""
from __future__ import annotations

import os

from . import _rankscope

PACKAGE = os.path.dirname(os.path.abspath(__file__))


def spm_helper() -> str | None:
    """The rankscope-spm program (SentencePiece runs in its own process: libsentencepiece and libtorch cannot share
    one on Debian 12), or None when neither the package nor the build tree has it."""
    for candidate in (os.path.join(PACKAGE, "bin", "rankscope-spm"),
                      os.path.join(PACKAGE, "..", "..", "bin", "rankscope-spm")):
        if os.access(candidate, os.X_OK):
            return os.path.normpath(candidate)
    return None


def default_text() -> str | None:
    """GLUE RTE's train.tsv (the paper's text): the package's copy, the source tree's, or one found from the working
    directory as the command line looks for it; None when there is none."""
    for candidate in (os.path.join(PACKAGE, "data", "RTE", "train.tsv"),
                      os.path.join(_rankscope.source_dir, "data", "RTE", "train.tsv"),
                      _rankscope.default_text()):
        if candidate and os.path.isfile(candidate):
            return os.path.normpath(candidate)
    return None


def configure_environment() -> None:
    """Points the engine at the SentencePiece helper ($RANKSCOPE_SPM, unless the caller set it)."""
    helper = spm_helper()
    if helper and "RANKSCOPE_SPM" not in os.environ:
        os.environ["RANKSCOPE_SPM"] = helper
