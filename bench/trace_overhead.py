#!/usr/bin/env python3
"""What ds-run's observers cost per step: tracing and wall_clock_breakdown off and on.

  bench/trace_overhead.py --bin build/bin [--base DS_RUN] [--model transformer] [--steps 400]
                          [--repeats 5]

Times `ds-run`'s CPU time per optimizer step (two runs of N/2 and N steps, the difference divided by N/2,
so start-up and loading cancel out; the median of --repeats, the variants interleaved) on a test
model of test/models (made into a temporary folder, its data repeated to N steps), 1 rank, 1
thread, for: `off` (no --trace, no wall_clock_breakdown: the executor tests a null observer per
op), `trace` (--trace), `wall_clock` (wall_clock_breakdown with steps_per_print 50); and, with
--base, the same `off` run of another ds-run binary (one built without the observer hook).
Prints a markdown table of ms/step and the ratio to `off`.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def timed(cmd, env):
    """The child's CPU time (user + system): other processes on the machine inflate wall time
    far more than they do this (one LibTorch thread, so CPU time is the step's work)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin", required=True)
    p.add_argument("--base", help="another ds-run binary to time with the same plan")
    p.add_argument("--model", default="transformer")
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS="1")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, os.path.join(HERE, "..", "test", "models",
                                                     "make_models.py"), tmp],
                       check=True, stdout=subprocess.DEVNULL)
        model = os.path.join(tmp, args.model + ".pt")
        data = torch.load(os.path.join(tmp, args.model + ".data.pt"))
        s_avail = next(iter(data.values())).shape[0]
        reps = (args.steps + s_avail - 1) // s_avail
        data = {k: v.repeat((reps,) + (1,) * (v.dim() - 1)) for k, v in data.items()}
        big = os.path.join(tmp, "bench.data.pt")
        torch.save(data, big)
        plans = {}
        for name, extra in (("off", {}), ("wall_clock", {"wall_clock_breakdown": True,
                                                         "steps_per_print": 50})):
            config = dict({"train_micro_batch_size_per_gpu": "auto",
                           "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}, **extra)
            cfg = os.path.join(tmp, name + ".json")
            with open(cfg, "w") as f:
                json.dump(config, f)
            plans[name] = os.path.join(tmp, name + ".plan")
            subprocess.run([os.path.join(args.bin, "ds-compile"), model, "--config", cfg,
                            "--example-inputs", big, "-o", plans[name]], check=True, env=env)
        ds_run = os.path.join(args.bin, "ds-run")
        variants = {"off": (ds_run, plans["off"], []),
                    "trace": (ds_run, plans["off"], ["--trace", os.path.join(tmp, "t.json")]),
                    "wall_clock": (ds_run, plans["wall_clock"], [])}
        if args.base:
            variants["base (no hook)"] = (args.base, plans["off"], [])
        times = {name: [] for name in variants}
        half = args.steps // 2
        for _ in range(args.repeats):
            for name, (binary, plan, extra) in variants.items():
                run = [binary, plan, "--data", big] + extra
                short = timed(run + ["--steps", str(half)], env)
                long = timed(run + ["--steps", str(args.steps)], env)
                times[name].append((long - short) / (args.steps - half) * 1000.0)
    off = statistics.median(times["off"])
    print("| variant | CPU ms/step (median of %d) | min | ratio to off |" % args.repeats)
    print("|---|---|---|---|")
    for name, values in times.items():
        median = statistics.median(values)
        print("| %s | %.3f | %.3f | %.3f |" % (name, median, min(values), median / off))


if __name__ == "__main__":
    main()
