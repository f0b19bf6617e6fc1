#!/usr/bin/env bash
# Writes the GPU check's bundle (docs/cuda.md, "The GPU check"): a
# self-contained folder of at most 40 MB to copy to a GPU node and run there
# with `bash OUT/gpu-check.sh RESULTS` (no network, no MLIR, no MPI needed).
#
#   bash scripts/gpu-bundle.sh OUT        (after scripts/build.sh)
#
# OUT/src        the runtime-only build's sources: runtime/ (its CMake entry),
#                cmake/, the headers and lib/ folders of the runtime, ds-run,
#                ds-zero-to-fp32, python-bindings, the conformance suite,
#                the NCCL channel's tests;
#                third_party/ with Debian's nlohmann-json headers and
#                GoogleTest sources and their licences
# OUT/cases      plans compiled here with `ds-compile --device cuda`, their
#                TorchScript archives, data and configs (scripts/gpu/make_cases.py);
#                the ~100M-parameter GPT is made on the node (make_gpt.py)
# OUT/check      check.py (the tiers), oracle.py (with --device cuda),
#                make_gpt.py and bench/step_time.py's GPT
# OUT/gpu-check.sh, OUT/BUNDLE.md (what and from which commit)
#
# Environment: DS_BUILD (default build/), DS_PYTHON (default .venv/bin/python),
# DS_MODELS (default DS_BUILD/test/models when it has them, else made here),
# DS_NLOHMANN_JSON_DIR (default /usr/include/nlohmann),
# DS_GTEST_DIR (default /usr/src/googletest).
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: bash scripts/gpu-bundle.sh OUT" >&2
  exit 2
fi
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$1
BUILD=${DS_BUILD:-$ROOT/build}
PY=${DS_PYTHON:-$ROOT/.venv/bin/python}
JSON_DIR=${DS_NLOHMANN_JSON_DIR:-/usr/include/nlohmann}
JSON_LICENSE=${DS_NLOHMANN_JSON_LICENSE:-/usr/share/doc/nlohmann-json3-dev/copyright}
GTEST_DIR=${DS_GTEST_DIR:-/usr/src/googletest}
LIMIT_MB=40

fail() { echo "gpu-bundle.sh: $*" >&2; exit 1; }

[ -x "$BUILD/bin/ds-compile" ] || fail "no $BUILD/bin/ds-compile: run scripts/build.sh first"
"$BUILD/bin/ds-compile" --help | grep -q -- "--device" ||
  fail "$BUILD/bin/ds-compile has no --device option (rebuild it)"
[ -f "$JSON_DIR/json.hpp" ] || fail "no nlohmann-json headers in $JSON_DIR (DS_NLOHMANN_JSON_DIR)"
[ -f "$JSON_LICENSE" ] || fail "no nlohmann-json licence at $JSON_LICENSE"
[ -f "$GTEST_DIR/googletest/src/gtest-all.cc" ] || fail "no GoogleTest sources in $GTEST_DIR"
[ -f "$GTEST_DIR/LICENSE" ] || [ -f /usr/share/doc/googletest/copyright ] ||
  fail "no GoogleTest licence"

# OUT is replaced: only an empty folder or an earlier bundle.
if [ -d "$OUT" ] && [ -n "$(ls -A "$OUT")" ] && [ ! -f "$OUT/BUNDLE.md" ]; then
  fail "$OUT exists and is not a bundle (no BUNDLE.md): refusing to replace it"
fi
rm -rf "$OUT"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
echo "# GPU check bundle (incomplete: gpu-bundle.sh did not finish)" > "$OUT/BUNDLE.md"

# -- sources -----------------------------------------------------------------
# The working tree as it is (what is built here, committed or not), minus
# caches. The headers are those of the libraries the runtime build compiles;
# check_includes below proves nothing else is included.
copy() { # paths relative to ROOT
  for path in "$@"; do
    mkdir -p "$OUT/src/$(dirname "$path")"
    cp -R "$ROOT/$path" "$OUT/src/$path"
  done
}
copy runtime cmake \
     include/ds/Config include/ds/Plan include/ds/Runtime include/ds/Support \
     include/ds/TensorIO \
     lib/Support lib/Config lib/Plan lib/TensorIO lib/Runtime \
     tools/ds-run tools/ds-zero-to-fp32 \
     python-bindings/CMakeLists.txt python-bindings/make_wheel.py \
     python-bindings/src python-bindings/dsopt \
     unittests/Runtime/DeviceConformanceTest.cpp \
     unittests/Runtime/DeviceConformance.cmake \
     unittests/Runtime/NcclChannel.cmake unittests/Runtime/NcclChannelTest.cpp \
     unittests/Runtime/NcclHostTest.cpp unittests/Runtime/TestRendezvous.h
