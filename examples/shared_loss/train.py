#!/usr/bin/env python3
"""Jointly training models with a shared loss: one backward through every engine.

    .venv/bin/python examples/shared_loss/train.py [--steps N]
    mpirun -n 2 .venv/bin/python examples/shared_loss/train.py

DeepSpeed's "Jointly Training Models With Shared Loss": each model has its
engine; the losses are combined in Python and `loss.backward()` runs once.
Each engine's loss is an autograd node whose backward is the engine's
compiled backward, seeded with the weight the loss carries in the sum (here
1, 1/2, 1/3). `_backward_epilogue()` is accepted (the compiled backward has
reduced the gradients already); `optimizer.zero_grad()` is a no-op (the
updating step zeroed them).
"""

import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

import dsopt

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from oracle_check import Recorder, check, example_args, rank_batch  # noqa: E402

MICRO_BATCH = 4


class Member(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc1 = nn.Linear(5, width)
        self.fc2 = nn.Linear(width, 1)

    def forward(self, x, y):
        return F.mse_loss(self.fc2(torch.sigmoid(self.fc1(x))), y)


def config(lr, stage):
    return {"train_micro_batch_size_per_gpu": MICRO_BATCH,
            "optimizer": {"type": "AdamW", "params": {"lr": lr}},
            "zero_optimization": {"stage": stage}}


CONFIGS = [config(0.01, 0), config(0.02, 2), config(0.005, 1)]


class Joint(nn.Module):
    """The shared loss as one module: what the oracle trains (--check)."""

    def __init__(self, members):
        super().__init__()
        self.m0, self.m1, self.m2 = members

    def forward(self, x, y):
        return self.m0(x, y), self.m1(x, y) / 2, self.m2(x, y) / 3


def main():
    args = example_args(__doc__, 6)

    torch.manual_seed(2)
    models = [Member(12), Member(8), Member(16)]
    rank, world = dsopt.get_rank(), dsopt.get_world_size()
    data = {"x": torch.randn(args.steps, world * MICRO_BATCH, 5),
            "y": torch.randn(args.steps, world * MICRO_BATCH, 1)}

    model_engines = [engine for engine, _, _, _ in [
        dsopt.initialize(model=m, config=c, example_inputs=rank_batch(data, 0))
        for m, c in zip(models, CONFIGS)]]

    record = Recorder(1)
    for s in range(args.steps):
        x, y = rank_batch(data, s)
        losses = [engine(x, y) for engine in model_engines]
        loss = sum(l / (i + 1) for i, l in enumerate(losses))
        loss.backward()

        for engine in model_engines:
            engine._backward_epilogue()

        for engine in model_engines:
            engine.step()

        for engine in model_engines:
            engine.optimizer.zero_grad()
        record.add(loss.detach())
        if rank == 0:
            print("step %d  shared loss %.5f" % (s + 1, record.steps[-1]))

    if args.check:
        ours = {}
        for i, engine in enumerate(model_engines):
            ours.update(("m%d.%s" % (i, k), v) for k, v in engine.state_dict().items())
        engines = {"m%d" % i: c for i, c in enumerate(CONFIGS)}
        # Non-power-of-two weights (1/3): the seed scale and the oracle's
        # division round differently, by an ulp.
        check(args.check, "shared loss", Joint(models), data, {"engines": engines},
              args.steps, ours, record.steps, loss_rtol=1e-5)


if __name__ == "__main__":
    main()
