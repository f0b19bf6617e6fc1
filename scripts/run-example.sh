#!/usr/bin/env bash
# The main job: sets up, builds, compiles the bundled transformer example with
# its DeepSpeed config and runs it with ds-run. (Training lands with the
# autodiff pass; until then the job runs the plan's eval forward.)
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
build/bin/ds-run "$out/model.plan" --data "$out/data.pt" --steps 4 --eval \
  --losses "$out/losses.jsonl"
