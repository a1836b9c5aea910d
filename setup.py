"""setuptools drives CMake for `pip install .` (pyproject.toml has the metadata and the offline backend).

The package is exactly what `cmake --install <build> --component python` installs (python/CMakeLists.txt: the pure
Python files, the extension, its type stubs, the rankscope-spm helper and the default RTE text); this file builds the
extension's target, stages that install and hands the folder to setuptools as the wheel's contents.
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.abspath(os.environ.get("RANKSCOPE_CMAKE_BUILD_DIR") or os.path.join(ROOT, "build", "pip"))


def torch_of_this_python():
    """-DCMAKE_PREFIX_PATH=<torch's CMake config> of the Python pip installs into, so that the extension links *that*
    environment's torch (PyPI's torch 2.x, CPU or CUDA). Asked in a child started with -I: pip's isolated build
    environment hides the target environment's site-packages from this process, not from an isolated child. No
    torch there: nothing is passed and CMake finds Debian's libtorch-dev, if installed."""
    probe = subprocess.run([sys.executable, "-I", "-c", "import torch.utils; print(torch.utils.cmake_prefix_path)"],
                           capture_output=True, text=True)
    if probe.returncode != 0 or not probe.stdout.strip():
        print("rankscope: no torch importable from " + sys.executable + "; CMake looks for a system libtorch")
        return []
    return [f"-DCMAKE_PREFIX_PATH={probe.stdout.strip()}"]


class CMakeBuild(build_ext):
    def run(self):
        if not os.path.isfile(os.path.join(BUILD, "CMakeCache.txt")):
            subprocess.check_call(["cmake", "-S", ROOT, "-B", BUILD, "-DCMAKE_BUILD_TYPE=Release",
                                   "-DRANKSCOPE_BUILD_TESTS=OFF", "-DRANKSCOPE_BUILD_BENCH=OFF",
                                   # only the module is built, and it runs on the Python process's malloc
                                   "-DRANKSCOPE_TCMALLOC=OFF",
                                   "-DRANKSCOPE_BUILD_PYTHON=ON", f"-DPython_EXECUTABLE={sys.executable}",
                                   *torch_of_this_python()])
        # RANKSCOPE_CMAKE_BUILD=0 packages an existing build as it is (nothing is compiled).
        if os.environ.get("RANKSCOPE_CMAKE_BUILD", "1") != "0":
            jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))
            subprocess.check_call(["cmake", "--build", BUILD, "--target", "_rankscope", "-j", jobs])
        with tempfile.TemporaryDirectory(prefix="rankscope-stage-") as stage:
            subprocess.check_call(["cmake", "--install", BUILD, "--component", "python", "--prefix", stage])
            packages = glob.glob(os.path.join(stage, "**", "rankscope", "__init__.py"), recursive=True)
            if len(packages) != 1:
                raise RuntimeError(f"cmake --install staged {len(packages)} rankscope packages in {stage}")
            target = os.path.join(os.path.abspath(self.build_lib), "rankscope")
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(os.path.dirname(packages[0]), target)


setup(
    ext_modules=[Extension("rankscope._rankscope", sources=[])],  # built by CMake; marks the wheel as platform-specific
    cmdclass={"build_ext": CMakeBuild},
    packages=[],
    options={"build": {"build_base": os.path.join(BUILD, "setuptools")}, "egg_info": {"egg_base": BUILD}},
)
