#!/usr/bin/env python3
"""Training oracle check: ds-compile + ds-run (training) against oracle.py's train().

  train_check.py --bin BUILD/bin --models DIR --model NAME --config-json '{...}' --steps N
                 [--compile-model FILE.pt2]
                 [--unbatched NAME ...] [--world-size W] [--launcher 'mpirun -n {W}']
                 [--seed S] [--data FILE] [--loss-rtol 1e-5] [--rtol 1e-4] [--atol 1e-4]
                 [--lr-rtol 1e-12] [--norm-rtol 1e-4] [--keep DIR]

Writes the config, compiles DIR/NAME.pt with it (example inputs DIR/NAME.data.pt unless --data),
trains N optimizer steps with `ds-run PLAN --data D --steps N --losses ours.jsonl --save-params
ours.safetensors`, runs the LibTorch oracle (oracle.train) on the same data and config, and
compares:
  - the loss lines step by step: loss (and per-output losses) within --loss-rtol (1e-5, the
    design's tolerance), lr within --lr-rtol (the schedule is the same double formula on both
    sides), pre-clip grad_norm within --norm-rtol, loss_scale 1 and no skipped step;
  - every final parameter and buffer: |ours - oracle| <= atol + rtol * |oracle| elementwise
    (design tolerance 1e-4 + 1e-4 * |oracle|).
Prints a summary with the largest errors; exits 1 on a mismatch or a failing tool, naming the
step or tensor, 2 on bad arguments.

World size W > 1: the plan is compiled with --world-size W and ds-run is started through the
launcher (default `mpirun --oversubscribe -n {W}`, plus --allow-run-as-root when run as root; {W}
is replaced by the world size; --launcher '' runs ds-run directly). --keep DIR keeps the config, plan and both sides' outputs there.
"""

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import oracle  # noqa: E402


class CheckFailed(Exception):
    pass


def run(cmd, what):
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        raise CheckFailed(f"{what}: cannot run {cmd[0]}: {e.strerror}")
    if proc.returncode != 0:
        raise CheckFailed("%s failed (exit %d): %s\n%s%s" % (
            what, proc.returncode, " ".join(shlex.quote(c) for c in cmd), proc.stdout, proc.stderr))
    return proc


def default_launcher(world_size):
    """Direct for one rank; else mpirun (--allow-run-as-root when root, as in CI containers;
    --oversubscribe so that W may exceed the cores)."""
    if world_size <= 1:
        return ""
    root = " --allow-run-as-root" if hasattr(os, "geteuid") and os.geteuid() == 0 else ""
    return "mpirun" + root + " --oversubscribe -n {W}"


