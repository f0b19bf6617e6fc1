#!/usr/bin/env python3
"""Trains the bundled transformer example from Python, with DeepSpeed's loop.

    .venv/bin/python examples/transformer/train.py [--steps N]

The same job as scripts/run-example.sh (ds-compile + ds-run), written the way a
DeepSpeed user writes it: dsopt.compile stands where deepspeed.initialize
stands, and the loop is forward, backward, step per micro-step. Prints one line
per optimizer step and, with --losses, writes ds-run's JSON lines.
"""

import argparse
import json
import os
import subprocess
import sys

import torch

import dsopt

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=32, help="optimizer steps (default 32)")
    p.add_argument("--out", default=os.path.join(ROOT, "build", "examples", "transformer"),
                   help="folder for the example's model.pt and data.pt (made if missing)")
    p.add_argument("--losses", help="also write one JSON line per step here")
    p.add_argument("--save-params", help="write the trained parameters (.safetensors)")
    args = p.parse_args()

    model_path = os.path.join(args.out, "model.pt")
    data_path = os.path.join(args.out, "data.pt")
    if not (os.path.exists(model_path) and os.path.exists(data_path)):
        subprocess.run([sys.executable, os.path.join(HERE, "make_example.py"), args.out],
                       check=True)

    # deepspeed.initialize(model=..., config=...) -> compile once, then an engine.
    # The example inputs (here: the data file itself) fix the shapes.
    plan = dsopt.compile(model_path, os.path.join(HERE, "ds_config.json"), data_path)
    engine = dsopt.Engine(plan)

    # data.pt holds [S, B, T] token tensors: S micro-steps of B rows (one rank).
    data = torch.load(data_path)
    gas = engine.gradient_accumulation_steps()
    if data["idx"].shape[0] < args.steps * gas:
        sys.exit("train.py: %s has %d micro-steps; %d steps need %d"
                 % (data_path, data["idx"].shape[0], args.steps, args.steps * gas))

    lines = []
    for step in range(1, args.steps + 1):
        total = 0.0
        for micro in range(gas):
            s = (step - 1) * gas + micro
            loss = engine(data["idx"][s], data["targets"][s])   # forward
            engine.backward(loss)                                 # compiled backward
            report = engine.step()                                # updates on the boundary
            total += loss.item()
        update = report["engines"][0]  # The boundary's step: this update's LR and norm.
        line = {"step": step, "loss": total / gas, "lr": update["lr"],
                "grad_norm": update["grad_norm"]}
        lines.append(line)
        print("step %3d  loss %.4f  grad_norm %.4f" % (step, line["loss"], line["grad_norm"]))
    print("loss: step 1 %.4f -> step %d %.4f" % (lines[0]["loss"], step, lines[-1]["loss"]))

    if args.losses:
        with open(args.losses, "w") as f:
            f.writelines(json.dumps(line) + "\n" for line in lines)
    if args.save_params:
        engine.save_params(args.save_params)


if __name__ == "__main__":
    main()
