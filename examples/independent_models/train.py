#!/usr/bin/env python3
"""Training independent models: one engine per model, each with its own config.

    .venv/bin/python examples/independent_models/train.py [--steps N]
    mpirun -n 2 .venv/bin/python examples/independent_models/train.py

DeepSpeed's "Training Independent Models": every model gets its own
engine from its own initialize call, and the loop runs each engine's
forward, backward and step on the same batches. The engines are separate
plans: different ZeRO stages, optimizers and accumulation steps are fine.
Under mpirun both train data-parallel on every rank, each rank on its own
rows of the batch.
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


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(8, 24)
        self.out = nn.Linear(24, 2)

    def forward(self, x, y):
        return F.mse_loss(self.out(torch.tanh(self.hidden(x))), y)


class Bilinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.left = nn.Linear(8, 6, bias=False)
        self.right = nn.Linear(8, 6)
        self.head = nn.Linear(6, 2)

    def forward(self, x, y):
        return (self.head(self.left(x) * self.right(x)) - y).abs().mean()


CONFIGS = [
    {"train_micro_batch_size_per_gpu": MICRO_BATCH, "gradient_accumulation_steps": 1,
     "optimizer": {"type": "AdamW", "params": {"lr": 0.005}},
     "zero_optimization": {"stage": 2, "reduce_bucket_size": 200}},
    {"train_micro_batch_size_per_gpu": MICRO_BATCH, "gradient_accumulation_steps": 2,
     "optimizer": {"type": "SGD", "params": {"lr": 0.05, "momentum": 0.9}},
     "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 3,
                                                  "warmup_type": "linear"}},
     "zero_optimization": {"stage": 1}},
]


def main():
    args = example_args(__doc__, 8)

    torch.manual_seed(1)
    models = [Regressor(), Bilinear()]
    rank, world = dsopt.get_rank(), dsopt.get_world_size()
    data = {"x": torch.randn(args.steps, world * MICRO_BATCH, 8),
            "y": torch.randn(args.steps, world * MICRO_BATCH, 2)}

    model_engines = [engine for engine, _, _, _ in [
        dsopt.initialize(model=m, config=c, example_inputs=rank_batch(data, 0))
        for m, c in zip(models, CONFIGS)]]

    records = [Recorder(c["gradient_accumulation_steps"]) for c in CONFIGS]
    for s in range(args.steps):
        losses = [engine(*rank_batch(data, s)) for engine in model_engines]
        for engine, loss, record in zip(model_engines, losses, records):
            engine.backward(loss)
            engine.step()
            record.add(loss)
    if rank == 0:
        for i, (engine, record) in enumerate(zip(model_engines, records)):
            print("model %d: %d updates, loss %.5f -> %.5f" % (
                i, engine.global_steps, record.steps[0], record.steps[-1]))

    if args.check:
        for i, (model, config, engine, record) in enumerate(
                zip(models, CONFIGS, model_engines, records)):
            check(args.check, "independent model %d" % i, model, data, config,
                  engine.global_steps, engine.state_dict(), record.steps)


if __name__ == "__main__":
    main()
