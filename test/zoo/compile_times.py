#!/usr/bin/env python3
"""Compile time of every zoo archive: a markdown table for docs/import.md.

  compile_times.py --bin BUILD/bin --zoo DIR [--repeat 3]

DIR is make_zoo.py's output. Each archive is compiled for ZeRO stage 0 on one rank (and for ZeRO-3
on two ranks) with its example inputs, --repeat times; the table gives the fastest wall time of
ds-compile (import, every pass, the plan written), the parameter count and the plan's size.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import zoo_check  # noqa: E402


def compile_seconds(bin_dir, archive, data, config, world, repeat, workdir):
    config_path = os.path.join(workdir, "config.json")
    with open(config_path, "w") as f:
        json.dump(config, f)
    plan = os.path.join(workdir, "plan")
    best = None
    for _ in range(repeat):
        started = time.monotonic()
        subprocess.run([os.path.join(bin_dir, "ds-compile"), archive, "--config", config_path,
                        "--example-inputs", data, "--world-size", str(world), "-o", plan],
                       check=True, capture_output=True)
        elapsed = time.monotonic() - started
        best = elapsed if best is None else min(best, elapsed)
    return best, os.path.getsize(plan)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bin", required=True)
    p.add_argument("--zoo", required=True)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    with open(os.path.join(args.zoo, "zoo.json")) as f:
        zoo = json.load(f)
    print("| model | archive | parameters | compile, stage 0, W 1 | compile, ZeRO-3, W 2 |"
          " plan (stage 0) |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as work:
        for name, entry in zoo.items():
            data = os.path.join(args.zoo, name + ".data.pt")
            kinds = [k for k, ok in (("scripted", entry["scripted"]),
                                     ("traced", entry["traced"])) if ok]
            for kind in kinds:
                archive = os.path.join(args.zoo, name + ("_traced" if kind == "traced" else "")
                                       + ".pt")
                s0, size = compile_seconds(args.bin, archive, data,
                                           zoo_check.config_for(entry, "script-s0-w1"), 1,
                                           args.repeat, work)
                z3, _ = compile_seconds(args.bin, archive, data,
                                        zoo_check.config_for(entry, "script-z3-w2"), 2,
                                        args.repeat, work)
                print(f"| {name} | {kind} | {entry['params']:,} | {s0:.2f} s | {z3:.2f} s |"
                      f" {size / 1024:.0f} KiB |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
