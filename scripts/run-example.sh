#!/usr/bin/env bash
# The main job: sets up, builds, compiles the bundled transformer example with
# its DeepSpeed config (ZeRO stage 3, overlapped communication) for 2 ranks,
# trains it 32 optimizer steps with `mpirun -n 2 ds-run`, and prints the
# loss and the measured memory and traffic report.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
out=build/examples/transformer
ranks=2
mkdir -p "$out"
.venv/bin/python examples/transformer/make_example.py "$out"
build/bin/ds-compile "$out/model.pt" --config examples/transformer/ds_config.json \
  --example-inputs "$out/data.pt" --world-size "$ranks" -o "$out/model.plan" \
  --report "$out/predicted.json"
echo "compiled $out/model.plan for $ranks ranks"
launcher=(mpirun --oversubscribe -n "$ranks")
if [ "$(id -u)" = 0 ]; then launcher+=(--allow-run-as-root); fi
OMP_NUM_THREADS=1 "${launcher[@]}" build/bin/ds-run "$out/model.plan" --data "$out/data.pt" \
  --steps 32 --losses "$out/losses.jsonl" --save-params "$out/trained.safetensors" \
  --report "$out/report.json"
echo "trained parameters in $out/trained.safetensors"
.venv/bin/python - "$out/losses.jsonl" "$out/report.json" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
print("loss: step 1 %.4f -> step %d %.4f" % (lines[0]["loss"], lines[-1]["step"], lines[-1]["loss"]))
report = json.load(open(sys.argv[2]))
print("measured report (ZeRO stage %s, %d ranks), per rank:" % (report.get("zero_stage"), report["world_size"]))
for r in report["ranks"]:
    c = r["comm_volume_elements"]
    o = r.get("overlap", {}).get("total", {})
    print("  rank %d: params %d B, grads %d B, optimizer state %d B, peak %d B; per step: "
          "all-gather %d, reduce-scatter %d, all-reduce %d elements%s"
          % (r["rank"], r["param_bytes"], r["grad_bytes"], r["optimizer_state_bytes"],
             r["peak_bytes"], c["all_gather"], c["reduce_scatter"], c["all_reduce"],
             "; collectives in flight %.3f s, blocked in wait %.3f s (%.0f%% hidden)"
             % (o["collective_seconds"], o["wait_seconds"],
                100 * r["overlap"]["hidden_fraction"]) if "collective_seconds" in o else ""))
PY
