"""The PEP 517 backend of `pip install .`: Debian's setuptools driving CMake (setup.py), offline.

pip builds in an isolated environment and would download setuptools and wheel from PyPI, which is not reachable on
these machines. This in-tree backend (pyproject.toml: requires = [], backend-path) uses the setuptools and wheel that
Debian's python3-setuptools and python3-wheel install in /usr/lib/python3/dist-packages, appended to the END of
sys.path only when the build environment has no setuptools of its own, and asks pip for nothing more.
"""
import sys

try:
    import setuptools  # noqa: F401  (a non-isolated build, or an environment that has it)
except ImportError:
    sys.path.append("/usr/lib/python3/dist-packages")

from setuptools import build_meta as _setuptools_backend  # noqa: E402
from setuptools.build_meta import *  # noqa: E402,F401,F403


def get_requires_for_build_wheel(config_settings=None):
    """Nothing to download: setuptools' own answer (['wheel']) is already satisfied by Debian's python3-wheel."""
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


__all__ = _setuptools_backend.__all__
