"""Regenerates the torch.save fixtures of DataFileTest.cpp.

Run with Debian's interpreter (it has torch 1.13):
    /usr/bin/python3 unittests/Runtime/data/make_fixtures.py
The files are checked in so that the unit tests need no Python.
"""
import os

import torch

here = os.path.dirname(os.path.abspath(__file__))
x = torch.arange(24, dtype=torch.float32).reshape(2, 4, 3)
# One key: Python pickles it with SETITEM, which LibTorch 1.13 cannot read.
torch.save({"x": x}, os.path.join(here, "one_key.pt"))
torch.save({"x": x, "y": torch.arange(8).reshape(2, 4)},
           os.path.join(here, "two_keys.pt"))