find "$OUT/src" -name __pycache__ -prune -exec rm -rf {} +
# dsopt's compiler module links MLIR: the full build's only.
rm "$OUT/src/python-bindings/src/CompileBindings.cpp"

mkdir -p "$OUT/src/third_party/nlohmann_json/include" "$OUT/src/third_party/googletest"
cp -R "$JSON_DIR" "$OUT/src/third_party/nlohmann_json/include/nlohmann"
cp "$JSON_LICENSE" "$OUT/src/third_party/nlohmann_json/LICENSE"
cp -R "$GTEST_DIR/googletest/include" "$GTEST_DIR/googletest/src" \
      "$OUT/src/third_party/googletest/"
if [ -f "$GTEST_DIR/LICENSE" ]; then
  cp "$GTEST_DIR/LICENSE" "$OUT/src/third_party/googletest/LICENSE"
else
  cp /usr/share/doc/googletest/copyright "$OUT/src/third_party/googletest/LICENSE"
fi

# Every #include "..." of the bundled sources resolves inside the bundle.
"$PY" - "$OUT/src" <<'EOF'
import os, re, sys
src = sys.argv[1]
roots = [os.path.join(src, "include")]
missing = []
for folder, _, files in os.walk(src):
    if "third_party" in folder:
        continue
    for name in files:
        if not name.endswith((".cpp", ".h", ".def", ".inc")):
            continue
        path = os.path.join(folder, name)
        for line in open(path, encoding="utf-8", errors="replace"):
            m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if not m:
                continue
            inc = m.group(1)
            if inc.endswith(".pb.h"):  # generated by protoc, when there is protobuf
                continue
            if not any(os.path.exists(os.path.join(d, inc)) for d in [folder] + roots):
                missing.append("%s: %s" % (os.path.relpath(path, src), inc))
if missing:
    sys.exit("gpu-bundle.sh: includes that the bundle lacks:\n  " + "\n  ".join(missing))
EOF

# -- check scripts ---------------------------------------------------------------
mkdir -p "$OUT/check"
cp "$ROOT/scripts/gpu/check.py" "$ROOT/scripts/gpu/make_gpt.py" \
   "$ROOT/test/oracle/oracle.py" "$ROOT/bench/step_time.py" "$OUT/check/"
cp "$ROOT/scripts/gpu/gpu-check.sh" "$OUT/gpu-check.sh"

# -- cases ----------------------------------------------------------------------
MODELS=${DS_MODELS:-$BUILD/test/models}
if [ ! -f "$MODELS/manifest.json" ]; then
  MODELS=$OUT/.models
  "$PY" "$ROOT/test/models/make_models.py" "$MODELS" > /dev/null
fi
"$PY" "$ROOT/scripts/gpu/make_cases.py" --ds-compile "$BUILD/bin/ds-compile" \
  --models "$MODELS" --out "$OUT/cases"
rm -rf "$OUT/.models"

# -- provenance and size ------------------------------------------------------------
commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git -C "$ROOT" status --porcelain 2>/dev/null | wc -l)
{
  echo "# GPU check bundle"
  echo
  echo "- bundle: made $(date -u '+%Y-%m-%d %H:%M UTC') from commit $commit" \
       "($dirty paths changed or new in the working tree), plans compiled with torch" \
       "$("$PY" -c 'import torch; print(torch.__version__)')"
  echo
  echo "Run on the GPU node: \`bash gpu-check.sh RESULTS\` (docs/cuda.md in the repository)."
  echo "third_party/ holds Debian's nlohmann-json headers and GoogleTest sources with their"
  echo "licences (LICENSE beside each)."
} > "$OUT/BUNDLE.md"

bytes=$(du -sb "$OUT" | cut -f1)
mb=$(( (bytes + 1048575) / 1048576 ))
if [ "$bytes" -gt $(( LIMIT_MB * 1048576 )) ]; then
  fail "the bundle is $mb MB, over the $LIMIT_MB MB limit"
fi
echo "gpu-bundle.sh: $OUT: $bytes bytes ($mb MB of at most $LIMIT_MB)"
