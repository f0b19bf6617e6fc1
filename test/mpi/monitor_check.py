#!/usr/bin/env python3
"""ds-run's monitoring on 2 ranks: progress lines, wall_clock_breakdown, csv_monitor, tensorboard
and --trace (docs/config.md "Monitoring", docs/tracing.md).

  monitor_check.py --bin BUILD/bin --models DIR [--launcher 'mpirun -n {W}'] [--model transformer]

Compiles DIR/MODEL.pt at ZeRO stage 3 with GAS 2 for 2 ranks (small buckets: several collectives
in flight), steps_per_print 2, wall_clock_breakdown, csv_monitor and tensorboard on, and runs 3
steps with --trace. Checks:
  - stdout holds only the JSON loss lines; stderr has rank 0's progress lines at steps 2 and 3
    (samples/s) each followed by DeepSpeed's "time (ms) | fwd: ..." line, none from rank 1;
  - csv_monitor: OUT/job/Train_Samples_train_loss.csv and _lr.csv (read with the csv module): rows
    (step = samples seen, value) equal to the loss lines; the timer files have one row per step;
  - tensorboard: an events file under OUT/tb-job read with tensorboard's EventAccumulator holds
    the same scalars (skipped, saying so, when the tensorboard package is absent);
  - the trace of each rank (json module): valid trace-event JSON; pid is the rank; thread_name
    metadata for "ops" (tid 0) and the collectives tracks; on tid 0 the slices nest (steps >
    parts > ops); step 2 holds per micro-step a forward and a backward and then one step part, its
    ops named by the plan's module paths (every module-path op of the forward), its collectives
    on tracks tid >= 1 each ending with a `wait`, and an optimizer_step inside the step part;
    rank 1 writes no monitor files (its rows would double the CSV files, its event file would be a
    second one).
Exits 1 naming what failed.
"""

import argparse
import csv
import glob
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

STEPS = 3
GAS = 2
WORLD = 2


def default_launcher():
    root = " --allow-run-as-root" if hasattr(os, "geteuid") and os.geteuid() == 0 else ""
    return "mpirun" + root + " --oversubscribe -n {W}"


def fail(message):
    sys.exit("monitor_check: FAIL: " + message)


def run(cmd, env=None):
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        fail("command failed: %s\n%s\n%s" % (" ".join(cmd), proc.stdout, proc.stderr))
    return proc


def walk_ops(ops):
    for op in ops:
        yield op
        for side in ("then", "else"):
            branch = op.get(side)
            if isinstance(branch, dict):
                yield from walk_ops(branch.get("body", []))


def check_progress(stdout, stderr, losses):
    for line in stdout.splitlines():
        try:
            json.loads(line)
        except ValueError:
            fail("stdout holds a line that is not JSON: %r" % line)
    progress = [l for l in stderr.splitlines() if l.startswith("ds-run: step=")]
    timers = [l for l in stderr.splitlines() if l.startswith("ds-run: time (ms) | fwd: ")]
    steps = [int(l.split("step=")[1].split("/")[0]) for l in progress]
    if steps != [2, 3]:
        fail("progress lines at steps %s, expected [2, 3] (steps_per_print 2, and the last):\n%s"
             % (steps, stderr))
    for line in progress:
        if "CurrSamplesPerSec=" not in line or "RunningAvgSamplesPerSec=" not in line:
            fail("progress line without samples/s: " + line)
    if len(timers) != 2:
        fail("expected 2 wall_clock_breakdown lines, got:\n" + stderr)
    for name in ("fwd", "bwd", "bwd_inner", "bwd_allreduce", "step", "optimizer", "comm"):
        if " | %s: " % name not in timers[0]:
            fail("the timer line lacks %s: %s" % (name, timers[0]))
    loss_at_2 = "loss=%r" % losses[1]
    if loss_at_2 not in progress[0]:
        fail("the step 2 progress line lacks %s: %s" % (loss_at_2, progress[0]))


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.reader(f))