def check(args, workdir):
    model = os.path.join(args.models, args.model + ".pt")
    compiled = args.compile_model or model
    data = args.data or os.path.join(args.models, args.model + ".data.pt")
    for path in (model, compiled, data):
        if not os.path.exists(path):
            raise CheckFailed(f"{path} does not exist")
    config = json.loads(args.config_json)
    config_path = os.path.join(workdir, "ds_config.json")
    with open(config_path, "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    unbatched = sum((["--unbatched", u] for u in args.unbatched), [])

    plan = os.path.join(workdir, args.model + ".plan")
    started = time.monotonic()
    run([os.path.join(args.bin, "ds-compile"), compiled, "--config", config_path,
         "--example-inputs", data, "--world-size", str(args.world_size), "-o", plan] + unbatched,
        "ds-compile")
    print(f"  ds-compile: {time.monotonic() - started:.2f} s", flush=True)

    ours_lines = os.path.join(workdir, "ours.jsonl")
    ours_params = os.path.join(workdir, "ours.safetensors")
    launcher = args.launcher
    if launcher is None:
        launcher = default_launcher(args.world_size)
    prefix = shlex.split(launcher.replace("{W}", str(args.world_size)))
    seed = ["--seed", str(args.seed)] if args.seed is not None else []
    run(prefix + [os.path.join(args.bin, "ds-run"), plan, "--data", data, "--steps",
                  str(args.steps), "--losses", ours_lines, "--save-params", ours_params]
        + unbatched + seed, "ds-run")

    try:
        expected_lines, expected_state = oracle.train(model, data, config, args.steps,
                                                      args.world_size, args.unbatched,
                                                      seed=args.seed)
    except oracle.OracleError as e:
        raise CheckFailed(f"oracle: {e}")
    oracle.write_jsonl(os.path.join(workdir, "oracle.jsonl"), expected_lines)
    oracle.write_safetensors(os.path.join(workdir, "oracle.safetensors"), expected_state)

    try:
        got_lines = oracle.read_jsonl(ours_lines)
        got_state = oracle.load_params(ours_params)
    except oracle.OracleError as e:
        raise CheckFailed(f"ds-run output: {e}")
    ok_l, msg_l = oracle.compare_train_lines(got_lines, expected_lines, args.loss_rtol,
                                             args.lr_rtol, args.norm_rtol, "ds-run", "oracle")
    ok_p, msg_p = oracle.compare_params(got_state, expected_state, args.rtol, args.atol,
                                        "ds-run", "oracle")
    return ok_l, msg_l, ok_p, msg_p


def main(argv=None):
    p = argparse.ArgumentParser(prog="train_check.py",
                                description="ds-compile + ds-run training vs the LibTorch oracle")
    p.add_argument("--bin", required=True, help="directory with ds-compile and ds-run")
    p.add_argument("--models", required=True, help="directory of NAME.pt and NAME.data.pt")
    p.add_argument("--model", required=True)
    p.add_argument("--config-json", required=True, help="the DeepSpeed config, as JSON text")
    p.add_argument("--steps", type=int, default=3, help="optimizer steps")
    p.add_argument("--unbatched", action="append", default=[], metavar="NAME")
    p.add_argument("--world-size", type=int, default=1)
    p.add_argument("--launcher", default=None,
                   help="command prefix for ds-run ({W}: the world size; default for W > 1: "
                        "'mpirun --oversubscribe -n {W}', with --allow-run-as-root as root)")
    p.add_argument("--seed", type=int, default=None, help="passed to ds-run")
    p.add_argument("--data", default=None, help="data file (default DIR/NAME.data.pt)")
    p.add_argument("--compile-model", default=None, metavar="FILE",
                   help="the model file ds-compile gets (a torch.export .pt2 of the same "
                        "module); the oracle trains DIR/NAME.pt")
    p.add_argument("--loss-rtol", type=float, default=1e-5)
    p.add_argument("--lr-rtol", type=float, default=1e-12)
    p.add_argument("--norm-rtol", type=float, default=1e-4)
    p.add_argument("--rtol", type=float, default=1e-4, help="parameters: relative tolerance")
    p.add_argument("--atol", type=float, default=1e-4, help="parameters: absolute tolerance")
    p.add_argument("--keep", default=None, metavar="DIR",
                   help="keep config, plan and both sides' outputs in DIR")
    args = p.parse_args(argv)
    try:
        json.loads(args.config_json)
    except json.JSONDecodeError as e:
        p.error(f"--config-json is not JSON: {e}")

    name = f"train-check {args.model} (W={args.world_size}, {args.steps} steps)"
    print(name, flush=True)
    tmp = tempfile.mkdtemp(prefix="train_check.")
    try:
        workdir = tmp
        if args.keep:
            os.makedirs(args.keep, exist_ok=True)
            workdir = args.keep
        try:
            ok_l, msg_l, ok_p, msg_p = check(args, workdir)
        except CheckFailed as e:
            print(f"{name} FAILED: {e}", file=sys.stderr)
            return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"  losses: {'OK' if ok_l else 'MISMATCH'}: {msg_l}")
    print(f"  params: {'OK' if ok_p else 'MISMATCH'}: {msg_p}")
    if ok_l and ok_p:
        print(f"{name}: PASS")
        return 0
    what = " and ".join(w for w, ok in (("losses", ok_l), ("final parameters", ok_p)) if not ok)
    print(f"{name} FAILED: {what} differ from the oracle"
          + (f" (outputs kept in {args.keep})" if args.keep else " (rerun with --keep DIR to inspect)"),
          file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
