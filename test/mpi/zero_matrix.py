#!/usr/bin/env python3
"""ZeRO oracle matrix: every stage against the LibTorch oracle and against each other.

  zero_matrix.py --bin BUILD/bin --models DIR --model NAME --world-size W
                 [--stages 0 1 2 3o 3n 3or] [--gas 1 2] [--steps 3] [--bucket N]
                 [--leaf-module JSON] [--check-report] [--launcher 'mpirun -n {W}'] [--keep DIR]

A stage is a digit with optional flags: `o` overlap_comm on, `n` overlap_comm off (neither: the
config leaves it to DeepSpeed's default), `r` stage3_max_reuse_distance 0 (release after the
forward and gather again for the backward), `l` zero_optimization.leaf_module set to --leaf-module
(stage 3 gathers each leaf module whole and reduces it once). Stage 3 cells set
stage3_param_persistence_threshold 0, so that every parameter is sharded.

For each GAS g, the oracle (oracle.train, docs/oracle.md) trains the model once
on W ranks' rows; then for each stage s, the model is compiled with
`zero_optimization.stage = s` (and reduce/all-gather buckets of N elements when --bucket is given,
so that several buckets, split parameters and padding are exercised) and trained with
`mpirun -n W ds-run`. Checks, per cell (s, W, g):
  - losses, lr and grad_norm per step and every final parameter within the design's tolerance
    of the oracle (losses 1e-5 relative; parameters 1e-4 + 1e-4 * |oracle|);
  - the final parameters of every stage within the same tolerance of stage `stages[0]`'s;
  - the highest stage, run a second time, gives bitwise the same parameters and loss lines
    (runs of the same stage and W are bitwise equal);
  - with --check-report, ds-compile --report and ds-run --report agree on every rank's
    parameter, gradient and optimizer-state bytes and communication volume (peaks are not
    compared: a data-dependent model's activations are not known before it runs).
Exits 1 naming the failing cell, 2 on bad arguments.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "oracle"))
import oracle  # noqa: E402
import train_check  # noqa: E402


def parse_stage(spec):
    """'3or' -> (3, {"overlap_comm": True, "stage3_max_reuse_distance": 0, ...})."""
    if (not spec or not spec[0].isdigit() or int(spec[0]) > 3
            or any(c not in "onrl" for c in spec[1:])):
        raise argparse.ArgumentTypeError(f"bad stage {spec!r}: a digit 0-3 and flags o, n, r, l")
    stage, flags = int(spec[0]), spec[1:]
    zero = {}
    if "o" in flags:
        zero["overlap_comm"] = True
    if "n" in flags:
        zero["overlap_comm"] = False
    if "r" in flags:
        zero["stage3_max_reuse_distance"] = 0
    if "l" in flags:
        zero["leaf_module"] = None  # --leaf-module, filled in by config_for
    if stage == 3:
        zero["stage3_param_persistence_threshold"] = 0
    return spec, stage, zero


def config_for(stage, gas, bucket, leaf_module=None):
    spec, number, extra = stage
    zero = {"stage": number}
    zero.update(extra)
    if "leaf_module" in zero:
        zero["leaf_module"] = leaf_module
    if bucket:
        zero["reduce_bucket_size"] = bucket
        zero["allgather_bucket_size"] = bucket
    return {
        "train_micro_batch_size_per_gpu": "auto",
        "gradient_accumulation_steps": gas,
        "zero_optimization": zero,
        "optimizer": {"type": "AdamW", "params": {"lr": 0.001, "weight_decay": 0.01}},
    }


def run_cell(args, workdir, config):
    """Compiles and trains one cell; returns (loss lines, final state)."""
    model = os.path.join(args.models, args.model + ".pt")
    data = os.path.join(args.models, args.model + ".data.pt")
    config_path = os.path.join(workdir, "ds_config.json")
    with open(config_path, "w") as f:
        json.dump(config, f, indent=2)
    plan = os.path.join(workdir, "model.plan")
    predicted = os.path.join(workdir, "predicted.json")
    measured = os.path.join(workdir, "measured.json")
    reports = args.check_report
    train_check.run([os.path.join(args.bin, "ds-compile"), model, "--config", config_path,
                     "--example-inputs", data, "--world-size", str(args.world_size), "-o", plan]
                    + (["--report", predicted] if reports else []), "ds-compile")
    launcher = args.launcher
    if launcher is None:
        launcher = train_check.default_launcher(args.world_size)
    prefix = launcher.replace("{W}", str(args.world_size)).split()
    lines = os.path.join(workdir, "ours.jsonl")
    params = os.path.join(workdir, "ours.safetensors")
    train_check.run(prefix + [os.path.join(args.bin, "ds-run"), plan, "--data", data,
                              "--steps", str(args.steps), "--losses", lines,
                              "--save-params", params]
                    + (["--report", measured] if reports else []), "ds-run")
    if reports:
        compare_reports(predicted, measured)
    return oracle.read_jsonl(lines), oracle.load_params(params)


REPORT_KEYS = ("param_bytes", "grad_bytes", "optimizer_state_bytes", "comm_volume_elements")


def compare_reports(predicted_path, measured_path):
    """Raises CheckFailed unless every rank's state bytes and traffic are as predicted."""
    with open(predicted_path) as f:
        predicted = json.load(f)
    with open(measured_path) as f:
        measured = json.load(f)
    for want, got in zip(predicted["ranks"], measured["ranks"]):
        for key in REPORT_KEYS:
            if want[key] != got[key]:
                raise train_check.CheckFailed(
                    f"rank {got['rank']}: {key} measured {got[key]} != predicted {want[key]}")


