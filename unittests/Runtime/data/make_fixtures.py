"""Regenerates the torch.save fixtures of DataFileTest.cpp.

Run with the project's interpreter (torch 2.15):
    .venv/bin/python unittests/Runtime/data/make_fixtures.py
The files are checked in so that the unit tests need no Python.
"""
import os

import torch

here = os.path.dirname(os.path.abspath(__file__))
x = torch.arange(24, dtype=torch.float32).reshape(2, 4, 3)
# One key: Python pickles it with SETITEM (two keys: SETITEMS).
torch.save({"x": x}, os.path.join(here, "one_key.pt"))
torch.save({"x": x, "y": torch.arange(8).reshape(2, 4)},
           os.path.join(here, "two_keys.pt"))

# Optimizer oracle for OptimizerTest.cpp: torch.optim (Python, 2.15) with
# torch.nn.utils.clip_grad_norm_, the way the numerical oracle runs them.
g = torch.Generator().manual_seed(11)
shapes = [(3, 5), (5,), (2, 2, 2)]
p0 = [torch.randn(s, generator=g) for s in shapes]
grads = [[torch.randn(s, generator=g) for s in shapes] for _ in range(3)]
out = {f"p0_{i}": p for i, p in enumerate(p0)}
for step, gs in enumerate(grads):
    for i, gr in enumerate(gs):
        out[f"g{step}_{i}"] = gr
cases = {
    "adamw": (lambda ps: torch.optim.AdamW(ps, lr=0.01, betas=(0.8, 0.99), eps=1e-6,
                                           weight_decay=0.1), 0.7),
    "adam": (lambda ps: torch.optim.Adam(ps, lr=0.01, betas=(0.8, 0.99), eps=1e-6,
                                         weight_decay=0.1), 0.7),
    "sgd": (lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=0.01,
                                       nesterov=True), 0.0),
}
for name, (make, max_norm) in cases.items():
    ps = [p.clone().requires_grad_(True) for p in p0]
    opt = make(ps)
    for step, gs in enumerate(grads):
        for p, gr in zip(ps, gs):
            p.grad = gr.clone()
        if max_norm > 0:
            norm = torch.nn.utils.clip_grad_norm_(ps, max_norm)
        else:  # DeepSpeed's gradient_clipping 0: measured, not clipped.
            norm = torch.norm(torch.stack([torch.norm(p.grad, 2.0) for p in ps]), 2.0)
        out[f"{name}_norm{step}"] = norm.detach().clone()
        opt.step()
        for i, p in enumerate(ps):
            out[f"{name}_{step}_{i}"] = p.detach().clone()
torch.save(out, os.path.join(here, "optim_expected.pt"))
