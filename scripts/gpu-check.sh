#!/usr/bin/env bash
# rankscope on a CUDA machine with the machine's own PyTorch 2.x (the path a CUDA user takes), as one prepared run:
#
#   1. build `rankscope` with the project's CMake as it is (no patches): torch from torch.utils.cmake_prefix_path of
#      the machine's python3, Debian's other libraries from .deb files unpacked into a prefix (never into /):
#      .dev/debs, downloaded beforehand on a machine with Debian's package registry (list below); without tcmalloc
#      (its pkg-config file names /usr, not the prefix: glibc's malloc with the mallopt settings serves the host side);
#   2. the E1 grid (BERT-base at init, 4 surgeries) at 32 × 128 on cuda and on cpu: residual.csv compared;
#   3. theory on cuda and on cpu (float64): theory_summary.csv compared;
#   4. the transformers suite's model cases with `--device cuda` (rankscope on the GPU, transformers on the CPU):
#      transformers 4.57.6, tokenizers 0.22.2 and huggingface_hub 0.36.2 as wheels in .whl (the image has 5.x);
#   5. timings: the E1 grid at 32 × 128 and 128 × 512 tokens, rankscope --device cuda against bench/e1_grid_torch.py
#      on the same GPU (whole processes; the script also prints its compute alone).
#
# Preparation, on the Debian machine, in the repository root (both folders are git-ignored through .git/info/exclude):
#   mkdir -p .dev/debs && (cd .dev/debs && apt-get download libeigen3-dev libopenblas0-pthread libopenblas-pthread-dev \
#     libopenblas-dev libglpk-dev libglpk40 libamd2 libcolamd2 libsuitesparseconfig5 libltdl7 libutf8proc-dev \
#     libutf8proc2 libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3 libsentencepiece-dev \
#     libsentencepiece0 libprotobuf-lite32 nlohmann-json3-dev libcli11-dev libfmt-dev libfmt9 libtomlplusplus-dev \
#     libtomlplusplus3 zlib1g-dev libgfortran5 libgmp10 libboost1.74-dev)
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_17_x86_64 -d .whl transformers==4.57.6 tokenizers==0.22.2 huggingface_hub==0.36.2
# Run (OUT: where logs go): OUT=/tmp/gpu bash scripts/gpu-check.sh
set -u
OUT=${OUT:-/tmp/gpu-check}
mkdir -p "$OUT"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
T0=$(date +%s)
elapsed() { echo "[+$(( $(date +%s) - T0 ))s] $*"; }
seconds() { python3 -c "import sys, time; print(f'{time.time() - float(sys.argv[1]):.2f}')" "$1"; }

