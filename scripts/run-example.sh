#!/usr/bin/env bash
# The main job: sets up, builds, compiles the bundled transformer example with
# its DeepSpeed config and trains it with ds-run (32 optimizer steps).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
out=build/examples/transformer
mkdir -p "$out"
/usr/bin/python3 examples/transformer/make_example.py "$out"
build/bin/ds-compile "$out/model.pt" --config examples/transformer/ds_config.json \
  --example-inputs "$out/data.pt" -o "$out/model.plan"
echo "compiled $out/model.plan"
build/bin/ds-run "$out/model.plan" --data "$out/data.pt" --steps 32 \
  --losses "$out/losses.jsonl" --save-params "$out/trained.safetensors"
echo "trained parameters in $out/trained.safetensors"
/usr/bin/python3 -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
print("loss: step 1 %.4f -> step %d %.4f" % (lines[0]["loss"], lines[-1]["step"], lines[-1]["loss"]))
' "$out/losses.jsonl"
