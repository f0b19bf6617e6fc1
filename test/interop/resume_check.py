#!/usr/bin/env python3
"""ds-run resumes DeepSpeed's own checkpoints (docs/checkpoint.md, "DeepSpeed interop").

  resume_check.py --bin BUILD/bin --models DIR [--launcher 'mpirun -n {W}'] [--keep DIR]

Per ZeRO stage 1, 2 and 3 (buckets of 500 elements; at stage 3 DeepSpeed's module holds empty
placeholders for the partitioned parameters), on 2 ranks: DeepSpeed 0.19 on its CPU
accelerator (Gloo; two processes started here, OMP_NUM_THREADS=1) trains mlp with AdamW
(torch.optim's, weight decay 0.01), WarmupLR and GAS 2 for 2 steps, saves a checkpoint and goes
on to step 4. `ds-run --resume` from DeepSpeed's checkpoint runs steps 3-4 of the same data:
the loss lines of steps 3-4 and the final parameters equal DeepSpeed's within the fp32 design
tolerance (oracle.PRECISION_TOLERANCES["fp32"]: losses 1e-5 relative, parameters 1e-4
absolute + 1e-4 relative). Exits 1 naming every failure.
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "mpi"))
import checkpoint_check as cc  # noqa: E402
import oracle  # noqa: E402

WORLD, GAS, STEPS, SAVED = 2, 2, 4, 2
STAGES = (1, 2, 3)
TOLERANCE = oracle.PRECISION_TOLERANCES["fp32"]


def config_for(stage):
    config = cc.config_for(stage)
    del config["train_micro_batch_size_per_gpu"]
    return config


class MLP(torch.nn.Module):
    """make_models.py's mlp, eager, for DeepSpeed."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 32)
        self.fc2 = torch.nn.Linear(32, 32)
        self.fc3 = torch.nn.Linear(32, 4)

    def forward(self, x, y):
        h = torch.relu(self.fc2(torch.nn.functional.gelu(self.fc1(x))))
        return torch.nn.functional.mse_loss(self.fc3(h), y)


def worker(args):
    """One DeepSpeed rank: RANK, WORLD_SIZE, MASTER_ADDR / PORT in the environment."""
    import deepspeed
    deepspeed.init_distributed(dist_backend="gloo")
    rank = int(os.environ["RANK"])
    torch.manual_seed(0)
    model = MLP()
    model.load_state_dict(torch.jit.load(os.path.join(args.models, "mlp.pt")).state_dict())
    data = oracle.load_data(os.path.join(args.models, "mlp.data.pt"))
    batch = data["x"].shape[1] // WORLD
    config = config_for(args.stage)
    optimizer_params = config.pop("optimizer")["params"]
    config["train_batch_size"] = batch * WORLD * GAS
    optimizer = torch.optim.AdamW(model.parameters(), **optimizer_params)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=config)
    lines = []
    for step in range(STEPS):
        losses = []
        for micro in range(GAS):
            s = step * GAS + micro
            rows = slice(rank * batch, (rank + 1) * batch)
            loss = engine(data["x"][s, rows], data["y"][s, rows])
            engine.backward(loss)
            engine.step()
            losses.append(loss.detach().double())
        mean = torch.stack(losses).mean()
        torch.distributed.all_reduce(mean)
        lines.append({"step": step + 1, "loss": mean.item() / WORLD})
        if step + 1 == SAVED:
            engine.save_checkpoint(args.out)
    # Stage 3: every rank gathers the partitioned parameters (a collective).
    with deepspeed.zero.GatheredParameters(list(engine.module.parameters())):
        final = {k: v.detach().clone() for k, v in engine.module.state_dict().items()}
    if rank == 0:
        oracle.write_safetensors(os.path.join(args.out, "final.safetensors"), final)
        oracle.write_jsonl(os.path.join(args.out, "deepspeed.jsonl"), lines)
    torch.distributed.destroy_process_group()
    # Even after destroy_process_group, DeepSpeed's CPU accelerator (its shm comm op) and
    # Gloo leave threads that the interpreter's exit tears down unjoined: about one run in
    # ten died there with "terminate called without an active exception" after all its
    # files were written. The rank's work is done and checked by the caller; skip the
    # interpreter's teardown.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_deepspeed(args, stage, out):
    env = dict(os.environ, OMP_NUM_THREADS="1", MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(free_port()), WORLD_SIZE=str(WORLD), DS_ACCELERATOR="cpu")
    procs = []
    for rank in range(WORLD):
        procs.append(subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker", "--models", args.models,
             "--stage", str(stage), "--out", out],
            env=dict(env, RANK=str(rank), LOCAL_RANK=str(rank)),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outputs = []
    for proc in procs:
        try:
            outputs.append(proc.communicate(timeout=300)[0])
        except subprocess.TimeoutExpired:
            for other in procs:
                other.kill()
            raise cc.Failure("DeepSpeed timed out")
    if any(proc.returncode != 0 for proc in procs):
        raise cc.Failure("DeepSpeed failed:\n" + "\n".join(o[-3000:] for o in outputs))


def resume_case(r, stage):
    name = f"resume-s{stage}"
    out = r.path(name, "deepspeed")
    run_deepspeed(r.args, stage, out)
    plan = r.compile(name, "mlp", cc.config_for(stage), WORLD)
    ours = r.path(name, "ours.safetensors")
    proc = r.launch(plan, "mlp", WORLD, ["--steps", STEPS, "--resume", out, "--save-params", ours])
    got = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    expected = oracle.read_jsonl(os.path.join(out, "deepspeed.jsonl"))[SAVED:]
    if [line["step"] for line in got] != [line["step"] for line in expected]:
        raise cc.Failure(f"steps {[l['step'] for l in got]}, expected 3-4")
    for a, b in zip(got, expected):
        if abs(a["loss"] - b["loss"]) > TOLERANCE["loss_rtol"] * abs(b["loss"]):
            raise cc.Failure(f"step {a['step']}: loss {a['loss']} vs DeepSpeed's {b['loss']}")
    ok, message = oracle.compare_params(oracle.load_params(ours), oracle.load_params(
        os.path.join(out, "final.safetensors")), TOLERANCE["param_rtol"], TOLERANCE["param_atol"])
    if not ok:
        raise cc.Failure("parameters after steps 3-4: " + message)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin")
    parser.add_argument("--models", required=True)
    parser.add_argument("--launcher", default=None)
    parser.add_argument("--keep", default=None)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--stage", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    root = args.keep or tempfile.mkdtemp(prefix="resume_check.")
    os.makedirs(root, exist_ok=True)
    r = cc.Runner(args, root)
    for stage in STAGES:
        r.check(f"ds-run resumes DeepSpeed's stage {stage} checkpoint, W={WORLD}",
                lambda stage=stage: resume_case(r, stage))
    return r.finish()


if __name__ == "__main__":
    sys.exit(main())