def check_csv(job_dir, lines, batch):
    for name, key in (("train_loss", "loss"), ("lr", "lr")):
        path = os.path.join(job_dir, "Train_Samples_%s.csv" % name)
        if not os.path.exists(path):
            fail("no %s (files: %s)" % (path, os.listdir(job_dir)))
        rows = read_csv(path)
        if rows[0] != ["step", name]:
            fail("%s: header %s" % (path, rows[0]))
        expected = [[str(l["step"] * batch), l[key]] for l in lines]
        got = [[r[0], float(r[1])] for r in rows[1:]]
        if got != expected:
            fail("%s: rows %s, expected %s" % (path, got, expected))
    for timer in ("forward", "backward", "backward_inner", "backward_allreduce", "step"):
        path = os.path.join(job_dir, "Train_Samples_elapsed_time_ms_%s.csv" % timer)
        rows = read_csv(path)
        if len(rows) != 1 + STEPS or any(float(r[1]) < 0 for r in rows[1:]):
            fail("%s: %s" % (path, rows))


def check_tensorboard(tb_dir, lines, batch):
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError:
        print("monitor_check: tensorboard package absent (scripts/setup.sh --dev installs it): "
              "event files not read back")
        return
    files = glob.glob(os.path.join(tb_dir, "events.out.tfevents.*"))
    if len(files) != 1:
        fail("expected one event file in %s, got %s" % (tb_dir, files))
    acc = EventAccumulator(tb_dir)
    acc.Reload()
    tags = acc.Tags()["scalars"]
    for tag, key in (("Train/Samples/train_loss", "loss"), ("Train/Samples/lr", "lr")):
        if tag not in tags:
            fail("tensorboard: no %s in %s" % (tag, tags))
        got = [(e.step, e.value) for e in acc.Scalars(tag)]
        expected = [(l["step"] * batch, l[key]) for l in lines]
        if len(got) != len(expected) or any(
                s != es or abs(v - ev) > 1e-6 * max(1.0, abs(ev))
                for (s, v), (es, ev) in zip(got, expected)):
            fail("tensorboard %s: %s, expected %s" % (tag, got, expected))
    print("monitor_check: tensorboard events read back: %d scalar tags" % len(tags))


def nested(slices):
    """Whether [ts, ts + dur) intervals form a laminar family."""
    stack = []
    for s in sorted(slices, key=lambda s: (s["ts"], -s["dur"])):
        while stack and s["ts"] >= stack[-1]["ts"] + stack[-1]["dur"] - 1e-3:
            stack.pop()
        if stack and s["ts"] + s["dur"] > stack[-1]["ts"] + stack[-1]["dur"] + 1e-3:
            return "%s overlaps %s" % (s["name"], stack[-1]["name"])
        stack.append(s)
    return None


