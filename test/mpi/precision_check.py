#!/usr/bin/env python3
"""Mixed-precision oracle check (issue 7): bf16, torch_autocast and fp16 training under ZeRO stages
against the LibTorch oracle.

  precision_check.py --bin BUILD/bin --models DIR --model NAME
                     --mode bf16|fp16|autocast|autocast_fp16|fp32
                     --world-size W [--gas G] [--steps N] [--stages 0 2 3]
                     [--config-json '{...}'] [--min-skipped K] [--unbatched NAME ...]
                     [--loss-rtol X] [--norm-rtol X] [--rtol X] [--atol X] [--offload]
                     [--launcher 'mpirun -n {W}'] [--keep DIR]

The config of a cell: micro-batch "auto" (the data's global micro-batch / W), GAS G,
zero_optimization.stage s (stage 3: stage3_param_persistence_threshold 0, every parameter
sharded), SGD (lr 0.05, momentum 0.9: see oracle.py, "Tolerances", why not Adam), and the
mode's section: {"bf16": {"enabled": true}}, {"fp16": {"enabled": true}},
{"torch_autocast": {"enabled": true}} (bf16, the CPU default) or {"torch_autocast": {"enabled":
true, "dtype": "float16"}} (autocast_fp16); then --config-json is merged over it (objects key by key, other
values replaced; a given optimizer or scheduler replaces the base's whole), e.g. to set the
fp16 scaler, the optimizer or a scheduler.

The oracle (oracle.train, which ignores the ZeRO stage) trains once; each stage is compiled with
`ds-compile MODEL --config CFG --example-inputs DATA --world-size W` and trained with
`[launcher] ds-run PLAN --data DATA --steps N --losses ours.jsonl --save-params ours.safetensors`.
Checks per stage:
  - loss lines: loss and grad_norm within the mode's tolerances (oracle.PRECISION_TOLERANCES,
    overridable), lr, loss_scale and skipped EXACTLY equal to the oracle's (fp16: the whole
    sequence of scales and skipped steps);
  - every final parameter and buffer within rtol/atol of the oracle's. The oracle's are stored
    in the model dtype (bf16 / fp16; fp32 under autocast); if ds-run writes a parameter as fp32
    where the oracle has bf16/fp16, it is compared with the oracle's fp32 master weight instead;
  - the parameters of every stage within the same tolerance of the first stage's.
With --offload each stage 1-3 also runs with ZeRO-Offload (zero_optimization.offload_optimizer
{"device": "cpu", "pin_memory": true}): checked against the oracle as above, and its loss lines
and final parameters must equal the same stage's run without offload BITWISE (on the CPU the
offloaded update is the same CPU optimizer; docs/zero.md, "ZeRO-Offload").
With --min-skipped K the oracle's run must skip at least K steps (an fp16 test that no longer
overflows tests nothing; fp16 and autocast_fp16, whose torch.amp.GradScaler the oracle runs).
Exits 1 naming the failing stage, 2 on bad arguments.
"""

import argparse
import json
import os
import shlex
import shutil
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "oracle"))
import oracle  # noqa: E402
import train_check  # noqa: E402

MODE_SECTIONS = {
    "fp32": {},  # the same pipeline in fp32 (design tolerances): runs with today's ds-run
    "bf16": {"bf16": {"enabled": True}},
    "autocast": {"torch_autocast": {"enabled": True}},
    "autocast_fp16": {"torch_autocast": {"enabled": True, "dtype": "float16"}},
    "fp16": {"fp16": {"enabled": True}},
}


WHOLE_SECTIONS = ("optimizer", "scheduler")  # replaced whole: their params depend on the type


def merge(base, extra, top=True):
    """extra over base: objects merged key by key (except a top-level optimizer or scheduler,
    which replaces the base's whole), everything else replaced."""
    out = dict(base)
    for k, v in extra.items():
        if top and k in WHOLE_SECTIONS:
            out[k] = v
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v, False)
        else:
            out[k] = v
    return out


def config_for(mode, stage, gas, extra):
    zero = {"stage": stage}
    if stage == 3:
        zero["stage3_param_persistence_threshold"] = 0
    cfg = {
        "train_micro_batch_size_per_gpu": "auto",
        "gradient_accumulation_steps": gas,
        "zero_optimization": zero,
        "optimizer": {"type": "SGD", "params": {"lr": 0.05, "momentum": 0.9}},
    }
    cfg.update(MODE_SECTIONS[mode])
    return merge(cfg, extra)


