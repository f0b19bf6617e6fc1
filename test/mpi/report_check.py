#!/usr/bin/python3
"""Predicted against measured memory and communication reports (docs/runtime.md, "Reports").

  report_check.py --bin BUILD/bin --models DIR [--launcher 'mpirun -n {W}'] [--world-size 1 2]

For each W: compiles DIR/mlp.pt with AdamW, ZeRO stage 0, GAS 1, `--world-size W --report
predicted.json`, runs 2 steps with `ds-run --report measured.json` (under the launcher for W > 1)
and checks, with Psi the plan's parameter elements (all float32):

  - measured param/grad/optimizer_state bytes == predicted == 4 Psi / 4 Psi / 8 Psi (fp32 Adam:
    16 Psi in all) on every rank;
  - comm_volume_elements.total == 0 at W = 1 and == 2 Psi (the all-reduce) at W > 1, measured ==
    predicted;
  - measured peak_bytes <= predicted (static shapes: equal is expected; both are printed).

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


def check_world(args, tmp, world):
    config = os.path.join(tmp, "ds_config.json")
    with open(config, "w") as f:
        json.dump({"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": 1,
                   "zero_optimization": {"stage": 0},
                   "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}, f)
    plan_path = os.path.join(tmp, "mlp-w%d.plan" % world)
    predicted_path = os.path.join(tmp, "predicted-w%d.json" % world)
    measured_path = os.path.join(tmp, "measured-w%d.json" % world)
    run([os.path.join(args.bin, "ds-compile"), os.path.join(args.models, "mlp.pt"),
         "--config", config, "--example-inputs", os.path.join(args.models, "mlp.data.pt"),
         "--world-size", str(world), "-o", plan_path, "--report", predicted_path])
    cmd = [os.path.join(args.bin, "ds-run"), plan_path, "--data",
           os.path.join(args.models, "mlp.data.pt"), "--steps", str(STEPS),
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
    want = {"param_bytes": 4 * psi, "grad_bytes": 4 * psi, "optimizer_state_bytes": 8 * psi}
    total = 0 if world == 1 else 2 * psi
    for p, m in zip(predicted["ranks"], measured["ranks"]):
        r = m["rank"]
        for key, value in want.items():
            expect("rank %d predicted %s" % (r, key), p[key], value)
            expect("rank %d measured %s" % (r, key), m[key], value)
        pc, mc = p["comm_volume_elements"], m["comm_volume_elements"]
        expect("rank %d predicted comm total" % r, pc["total"], total)
        expect("rank %d measured comm total" % r, mc["total"], total)
        expect("rank %d measured comm == predicted" % r, mc, pc)
        expect("rank %d measured all_reduce" % r, mc["all_reduce"], total)
        if m["peak_bytes"] > p["peak_bytes"]:
            failures.append("rank %d: measured peak_bytes %d > predicted %d"
                            % (r, m["peak_bytes"], p["peak_bytes"]))
    m0, p0 = measured["ranks"][0], predicted["ranks"][0]
    print("report W=%d: Psi=%d param=%d grad=%d optimizer=%d (16 Psi = %d) peak measured=%d "
          "predicted=%d comm total measured=%d predicted=%d (2 Psi = %d) load broadcast=%d: %s"
          % (world, psi, m0["param_bytes"], m0["grad_bytes"], m0["optimizer_state_bytes"],
             16 * psi, m0["peak_bytes"], p0["peak_bytes"],
             m0["comm_volume_elements"]["total"], p0["comm_volume_elements"]["total"], 2 * psi,
             measured.get("load_broadcast_elements", 0), "FAIL" if failures else "ok"))
    for failure in failures:
        print("  " + failure)
    return not failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", required=True)
    parser.add_argument("--models", required=True)
    parser.add_argument("--launcher", default=default_launcher())
    parser.add_argument("--world-size", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for world in args.world_size:
            ok = check_world(args, tmp, world) and ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
