#!/usr/bin/env python3
"""A rank that dies or hangs must end a multi-rank ds-run within a bounded time, with a clear error.

  fault_check.py --bin BUILD/bin --models DIR --case CASE [--launcher 'mpirun -n {W}']
                 [--limit 60]

Compiles DIR/mlp.pt for --world-size 2 (AdamW, GAS 1; 8 steps of data), then starts
`LAUNCHER ds-run PLAN --data DIR/mlp.data.pt` with ds-run's test hook DS_TEST_FAULT=MODE:1:2
(rank 1 misbehaves when training step 2 begins; tools/ds-run/World.h) and checks that the job
exits non-zero within --limit seconds (60) and that its output says what happened:

  exit      rank 1 exits with code 3 without finalising MPI (a crash): mpirun ends the job and
            names the rank; exit code non-zero
  kill      rank 1 dies of SIGKILL: mpirun ends the job, naming the signal
  hang      rank 1 stops answering (DS_COMM_TIMEOUT_SECONDS=3): rank 0 reports
            "ds-run: error: rank 0: collective ... in training step 2 timed out after 3 s (a peer
            rank may have died)" and aborts the job (under torchrun, test/launch: the
            store channel's watchdog aborts it)
  mismatch  the W=2 plan launched on 4 ranks: "the plan was compiled for --world-size 2, but 4
            ranks were launched"

Fault points inside a step (DS_TEST_FAULT=MODE:RANK:STEP:POINT[:N]), on mlp compiled for ZeRO
stage 3 (every parameter sharded, buckets of 500 elements: 3 all_gathers per step; AdamW with
WarmupLR; GAS 1), 5 steps on 2 ranks:

  allgather       rank 1 is killed once it has issued the 2nd all_gather of step 3 (kill:1:3:
                  allgather:2; rank 0 is then inside a collective) under DS_COMM_TIMEOUT_SECONDS=5
  optimizer       rank 1 is killed in step 3's optimizer_step, after the gradient reduction
                  (kill:1:3:optimizer)
  allgather-hang  rank 1 hangs there instead (hang:1:3:allgather:2, DS_COMM_TIMEOUT_SECONDS=3):
                  only ds-run's own timeout can end the job; it names the collective
  badpoint        DS_TEST_FAULT=kill:1:3:nowhere on one rank: exit 1 naming the variable and
                  the unknown point

Each of these runs checks that the job exits non-zero within DS_COMM_TIMEOUT_SECONDS + 10 s of
the fault line, and that its output names the dead rank or the collective: mpirun's report
("mpirun noticed that process rank 1 ...", when it ends the job first) or ds-run's timeout
("ds-run: error: rank 0: collective ... timed out after T s"); either is accepted, and the
summary says which one it saw. allgather and optimizer also save a checkpoint after every step
(--save-checkpoint --save-every 1): `latest` must name global_step2 (the last complete one), and
`ds-run --resume` from it to step 5 must print the loss lines of steps 3-5 and write
--save-params bytes identical to those of an uninterrupted 5-step run (as must the faulted run's
lines of steps 1-2).

Prints one summary line per case with the elapsed time; exits 1 on failure.
"""

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time

FAULT_STEP = 2


def default_launcher():
    root = " --allow-run-as-root" if hasattr(os, "geteuid") and os.geteuid() == 0 else ""
    return "mpirun" + root + " --oversubscribe -n {W}"


