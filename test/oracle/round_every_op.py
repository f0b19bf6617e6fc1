#!/usr/bin/env python3
"""A second low-precision implementation, to measure the oracle's tolerances (oracle.py,
"Tolerances").

  round_every_op.py --models DIR --model NAME --mode bf16|fp16|autocast|autocast_fp16
                    [--world-size 2] [--gas 2] [--steps 4] [--config-json '{...}']
                    [--unbatched NAME ...]

It runs oracle.train twice on the same config: as is (LibTorch's BFloat16 / Half CPU kernels,
as the oracle and ds-run run them), and with every aten op of each forward and backward that
has a bf16 / fp16 operand intercepted (a TorchDispatchMode; the TorchScript interpreter
dispatches every op, so the mode sees the ops inside the loaded module; under autocast it sees
them after autocast's casts) and recomputed another correct way: operands upcast to fp32, the
op run in fp32, its float results rounded to bf16 / fp16 (what our compiler does for an op
without a kernel in that dtype). Both are correct implementations that round in different
places; the difference is what the oracle's tolerances must absorb. Prints the largest
differences of losses, grad_norm and final parameters, the smallest param_atol that passes with
the mode's param_rtol, and whether the lr / loss_scale / skipped sequences are equal.
"""

import argparse
import json
import os
import sys

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import oracle  # noqa: E402


class RoundEveryOp(TorchDispatchMode):
    """Ops with an operand of dtype `low` (bf16 or fp16) run in fp32 on upcast operands (a dtype
    argument `low` becomes fp32 too) and round their fp32 results to `low` (casts pass
    through)."""

    def __init__(self, low: torch.dtype):
        super().__init__()
        self.low = low

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if "to_copy" in str(func):
            return func(*args, **kwargs)
        has_low = any(isinstance(t, torch.Tensor) and t.dtype == self.low
                      for t in list(args) + list(kwargs.values()))
        if not has_low:
            return func(*args, **kwargs)

        def up(t):
            # operands, and dtype arguments that describe them (_softmax_backward_data's
            # input_dtype), in fp32
            if isinstance(t, torch.Tensor) and t.dtype == self.low:
                return t.float()
            return torch.float32 if t is self.low else t

        out = func(*tree_map(up, args), **tree_map(up, kwargs))
        return tree_map(lambda t: t.to(self.low)
                        if isinstance(t, torch.Tensor) and t.dtype == torch.float32 else t, out)


# The mode's config section (as test/mpi/precision_check.py's).
MODE_SECTIONS = {
    "bf16": {"bf16": {"enabled": True}},
    "fp16": {"fp16": {"enabled": True}},
    "autocast": {"torch_autocast": {"enabled": True}},
    "autocast_fp16": {"torch_autocast": {"enabled": True, "dtype": "float16"}},
}


def train_rounding_every_op(low: torch.dtype, *args, **kwargs):
    """oracle.train(*args, **kwargs) with forward and backward under RoundEveryOp(low)."""
    forward, backward = oracle.forward_losses, torch.autograd.backward

    def fwd(module, a):
        with RoundEveryOp(low):
            return forward(module, a)

    def bwd(*a, **k):
        with RoundEveryOp(low):
            return backward(*a, **k)

    oracle.forward_losses, torch.autograd.backward = fwd, bwd
    try:
        return oracle.train(*args, **kwargs)
    finally:
        oracle.forward_losses, torch.autograd.backward = forward, backward


def compare(a_lines, a_state, b_lines, b_state, param_rtol):
    """Largest differences of b from a."""
    def rel(x, y):
        return abs(x - y) / abs(y) if y else (0.0 if x == y else float("inf"))

    out = {
        "loss_rel": max(rel(x["loss"], y["loss"]) for x, y in zip(b_lines, a_lines)),
        "grad_norm_rel": max(rel(x["grad_norm"], y["grad_norm"])
                             for x, y in zip(b_lines, a_lines)),
        "sequences_equal": all(x[k] == y[k] for x, y in zip(b_lines, a_lines)
                               for k in ("lr", "loss_scale", "skipped")),
        "param_abs": 0.0, "param_atol_needed": 0.0,
    }
    for name, t in a_state.items():
        if not t.is_floating_point():
            continue
        x, y = b_state[name].double(), t.double()
        d = (x - y).abs()
        out["param_abs"] = max(out["param_abs"], float(d.max()))
        out["param_atol_needed"] = max(out["param_atol_needed"],
                                       float((d - param_rtol * y.abs()).max()))
    return out


def main(argv=None):
    p = argparse.ArgumentParser(prog="round_every_op.py", description=__doc__.splitlines()[0])
    p.add_argument("--models", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--mode", required=True, choices=sorted(MODE_SECTIONS))
    p.add_argument("--world-size", type=int, default=2)
    p.add_argument("--gas", type=int, default=2)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--config-json", type=json.loads, default={})
    p.add_argument("--unbatched", action="append", default=[])
    args = p.parse_args(argv)
    cfg = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": args.gas,
           "optimizer": {"type": "SGD", "params": {"lr": 0.05, "momentum": 0.9}}}
    cfg.update(MODE_SECTIONS[args.mode])
    cfg.update(args.config_json)
    model = os.path.join(args.models, args.model + ".pt")
    data = os.path.join(args.models, args.model + ".data.pt")
    low = torch.float16 if args.mode in ("fp16", "autocast_fp16") else torch.bfloat16
    a = oracle.train(model, data, cfg, args.steps, args.world_size, args.unbatched)
    b = train_rounding_every_op(low, model, data, cfg, args.steps, args.world_size,
                                args.unbatched)
    tol = oracle.PRECISION_TOLERANCES[args.mode]
    got = compare(*a, *b, tol["param_rtol"])
    print(json.dumps(dict(got, model=args.model, mode=args.mode, tolerances=tol), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
