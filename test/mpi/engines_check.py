#!/usr/bin/env python3
"""Several engines in one training step, against the LibTorch oracle.

  engines_check.py --bin BUILD/bin --models DIR --scenario NAME [--world-size 1 2] [--gas 1 2]
                   [--steps 3] [--launcher 'mpirun -n {W}'] [--keep DIR]

Scenarios (each a model of test/models and a {"engines": {...}} config, every engine with its own
ZeRO stage, optimizer and buckets small enough that there are several):
  shared3      three_engines: e0 stage 1 AdamW, e1 stage 2 SGD momentum, e2 stage 3 Adam on
               the shared loss l0 / 1 + l1 / 2 + l2 / 3
  distill      two_models: student stage 2 AdamW, teacher stage 3 frozen (no optimizer); loss
               with a KL term against the detached teacher
  through      through_frozen: student stage 2 AdamW, critic stage 3 frozen; the student's output
               flows through the critic, so the backward gathers the critic again
  independent  two_losses: a stage 2 AdamW, b stage 3 SGD; the root returns (loss_a, loss_b)
  paths        two_paths: enc stage 2 AdamW, head stage 3 AdamW; enc's gradient reaches it by
               three paths, one of them a second call of enc (the GAS division must apply once
               to each)

For each W and GAS: ds-compile --world-size W --report, mpirun -n W ds-run --report, and checks
  - losses (and each engine's lr, grad_norm, and loss for tuple outputs) per step and every final
    parameter against oracle.train (one torch.optim per trainable engine): losses 1e-5 relative,
    parameters 1e-4 + 1e-4 * |oracle| (docs/oracle.md);
  - every parameter of a frozen engine bitwise equal to the TorchScript archive's, and a frozen
    ZeRO-3 engine sharded (each of W > 1 ranks holds about 1/W of its parameter bytes);
  - the measured report's "engines" equal the predicted ones (bytes and traffic per engine), and
    sum to the rank's totals.
Exits 1 naming the failing cell, 2 on bad arguments.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "oracle"))
import oracle  # noqa: E402
import train_check  # noqa: E402


def engine(stage, optimizer=None, bucket=200, overlap=True):
    zero = {"stage": stage, "reduce_bucket_size": bucket, "allgather_bucket_size": bucket,
            "overlap_comm": overlap}
    if stage == 3:
        zero["stage3_param_persistence_threshold"] = 0
    cfg = {"train_micro_batch_size_per_gpu": "auto", "zero_optimization": zero}
    if optimizer:
        cfg["optimizer"] = optimizer
    return cfg


ADAMW = {"type": "AdamW", "params": {"lr": 0.002, "weight_decay": 0.01}}
ADAM = {"type": "Adam", "params": {"lr": 0.003}}
SGD = {"type": "SGD", "params": {"lr": 0.05, "momentum": 0.9}}

SCENARIOS = {
    "shared3": ("three_engines", {"e0": engine(1, ADAMW), "e1": engine(2, SGD),
                                  "e2": engine(3, ADAM)}),
    "distill": ("two_models", {"student": engine(2, ADAMW), "teacher": engine(3)}),
    "through": ("through_frozen", {"student": engine(2, ADAMW), "critic": engine(3)}),
    "independent": ("two_losses", {"a": engine(2, ADAMW), "b": engine(3, SGD)}),
    "paths": ("two_paths", {"enc": engine(2, ADAMW), "head": engine(3, ADAMW, bucket=8)}),
}


def config_for(engines, gas):
    out = {}
    for key, cfg in engines.items():
        cfg = json.loads(json.dumps(cfg))
        cfg["gradient_accumulation_steps"] = gas
        out[key] = cfg
    return {"engines": out}


def run_cell(args, workdir, model, config, world_size):
    """Compiles and trains one cell; returns (loss lines, final state, predicted, measured)."""
    model_pt = os.path.join(args.models, model + ".pt")
    data = os.path.join(args.models, model + ".data.pt")
    config_path = os.path.join(workdir, "ds_config.json")
    with open(config_path, "w") as f:
        json.dump(config, f, indent=2)
    plan = os.path.join(workdir, "model.plan")
    predicted = os.path.join(workdir, "predicted.json")
    train_check.run([os.path.join(args.bin, "ds-compile"), model_pt, "--config", config_path,
                     "--example-inputs", data, "--world-size", str(world_size), "-o", plan,
                     "--report", predicted], "ds-compile")
    launcher = args.launcher
    if launcher is None:
        launcher = train_check.default_launcher(world_size)
    prefix = launcher.replace("{W}", str(world_size)).split() if world_size > 1 else []
    lines = os.path.join(workdir, "ours.jsonl")
    params = os.path.join(workdir, "ours.safetensors")
    measured = os.path.join(workdir, "measured.json")
    train_check.run(prefix + [os.path.join(args.bin, "ds-run"), plan, "--data", data,
                              "--steps", str(args.steps), "--losses", lines,
                              "--save-params", params, "--report", measured], "ds-run")
    with open(predicted) as f:
        pred = json.load(f)
    with open(measured) as f:
        meas = json.load(f)
    return oracle.read_jsonl(lines), oracle.load_params(params), pred, meas


def check_engine_losses(ours, expected, keys):
    """Tuple outputs: each engine's "loss" is its element of "losses" (the oracle's)."""
    for mine, theirs in zip(ours, expected):
        if "losses" not in theirs:
            return True, "no tuple output"
        for key, value in zip(keys, theirs["losses"]):
            got = mine.get("engines", {}).get(key, {}).get("loss")
            if got is None or abs(got - value) > 1e-5 * max(1.0, abs(value)):
                return False, f"step {theirs['step']}: engines['{key}'].loss {got} != {value}"
    return True, "per-engine losses match"


def check_reports(pred, meas):
    """Per engine, measured == predicted; per rank, the engines sum to the totals."""
    for p_rank, m_rank in zip(pred["ranks"], meas["ranks"]):
        r = m_rank["rank"]
        if m_rank["engines"] != p_rank["engines"]:
            return False, (f"rank {r}: measured engines {json.dumps(m_rank['engines'])} != "
                           f"predicted {json.dumps(p_rank['engines'])}")
        for field in ("param_bytes", "grad_bytes", "optimizer_state_bytes"):
            total = sum(e[field] for e in m_rank["engines"].values())
            if total != m_rank[field]:
                return False, f"rank {r}: engines' {field} sum to {total}, not {m_rank[field]}"
        comm = sum(e["comm_volume_elements"]["total"] for e in m_rank["engines"].values())
        if comm != m_rank["comm_volume_elements"]["total"]:
            return False, (f"rank {r}: engines' traffic sums to {comm}, not "
                           f"{m_rank['comm_volume_elements']['total']}")
    return True, "per-engine bytes and traffic: measured == predicted"


def main(argv=None):
    p = argparse.ArgumentParser(prog="engines_check.py", description=__doc__.splitlines()[0])
    p.add_argument("--bin", required=True)
    p.add_argument("--models", required=True)
    p.add_argument("--scenario", required=True, choices=sorted(SCENARIOS))
    p.add_argument("--world-size", type=int, nargs="+", default=[1, 2])
    p.add_argument("--gas", type=int, nargs="+", default=[1, 2])
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--launcher", default=None)
    p.add_argument("--keep", default=None, metavar="DIR")
    args = p.parse_args(argv)
    if args.steps < 1 or any(w < 1 for w in args.world_size) or any(g < 1 for g in args.gas):
        p.error("--world-size, --steps and --gas must be positive")

    model, engines = SCENARIOS[args.scenario]
    keys = list(engines)
    frozen = [k for k, cfg in engines.items() if "optimizer" not in cfg]
    initial = dict(torch.jit.load(os.path.join(args.models, model + ".pt")).named_parameters())
    root = args.keep or tempfile.mkdtemp(prefix="engines_check.")
    failures = []
    try:
        for world_size in args.world_size:
            for gas in args.gas:
                cell = f"{args.scenario} ({model}) W={world_size} GAS={gas}"
                workdir = os.path.join(root, f"w{world_size}-g{gas}")
                os.makedirs(workdir, exist_ok=True)
                config = config_for(engines, gas)
                try:
                    expected_lines, expected_state = oracle.train(
                        os.path.join(args.models, model + ".pt"),
                        os.path.join(args.models, model + ".data.pt"), config, args.steps,
                        world_size)
                    lines, state, pred, meas = run_cell(args, workdir, model, config, world_size)
                except (train_check.CheckFailed, oracle.OracleError) as e:
                    failures.append(f"{cell}: {e}")
                    print(f"{cell}: FAILED to run: {e}", file=sys.stderr)
                    continue
                checks = [
                    ("losses", oracle.compare_train_lines(lines, expected_lines, 1e-5, 1e-12,
                                                          1e-4, "ds-run", "oracle")),
                    ("engine losses", check_engine_losses(lines, expected_lines, keys)),
                    ("params", oracle.compare_params(state, expected_state, 1e-4, 1e-4,
                                                     "ds-run", "oracle")),
                    ("reports", check_reports(pred, meas)),
                ]
                for key in frozen:
                    names = [n for n in initial if n.startswith(key + ".")]
                    if engines[key]["zero_optimization"]["stage"] == 3 and world_size > 1:
                        # Sharded: each rank holds about 1/W of the frozen engine.
                        whole = sum(initial[n].numel() * 4 for n in names)
                        held = max(r["engines"][key]["param_bytes"] for r in meas["ranks"])
                        ok = held * world_size <= whole + 4 * world_size * len(names)
                        checks.append((f"frozen {key} sharded",
                                       (ok, f"{held} of {whole} bytes held per rank")))
                    same = names and all(torch.equal(state[n], initial[n].detach())
                                         for n in names)
                    checks.append((f"frozen {key}",
                                   (bool(same), f"{len(names)} parameters bitwise unchanged"
                                    if same else "a parameter changed")))
                for what, (ok, msg) in checks:
                    print(f"{cell}: {what} {'OK' if ok else 'MISMATCH'} ({msg})")
                    if not ok:
                        failures.append(f"{cell}: {what}: {msg}")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    if failures:
        print("engines_check FAILED:\n  " + "\n  ".join(failures), file=sys.stderr)
        return 1
    print(f"engines_check {args.scenario}: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