def compile_plan(args, tmp, config_json=None):
    config = os.path.join(tmp, "ds_config.json")
    with open(config, "w") as f:
        json.dump(config_json or {
            "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": 1,
            "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}, f)
    plan = os.path.join(tmp, "mlp.plan")
    cmd = [os.path.join(args.bin, "ds-compile"), os.path.join(args.models, "mlp.pt"),
           "--config", config, "--example-inputs", os.path.join(args.models, "mlp.data.pt"),
           "--world-size", "2", "-o", plan]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit("ds-compile failed: %s\n%s" % (proc.stdout, proc.stderr))
    return plan


def launch(args, plan, ranks, env_extra):
    prefix = shlex.split(args.launcher.replace("{W}", str(ranks)))
    cmd = prefix + [os.path.join(args.bin, "ds-run"), plan, "--data",
                    os.path.join(args.models, "mlp.data.pt")]
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.update(env_extra)
    start = time.monotonic()
    # A session of its own, so that a job that overstays is killed whole.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=args.limit + 30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return None, time.monotonic() - start, out, err
    return proc.returncode, time.monotonic() - start, out, err


CASES = {
    # case: (ranks, environment, texts the output must contain)
    "exit": (2, {"DS_TEST_FAULT": f"exit:1:{FAULT_STEP}"},
             [f"DS_TEST_FAULT: rank 1: exit at step {FAULT_STEP}", "Exit code:    3"]),
    "kill": (2, {"DS_TEST_FAULT": f"kill:1:{FAULT_STEP}"},
             [f"DS_TEST_FAULT: rank 1: kill at step {FAULT_STEP}", "signal 9"]),
    "hang": (2, {"DS_TEST_FAULT": f"hang:1:{FAULT_STEP}", "DS_COMM_TIMEOUT_SECONDS": "3"},
             ["ds-run: error: rank 0: collective ",
              f"in training step {FAULT_STEP} timed out after 3 s (a peer rank may have died)"]),
    "mismatch": (4, {},
                 ["the plan was compiled for --world-size 2, but 4 ranks were launched"]),
}


# -- fault points inside a step ------------------------------------------------------------------
POINT_STEP = 3
POINT_STEPS = 5
MARGIN = 10.0  # seconds past DS_COMM_TIMEOUT_SECONDS the job may take to end after the fault
ZERO3 = {
    "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": 1,
    "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0,
                          "reduce_bucket_size": 500, "allgather_bucket_size": 500},
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.01}},
    "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 1e-4, "warmup_max_lr": 1e-3,
                                                 "warmup_num_steps": 3}},
}
OURS = "ds-run's own timeout message"
MPIRUN = "mpirun's report of the dead rank"

POINT_CASES = {
    # case: (DS_TEST_FAULT, DS_COMM_TIMEOUT_SECONDS, end-of-job messages accepted, resume?)
    "allgather": (f"kill:1:{POINT_STEP}:allgather:2", 5, (OURS, MPIRUN), True),
    "optimizer": (f"kill:1:{POINT_STEP}:optimizer", 5, (OURS, MPIRUN), True),
    "allgather-hang": (f"hang:1:{POINT_STEP}:allgather:2", 3, (OURS,), False),
}


class Failed(Exception):
    pass