def inside(inner, outer):
    return (inner["ts"] >= outer["ts"] - 1e-3 and
            inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"] + 1e-3)


def check_trace(path, rank, plan):
    with open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    for e in events:
        if e["ph"] not in ("X", "M"):
            fail("%s: phase %s" % (path, e["ph"]))
        if e["pid"] != rank:
            fail("%s: pid %s, expected the rank %d" % (path, e["pid"], rank))
        if e["ph"] == "X" and (e["dur"] < 0 or not isinstance(e["tid"], int)):
            fail("%s: bad slice %s" % (path, e))
    names = {e["tid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "thread_name"}
    if names.get(0) != "ops" or not any(n.startswith("collectives") for n in names.values()):
        fail("%s: thread names %s" % (path, names))
    slices = [e for e in events if e["ph"] == "X"]
    main = [e for e in slices if e["tid"] == 0]
    problem = nested(main)
    if problem:
        fail("%s: tid 0 does not nest: %s" % (path, problem))
    steps = {e["name"]: e for e in main if e["cat"] == "step"}
    if sorted(steps) != ["step %d" % s for s in range(1, STEPS + 1)]:
        fail("%s: step slices %s" % (path, sorted(steps)))
    step = steps["step 2"]
    parts = sorted((e for e in main if e["cat"] == "part" and inside(e, step)),
                   key=lambda e: e["ts"])
    expected_parts = ["forward", "backward"] * GAS + ["step"]
    if [p["name"] for p in parts] != expected_parts:
        fail("%s: step 2's parts %s, expected %s" % (path, [p["name"] for p in parts],
                                                     expected_parts))
    train = plan["programs"]["train"]
    forward_modules = {op["module"] for op in walk_ops(train["body"][:train["backward_start"]])
                       if op.get("module")}
    forward = parts[0]
    ops = [e for e in main if e["cat"] not in ("step", "part") and inside(e, forward)]
    traced_modules = {e["name"] for e in ops if e["args"].get("module")}
    if traced_modules != forward_modules:
        fail("%s: forward ops named %s, the plan's modules are %s"
             % (path, sorted(traced_modules), sorted(forward_modules)))
    for e in ops:
        if e["args"].get("module") and e["name"] != e["args"]["module"]:
            fail("%s: op %s not named by its module path" % (path, e))
    collectives = [e for e in slices if e["cat"] == "collective" and inside(e, step)]
    if not collectives:
        fail("%s: no collectives in step 2" % path)
    waits = [e for e in main if e["cat"] == "wait" and inside(e, step)]
    for c in collectives:
        if c["tid"] < 1 or not names.get(c["tid"], "").startswith("collectives"):
            fail("%s: collective %s not on a collectives track" % (path, c))
        end = c["ts"] + c["dur"]
        if not any(abs(w["ts"] + w["dur"] - end) < 1e3 and w["ts"] + w["dur"] <= end + 1e-3
                   for w in waits):
            fail("%s: collective %s does not end with a wait" % (path, c))
    issued = [e for e in main if e["cat"] in ("all_gather", "reduce_scatter", "all_reduce")
              and inside(e, step)]
    if len(issued) != len(collectives):
        fail("%s: %d collective ops, %d collective slices" % (path, len(issued), len(collectives)))
    optimizer = [e for e in main if e["cat"] == "optimizer_step" and inside(e, parts[-1])]
    if not optimizer:
        fail("%s: no optimizer_step in step 2's step part" % path)
    return len(ops), len(collectives)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", required=True)
    parser.add_argument("--models", required=True)
    parser.add_argument("--model", default="transformer")
    parser.add_argument("--launcher", default=default_launcher())
    parser.add_argument("--keep", help="keep the files in this folder")
    args = parser.parse_args()

    tmp = args.keep or tempfile.mkdtemp(prefix="ds-monitor-")
    os.makedirs(tmp, exist_ok=True)
    out = os.path.join(tmp, "out")
    # The CSV files are appended to, as DeepSpeed's are: start from none.
    shutil.rmtree(out, ignore_errors=True)
    config = {
        "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": GAS,
        "steps_per_print": 2, "wall_clock_breakdown": True,
        "zero_optimization": {"stage": 3, "reduce_bucket_size": 3000,
                              "allgather_bucket_size": 3000,
                              "stage3_param_persistence_threshold": 0},
        "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
        "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 4}},
        "csv_monitor": {"enabled": True, "output_path": out, "job_name": "job"},
        "tensorboard": {"enabled": True, "output_path": out + "/", "job_name": "tb-job"},
        "wandb": {"enabled": False},
    }
    config_path = os.path.join(tmp, "ds_config.json")
    with open(config_path, "w") as f:
        json.dump(config, f)
    model = os.path.join(args.models, args.model + ".pt")
    data = os.path.join(args.models, args.model + ".data.pt")
    plan_path = os.path.join(tmp, "plan.json")
    run([os.path.join(args.bin, "ds-compile"), model, "--config", config_path,
         "--example-inputs", data, "--world-size", str(WORLD), "-o", plan_path])
    trace = os.path.join(tmp, "trace.json")
    cmd = shlex.split(args.launcher.replace("{W}", str(WORLD))) + [
        os.path.join(args.bin, "ds-run"), plan_path, "--data", data, "--steps", str(STEPS),
        "--trace", trace]
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.pop("DS_TEST_FAULT", None)
    proc = run(cmd, env)
    lines = [json.loads(l) for l in proc.stdout.splitlines()]
    if [l["step"] for l in lines] != list(range(1, STEPS + 1)):
        fail("loss lines %s" % lines)
    check_progress(proc.stdout, proc.stderr, [l["loss"] for l in lines])

    with open(plan_path) as f:
        plan = json.load(f)
    batch = plan["engines"][0]["batch"]["train_batch_size"]
    check_csv(os.path.join(out, "job"), lines, batch)
    check_tensorboard(os.path.join(out, "tb-job"), lines, batch)
    for rank in range(WORLD):
        path = os.path.join(tmp, "trace.rank%d.json" % rank)
        if not os.path.exists(path):
            fail("no %s" % path)
        ops, collectives = check_trace(path, rank, plan)
    print("monitor_check: OK (%d ops in a forward, %d collectives in a step per rank)"
          % (ops, collectives))


if __name__ == "__main__":
    main()
