#!/usr/bin/env python3
"""Predicted against measured memory and communication reports (docs/runtime.md, "Reports").

  report_check.py --bin BUILD/bin --models DIR [--launcher 'mpirun -n {W}'] [--world-size 1 2]
                  [--stages 0 1 2 3 3r] [--gas 1 2] [--bucket N] [--model mlp]

For each stage s, GAS g and W: compiles DIR/mlp.pt (or DIR/MODEL.pt) with AdamW, `--world-size W --report
predicted.json`, runs 2 steps with `ds-run --report measured.json` (under the launcher for W > 1)
and checks, with Psi the trainable elements and Psi' the engine's flat buffer
(plan engines[0].partition.numel: Psi plus the padding that makes every bucket a multiple of W,
less than W elements per bucket), all float32, ZeRO's formulas for fp32 Adam:

  - measured param/grad/optimizer_state bytes == predicted == stage 0: 4 Psi / 4 Psi' / 8 Psi
    (16 Psi), stage 1: 4 Psi' / 4 Psi' / 8 Psi' / W (8 Psi + 8 Psi / W), stage 2:
    4 Psi' / 4 Psi' / W / 8 Psi' / W (4 Psi + 12 Psi / W) on every rank;
  - comm_volume_elements measured == predicted; 0 at W = 1; at W > 1 stage 0 all-reduces 2 Psi',
    stage 1 reduce-scatters Psi' and all-gathers Psi', stage 2 reduce-scatters g Psi' and
    all-gathers Psi' (2 Psi at GAS 1 for every stage; (g + 1) Psi for stage 2), plus, for the
    sharded stages, the clipping norm's scalar all-reduce (2 elements);
  - stage 3 (stage3_param_persistence_threshold 0: every parameter sharded): 4 Psi' / W each
    (16 Psi / W); per micro-step the forward all-gathers Psi' and the backward reduce-scatters
    Psi': 2 Psi per step at GAS 1 with the default distance, which keeps the parameters gathered
    across the forward/backward turn. With `3r` (stage3_max_reuse_distance 0) the backward
    gathers again, but only the buckets it reads: DeepSpeed's 3 Psi counts every parameter, while
    the first layer's weight and bias are never read by mlp's backward (its input needs no
    gradient), so the backward gathers between 0 and Psi' (checked: strictly between, and
    measured == predicted);
  - measured peak_bytes <= predicted (static shapes: equal is expected; both are printed);
  - measured activation_peak_bytes == predicted, or <= predicted when the prediction marks it
    as resting on bounds of dynamic tensors (activation_peak_is_bound; --model moe), and a
    prediction that leaves unbounded dynamic tensors out (unbounded_values > 0) fails.

Prints one summary line per world size; exits 1 on failure.
"""

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile

STEPS = 2


def default_launcher():
    root = " --allow-run-as-root" if hasattr(os, "geteuid") and os.geteuid() == 0 else ""
    return "mpirun" + root + " --oversubscribe -n {W}"


def run(cmd, env=None):
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.exit("command failed: %s\n%s\n%s" % (" ".join(cmd), proc.stdout, proc.stderr))
    return proc


