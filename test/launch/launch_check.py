#!/usr/bin/env python3
"""ds-run and the rendezvous under every launcher (docs/launching.md), on the CPU.

  launch_check.py --bin BUILD/bin --models DIR --mpirun 'mpirun --oversubscribe'

1. Rendezvous: ds-launch-probe on 2 ranks under mpirun (MPI), torchrun --standalone
   --no-python (a client of the agent's TCP store) and a hand launch with RANK, WORLD_SIZE,
   LOCAL_RANK, MASTER_ADDR, MASTER_PORT (rank 0 serves the store): every rank reports its rank
   and local rank as the launcher gave them, and the same 128-byte id drawn by rank 0 (the
   path of NCCL's unique id).
2. Training: mlp compiled for 2 ranks at ZeRO stages 2 and 3 trains 4 steps under mpirun
   (MPI), torchrun and the hand launch (the store channel): the loss lines and the final
   parameters (--save-params) of the three launches are bitwise equal.
3. A plan for 2 ranks started by torchrun on 3 is refused, naming both counts.
Exits 1 naming every failure.
"""

import argparse
import json
import os
import shlex
import socket
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "mpi"))
import checkpoint_check as cc  # noqa: E402

WORLD = 2
TIMEOUT = 240


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(ranks):
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--no-python",
            "--nproc-per-node", str(ranks)]


def run_launcher(prefix, command, env=None):
    """(exit code, stdout, stderr) of one launcher invocation."""
    proc = subprocess.run(prefix + command, capture_output=True, text=True, timeout=TIMEOUT,
                          env=dict(os.environ, **(env or {})))
    return proc.returncode, proc.stdout, proc.stderr


def run_by_hand(command, ranks=WORLD):
    """Every rank started here with RANK/WORLD_SIZE/MASTER_*: (codes, stdouts, stderrs)."""
    port = str(free_port())
    procs = []
    for rank in range(ranks):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(ranks), LOCAL_RANK=str(rank),
                   LOCAL_WORLD_SIZE=str(ranks), MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        for name in ("TORCHELASTIC_USE_AGENT_STORE", "OMPI_COMM_WORLD_SIZE"):
            env.pop(name, None)
        procs.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    outs = [proc.communicate(timeout=TIMEOUT) for proc in procs]
    return [p.returncode for p in procs], [o[0] for o in outs], [o[1] for o in outs]


