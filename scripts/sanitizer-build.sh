#!/usr/bin/env bash
# Configures (once) and builds build-san/: the project built by Debian's clang-22 with
# AddressSanitizer + UndefinedBehaviorSanitizer and libFuzzer's coverage instrumentation
# (cmake/DSSanitizers.cmake). Shared by scripts/fuzz.sh and scripts/sanitize.sh; the
# arguments are ninja targets. Installs clang-22 and its runtimes when they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang++-22 >/dev/null || [ ! -d /usr/lib/llvm-22/lib/clang/22/lib ]; then
  echo "sanitizer-build: installing clang-22 and libclang-rt-22-dev"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get install -y -qq --no-install-recommends clang-22 libclang-rt-22-dev
fi
if [ ! -f build-san/build.ninja ]; then
  # nvcc (which LibTorch's CMake config enables) refuses clang >= 21 as its host
  # compiler: it keeps g++. The CUDA backend is left out (no GPU runs a sanitizer here).
  CUDAHOSTCXX=g++ CC=clang-22 CXX=clang++-22 cmake -G Ninja -S . -B build-san \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDS_SANITIZE="address;undefined" \
    -DDS_ENABLE_FUZZERS=ON -DDS_ENABLE_CUDA=OFF
fi
ninja -C build-san "$@"
