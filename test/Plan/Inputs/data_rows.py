"""Writes a stacked data file with the first ROWS rows of every micro-step (a smaller batch).

  data_rows.py STACKED.pt OUT.pt ROWS [--double KEY]

--double KEY stores KEY as float64, for the error test.
"""
import sys

import torch

stacked = torch.load(sys.argv[1])
rows = int(sys.argv[3])
out = {key: value[:, :rows].clone() for key, value in stacked.items()}
if len(sys.argv) > 4 and sys.argv[4] == "--double":
    out[sys.argv[5]] = out[sys.argv[5]].double()
torch.save(out, sys.argv[2])
