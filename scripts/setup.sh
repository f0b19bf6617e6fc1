#!/usr/bin/env bash
# Installs the Debian packages the project builds and tests with.
# Idempotent: when every package is present it only runs dpkg-query (well under a second).
set -euo pipefail

packages=(
  cmake ninja-build ccache g++
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  libtorch-dev python3-torch libopenblas0-pthread
  libopenmpi-dev openmpi-bin
  nlohmann-json3-dev libgtest-dev pybind11-dev python3-pytest python3-numpy
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: done"