def check_world(args, tmp, world, spec, gas):
    config = os.path.join(tmp, "ds_config.json")
    stage, regather = int(spec[0]), "r" in spec
    zero = {"stage": stage}
    if stage == 3:
        zero["stage3_param_persistence_threshold"] = 0
    if regather:
        zero["stage3_max_reuse_distance"] = 0
    if args.bucket:
        zero["reduce_bucket_size"] = args.bucket
        zero["allgather_bucket_size"] = args.bucket
    with open(config, "w") as f:
        json.dump({"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": gas,
                   "zero_optimization": zero,
                   "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}, f)
    tag = "s%s-g%d-w%d" % (spec, gas, world)
    plan_path = os.path.join(tmp, "%s-%s.plan" % (args.model, tag))
    predicted_path = os.path.join(tmp, "predicted-%s.json" % tag)
    measured_path = os.path.join(tmp, "measured-%s.json" % tag)
    model = os.path.join(args.models, args.model + ".pt")
    data = os.path.join(args.models, args.model + ".data.pt")
    run([os.path.join(args.bin, "ds-compile"), model,
         "--config", config, "--example-inputs", data,
         "--world-size", str(world), "-o", plan_path, "--report", predicted_path])
    cmd = [os.path.join(args.bin, "ds-run"), plan_path, "--data", data, "--steps", str(STEPS),
           "--report", measured_path]
    if world > 1:
        cmd = shlex.split(args.launcher.replace("{W}", str(world))) + cmd
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    run(cmd, env)

    with open(plan_path) as f:
        plan = json.load(f)
    psi = 0
    for state in plan["state"]:
        if state.get("kind", "param") == "param":
            assert state["dtype"] == "float32", state
            n = 1
            for d in state["shape"]:
                n *= d
            psi += n
    partition = plan["engines"][0]["partition"]
    padded = partition["numel"]
    buckets = len(partition["buckets"])
    with open(predicted_path) as f:
        predicted = json.load(f)
    with open(measured_path) as f:
        measured = json.load(f)

    failures = []

    def expect(what, got, want):
        if got != want:
            failures.append("%s: got %s, expected %s" % (what, got, want))

    expect("predicted ranks", len(predicted["ranks"]), world)
    expect("measured ranks", len(measured["ranks"]), world)
    expect("measured ranks' order", [r["rank"] for r in measured["ranks"]], list(range(world)))
    if not psi <= padded < psi + buckets * world:
        failures.append("flat buffer of %d elements for Psi = %d in %d buckets: padding is at "
                        "most W - 1 per bucket" % (padded, psi, buckets))
    shard = padded // world
    want = {
        0: {"param_bytes": 4 * psi, "grad_bytes": 4 * padded, "optimizer_state_bytes": 8 * padded},
        1: {"param_bytes": 4 * padded, "grad_bytes": 4 * padded,
            "optimizer_state_bytes": 8 * shard},
        2: {"param_bytes": 4 * padded, "grad_bytes": 4 * shard, "optimizer_state_bytes": 8 * shard},
        3: {"param_bytes": 4 * shard, "grad_bytes": 4 * shard, "optimizer_state_bytes": 8 * shard},
    }[stage]
    if world == 1:
        comm = {"all_reduce": 0, "reduce_scatter": 0, "all_gather": 0}
    else:
        comm = {0: {"all_reduce": 2 * padded, "reduce_scatter": 0, "all_gather": 0},
                1: {"all_reduce": 2, "reduce_scatter": padded, "all_gather": padded},
                2: {"all_reduce": 2, "reduce_scatter": gas * padded, "all_gather": padded},
                3: {"all_reduce": 2, "reduce_scatter": gas * padded, "all_gather": gas * padded},
                }[stage]
        if regather:
            # Checked below as a range: the forward's Psi' plus a backward regather of the
            # buckets the backward reads.
            del comm["all_gather"]
    total = sum(comm.values()) if not regather or world == 1 else None
    for p, m in zip(predicted["ranks"], measured["ranks"]):
        r = m["rank"]
        for key, value in want.items():
            expect("rank %d predicted %s" % (r, key), p[key], value)
            expect("rank %d measured %s" % (r, key), m[key], value)
        pc, mc = p["comm_volume_elements"], m["comm_volume_elements"]
        if total is not None:
            expect("rank %d predicted comm total" % r, pc["total"], total)
            expect("rank %d measured comm total" % r, mc["total"], total)
        expect("rank %d measured comm == predicted" % r, mc, pc)
        for kind, value in comm.items():
            expect("rank %d measured %s" % (r, kind), mc[kind], value)
        if regather and world > 1 and not gas * padded < mc["all_gather"] < 2 * gas * padded:
            failures.append("rank %d: stage 3 with max_reuse_distance 0 all-gathers %d elements "
                            "per step, expected strictly between g Psi' = %d and 2 g Psi' = %d"
                            % (r, mc["all_gather"], gas * padded, 2 * gas * padded))
        if m["peak_bytes"] > p["peak_bytes"]:
            failures.append("rank %d: measured peak_bytes %d > predicted %d"
                            % (r, m["peak_bytes"], p["peak_bytes"]))
        # Dynamic shapes: the prediction counts them at their bound.
        if p.get("unbounded_values", 0):
            failures.append("rank %d: the prediction counts %d dynamic tensors without a bound "
                            "as 0" % (r, p["unbounded_values"]))
        if p.get("activation_peak_is_bound"):
            if m["activation_peak_bytes"] > p["activation_peak_bytes"]:
                failures.append("rank %d: measured activation_peak_bytes %d > the predicted "
                                "bound %d" % (r, m["activation_peak_bytes"],
                                              p["activation_peak_bytes"]))
        else:
            expect("rank %d measured activation_peak_bytes" % r, m["activation_peak_bytes"],
                   p["activation_peak_bytes"])
    m0, p0 = measured["ranks"][0], predicted["ranks"][0]
    state = m0["param_bytes"] + m0["grad_bytes"] + m0["optimizer_state_bytes"]
    formula = {0: "16 Psi", 1: "8 Psi + 8 Psi/W", 2: "4 Psi + 12 Psi/W", 3: "16 Psi/W"}[stage]
    formula_bytes = {0: 16 * psi, 1: 8 * psi + 8 * psi / world,
                     2: 4 * psi + 12 * psi / world, 3: 16 * psi / world}[stage]
    traffic = {0: 2, 1: 2, 2: gas + 1, 3: (3 if regather else 2) * gas}[stage]
    measured_psi = m0["comm_volume_elements"]["total"] / psi
    print("report stage %s GAS %d W=%d: Psi=%d Psi'=%d param=%d grad=%d optimizer=%d state=%d "
          "(%s = %d) peak measured=%d predicted=%d comm total measured=%d predicted=%d "
          "(%.2f Psi; DeepSpeed's count %s) load broadcast=%d: %s"
          % (spec, gas, world, psi, padded, m0["param_bytes"], m0["grad_bytes"],
             m0["optimizer_state_bytes"], state, formula, formula_bytes, m0["peak_bytes"],
             p0["peak_bytes"], m0["comm_volume_elements"]["total"],
             p0["comm_volume_elements"]["total"],
             measured_psi, "%d Psi" % traffic, measured.get("load_broadcast_elements", 0),
             "FAIL" if failures else "ok"))
    for failure in failures:
        print("  " + failure)
    return not failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", required=True)
    parser.add_argument("--models", required=True)
    parser.add_argument("--launcher", default=default_launcher())
    parser.add_argument("--world-size", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--stages", nargs="+", default=["0"],
                        help="0, 1, 2, 3, or 3r (stage 3 with stage3_max_reuse_distance 0)")
    parser.add_argument("--gas", type=int, nargs="+", default=[1])
    parser.add_argument("--model", default="mlp",
                        help="the test model (MODEL.pt, MODEL.data.pt in --models)")
    parser.add_argument("--bucket", type=int, default=0,
                        help="reduce_bucket_size and allgather_bucket_size (elements)")
    args = parser.parse_args()
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for stage in args.stages:
            for gas in args.gas:
                for world in args.world_size:
                    ok = check_world(args, tmp, world, stage, gas) and ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
