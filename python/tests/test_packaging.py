"""Installing the module: `cmake --install --component python` into a prefix, and `pip install .` offline into a
virtual environment (Debian's setuptools as the build backend). Both reuse the tested build tree (pip with
RANKSCOPE_CMAKE_BUILD=0: packaged as built, nothing compiled), and the installed module runs from elsewhere, with its
SentencePiece helper and default text inside the package."""
import json
import os
import subprocess
import sys

import rankscope
from conftest import REPO

BUILD = os.environ.get("RANKSCOPE_BUILD_DIR", os.path.join(REPO, "build"))

PROBE = """
import importlib.metadata, json, os
import numpy as np
import rankscope as rs
from rankscope import _find
batch = rs.text_batch("albert-base-v2", samples=1, tokens=8)      # SentencePiece, trained in the helper process
print(json.dumps({"file": rs.__file__, "spm": os.environ.get("RANKSCOPE_SPM"), "text": _find.default_text(),
                  "version": rs.__version__, "value": float(rs.relative_residual(np.eye(3))),
                  "ids": batch["input_ids"].tolist(), "dist": _dist()}))
"""


def probe(python, cwd, extra_env=None):
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "RANKSCOPE_SPM")}
    env.update(extra_env or {})
    code = "def _dist():\n    import importlib.metadata\n    try:\n        return importlib.metadata.version('rankscope')\n" \
           "    except importlib.metadata.PackageNotFoundError:\n        return None\n" + PROBE
    result = subprocess.run([python, "-c", code], cwd=cwd, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def expected_ids():
    return rankscope.text_batch("albert-base-v2", samples=1, tokens=8)["input_ids"].tolist()


def test_cmake_install_component_python(tmp_path):
    prefix = tmp_path / "prefix"
    subprocess.run(["cmake", "--install", BUILD, "--component", "python", "--prefix", prefix], check=True,
                   capture_output=True)
    package = prefix / "lib" / "python3" / "dist-packages" / "rankscope"
    for name in ("__init__.py", "_rankscope.pyi", "py.typed", "bin/rankscope-spm", "data/RTE/train.tsv"):
        assert (package / name).exists(), name
    assert list(package.glob("_rankscope*.so"))
    found = probe(sys.executable, tmp_path, {"PYTHONPATH": str(package.parent)})
    assert found["file"] == str(package / "__init__.py")
    assert found["spm"] == str(package / "bin" / "rankscope-spm")
    assert found["text"] == str(package / "data" / "RTE" / "train.tsv")
    assert found["value"] == float(rankscope.relative_residual(__import__("numpy").eye(3)))
    assert found["ids"] == expected_ids()


def test_pip_install_offline_into_a_virtual_environment(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", venv], check=True)
    env = {key: value for key, value in os.environ.items() if not key.startswith("PIP_")}
    env.update(RANKSCOPE_CMAKE_BUILD_DIR=BUILD, RANKSCOPE_CMAKE_BUILD="0", PIP_NO_INDEX="1", PIP_NO_CACHE_DIR="1",
               PIP_DISABLE_PIP_VERSION_CHECK="1")
    result = subprocess.run([venv / "bin" / "pip", "install", "--no-deps", REPO], env=env, capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    site = next((venv / "lib").glob("python3*/site-packages"))
    found = probe(str(venv / "bin" / "python"), tmp_path)
    assert found["file"] == str(site / "rankscope" / "__init__.py")
    assert found["spm"] == str(site / "rankscope" / "bin" / "rankscope-spm")
    assert found["text"] == str(site / "rankscope" / "data" / "RTE" / "train.tsv")
    assert found["dist"] == found["version"] == rankscope.__version__
    assert found["ids"] == expected_ids()
