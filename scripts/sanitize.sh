#!/usr/bin/env bash
# ASan + UBSan run of the project's tests (docs/reliability.md, "Sanitizers"), outside CI.
#
#   scripts/sanitize.sh [CTEST_REGEX]
#
# Builds build-san/ (scripts/sanitizer-build.sh: clang-22, -fsanitize=address,undefined
# on every target of ours) and runs its ctest: the gtest suites, lit, the fuzz corpus
# replays, and the Python-driven tests, whose Python runs uninstrumented and drives the
# sanitized ds-compile / ds-run / ds-zero-to-fp32 (mpirun's ranks included). Left out:
# the tests that import the dsopt extension into Python (python-dsopt, dsopt-*, interop-*,
# example-*, mpi-checkpoint-save-16bit, and gpu-check-selftest-cpu, which also needs the
# CUDA backend: an ASan extension needs libasan preloaded into CPython, which then reports
# CPython's own allocations), and the gpu label (no GPU). CTEST_REGEX narrows the run (ctest -R).
# Any report ends its process (-fno-sanitize-recover), so the test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/sanitizer-build.sh
# LibTorch, MLIR and Open MPI are not instrumented: std containers they fill would trip
# container-overflow checks, LLVM's allocator inlined into our code poisons slabs that
# uninstrumented libMLIR fills (allow_user_poisoning=0), and their process-lifetime
# registries read as leaks.
# Each suppression is named in docs/reliability.md.
export ASAN_OPTIONS=detect_container_overflow=0:detect_leaks=0:allow_user_poisoning=0:abort_on_error=1:${ASAN_OPTIONS:-}
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}
args=(-j 2 --output-on-failure -LE gpu
      -E '^(python-dsopt|dsopt-|interop-|example-|mpi-checkpoint-save-16bit|gpu-check-selftest)')
if [ $# -gt 0 ]; then args+=(-R "$1"); fi
cd build-san && ctest "${args[@]}"
