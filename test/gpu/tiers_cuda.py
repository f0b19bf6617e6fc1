#!/usr/bin/env python3
"""ctest's gpu-tiers-cuda (label gpu): scripts/gpu/check.py's tiers on the GPU with the full
build's binaries and the bundle's cases. Without a visible GPU it prints why and exits 77,
ctest's SKIP_RETURN_CODE: reported as skipped, never as passed.

  tiers_cuda.py --bundle B --build BUILD --results DIR
"""

import argparse
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CHECK = os.path.join(HERE, "..", "..", "scripts", "gpu", "check.py")


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--bundle", required=True)
    p.add_argument("--build", required=True)
    p.add_argument("--results", required=True)
    args = p.parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        print("SKIPPED: no CUDA device visible (torch %s, CUDA %s: torch.cuda.is_available() "
              "is False); the GPU tiers run on a GPU node (docs/cuda.md)"
              % (torch.__version__, torch.version.cuda))
        return 77
    shutil.rmtree(args.results, ignore_errors=True)
    os.makedirs(args.results)
    return subprocess.call([sys.executable, CHECK, "--bundle", args.bundle, "--build",
                            args.build, "--results", args.results, "--device", "cuda"])


if __name__ == "__main__":
    sys.exit(main())
