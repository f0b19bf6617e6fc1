#!/usr/bin/env bash
# Differential testing of the compiler (test/difftest/difftest.py; docs/import.md,
# "Differential testing"), outside CI: random small PyTorch modules, scripted or traced,
# compiled by dsopt and compared with eager autograd (loss and every gradient).
#
#   scripts/difftest.sh [FIRST] [COUNT] [OUT]   seeds [FIRST, FIRST + COUNT), default 100 5000
#
# CI runs seeds 0 to 99 (ctest difftest-100). Each failure is reduced and written as
# OUT/seed_N.py (default build/difftest-found), a regression test to commit once fixed.
set -euo pipefail
cd "$(dirname "$0")/.."
first=${1:-100} count=${2:-5000} out=${3:-build/difftest-found}
exec .venv/bin/python test/difftest/difftest.py --seeds "$first:$((first + count))" --keep "$out"
