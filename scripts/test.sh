#!/usr/bin/env bash
# Sets up, builds and runs every test (lit, gtest, pytest, oracle checks) under
# ctest; ctest's closing line is the verdict. Setup with --dev: the interop
# tests (test/interop) run DeepSpeed itself, from requirements-dev.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --dev
bash scripts/build.sh
cd build
ctest --output-on-failure -j2 "$@"
