#!/usr/bin/env python3
"""Writes the bundled example: a small GPT-style transformer (TorchScript) and
its token data, into OUTDIR as model.pt and data.pt.

The model is the test suite's `transformer` (test/models/make_models.py), so
the example and the oracle tests exercise the same code.
"""
import os
import shutil
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
with tempfile.TemporaryDirectory() as tmp:
    subprocess.run([sys.executable, os.path.join(here, "..", "..", "test", "models",
                                                 "make_models.py"), tmp], check=True,
                   stdout=subprocess.DEVNULL)
    shutil.copy(os.path.join(tmp, "transformer.pt"), os.path.join(out, "model.pt"))
    # Eight passes over the test data: enough micro-steps for the loss to fall.
    import torch
    data = torch.load(os.path.join(tmp, "transformer.data.pt"))
    torch.save({k: v.repeat((8,) + (1,) * (v.dim() - 1)).contiguous()
                for k, v in data.items()}, os.path.join(out, "data.pt"))
print("example model and data in", out)
