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
import time

FAULT_STEP = 2


def default_launcher():
    root = " --allow-run-as-root" if hasattr(os, "geteuid") and os.geteuid() == 0 else ""
    return "mpirun" + root + " --oversubscribe -n {W}"


def compile_plan(args, tmp):
    config = os.path.join(tmp, "ds_config.json")
    with open(config, "w") as f:
        json.dump({"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": 1,
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


def main():
    p = argparse.ArgumentParser(prog="fault_check.py")
    p.add_argument("--bin", required=True)
    p.add_argument("--models", required=True)
    p.add_argument("--case", required=True, choices=sorted(CASES))
    p.add_argument("--launcher", default=default_launcher(),
                   help="command prefix for ds-run; {W} is replaced by the rank count")
    p.add_argument("--limit", type=float, default=60.0, help="seconds the job may take to end")
    args = p.parse_args()

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