class Checks:
    def __init__(self, args, root):
        self.args = args
        self.root = root
        self.failures = []

    def check(self, name, body):
        try:
            body()
            print(f"{name}: OK", flush=True)
        except (cc.Failure, subprocess.TimeoutExpired) as error:
            print(f"{name}: FAILED: {error}", flush=True)
            self.failures.append(f"{name}: {error}")

    def launches(self, command):
        """name -> (ok, stdout of all ranks, stderr)."""
        mpirun = shlex.split(self.args.mpirun) + ["-n", str(WORLD)]
        results = {}
        code, out, err = run_launcher(mpirun, command)
        results["mpirun"] = (code == 0, out, err)
        code, out, err = run_launcher(torchrun(WORLD), command)
        results["torchrun"] = (code == 0, out, err)
        codes, outs, errs = run_by_hand(command)
        results["by hand"] = (all(c == 0 for c in codes), "".join(outs), "".join(errs))
        for name, (ok, out, err) in results.items():
            if not ok:
                raise cc.Failure(f"under {name}:\n{out[-2000:]}{err[-3000:]}")
        return results

    def rendezvous(self):
        probe = [os.path.join(self.args.bin, "ds-launch-probe")]
        expected = {"mpirun": "mpirun (mpi)", "torchrun": "torchrun (agent store",
                    "by hand": "RANK/WORLD_SIZE (store 127.0.0.1:"}
        for name, (_, out, _) in self.launches(probe).items():
            lines = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
            ranks = sorted(l["rank"] for l in lines)
            if ranks != list(range(WORLD)):
                raise cc.Failure(f"under {name}: ranks {ranks}, expected 0..{WORLD - 1}")
            for line in lines:
                if line["size"] != WORLD or line["local_size"] != WORLD or \
                        line["local_rank"] != line["rank"]:
                    raise cc.Failure(f"under {name}: {line}")
                if not line["rendezvous"].startswith(expected[name]):
                    raise cc.Failure(f"under {name}: met through {line['rendezvous']!r}")
            ids = {l["id"] for l in lines}
            if len(ids) != 1 or len(next(iter(ids))) != 256 or next(iter(ids)) == "0" * 256:
                raise cc.Failure(f"under {name}: the ranks received different ids {ids}")

    def compile(self, stage):
        plan = os.path.join(self.root, f"mlp-s{stage}.plan")
        config = os.path.join(self.root, f"s{stage}.json")
        with open(config, "w") as f:
            json.dump(cc.config_for(stage), f)
        proc = subprocess.run(
            [os.path.join(self.args.bin, "ds-compile"), os.path.join(self.args.models, "mlp.pt"),
             "--config", config, "--example-inputs",
             os.path.join(self.args.models, "mlp.data.pt"), "--world-size", str(WORLD),
             "-o", plan], capture_output=True, text=True)
        if proc.returncode != 0:
            raise cc.Failure("ds-compile: " + proc.stderr)
        return plan

    def training(self, stage):
        plan = self.compile(stage)
        runs = {}
        for launcher in ("mpirun", "torchrun", "by hand"):
            params = os.path.join(self.root, f"s{stage}-{launcher.replace(' ', '_')}.safetensors")
            command = [os.path.join(self.args.bin, "ds-run"), plan, "--data",
                       os.path.join(self.args.models, "mlp.data.pt"), "--steps", "4",
                       "--save-params", params]
            runs[launcher] = (command, params)
        mpirun = shlex.split(self.args.mpirun) + ["-n", str(WORLD)]
        results = {}
        for launcher, (command, params) in runs.items():
            if launcher == "mpirun":
                code, out, err = run_launcher(mpirun, command)
            elif launcher == "torchrun":
                code, out, err = run_launcher(torchrun(WORLD), command)
            else:
                codes, outs, errs = run_by_hand(command)
                code, out, err = max(codes), "".join(outs), "".join(errs)
            if code != 0:
                raise cc.Failure(f"ds-run under {launcher} exited {code}:\n{err[-3000:]}")
            lines = [l for l in out.splitlines() if l.startswith("{")]
            with open(params, "rb") as f:
                results[launcher] = (lines, f.read())
        base_lines, base_params = results["mpirun"]
        if len(base_lines) != 4:
            raise cc.Failure(f"mpirun printed {len(base_lines)} loss lines, expected 4")
        for launcher, (lines, params) in results.items():
            if lines != base_lines:
                raise cc.Failure(f"loss lines under {launcher} differ from mpirun's:\n"
                                 + "\n".join(lines) + "\nvs\n" + "\n".join(base_lines))
            if params != base_params:
                raise cc.Failure(f"final parameters under {launcher} differ from mpirun's")

    def mismatch(self):
        plan = self.compile(2)
        code, out, err = run_launcher(torchrun(3), [
            os.path.join(self.args.bin, "ds-run"), plan, "--data",
            os.path.join(self.args.models, "mlp.data.pt")])
        # The first rank to fail ends the job (torchrun stops the others), so the others
        # may not get to say it.
        text = "the plan was compiled for --world-size 2, but 3 ranks were launched"
        if code == 0 or text not in err:
            raise cc.Failure(f"expected exit != 0 and {text!r}; got exit "
                             f"{code}:\n{err[-3000:]}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", required=True)
    parser.add_argument("--models", required=True)
    parser.add_argument("--mpirun", required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="launch_check.") as root:
        checks = Checks(args, root)
        checks.check("rendezvous under mpirun, torchrun and by hand", checks.rendezvous)
        for stage in (2, 3):
            checks.check(f"ZeRO-{stage} on 2 ranks: torchrun and by hand == mpirun, bitwise",
                         lambda stage=stage: checks.training(stage))
        checks.check("a 2-rank plan on 3 torchrun ranks is refused", checks.mismatch)
    if checks.failures:
        print(f"{len(checks.failures)} failure(s)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
