#!/usr/bin/env bash
# Installs what the project builds and tests with:
#   - Debian packages: MLIR/LLVM 22 (with lit and FileCheck), Open MPI, Ninja, ccache,
#     nlohmann-json, GoogleTest, pybind11, protobuf (ds-run's tensorboard monitor), and
#     Python's venv and headers;
#   - the project's Python environment .venv/ (git-ignored) with the pinned packages of
#     requirements.txt: torch 2.x (LibTorch for the build, Python's torch for the tests and
#     the oracle), numpy, pytest, safetensors, torchvision and transformers (the model
#     zoo). `--dev` adds requirements-dev.txt (the peers that benches and interop tests
#     run side by side: DeepSpeed, ...).
# Debian's LibTorch (libtorch-dev, python3-torch) is not used: CMake refuses to configure
# when one of its libraries would be linked next to the wheel's (cmake/DSTorch.cmake).
# Idempotent: when everything is installed it runs dpkg-query and compares two checksums
# (well under a second).
set -euo pipefail
cd "$(dirname "$0")/.."

dev=0
for arg in "$@"; do
  case "$arg" in
  --dev) dev=1 ;;
  *) echo "setup: unknown argument '$arg' (accepted: --dev)" >&2; exit 2 ;;
  esac
done

packages=(
  cmake ninja-build ccache g++
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  libopenmpi-dev openmpi-bin
  nlohmann-json3-dev libgtest-dev pybind11-dev python3-dev python3-venv
  libprotobuf-dev protobuf-compiler
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} Debian packages present"
else
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The virtual environment: made from Debian's interpreter (its headers come with
# python3-dev, which the dsopt extension builds against). A stamp per requirements file
# holds the checksum it was installed from; pip runs only when a file changed.
venv=.venv
if [ ! -x "$venv/bin/python" ]; then
  echo "setup: creating $venv"
  /usr/bin/python3 -m venv "$venv"
fi
install_requirements() {
  local file=$1 stamp="$venv/.stamp-$1"
  local sum
  sum=$(sha256sum "$file" | cut -d' ' -f1)
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sum" ]; then
    echo "setup: $venv has $file"
    return
  fi
  echo "setup: installing $file into $venv (torch is a 5 GB download the first time)"
  # --no-build-isolation: source packages that import torch at build time (DeepSpeed)
  # build against the torch already installed from requirements.txt.
  DS_BUILD_OPS=0 "$venv/bin/pip" install --disable-pip-version-check -q \
    $([ "$file" = requirements-dev.txt ] && echo --no-build-isolation) -r "$file"
  echo "$sum" >"$stamp"
}
install_requirements requirements.txt
if [ "$dev" = 1 ]; then install_requirements requirements-dev.txt; fi
echo "setup: done"
