#!/usr/bin/env python3
"""PyTorch DDP's step time on the bench GPT, the baseline of check.py's speed-ddp cases.

  torchrun --standalone --nproc-per-node W ddp_step.py --archive GPT.pt --data DATA.pt
           --size bench --steps N --device cuda|cpu

Every rank builds make_gpt.py's GPT (bench/step_time.py's nn.Module) with the archive's weights,
wraps it in DistributedDataParallel (NCCL on cuda:LOCAL_RANK, Gloo on the CPU), takes its rows
[r*b, (r+1)*b) of each micro-step (as ds-run does), and trains with torch.optim.AdamW (lr 1e-3,
weight decay 0.01) and clipping 1.0: 3 warm-up steps, then N timed. Rank 0 prints
"ddp ms/step X".
"""

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_gpt  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    p.add_argument("--archive", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--size", default="bench")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--device", default="cuda")
    args = p.parse_args(argv)
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if args.device == "cuda":
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    module, _ = make_gpt.build(args.size)
    module.load_state_dict(torch.jit.load(args.archive, map_location="cpu").state_dict())
    module.to(device).train()
    model = torch.nn.parallel.DistributedDataParallel(
        module, device_ids=[local] if device.type == "cuda" else None)
    data = torch.load(args.data)
    b = data["idx"].shape[1] // world
    idx = data["idx"][:, rank * b:(rank + 1) * b].to(device)
    targets = data["targets"][:, rank * b:(rank + 1) * b].to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)

    def step(s):
        loss = model(idx[s], targets[s])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    for s in range(3):
        step(s)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    dist.barrier()
    start = time.perf_counter()
    for s in range(args.steps):
        step(3 + s % (idx.shape[0] - 3))
    sync()
    seconds = (time.perf_counter() - start) / args.steps
    if rank == 0:
        print("ddp ms/step %.4f" % (seconds * 1e3), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
