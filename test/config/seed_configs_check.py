#!/usr/bin/env python3
"""Accelerate's seed configs, verbatim, train on W ranks as the oracle does.

  seed_configs_check.py --bin BUILD/bin --models DIR --model NAME --world-size W
                        --config student=zero2_config.json --config teacher=zero3_config.json
                        [--set KEY=VALUE ...] [--mixed-precision M] [--steps N]

Compiles DIR/NAME.pt with one config file per engine (ds-compile --config NAME=FILE), takes the
configs the plan records (every "auto" resolved), and runs test/oracle/train_check.py with them
inlined as an "engines" document: its ds-compile must write the very same plan (so the oracle
checks the plan of the seed files), then `mpirun -n W ds-run` trains and the LibTorch oracle
trains the same model, compared step by step and tensor by tensor. Exits 1 on a mismatch.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN_CHECK = os.path.join(HERE, "..", "oracle", "train_check.py")


def main():
    p = argparse.ArgumentParser(prog="seed_configs_check.py")
    p.add_argument("--bin", required=True)
    p.add_argument("--models", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--world-size", type=int, default=2)
    p.add_argument("--config", action="append", required=True, metavar="NAME=FILE")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--mixed-precision", default=None)
    p.add_argument("--steps", type=int, default=3)
    args = p.parse_args()

    with tempfile.TemporaryDirectory(prefix="seed-configs-") as workdir:
        plan = os.path.join(workdir, "seed.plan")
        cmd = [os.path.join(args.bin, "ds-compile"), os.path.join(args.models, args.model + ".pt"),
               "--example-inputs", os.path.join(args.models, args.model + ".data.pt"),
               "--world-size", str(args.world_size), "-o", plan]
        cmd += sum((["--config", c] for c in args.config), [])
        cmd += sum((["--set", s] for s in args.set), [])
        if args.mixed_precision:
            cmd += ["--mixed-precision", args.mixed_precision]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        sys.stderr.write(proc.stderr)
        if proc.returncode != 0:
            print("ds-compile failed: " + " ".join(cmd))
            return 1

        with open(plan) as f:
            engines = json.load(f)["engines"]
        resolved = {"engines": {e["module"]: e["ds_config"] for e in engines}}
        if "auto" in json.dumps(resolved):
            print("the plan records an unresolved \"auto\": " + json.dumps(resolved))
            return 1

        keep = os.path.join(workdir, "oracle")
        rc = subprocess.run([sys.executable, TRAIN_CHECK, "--bin", args.bin, "--models",
                             args.models, "--model", args.model, "--config-json",
                             json.dumps(resolved), "--steps", str(args.steps), "--world-size",
                             str(args.world_size), "--keep", keep]).returncode
        if rc != 0:
            return rc
        with open(plan, "rb") as a, open(os.path.join(keep, args.model + ".plan"), "rb") as b:
            if a.read() != b.read():
                print("the plan of the seed files differs from the plan the oracle checked")
                return 1
    print("seed configs: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