OFFLOAD = {"zero_optimization": {"offload_optimizer": {"device": "cpu", "pin_memory": True}}}


def same_bitwise(lines, state, other_lines, other_state):
    """'' when both runs are bitwise equal, else what differs."""
    if lines != other_lines:
        return f"loss lines differ: {lines} vs {other_lines}"
    if state.keys() != other_state.keys():
        return f"parameter names differ: {sorted(state)} vs {sorted(other_state)}"
    for key in state:
        a, b = state[key], other_state[key]
        if a.dtype != b.dtype or not torch.equal(a, b):
            diff = (a.double() - b.double()).abs().max().item() if a.shape == b.shape else "shape"
            return f"{key} differs (max |diff| {diff})"
    return ""


def run_stage(args, workdir, config, model, data):
    """Compiles and trains one stage; returns (loss lines, final state)."""
    config_path = os.path.join(workdir, "ds_config.json")
    with open(config_path, "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    unbatched = sum((["--unbatched", u] for u in args.unbatched), [])
    plan = os.path.join(workdir, args.model + ".plan")
    train_check.run([os.path.join(args.bin, "ds-compile"), model, "--config", config_path,
                     "--example-inputs", data, "--world-size", str(args.world_size), "-o", plan]
                    + unbatched, "ds-compile")
    launcher = args.launcher
    if launcher is None:
        launcher = train_check.default_launcher(args.world_size)
    prefix = shlex.split(launcher.replace("{W}", str(args.world_size)))
    lines = os.path.join(workdir, "ours.jsonl")
    params = os.path.join(workdir, "ours.safetensors")
    train_check.run(prefix + [os.path.join(args.bin, "ds-run"), plan, "--data", data,
                              "--steps", str(args.steps), "--losses", lines,
                              "--save-params", params] + unbatched, "ds-run")
    try:
        return oracle.read_jsonl(lines), oracle.load_params(params)
    except oracle.OracleError as e:
        raise train_check.CheckFailed(f"ds-run output: {e}")


def main(argv=None):
    p = argparse.ArgumentParser(prog="precision_check.py", description=__doc__.splitlines()[0])
    p.add_argument("--bin", required=True)
    p.add_argument("--models", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--mode", required=True, choices=sorted(MODE_SECTIONS))
    p.add_argument("--world-size", type=int, required=True)
    p.add_argument("--gas", type=int, default=2)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--stages", type=int, nargs="+", default=[0])
    p.add_argument("--config-json", type=json.loads, default={}, metavar="JSON",
                   help="merged over the cell's config")
    p.add_argument("--min-skipped", type=int, default=0)
    p.add_argument("--unbatched", action="append", default=[], metavar="NAME")
    p.add_argument("--loss-rtol", type=float, default=None)
    p.add_argument("--norm-rtol", type=float, default=None)
    p.add_argument("--rtol", type=float, default=None, help="parameters: relative tolerance")
    p.add_argument("--atol", type=float, default=None, help="parameters: absolute tolerance")
    p.add_argument("--offload", action="store_true",
                   help="stages 1-3 also with ZeRO-Offload, bitwise equal to the run without")
    p.add_argument("--launcher", default=None,
                   help="command prefix for ds-run ({W}: the world size; '' runs it directly)")
    p.add_argument("--keep", default=None, metavar="DIR")
    args = p.parse_args(argv)
    if args.world_size < 1 or args.steps < 1 or args.gas < 1:
        p.error("--world-size, --steps and --gas must be positive")
    if any(s not in (0, 1, 2, 3) for s in args.stages):
        p.error("--stages: 0 to 3")
    if not isinstance(args.config_json, dict):
        p.error("--config-json must be a JSON object")
    tol = dict(oracle.PRECISION_TOLERANCES[args.mode])
    for key, value in (("loss_rtol", args.loss_rtol), ("norm_rtol", args.norm_rtol),
                       ("param_rtol", args.rtol), ("param_atol", args.atol)):
        if value is not None:
            tol[key] = value

    model = os.path.join(args.models, args.model + ".pt")
    data = os.path.join(args.models, args.model + ".data.pt")
    name = f"precision {args.mode} {args.model} W={args.world_size} GAS={args.gas}"
    root = args.keep or tempfile.mkdtemp(prefix="precision_check.")
    failures = []
    try:
        masters = {}
        try:
            expected_lines, expected_state = oracle.train(
                model, data, config_for(args.mode, args.stages[0], args.gas, args.config_json),
                args.steps, args.world_size, args.unbatched, masters=masters)
        except oracle.OracleError as e:
            print(f"{name}: oracle FAILED: {e}", file=sys.stderr)
            return 1
        os.makedirs(root, exist_ok=True)
        oracle.write_jsonl(os.path.join(root, "oracle.jsonl"), expected_lines)
        oracle.write_safetensors(os.path.join(root, "oracle.safetensors"), expected_state)
        skipped = sum(1 for l in expected_lines if l.get("skipped"))
        if args.mode in ("fp16", "autocast_fp16"):
            print(f"{name}: oracle: {skipped} of {len(expected_lines)} steps skipped; loss "
                  f"scales {oracle._scale_sequence(expected_lines)}")
        if skipped < args.min_skipped:
            failures.append(f"the oracle skipped {skipped} steps, fewer than --min-skipped "
                            f"{args.min_skipped}: the run no longer exercises fp16 overflow")
        first = None
        for stage in args.stages:
            cell = f"{name} stage {stage}"
            workdir = os.path.join(root, f"s{stage}")
            os.makedirs(workdir, exist_ok=True)
            config = config_for(args.mode, stage, args.gas, args.config_json)
            try:
                lines, state = run_stage(args, workdir, config, model, data)
            except train_check.CheckFailed as e:
                failures.append(f"{cell}: {e}")
                print(f"{cell}: FAILED to run", file=sys.stderr)
                continue
            ok_l, msg_l = oracle.compare_train_lines(lines, expected_lines, tol["loss_rtol"], 0.0,
                                                     tol["norm_rtol"], "ds-run", "oracle")
            ok_p, msg_p = oracle.compare_params(state, oracle.expected_for(state, expected_state, masters),
                                                tol["param_rtol"], tol["param_atol"],
                                                "ds-run", "oracle")
            print(f"{cell}: losses {'OK' if ok_l else 'MISMATCH'} ({msg_l}); "
                  f"params {'OK' if ok_p else 'MISMATCH'} ({msg_p})")
            if not ok_l:
                failures.append(f"{cell}: loss lines differ from the oracle: {msg_l}")
            if not ok_p:
                failures.append(f"{cell}: parameters differ from the oracle: {msg_p}")
            if args.offload and stage >= 1:
                offdir = workdir + "-offload"
                os.makedirs(offdir, exist_ok=True)
                try:
                    off_lines, off_state = run_stage(args, offdir, merge(config, OFFLOAD),
                                                     model, data)
                except train_check.CheckFailed as e:
                    failures.append(f"{cell} offload: {e}")
                    print(f"{cell} offload: FAILED to run", file=sys.stderr)
                    continue
                ok_o, msg_o = oracle.compare_train_lines(off_lines, expected_lines,
                                                         tol["loss_rtol"], 0.0, tol["norm_rtol"],
                                                         "ds-run offload", "oracle")
                ok_q, msg_q = oracle.compare_params(
                    off_state, oracle.expected_for(off_state, expected_state, masters),
                    tol["param_rtol"], tol["param_atol"], "ds-run offload", "oracle")
                diff = same_bitwise(off_lines, off_state, lines, state)
                print(f"{cell} offload: vs oracle {'OK' if ok_o and ok_q else 'MISMATCH'}; "
                      f"vs no offload {'bitwise equal' if not diff else 'DIFFERENT: ' + diff}")
                if not ok_o or not ok_q:
                    failures.append(f"{cell} offload: differs from the oracle: {msg_o}; {msg_q}")
                if diff:
                    failures.append(f"{cell} offload: not bitwise the run without offload: "
                                    f"{diff}")
            if first is None:
                first = state
            else:
                ok_s, msg_s = oracle.compare_params(state, first, tol["param_rtol"],
                                                    tol["param_atol"], f"stage {stage}",
                                                    f"stage {args.stages[0]}")
                print(f"{cell}: vs stage {args.stages[0]}: {'OK' if ok_s else 'MISMATCH'} ({msg_s})")
                if not ok_s:
                    failures.append(f"{cell}: differs from stage {args.stages[0]}: {msg_s}")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(f"{name}: tolerances loss rtol {tol['loss_rtol']:g}, grad_norm rtol {tol['norm_rtol']:g}, "
          f"params rtol {tol['param_rtol']:g} atol {tol['param_atol']:g}; lr, loss_scale, "
          "skipped exact")
    if failures:
        print(f"{name} FAILED:\n  " + "\n  ".join(failures), file=sys.stderr)
        return 1
    print(f"{name}: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
