#!/usr/bin/env bash
# Installs every Debian (and npm) dependency of rankscope on a fresh Debian 12 machine.
# Safe to re-run: packages already present are skipped.
set -euo pipefail

DEBIAN_PACKAGES=(
  build-essential cmake pkg-config
  libtorch-dev libopenblas-dev libeigen3-dev
  libglpk-dev
  libsentencepiece-dev nlohmann-json3-dev libcli11-dev libfmt-dev
  libgtest-dev libbenchmark-dev
  gnuplot-nox
  chromium
  python3-torch python3-numpy
)

missing=()
for package in "${DEBIAN_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if [ "${#missing[@]}" -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all Debian packages present"
fi
