#!/usr/bin/env python3
"""The GPTs of the GPU check's speed tier: bench/step_time.py's GPT at two sizes.

  make_gpt.py --size bench|100m --out DIR [--micro-steps S]

writes DIR/gpt_SIZE.pt (torch.jit.script(...).save), DIR/gpt_SIZE.data.pt ({"idx", "targets"},
int64 [S, B, T]) and prints the parameter count. Deterministic (fixed seeds): the build machine
runs it to compile the plan (scripts/gpu-bundle.sh), and the GPU node runs it again to make the
100M archive, whose ~400 MB of weights do not fit in the bundle; the plan only needs the names,
shapes and dtypes, which the same code gives on any torch 2.x.

  bench  vocab 512, d 256, 4 blocks, 4 heads, T 64, B 8: 3,438,080 parameters (bench/README.md)
  100m   vocab 8192, d 768, 12 blocks, 12 heads, T 512, B 8: 98,032,128 parameters
"""

import argparse
import os
import sys
import warnings

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
# In the repository: bench/step_time.py; in a bundle: check/step_time.py beside this file.
for folder in (HERE, os.path.join(HERE, "..", "..", "bench")):
    if os.path.exists(os.path.join(folder, "step_time.py")):
        sys.path.insert(0, folder)
        break
import step_time  # noqa: E402

SIZES = {
    "bench": {"vocab": 512, "d": 256, "layers": 4, "t": 64, "heads": 4, "batch": 8},
    "100m": {"vocab": 8192, "d": 768, "layers": 12, "t": 512, "heads": 12, "batch": 8},
}


def build(size: str):
    """(module, geometry) for a size name, weights from a fixed seed."""
    g = SIZES[size]
    torch.manual_seed(0)
    model = step_time.GPT(vocab=g["vocab"], d=g["d"], layers=g["layers"], t=g["t"],
                          heads=g["heads"])
    return model, g


def data(g: dict, micro_steps: int) -> dict:
    gen = torch.Generator().manual_seed(1)
    shape = (micro_steps, g["batch"], g["t"])
    return {"idx": torch.randint(0, g["vocab"], shape, generator=gen),
            "targets": torch.randint(0, g["vocab"], shape, generator=gen)}


def main(argv=None) -> int:
    warnings.filterwarnings("ignore", message=r".*is deprecated\. Please switch to",
                            category=FutureWarning)
    p = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    p.add_argument("--size", choices=sorted(SIZES), required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--micro-steps", type=int, default=64)
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    model, g = build(args.size)
    base = os.path.join(args.out, "gpt_" + args.size)
    torch.jit.script(model).save(base + ".pt")
    torch.save(data(g, args.micro_steps), base + ".data.pt")
    print(sum(p.numel() for p in model.parameters()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
