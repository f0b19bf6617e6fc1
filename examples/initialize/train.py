#!/usr/bin/env python3
"""DeepSpeed's training loop with dsopt.initialize's 4-tuple.

    .venv/bin/python examples/initialize/train.py [--steps N]
    mpirun -n 2 .venv/bin/python examples/initialize/train.py

deepspeed.initialize(model=..., config=...) becomes dsopt.initialize(model=...,
config=..., example_inputs=...): the training step is compiled ahead of time for
the shapes of one micro-batch of this rank. The optimizer and the LR scheduler
come from the config and belong to the engine: engine.step() updates on the
accumulation boundary and advances the schedule.
"""

import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

import dsopt

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from oracle_check import Recorder, check, example_args, rank_batch  # noqa: E402

MICRO_BATCH = 4  # rows per rank and micro-step

CONFIG = {
    "train_micro_batch_size_per_gpu": MICRO_BATCH,
    "gradient_accumulation_steps": 2,
    "optimizer": {"type": "AdamW", "params": {"lr": 0.01, "weight_decay": 0.01}},
    "scheduler": {"type": "WarmupLR",
                  "params": {"warmup_min_lr": 0.0, "warmup_max_lr": 0.01,
                             "warmup_num_steps": 4, "warmup_type": "linear"}},
    "gradient_clipping": 1.0,
}


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 16)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x, y):
        return F.mse_loss(self.fc2(torch.relu(self.fc1(x))), y)


def main():
    args = example_args(__doc__, 6)

    torch.manual_seed(0)
    model = Net()
    rank, world = dsopt.get_rank(), dsopt.get_world_size()
    gas = CONFIG["gradient_accumulation_steps"]
    # Global batches: S micro-steps of world * MICRO_BATCH rows; each rank reads its own.
    data = {"x": torch.randn(args.steps * gas, world * MICRO_BATCH, 6),
            "y": torch.randn(args.steps * gas, world * MICRO_BATCH, 3)}

    engine, optimizer, _, lr_scheduler = dsopt.initialize(
        model=model, config=CONFIG, example_inputs=rank_batch(data, 0))

    record = Recorder(gas)
    for s in range(args.steps * gas):
        loss = engine(*rank_batch(data, s))
        engine.backward(loss)
        updated = engine.step()["updated"]
        record.add(loss)
        if updated and rank == 0:
            print("step %d  loss %.5f  next lr %.5f (param_groups %.5f)" % (
                engine.global_steps, record.steps[-1], lr_scheduler.get_last_lr()[0],
                optimizer.param_groups[0]["lr"]))

    if args.check:
        check(args.check, "initialize", model, data, CONFIG, args.steps,
              engine.state_dict(), record.steps)


if __name__ == "__main__":
    main()
