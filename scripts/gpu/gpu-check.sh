#!/usr/bin/env bash
# The GPU check, run on a GPU node from a bundle of scripts/gpu-bundle.sh
# (docs/cuda.md, "The GPU check"):
#
#   bash gpu-check.sh RESULTS
#
# 1. builds the runtime-only build (src/runtime: ds-run, the CUDA backend with
#    its NCCL channel, the conformance suite, the NCCL tests, the dsopt
#    wheel) against python3's torch (and its wheel's NCCL), in parallel,
#    into RESULTS/build, or DS_GPU_CHECK_SCRATCH/build (log: RESULTS/build.log);
# 2. runs check/check.py: the node's torch loads our archives, the device
#    conformance suite, the NCCL channel's tests (host logic; one rank per
#    visible GPU), tiers a (W = 1, stages 0 and 3, fp32 and bf16 against
#    the oracle on the same GPU), b (GAS 2, fp16 overflow skips, distillation,
#    checkpoint resume), the dsopt wheel, c (step time and MFU vs eager
#    PyTorch); each result is appended to RESULTS/results.md as it comes, then
#    one table of them all.
# Without a GPU every GPU tier is SKIPPED with the reason, never PASSED.
# Exit status: 0 when the build succeeded and nothing FAILED.
#
# Environment: PYTHON (default python3: the interpreter whose torch the
# runtime is built against and the oracle runs with), DS_GPU_CHECK_JOBS
# (default nproc), DS_GPU_CHECK_TARGETS (build only these targets; CI builds a
# small one), DS_GPU_CHECK_BUDGET_S (default 330: checks that would start
# later are SKIPPED, so the whole run stays under 6 minutes),
# DS_GPU_CHECK_DEVICE (default cuda), DS_GPU_CHECK_SCRATCH (default RESULTS:
# where the build folder and the work files go, hundreds of MB; RESULTS then
# keeps only results.md, results.jsonl and build.log).
set -uo pipefail

if [ $# -ne 1 ]; then
  echo "usage: bash gpu-check.sh RESULTS" >&2
  exit 2
fi
start=$(date +%s)
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$1"
RESULTS=$(cd "$1" && pwd)
PY=${PYTHON:-python3}
SCRATCH=${DS_GPU_CHECK_SCRATCH:-$RESULTS}
mkdir -p "$SCRATCH"
SCRATCH=$(cd "$SCRATCH" && pwd)
BUILD=$SCRATCH/build
JOBS=${DS_GPU_CHECK_JOBS:-$(nproc)}
TARGETS=${DS_GPU_CHECK_TARGETS:-}
BUDGET=${DS_GPU_CHECK_BUDGET_S:-330}
DEVICE=${DS_GPU_CHECK_DEVICE:-cuda}
MD=$RESULTS/results.md
JSONL=$RESULTS/results.jsonl
rm -f "$MD" "$JSONL"

record() { # tier name status seconds detail
  "$PY" - "$JSONL" "$@" <<'EOF'
import json, sys
path, tier, name, status, seconds, detail = sys.argv[1:7]
with open(path, "a") as f:
    f.write(json.dumps({"tier": tier, "name": name, "status": status,
                        "detail": " ".join(detail.split()),
                        "seconds": float(seconds)}) + "\n")
EOF
  echo "- $1 / $2: **$3** ($4 s): $5" | tee -a "$MD"
}

{
  echo "# GPU check"
  echo
  echo "- started $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname), $(nproc) cores"
  sed -n 's/^- bundle: /- bundle: /p' "$HERE/BUNDLE.md" 2>/dev/null
  echo "- cmake: $(cmake --version 2>/dev/null | head -1); ninja: $(ninja --version 2>/dev/null || echo none); nvcc: $(nvcc --version 2>/dev/null | tail -1 || echo none)"
  echo "- python: $PY ($("$PY" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "CUDA", torch.version.cuda)' 2>&1 | tail -1))"
  echo
  echo "## Build"
  echo
} | tee "$MD"

# -- 1. The runtime-only build --------------------------------------------------
# The bundle is self-contained: the system's nlohmann-json, GoogleTest,
# protobuf and MPI are not looked for (a GPU node has none), so what builds
# here builds there.
generator=()
if command -v ninja >/dev/null 2>&1; then
  generator=(-G Ninja)
fi
build_start=$(date +%s)
build_ok=1
{
  cmake "${generator[@]}" -S "$HERE/src/runtime" -B "$BUILD" \
    -DCMAKE_BUILD_TYPE=Release -DDS_PYTHON="$(command -v "$PY")" \
    -DCMAKE_DISABLE_FIND_PACKAGE_Protobuf=ON \
    -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON \
    -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON \
    -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON &&
  cmake --build "$BUILD" -j "$JOBS" ${TARGETS:+--target $TARGETS}
} > "$RESULTS/build.log" 2>&1 || build_ok=0
build_s=$(( $(date +%s) - build_start ))
what="runtime-only build (${TARGETS:-all targets}, -j $JOBS)"
if [ $build_ok = 1 ]; then
  record build "$what" PASSED "$build_s" "configured and built in ${build_s} s; log: build.log"
else
  record build "$what" FAILED "$build_s" "$(tail -5 "$RESULTS/build.log")"
fi

# -- 2. The tiers -----------------------------------------------------------------
deadline=$(( start + BUDGET ))
args=(--bundle "$HERE" --build "$BUILD" --results "$RESULTS" --scratch "$SCRATCH"
      --device "$DEVICE" --deadline "$deadline")
if [ $build_ok = 0 ]; then
  args+=(--build-failed)
fi
"$PY" "$HERE/check/check.py" "${args[@]}"
check_rc=$?
echo | tee -a "$MD"
echo "whole run: $(( $(date +%s) - start )) s (build ${build_s} s)" | tee -a "$MD"
if [ $build_ok = 0 ] || [ $check_rc != 0 ]; then
  exit 1
fi
exit 0
