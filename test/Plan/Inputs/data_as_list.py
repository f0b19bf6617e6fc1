"""Writes a stacked data file's micro-steps as a torch.save'd list of dicts.

  data_as_list.py STACKED.pt OUT.pt [--reshape KEY STEP SHAPE...]

Each micro-step s becomes {key: tensor[s]}; --reshape gives micro-step STEP's KEY another
shape (zeros), for the error test.
"""
import sys

import torch

stacked = torch.load(sys.argv[1])
steps = [{key: value[s].clone() for key, value in stacked.items()}
         for s in range(next(iter(stacked.values())).shape[0])]
if len(sys.argv) > 3 and sys.argv[3] == "--reshape":
    key, step = sys.argv[4], int(sys.argv[5])
    shape = [int(d) for d in sys.argv[6:]]
    steps[step][key] = torch.zeros(shape, dtype=steps[step][key].dtype)
torch.save(steps, sys.argv[2])
