#!/usr/bin/env python3
"""ZeRO-3 leaf modules marked from Python (DeepSpeed's set_z3_leaf_modules).

    .venv/bin/python examples/leaf_modules/train.py [--steps N]
    mpirun -n 2 .venv/bin/python examples/leaf_modules/train.py

A mixture-of-experts block routes each token to one expert, so which experts
run depends on the data. Under ZeRO stage 3 marking the block as a leaf
gathers all its parameters at once when the block is entered
(docs/leaf-modules.md). dsopt.set_z3_leaf_modules marks it on the module as
DeepSpeed does; TorchScript does not keep the mark, so dsopt.initialize (via
dsopt.compile) turns it into the config's zero_optimization.leaf_module
"names" before compiling.
"""

import json
import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

import dsopt

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from oracle_check import Recorder, check, example_args, rank_batch  # noqa: E402

TOKENS = 8  # rows per rank and micro-step

CONFIG = {
    "train_micro_batch_size_per_gpu": TOKENS,
    "optimizer": {"type": "SGD", "params": {"lr": 0.05}},
    "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0,
                          "reduce_bucket_size": 64, "stage3_prefetch_bucket_size": 64},
}


class Expert(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.up = nn.Linear(d, hidden)
        self.down = nn.Linear(hidden, d)

    def forward(self, x):
        return self.down(F.silu(self.up(x)))


class CustomMoEBlock(nn.Module):
    def __init__(self, d, hidden, num_experts):
        super().__init__()
        self.gate = nn.Linear(d, num_experts, bias=False)
        self.experts = nn.ModuleList([Expert(d, hidden) for _ in range(num_experts)])

    def forward(self, x):
        logits = self.gate(x)
        probs = F.softmax(logits, dim=-1)
        _, top = torch.topk(logits, 1, dim=-1)
        weight = torch.gather(probs, 1, top)
        route = top.squeeze(1)
        out = torch.zeros_like(x)
        e = 0
        for expert in self.experts:
            idx = torch.nonzero(route == e).squeeze(1)
            if idx.numel() > 0:  # data-dependent: which experts run differs per rank
                out = out.index_add(0, idx, expert(x.index_select(0, idx))
                                    * weight.index_select(0, idx))
            e += 1
        return out


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(6, 12)
        self.moe = CustomMoEBlock(12, 16, 3)
        self.head = nn.Linear(12, 6)

    def forward(self, x, y):
        h = self.embed(x)
        return F.mse_loss(self.head(h + self.moe(h)), y)


def leaf_bucket_check(plan, prefix):
    """The leaf's parameters form buckets of their own (one gather)."""
    engine = json.loads(plan.to_json())["engines"][0]
    flat = {p["name"]: p["offset"] for p in engine["partition"]["params"]}
    buckets = engine["partition"]["buckets"]

    def bucket_of(offset):
        return next(i for i, b in enumerate(buckets)
                    if b["offset"] <= offset < b["offset"] + b["numel"])
    leaf = {bucket_of(o) for n, o in flat.items() if n.startswith(prefix)}
    other = {bucket_of(o) for n, o in flat.items() if not n.startswith(prefix)}
    if len(leaf) != 1 or leaf & other:
        sys.exit("leaf %s: its parameters are in buckets %s, the others in %s"
                 % (prefix, sorted(leaf), sorted(other)))
    print("leaf %s: its %d parameters are gathered as bucket %d"
          % (prefix, sum(n.startswith(prefix) for n in flat), leaf.pop()))


def main():
    args = example_args(__doc__, 5)

    torch.manual_seed(4)
    model = Model()
    # By class; by name or suffix works alike:
    #   dsopt.set_z3_leaf_modules_by_name(model, ["moe"])
    #   dsopt.set_z3_leaf_modules_by_suffix(model, ["moe"])
    dsopt.set_z3_leaf_modules(model, [CustomMoEBlock])

    rank, world = dsopt.get_rank(), dsopt.get_world_size()
    data = {"x": torch.randn(args.steps, world * TOKENS, 6),
            "y": torch.randn(args.steps, world * TOKENS, 6)}

    engine, _, _, _ = dsopt.initialize(model=model, config=CONFIG,
                                       example_inputs=rank_batch(data, 0))
    record = Recorder(1)
    for s in range(args.steps):
        loss = engine(*rank_batch(data, s))
        engine.backward(loss)
        engine.step()
        record.add(loss)
        if rank == 0:
            print("step %d  loss %.5f" % (s + 1, record.steps[-1]))

    if args.check:
        if rank == 0:
            leaf_bucket_check(engine.plan, "moe.")
        check(args.check, "leaf modules", model, data, CONFIG, args.steps,
              engine.state_dict(), record.steps)


if __name__ == "__main__":
    main()
