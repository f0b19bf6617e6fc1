"""Writes scripted models for no_grad-errors.test: OUT/with_custom.pt (a `with` on a scripted
class of the user's), OUT/grad_query.pt (torch.is_grad_enabled() inside and after a no_grad
block) and OUT/ema_update.pt (a buffer updated in place under no_grad, then used), each with
OUT/NAME.data.pt ([S=2, B=4, 8] x)."""
import os
import sys
import warnings
from typing import Any

import torch
import torch.nn as nn

warnings.filterwarnings("ignore", category=FutureWarning)


@torch.jit.script
class Timer(object):
    def __init__(self):
        self.depth = 0

    def __enter__(self):
        self.depth += 1

    def __exit__(self, a: Any, b: Any, c: Any):
        self.depth -= 1


class WithCustom(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        with Timer():
            h = self.fc(x)
        return h.sum()


class GradQuery(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        h = self.fc(x)
        with torch.no_grad():
            inside = torch.is_grad_enabled()
            t = h * 2.0
        outside = torch.is_grad_enabled()
        if inside:
            t = t + 1.0
        if outside:
            t = t + 2.0
        return (h * t).sum()


class EmaUpdate(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.register_buffer("ema", torch.zeros(8))

    def forward(self, x):
        h = self.fc(x)
        e = self.ema
        with torch.no_grad():
            e.mul_(0.9).add_(h.mean(0), alpha=0.1)
        return ((h - e) ** 2).sum()


out = sys.argv[1]
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)
x = torch.randn(2, 4, 8)
for name, cls in (("with_custom", WithCustom), ("grad_query", GradQuery),
                  ("ema_update", EmaUpdate)):
    torch.jit.script(cls()).save(os.path.join(out, name + ".pt"))
    torch.save({"x": x}, os.path.join(out, name + ".data.pt"))
