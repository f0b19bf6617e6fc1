#!/usr/bin/env python3
"""Activation checkpointing end to end: a run with it against the same run without it.

  remat_check.py --bin BUILD/bin --models DIR --model NAME --config-json JSON
                 --modules-json JSON [--stages 0 3] [--steps N] [--world-size W]
                 [--launcher 'mpirun -n {W}'] [--keep DIR]

For each ZeRO stage, the config (JSON, `zero_optimization.stage` set per stage) is compiled twice
with ds-compile: as given, and with `"activation_checkpointing": {"modules": MODULES}` added.
Both plans train N steps on the model's data file (under the launcher when W > 1). The check:

  - the recomputation changes nothing: every loss line (loss, lr, grad_norm, loss_scale, skipped)
    and every saved parameter are bitwise those of the run without checkpointing (random draws
    are replayed from the generator states the forward saves);
  - rank 0's measured activation peak (`ds-run --report`) equals the predicted one
    (`ds-compile --report`) in both runs;
  - it saves memory: with it, the activation peak less the generator states the forward keeps
    for the backward (`ds::get_rng_state` before the plan's backward_start, 5,056 bytes each)
    is lower than the peak without it.

The run without checkpointing is itself the one the oracle tests check (train_check.py), so a
bitwise match carries that check over. Prints one line per stage with both peaks.
"""

import argparse
import json
import math
import os
import shlex
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from train_check import default_launcher  # noqa: E402


def run(cmd, what):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"remat_check: {what} failed (exit {proc.returncode}):\n"
                 f"{' '.join(map(shlex.quote, cmd))}\n{proc.stderr}{proc.stdout}")
    return proc


def activation_peak(report_path):
    with open(report_path) as f:
        report = json.load(f)
    return report["ranks"][0]["activation_peak_bytes"]


def saved_rng_state_bytes(plan_path):
    """Bytes of the generator states the train program's forward saves for the backward."""
    with open(plan_path) as f:
        train = json.load(f)["programs"]["train"]
    values = {v["id"]: v for v in train["values"]}
    total = 0
    for op in train["body"][:train["backward_start"]]:
        if op.get("op") == "ds::get_rng_state":
            state = values[op["results"][0]]
            total += math.prod(state["shape"])  # uint8
    return total


def train(args, work, name, config, prefix):
    config_path = os.path.join(work, name + ".json")
    with open(config_path, "w") as f:
        json.dump(config, f)
    model = os.path.join(args.models, args.model + ".pt")
    data = os.path.join(args.models, args.model + ".data.pt")
    plan = os.path.join(work, name + ".plan")
    predicted = os.path.join(work, name + ".predicted.json")
    run([os.path.join(args.bin, "ds-compile"), model, "--config", config_path,
         "--example-inputs", data, "--world-size", str(args.world_size), "--report", predicted,
         "-o", plan], f"ds-compile ({name})")
    outputs = {k: os.path.join(work, f"{name}.{k}") for k in ("jsonl", "safetensors", "json")}
    run(prefix + [os.path.join(args.bin, "ds-run"), plan, "--data", data,
                  "--steps", str(args.steps), "--losses", outputs["jsonl"],
                  "--save-params", outputs["safetensors"], "--report", outputs["json"]],
        f"ds-run ({name})")
    with open(outputs["jsonl"]) as f:
        losses = [json.loads(line) for line in f if line.strip()]
    with open(outputs["safetensors"], "rb") as f:
        params = f.read()
    return (losses, params, activation_peak(outputs["json"]), activation_peak(predicted),
            saved_rng_state_bytes(plan))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bin", required=True)
    p.add_argument("--models", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--config-json", required=True)
    p.add_argument("--modules-json", required=True,
                   help="activation_checkpointing.modules: {\"classes\": [...], ...}")
    p.add_argument("--stages", type=int, nargs="+", default=[0])
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--world-size", type=int, default=1)
    p.add_argument("--launcher", default=None)
    p.add_argument("--keep", default=None)
    args = p.parse_args()

    launcher = args.launcher if args.launcher is not None else default_launcher(args.world_size)
    prefix = shlex.split(launcher.replace("{W}", str(args.world_size))) \
        if args.world_size > 1 and launcher else []
    base = json.loads(args.config_json)
    modules = json.loads(args.modules_json)
    work = args.keep or tempfile.mkdtemp(prefix="remat_check.")
    os.makedirs(work, exist_ok=True)

    failures = []
    for stage in args.stages:
        config = json.loads(json.dumps(base))
        config.setdefault("zero_optimization", {})["stage"] = stage
        checkpointed = json.loads(json.dumps(config))
        checkpointed["activation_checkpointing"] = {"modules": modules}
        plain = train(args, work, f"s{stage}_plain", config, prefix)
        remat = train(args, work, f"s{stage}_remat", checkpointed, prefix)
        problems = []
        same = plain[0] == remat[0] and plain[1] == remat[1]
        if plain[0] != remat[0]:
            problems.append(f"losses differ: {plain[0]} vs {remat[0]}")
        if plain[1] != remat[1]:
            problems.append("saved parameters differ (bytes)")
        for run, name in ((plain, "without"), (remat, "with")):
            if run[2] != run[3]:
                problems.append(f"activation peak {name} checkpointing: measured {run[2]} != "
                                f"predicted {run[3]}")
        states = remat[4]
        if not remat[2] - states < plain[2]:
            problems.append(f"measured activation peak did not fall: {plain[2]} -> {remat[2]} "
                            f"({states} of it generator states)")
        if not remat[3] - states < plain[3]:
            problems.append(f"predicted activation peak did not fall: {plain[3]} -> {remat[3]} "
                            f"({states} of it generator states)")
        status = "FAIL" if problems else "PASS"
        print(f"{args.model} stage {stage} W{args.world_size}: activation peak measured "
              f"{plain[2]} -> {remat[2]} bytes ({remat[2] / plain[2]:.2f}x; generator states "
              f"saved for the backward: {states} bytes), predicted {plain[3]} -> {remat[3]}; "
              f"trajectory bitwise equal: {'yes' if same else 'no'}  {status}")
        failures += [f"stage {stage}: {m}" for m in problems]
    if failures:
        sys.exit("remat_check: " + "; ".join(failures))


if __name__ == "__main__":
    main()