def bitwise_equal(a, b):
    if a.keys() != b.keys():
        return False
    return all(a[k].dtype == b[k].dtype and a[k].shape == b[k].shape
               and bool((a[k] == b[k]).all()) for k in a)


def main(argv=None):
    p = argparse.ArgumentParser(prog="zero_matrix.py", description=__doc__.splitlines()[0])
    p.add_argument("--bin", required=True)
    p.add_argument("--models", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--world-size", type=int, required=True)
    p.add_argument("--stages", type=parse_stage, nargs="+",
                   default=[parse_stage(x) for x in ("0", "1", "2")])
    p.add_argument("--gas", type=int, nargs="+", default=[1, 2])
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--bucket", type=int, default=0,
                   help="reduce_bucket_size and allgather_bucket_size (elements)")
    p.add_argument("--leaf-module", type=json.loads, default=None, metavar="JSON",
                   help="zero_optimization.leaf_module of the stages with flag l")
    p.add_argument("--check-report", action="store_true",
                   help="compare ds-run --report with ds-compile --report in every cell")
    p.add_argument("--launcher", default=None)
    p.add_argument("--keep", default=None, metavar="DIR")
    args = p.parse_args(argv)
    if args.world_size < 1 or args.steps < 1 or any(g < 1 for g in args.gas):
        p.error("--world-size, --steps and --gas must be positive")
    if any("leaf_module" in stage[2] for stage in args.stages) and args.leaf_module is None:
        p.error("a stage with flag l needs --leaf-module")

    root = args.keep or tempfile.mkdtemp(prefix="zero_matrix.")
    failures = []
    try:
        for gas in args.gas:
            model = os.path.join(args.models, args.model + ".pt")
            data = os.path.join(args.models, args.model + ".data.pt")
            expected_lines, expected_state = oracle.train(
                model, data, config_for(args.stages[0], gas, args.bucket, args.leaf_module),
                args.steps, args.world_size)
            first_state = None
            for stage in args.stages:
                cell = f"{args.model} stage {stage[0]} W={args.world_size} GAS={gas}"
                workdir = os.path.join(root, f"s{stage[0]}-g{gas}")
                os.makedirs(workdir, exist_ok=True)
                config = config_for(stage, gas, args.bucket, args.leaf_module)
                try:
                    lines, state = run_cell(args, workdir, config)
                except (train_check.CheckFailed, oracle.OracleError) as e:
                    failures.append(f"{cell}: {e}")
                    print(f"{cell}: FAILED to run", file=sys.stderr)
                    continue
                ok_l, msg_l = oracle.compare_train_lines(lines, expected_lines, 1e-5, 1e-12,
                                                         1e-4, "ds-run", "oracle")
                ok_p, msg_p = oracle.compare_params(state, expected_state, 1e-4, 1e-4,
                                                    "ds-run", "oracle")
                print(f"{cell}: losses {'OK' if ok_l else 'MISMATCH'} ({msg_l}); "
                      f"params {'OK' if ok_p else 'MISMATCH'} ({msg_p})")
                if not ok_l:
                    failures.append(f"{cell}: losses differ from the oracle: {msg_l}")
                if not ok_p:
                    failures.append(f"{cell}: parameters differ from the oracle: {msg_p}")
                if first_state is None:
                    first_state = state
                else:
                    ok_s, msg_s = oracle.compare_params(state, first_state, 1e-4, 1e-4,
                                                        f"stage {stage[0]}",
                                                        f"stage {args.stages[0][0]}")
                    print(f"{cell}: vs stage {args.stages[0][0]}: {'OK' if ok_s else 'MISMATCH'} "
                          f"({msg_s})")
                    if not ok_s:
                        failures.append(f"{cell}: differs from stage {args.stages[0][0]}: "
                                        f"{msg_s}")
                if stage == args.stages[-1] and gas == args.gas[-1]:
                    again = os.path.join(root, f"s{stage[0]}-g{gas}-again")
                    os.makedirs(again, exist_ok=True)
                    try:
                        lines2, state2 = run_cell(args, again, config)
                    except (train_check.CheckFailed, oracle.OracleError) as e:
                        failures.append(f"{cell} (second run): {e}")
                        continue
                    same = bitwise_equal(state, state2) and lines == lines2
                    print(f"{cell}: second run {'bitwise equal' if same else 'DIFFERS'}")
                    if not same:
                        failures.append(f"{cell}: two runs are not bitwise equal")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    if failures:
        print("zero_matrix FAILED:\n  " + "\n  ".join(failures), file=sys.stderr)
        return 1
    print(f"zero_matrix {args.model} W={args.world_size}: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