def launch_watched(args, plan, flags, env_extra, ranks=2):
    """Runs LAUNCHER ds-run PLAN --data mlp FLAGS; (exit code or None, elapsed, seconds from the
    DS_TEST_FAULT line to the end or None, stdout, stderr)."""
    prefix = shlex.split(args.launcher.replace("{W}", str(ranks)))
    cmd = prefix + [os.path.join(args.bin, "ds-run"), plan, "--data",
                    os.path.join(args.models, "mlp.data.pt")] + [str(f) for f in flags]
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    for name in ("DS_TEST_FAULT", "DS_COMM_TIMEOUT_SECONDS"):
        env.pop(name, None)
    env.update(env_extra)
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, start_new_session=True)
    texts = {"out": [], "err": []}
    fault_at = []

    def read(stream, key):
        for line in stream:
            if "DS_TEST_FAULT: rank" in line and not fault_at:
                fault_at.append(time.monotonic())
            texts[key].append(line)

    readers = [threading.Thread(target=read, args=(proc.stdout, "out")),
               threading.Thread(target=read, args=(proc.stderr, "err"))]
    for reader in readers:
        reader.start()
    try:
        code = proc.wait(timeout=args.limit + 30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        code = None
    end = time.monotonic()
    for reader in readers:
        reader.join()
    since_fault = end - fault_at[0] if fault_at else None
    return code, end - start, since_fault, "".join(texts["out"]), "".join(texts["err"])


def loss_lines(text):
    """The JSON loss lines of a run's stdout (or --losses file), keyed by step."""
    lines = {}
    for line in text.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            lines[record["step"]] = record
    return lines


def count_ops(node, kind):
    if isinstance(node, dict):
        return (node.get("kind") == kind) + sum(count_ops(v, kind) for v in node.values())
    if isinstance(node, list):
        return sum(count_ops(v, kind) for v in node)
    return 0


def run_point_case(args, case, tmp):
    fault, timeout, accepted, resume = POINT_CASES[case]
    plan = compile_plan(args, tmp, ZERO3)
    with open(plan) as f:
        programs = json.load(f)["programs"]
    gathers = count_ops(programs["train"], "all_gather")
    steps = count_ops(programs, "optimizer_step")
    if gathers < 3 or steps != 1:
        raise Failed(f"the ZeRO-3 plan has {gathers} all_gather(s) in programs.train and "
                     f"{steps} optimizer_step(s): expected >= 3 and 1")
    notes = []
    flags = ["--steps", POINT_STEPS]
    if resume:
        ref_params = os.path.join(tmp, "uninterrupted.safetensors")
        code, elapsed, _, out, err = launch_watched(args, plan, flags + ["--save-params",
                                                                         ref_params], {})
        if code != 0:
            raise Failed(f"the uninterrupted run exited {code}:\n{out}{err}")
        reference = loss_lines(out)
        notes.append(f"uninterrupted run {elapsed:.1f} s")
    checkpoints = os.path.join(tmp, "checkpoints")
    faulted_flags = flags + (["--save-checkpoint", checkpoints, "--save-every", 1]
                             if resume else [])
    code, elapsed, since_fault, out, err = launch_watched(
        args, plan, faulted_flags,
        {"DS_TEST_FAULT": fault, "DS_COMM_TIMEOUT_SECONDS": str(timeout)})
    text = out + err
    problems = []
    point = fault.split(":")[3]
    occurrence = fault.split(":")[4] if fault.count(":") == 4 else "1"
    fault_line = (f"DS_TEST_FAULT: rank 1: {fault.split(':')[0]} at step {POINT_STEP} "
                  f"({point} #{occurrence})")
    if code is None:
        problems.append(f"the job was still running after {args.limit + 30:.0f} s (killed)")
    elif code == 0:
        problems.append("the job exited 0")
    if fault_line not in text:
        problems.append(f"the output lacks {fault_line!r}")
    elif since_fault is None or since_fault > timeout + MARGIN:
        problems.append(f"the job took {since_fault:.1f} s after the fault to end (limit "
                        f"DS_COMM_TIMEOUT_SECONDS {timeout} + {MARGIN:.0f} s)")
    if elapsed > args.limit:
        problems.append(f"the job took {elapsed:.1f} s to end (limit {args.limit:.0f} s)")
    seen = []
    if ("ds-run: error: rank 0: collective " in err and
            f"in training step {POINT_STEP} timed out after {timeout} s" in err):
        seen.append(OURS)
    if "mpirun noticed that process rank 1" in text:
        seen.append(MPIRUN)
    if not any(message in accepted for message in seen):
        problems.append("the output names neither the rank nor the collective (expected " +
                        " or ".join(accepted) + ")")
    if problems:
        raise Failed("; ".join(problems) + "\n---- output ----\n" + text)
    ends = [line for line in err.splitlines()
            if line.startswith("ds-run: error:") or line.startswith("mpirun noticed")]
    summary = (f"exit code {code} after {elapsed:.1f} s, {since_fault:.1f} s after the fault "
               f"(DS_COMM_TIMEOUT_SECONDS={timeout}); the end came from " + " and ".join(seen) +
               "".join("\n    " + line for line in ends))
    if not resume:
        return summary
    faulted = loss_lines(out)
    if sorted(faulted) != list(range(1, POINT_STEP)):
        raise Failed(f"the faulted run printed steps {sorted(faulted)}, expected 1-"
                     f"{POINT_STEP - 1}")
    for step, record in faulted.items():
        if record != reference[step]:
            raise Failed(f"step {step} before the fault: {record} != uninterrupted "
                         f"{reference[step]}")
    with open(os.path.join(checkpoints, "latest")) as f:
        latest = f.read().strip()
    if latest != f"global_step{POINT_STEP - 1}":
        raise Failed(f"latest names {latest!r}, expected global_step{POINT_STEP - 1}")
    resumed_params = os.path.join(tmp, "resumed.safetensors")
    resumed_losses = os.path.join(tmp, "resumed.jsonl")
    code, elapsed, _, out, err = launch_watched(
        args, plan, flags + ["--resume", checkpoints, "--save-params", resumed_params,
                             "--losses", resumed_losses], {})
    if code != 0:
        raise Failed(f"the resumed run exited {code}:\n{out}{err}")
    with open(resumed_losses) as f:
        resumed = loss_lines(f.read())
    if sorted(resumed) != list(range(POINT_STEP, POINT_STEPS + 1)):
        raise Failed(f"the resumed run wrote steps {sorted(resumed)}, expected "
                     f"{POINT_STEP}-{POINT_STEPS}")
    for step, record in resumed.items():
        if record != reference[step]:
            raise Failed(f"resumed step {step}: {record} != uninterrupted {reference[step]}")
    with open(ref_params, "rb") as f, open(resumed_params, "rb") as g:
        a, b = f.read(), g.read()
    if a != b:
        raise Failed(f"--save-params of the resumed run ({len(b)} bytes) differs from the "
                     f"uninterrupted run's ({len(a)} bytes)")
    return (summary + f"\n  resumed from {latest}: steps {POINT_STEP}-{POINT_STEPS} in "
            f"{elapsed:.1f} s, losses and --save-params ({len(a)} bytes) bitwise equal to the "
            f"uninterrupted run; " + ", ".join(notes))


def run_badpoint(args, tmp):
    plan = compile_plan(args, tmp)
    cmd = [os.path.join(args.bin, "ds-run"), plan, "--data",
           os.path.join(args.models, "mlp.data.pt"), "--steps", "1"]
    env = dict(os.environ, DS_TEST_FAULT="kill:1:3:nowhere")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    wanted = ("ds-run: error: DS_TEST_FAULT: 'kill:1:3:nowhere': unknown fault point 'nowhere' "
              "(POINT is step, allgather or optimizer)")
    if proc.returncode != 1 or wanted not in proc.stderr:
        raise Failed(f"exit code {proc.returncode} (expected 1), stderr lacks {wanted!r}:\n"
                     + proc.stdout + proc.stderr)
    return "exit code 1: " + proc.stderr.strip()


def main_point(args):
    name = f"fault-check {args.case}"
    start = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="fault_check.") as tmp:
            if args.case == "badpoint":
                summary = run_badpoint(args, tmp)
            else:
                summary = run_point_case(args, args.case, tmp)
    except Failed as e:
        print(f"{name} FAILED: {e}")
        return 1
    print(f"{name} (2 ranks, ZeRO-3): {summary}\n  {time.monotonic() - start:.1f} s in all; PASS"
          if args.case != "badpoint" else f"{name}: {summary}; PASS")
    return 0


