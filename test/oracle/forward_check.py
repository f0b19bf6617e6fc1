#!/usr/bin/env python3
"""Forward oracle check: ds-compile + ds-run --eval against LibTorch's eval forward.

  forward_check.py --bin BUILD/bin --models DIR --model NAME [--world-size W] [--gas G]
                   [--steps N] [--unbatched NAME ...] [--rtol 1e-6] [--launcher 'mpirun -n {W}']

Compiles DIR/NAME.pt with a DeepSpeed config for (W, G), runs the eval program over N optimizer
steps' worth of micro-steps, and compares every loss line with oracle.py's eval_losses on the same
rows (the mean over ranks and micro-steps). Exits non-zero with the oracle's message on a
mismatch.

World size W > 1: ds-run is started through the launcher (default `mpirun --oversubscribe -n {W}`,
plus --allow-run-as-root when run as root; {W} is replaced by the world size; --launcher '' runs
ds-run directly), as train_check.py does.
"""

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle  # noqa: E402


def run(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write("command failed (%d): %s\n%s%s" % (
            proc.returncode, " ".join(cmd), proc.stdout, proc.stderr))
        sys.exit(1)
    return proc


def default_launcher(world_size):
    """Direct for one rank; else mpirun (--allow-run-as-root when root; --oversubscribe so that
    W may exceed the cores)."""
    if world_size <= 1:
        return ""
    root = " --allow-run-as-root" if hasattr(os, "geteuid") and os.geteuid() == 0 else ""
    return "mpirun" + root + " --oversubscribe -n {W}"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--models", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--world-size", type=int, default=1)
    p.add_argument("--gas", type=int, default=1)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--unbatched", action="append", default=[])
    p.add_argument("--rtol", type=float, default=1e-6)
    p.add_argument("--launcher", default=None,
                   help="command prefix for ds-run ({W}: the world size; default for W > 1: "
                        "'mpirun --oversubscribe -n {W}', with --allow-run-as-root as root)")
    args = p.parse_args()
    launcher = args.launcher if args.launcher is not None else default_launcher(args.world_size)
    prefix = shlex.split(launcher.replace("{W}", str(args.world_size)))

    model = os.path.join(args.models, args.model + ".pt")
    data = os.path.join(args.models, args.model + ".data.pt")
    unbatched = sum((["--unbatched", u] for u in args.unbatched), [])
    with tempfile.TemporaryDirectory() as tmp:
        config = os.path.join(tmp, "ds_config.json")
        with open(config, "w") as f:
            json.dump({"train_micro_batch_size_per_gpu": "auto",
                       "gradient_accumulation_steps": args.gas,
                       "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}, f)
        plan = os.path.join(tmp, "model.plan")
        run([os.path.join(args.bin, "ds-compile"), model, "--config", config,
             "--example-inputs", data, "--world-size", str(args.world_size),
             "-o", plan] + unbatched)
        ours = os.path.join(tmp, "ours.jsonl")
        run(prefix + [os.path.join(args.bin, "ds-run"), plan, "--data", data, "--steps",
             str(args.steps), "--eval", "--losses", ours] + unbatched)
        expected = oracle.eval_losses(model, data, args.world_size, args.gas, args.steps,
                                      args.unbatched)
        ok, message = oracle.compare_lines(oracle.read_jsonl(ours), expected, args.rtol, 0.0)
        print(message)
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