PREFIX=/tmp/rankscope-prefix
rm -rf "$PREFIX" /tmp/rankscope-gpu-build /tmp/rankscope-gpu-work
mkdir -p "$PREFIX"
for deb in .dev/debs/*.deb; do dpkg -x "$deb" "$PREFIX"; done
LIB=$PREFIX/usr/lib/x86_64-linux-gnu
TORCH_CMAKE=$(python3 -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')
TORCH_LIB=$(python3 -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
export LD_LIBRARY_PATH=$TORCH_LIB:$LIB:$LIB/openblas-pthread:${LD_LIBRARY_PATH:-}
nvidia-smi -L; python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
g++ --version | head -1; cmake --version | head -1
elapsed "debs unpacked"

BUILD=/tmp/rankscope-gpu-build
PYBIND11_CMAKE=$(python3 -m pybind11 --cmakedir)
configure() {  # RANKSCOPE_BUILD_PYTHON
  cmake -S . -B $BUILD -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$TORCH_CMAKE;$PYBIND11_CMAKE;$PREFIX/usr" \
    -DRANKSCOPE_BUILD_TESTS=OFF -DRANKSCOPE_BUILD_BENCH=OFF -DRANKSCOPE_BUILD_PYTHON=$1 -DRANKSCOPE_MPI=OFF \
    -DRANKSCOPE_TCMALLOC=OFF \
    -DPython_EXECUTABLE="$(command -v python3)" \
    -DBLAS_LIBRARY=$LIB/openblas-pthread/libblas.so.3 -DLAPACK_LIBRARY=$LIB/openblas-pthread/liblapack.so.3 \
    -DGLPK_INCLUDE_DIR=$PREFIX/usr/include \
    -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath-link,$LIB -Wl,-rpath-link,$LIB/openblas-pthread" \
    -DCMAKE_SHARED_LINKER_FLAGS="-Wl,-rpath-link,$LIB -Wl,-rpath-link,$LIB/openblas-pthread" \
    -DCMAKE_MODULE_LINKER_FLAGS="-Wl,-rpath-link,$LIB -Wl,-rpath-link,$LIB/openblas-pthread" > "$OUT/configure.log" 2>&1
}
MODULE=_rankscope
if ! configure ON; then
  elapsed "configure with the Python module failed (kept in configure-python.log); without it"
  mv "$OUT/configure.log" "$OUT/configure-python.log"; rm -rf $BUILD; MODULE=
  configure OFF || { elapsed "configure failed"; tail -40 "$OUT/configure.log"; exit 1; }
fi
grep -E "torch |fmt:" "$OUT/configure.log"
elapsed "configured"
ninja -C $BUILD -k 0 rankscope rankscope-spm $MODULE > "$OUT/build.log" 2>&1; status=$?
elapsed "build exit $status"
grep -E "error:|FAILED" "$OUT/build.log" | head -40
[ $status -eq 0 ] || exit 2
RS=$BUILD/bin/rankscope
$RS --version

WORK=/tmp/rankscope-gpu-work
mkdir -p $WORK
python3 - $WORK <<'PY'
import sys, torch
from safetensors.torch import save_file
g = torch.Generator().manual_seed(0)
for samples, tokens in ((32, 128), (128, 512)):
    save_file({"input_ids": torch.randint(1000, 28996, (samples, tokens), generator=g),
               "attention_mask": torch.ones(samples, tokens, dtype=torch.long)},
              f"{sys.argv[1]}/batch_{samples}x{tokens}.safetensors")
PY
grid() {  # device samples tokens label
  local start; start=$(date +%s.%N)
  $RS model --model bert-base-cased --weights init --inputs $WORK/batch_$2x$3.safetensors \
    --variants SAN,SAN+MLP,SAN+skip,transformer --draws 0 --device "$1" --out $WORK/e1_$4 > $WORK/e1_$4.log 2>&1
  elapsed "rankscope E1 grid $2x$3 --device $1 exit $? wall $(seconds "$start") s"
}
grid cuda 32 128 cuda_small; grid cpu 32 128 cpu_small; grid cuda 32 128 cuda_small2
python3 - $WORK <<'PY'
import csv, sys
def rows(name):
    with open(f"{sys.argv[1]}/{name}/residual.csv") as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))
a, b = rows("e1_cuda_small"), rows("e1_cpu_small")
worst = max(abs(float(x["mean"]) - float(y["mean"])) / max(abs(float(y["mean"])), 1e-300)
            for x, y in zip(a, b) if float(y["mean"]) > 1e-3)
print(f"E1 32x128 residual.csv cuda vs cpu: {len(a)} / {len(b)} rows, worst relative difference of the mean "
      f"(where > 1e-3): {worst:.2e}")
PY
grid cuda 128 512 cuda_large
for size in 32x128 128x512; do
  for repeat in 1; do
    start=$(date +%s.%N)
    python3 bench/e1_grid_torch.py $WORK/batch_$size.safetensors 0 $WORK/torch_$size.csv cuda 2> $WORK/torch.err
    elapsed "plain PyTorch E1 grid $size cuda: wall $(seconds "$start") s, $(cat $WORK/torch.err | tail -1)"
  done
done

for device in cuda cpu; do
  start=$(date +%s.%N)
  $RS theory --device $device --out $WORK/theory_$device > $WORK/theory_$device.log 2>&1
  elapsed "theory --device $device exit $? wall $(seconds "$start") s"
done
cmp <(grep -v "^#" $WORK/theory_cuda/theory_summary.csv) <(grep -v "^#" $WORK/theory_cpu/theory_summary.csv) \
  && echo "theory_summary.csv identical on cuda and cpu" \
  || python3 - $WORK <<'PY'
import csv, sys
def rows(d):
    with open(f"{sys.argv[1]}/theory_{d}/theory_summary.csv") as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))
worst = 0.0
for x, y in zip(rows("cuda"), rows("cpu")):
    for key in x:
        try:
            a, b = float(x[key]), float(y[key])
        except ValueError:
            continue
        if abs(b) > 1e-10:
            worst = max(worst, abs(a - b) / abs(b))
print(f"theory_summary.csv cuda vs cpu: worst relative difference (|cpu| > 1e-10) {worst:.2e}")
PY

if ls .whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  start=$(date +%s.%N)
  PYTHONPATH=/tmp/site RANKSCOPE_JUDGE_DEVICE=cuda HF_HUB_OFFLINE=1 python3 tests/transformers/test_transformers_models.py \
    $RS -k bert -k albert -k xlnet -k gpt2 -k llama -k mistral -k qwen2 > "$OUT/transformers_cuda.log" 2>&1
  elapsed "transformers model judge, rankscope --device cuda: exit $? wall $(seconds "$start") s"
  grep -E "^(Ran|OK|FAILED)|  (bert|albert|xlnet|gpt2|llama|mistral|qwen2)" "$OUT/transformers_cuda.log" | head -80
fi
# The Python module, pip-installed into the image's own virtual environment (python3 is a venv's, with the CUDA
# torch; the build tree above, packaged as built): it must link that torch's libtorch.
[ -n "$MODULE" ] && RANKSCOPE_CMAKE_BUILD_DIR=$BUILD RANKSCOPE_CMAKE_BUILD=0 python3 -m pip install -q --no-deps \
  --no-build-isolation . > "$OUT/pip.log" 2>&1
elapsed "pip install . into the image's venv (python3: $(command -v python3)): exit $?"
(cd /tmp && RANKSCOPE_ROOT=$ROOT python3 - <<'PY'
import os, subprocess, torch, rankscope
so = [f for f in os.listdir(os.path.dirname(rankscope.__file__)) if f.startswith("_rankscope")][0]
libraries = subprocess.run(["ldd", os.path.join(os.path.dirname(rankscope.__file__), so)], capture_output=True,
                           text=True).stdout
torch_lib = os.path.join(os.path.dirname(torch.__file__), "lib")
print("module links the venv's torch:", all(torch_lib in line for line in libraries.splitlines() if "libtorch_cpu" in line),
      [line.split()[2] for line in libraries.splitlines() if "libtorch_cpu" in line or "libc10.so" in line])
x = torch.randn(16, 24, dtype=torch.float64, device="cuda")
print("relative_residual of a cuda tensor:", float(rankscope.relative_residual(x.cpu())))
# device= in the module: run_model and run_theory on the GPU against the same calls on the CPU.
import numpy as np
model = os.path.join(os.environ["RANKSCOPE_ROOT"], "tests", "fixtures", "bert-tiny")
ids = {"input_ids": np.arange(24, dtype=np.int64).reshape(2, 12) % 60 + 2}
for name, call, column in (
        ("run_model", lambda device: rankscope.run_model(model, inputs=ids, weights="init", draws=2, device=device).residual, "mean"),
        ("run_theory", lambda device: rankscope.run_theory(layers=3, d_model=16, tokens=8, seeds=2, device=device).rows, "residual"),
        ("Model.forward", lambda device: {"last": rankscope.load_model(model, weights="init", seed=1, device=device).forward(ids["input_ids"])[0]}, "last")):
    cpu, cuda = call("cpu")[column], call("cuda")[column]
    difference = float(np.max(np.abs(cuda - cpu) / np.maximum(np.abs(cpu), 1e-12)))  # residuals at 0 compared absolutely
    print(f"python {name} device=cuda vs cpu: max relative difference {difference:.2e}")
PY
) 2>&1 | tail -8
cp $WORK/*.log "$OUT/" 2>/dev/null
elapsed done
