#!/usr/bin/env python3
"""Activation checkpointing: step time and activation peak with and without it.

  bench/remat.py --bin build/bin [--world-size 1] [--stage 0] [--steps 12] [--batch 8]
                 [--launcher 'mpirun -n {W}']

One script, one model (bench/step_time.py's GPT, d=256, 4 blocks, T=64), one data set, one
AdamW config; only `activation_checkpointing` changes: none (the baseline every ratio is
against), every `Block` checkpointed (`{"modules": {"classes": ["Block"]}}`), and the first
two of the four (`{"modules": {"names": ["blocks.0", "blocks.1"]}}`). For each: ms/step (the
difference of two `ds-run` runs of N/2 and N steps divided by N/2, so start-up cancels) and,
from rank 0's measured report (`ds-run --report`), the activation peak and the whole peak.
Recomputation costs a second forward of the checkpointed modules; what it buys is the
activation peak.
Prints a markdown table.
"""

import argparse
import os
import shlex
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import step_time  # noqa: E402
from zero_overlap import ADAMW, compile_and_time, default_launcher, zero_section  # noqa: E402

VARIANTS = {
    "none": None,
    "every Block": {"classes": ["Block"]},
    "half the blocks": {"names": ["blocks.0", "blocks.1"]},
}


def config(stage, batch, modules):
    cfg = {"train_micro_batch_size_per_gpu": batch, "gradient_accumulation_steps": 1,
           "zero_optimization": zero_section(stage, 500000, overlap=stage >= 2),
           "optimizer": ADAMW}
    if modules is not None:
        cfg["activation_checkpointing"] = {"modules": modules}
    return cfg


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bin", required=True)
    p.add_argument("--world-size", type=int, default=1)
    p.add_argument("--stage", type=int, default=0)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--batch", type=int, default=8, help="micro-batch per rank")
    p.add_argument("--launcher", default=default_launcher())
    args = p.parse_args()
    w = args.world_size
    prefix = shlex.split(args.launcher.replace("{W}", str(w)))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        model, data = step_time.make_gpt(tmp, args.steps + 2, args.batch * w)
        for name, modules in VARIANTS.items():
            ms, r0 = compile_and_time(args.bin, prefix, tmp, model, data,
                                      config(args.stage, args.batch, modules), w, args.steps,
                                      env)
            rows.append((name, ms, r0["activation_peak_bytes"], r0["peak_bytes"]))
    base = rows[0]
    print(f"GPT d=256 x 4 blocks, T=64, ZeRO stage {args.stage}, W = {w}, micro-batch "
          f"{args.batch} per rank, {args.steps} steps, OMP_NUM_THREADS=1")
    print("| checkpointed | ms/step | vs none | activation peak B | vs none | peak B/rank |")
    print("|---|---|---|---|---|---|")
    for name, ms, activations, peak in rows:
        print("| %s | %.1f | %.2f | %d | %.2f | %d |" % (
            name, ms, ms / base[1], activations, activations / base[2], peak))


if __name__ == "__main__":
    main()
