#!/usr/bin/env bash
# Runs the libFuzzer targets (test/fuzz; docs/reliability.md, "Fuzzing"), outside CI.
#
#   scripts/fuzz.sh [--seconds N] [--jobs J] [READER...]   fuzz each reader N seconds
#   scripts/fuzz.sh --merge [--max-bytes B] [READER...]    fold new inputs into the corpus
#
# READERs: config plan datafile checkpoint torchscript pt2 mlir (default: all). Each
# reader runs N seconds (default 600), J readers at a time (default 1). New inputs go to
# build-san/fuzz/<reader>/corpus, crashes to build-san/fuzz/<reader>/crash-*, the log to
# build-san/fuzz/<reader>.log; the summary gives executions, coverage and findings.
# --merge minimises (libFuzzer -merge=1) the committed seeds, then adds the new inputs that
# add coverage, into test/fuzz/corpus/<reader>/; beyond B bytes per reader (default
# 196608) inputs are dropped, new ones first, largest first: the repository stays small.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=600 jobs=1 merge=0 max_bytes=196608 readers=()
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --merge) merge=1; shift ;;
    --max-bytes) max_bytes=$2; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) readers+=("$1"); shift ;;
  esac
done
case $seconds$jobs$max_bytes in *[!0-9]*) echo "fuzz.sh: --seconds, --jobs and --max-bytes take numbers" >&2; exit 2 ;; esac
[ "$jobs" -ge 1 ] || jobs=1
all=(config plan datafile checkpoint torchscript pt2 mlir)
[ ${#readers[@]} -gt 0 ] || readers=("${all[@]}")
target_of() {
  case $1 in
    torchscript|pt2) echo model ;;
    config|plan|datafile|checkpoint|mlir) echo "$1" ;;
    *) echo "fuzz.sh: unknown reader '$1' (one of: ${all[*]})" >&2; exit 2 ;;
  esac
}
targets=()
for reader in "${readers[@]}"; do targets+=("ds-fuzz-$(target_of "$reader")"); done
bash scripts/sanitizer-build.sh "${targets[@]}"

# LibTorch and MLIR are not instrumented: their containers' annotations would not match
# (detect_container_overflow=0), and LLVM's allocator, inlined into our code, poisons slabs
# that uninstrumented libMLIR code then fills (allow_user_poisoning=0). Leaks are not
# checked per input: LibTorch and MLIR keep registries for the process.
export ASAN_OPTIONS=detect_container_overflow=0:detect_leaks=0:allow_user_poisoning=0:${ASAN_OPTIONS:-}
export UBSAN_OPTIONS=print_stacktrace=1:${UBSAN_OPTIONS:-}
export OMP_NUM_THREADS=1

if [ "$merge" = 1 ]; then
  for reader in "${readers[@]}"; do
    seeds=test/fuzz/corpus/$reader merged=build-san/fuzz/$reader/merged
    fuzzer="build-san/bin/ds-fuzz-$(target_of "$reader")"
    rm -rf "$merged" && mkdir -p "$merged" "build-san/fuzz/$reader/corpus"
    # The committed seeds' coverage first, then what new inputs add to it, smallest first.
    "$fuzzer" -merge=1 -rss_limit_mb=4096 "$merged" "$seeds" \
      > "build-san/fuzz/$reader.merge.log" 2>&1
    ls "$merged" > "build-san/fuzz/$reader.kept"
    "$fuzzer" -merge=1 -rss_limit_mb=4096 "$merged" "build-san/fuzz/$reader/corpus" \
      >> "build-san/fuzz/$reader.merge.log" 2>&1
    # The repository must stay small: beyond max_bytes, new inputs go, largest first, then
    # the seeds' largest.
    total=$(find "$merged" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
    for file in $(ls -S "$merged" | grep -vxF -f "build-san/fuzz/$reader.kept") \
                $(ls -S "$merged" | grep -xF -f "build-san/fuzz/$reader.kept"); do
      [ "$total" -gt "$max_bytes" ] || break
      total=$((total - $(stat -c %s "$merged/$file")))
      rm "$merged/$file"
    done
    rm -rf "$seeds" && mv "$merged" "$seeds"
    echo "$reader: $(ls "$seeds" | wc -l) inputs, $total bytes"
  done
  exit 0
fi

fuzz_one() {
  local reader=$1 dir=build-san/fuzz/$1
  mkdir -p "$dir/corpus"
  # Findings of earlier runs (kept in test/fuzz/findings once fixed) are not counted again.
  mkdir -p "$dir/earlier" && find "$dir" -maxdepth 1 -type f \
    \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \
       -o -name 'slow-unit-*' \) -exec mv -t "$dir/earlier" {} +
  "build-san/bin/ds-fuzz-$(target_of "$reader")" -max_total_time="$seconds" \
    -rss_limit_mb=4096 -timeout=60 -print_final_stats=1 -artifact_prefix="$dir/" \
    "$dir/corpus" "test/fuzz/corpus/$reader" > "$dir.log" 2>&1 || true
}
running=0
for reader in "${readers[@]}"; do
  echo "fuzz.sh: $reader for ${seconds} s"
  fuzz_one "$reader" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then wait -n; running=$((running - 1)); fi
done
wait

status=0
printf '%-12s %12s %8s %8s %s\n' reader executions cov new findings
for reader in "${readers[@]}"; do
  log=build-san/fuzz/$reader.log
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || true)
  new=$(grep -o 'stat::new_units_added: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
  findings=$(ls build-san/fuzz/$reader/ 2>/dev/null | grep -cE '^(crash|leak|timeout|oom|slow-unit)-' || true)
  printf '%-12s %12s %8s %8s %s\n' "$reader" "${execs:-?}" "${cov:-?}" "${new:-?}" "$findings"
  [ "$findings" = 0 ] || status=1
done
exit $status