def main():
    p = argparse.ArgumentParser(prog="fault_check.py")
    p.add_argument("--bin", required=True)
    p.add_argument("--models", required=True)
    p.add_argument("--case", required=True,
                   choices=sorted(CASES) + sorted(POINT_CASES) + ["badpoint"])
    p.add_argument("--launcher", default=default_launcher(),
                   help="command prefix for ds-run; {W} is replaced by the rank count")
    p.add_argument("--limit", type=float, default=60.0, help="seconds the job may take to end")
    args = p.parse_args()
    if args.case not in CASES:
        return main_point(args)

    ranks, env, texts = CASES[args.case]
    with tempfile.TemporaryDirectory(prefix="fault_check.") as tmp:
        plan = compile_plan(args, tmp)
        code, elapsed, out, err = launch(args, plan, ranks, env)
    text = out + err
    problems = []
    if code is None:
        problems.append(f"the job was still running after {args.limit + 30:.0f} s (killed)")
    elif code == 0:
        problems.append("the job exited 0")
    if elapsed > args.limit:
        problems.append(f"the job took {elapsed:.1f} s to end (limit {args.limit:.0f} s)")
    for needed in texts:
        if needed not in text:
            problems.append(f"the output lacks {needed!r}")
    name = f"fault-check {args.case} ({ranks} ranks)"
    if problems:
        print(f"{name} FAILED: " + "; ".join(problems))
        print("---- output ----\n" + text)
        return 1
    print(f"{name}: exit code {code} after {elapsed:.1f} s; PASS")
    for line in err.splitlines():
        if line.startswith("ds-run:"):
            print("  " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
