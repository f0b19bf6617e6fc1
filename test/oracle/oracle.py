#!/usr/bin/python3
"""The LibTorch numerical oracle (see docs: design.md, "The numerical oracle").

Run with /usr/bin/python3 (Debian's interpreter, which has torch 1.13).

  oracle.py eval --model M.pt --data D.pt|D.safetensors --world-size W --gas G --steps N
                 [--unbatched NAME ...] --out FILE.jsonl
  oracle.py compare --ours OURS.jsonl --oracle ORACLE.jsonl [--rtol 1e-6] [--atol 0]

Data-parallel semantics reproduced in one process
-------------------------------------------------
The data file holds one tensor per forward argument (keyed by argument name, or in0, in1, ... by
position), shaped [S, B, ...]: S micro-steps, B the global micro-batch. Rank r of W takes rows
[r*b, (r+1)*b) of dim 1, b = B / W. An unbatched argument is shaped [S, ...] and every rank gets
its micro-step slice whole. Optimizer step k (0-based) consumes micro-steps k*G .. k*G+G-1.

The oracle runs every (rank, micro-step) forward separately, as the ranks would, and reports per
optimizer step the MEAN over the W*G forwards of their scalar losses (the mean is taken in double
precision over the fp32 losses). This equals one pass over the whole batch only when rows do not
interact (no BatchNorm batch statistics).

Tuple-returning models (the root returns (loss_a, loss_b, ...)): "losses" lists the mean of each
element, and "loss" is the mean of their SUM, i.e. sum(losses). The sum is the scalar that one
shared backward differentiates, so it is the natural single number to report and compare.

Output: JSON lines, one per optimizer step: {"step": k+1, "loss": float} plus "losses": [float, ...]
for tuple-returning models.

Structure: data loading (load_data / read_safetensors), input binding and per-rank slicing
(bind_inputs / rank_args), running one forward (forward_losses), the evaluation driver
(eval_losses), JSON-lines IO and comparison (compare_lines), CLI. The training oracle (autograd +
torch.optim, back-propagating sum(loss[r][s]) / (W*G) per optimizer step, buffers following rank 0,
parameters without a gradient stepping with zero) is to be added as a sibling of eval_losses that
reuses everything above it; forward_losses already returns the loss tensors it will need.
"""

import argparse
import json
import math
import os
import struct
import sys
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import torch


class OracleError(Exception):
    """A user-facing error (bad file, inconsistent sizes); the CLI prints it and exits 2."""


# ---------------------------------------------------------------------------------------------
# data loading
# ---------------------------------------------------------------------------------------------
_ST_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
    "U8": torch.uint8, "BOOL": torch.bool,
}


def read_safetensors(path: str) -> Dict[str, torch.Tensor]:
    """Reads a .safetensors file (written by hand: no safetensors package needed).

    Layout: u64 little-endian header size N, N bytes of JSON header
    {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}?}, then the
    raw little-endian tensor bytes; offsets are relative to the end of the header.
    Tensors keep the header's order (the order the file was written in).
    """
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise OracleError(f"{path}: too short for a safetensors file")
    (n,) = struct.unpack("<Q", blob[:8])
    if 8 + n > len(blob):
        raise OracleError(f"{path}: safetensors header size {n} exceeds the file size {len(blob)}")
    try:
        header = json.loads(blob[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise OracleError(f"{path}: bad safetensors header: {e}")
    if sys.byteorder != "little":
        raise OracleError("reading safetensors needs a little-endian machine")
    body = memoryview(blob)[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _ST_DTYPES.get(info.get("dtype"))
        if dtype is None:
            raise OracleError(f"{path}: tensor '{name}' has unsupported dtype {info.get('dtype')!r}")
        shape = [int(d) for d in info["shape"]]
        begin, end = (int(o) for o in info["data_offsets"])
        numel = math.prod(shape)
        itemsize = torch.empty((), dtype=dtype).element_size()
        if end - begin != numel * itemsize or end > len(body):
            raise OracleError(f"{path}: tensor '{name}' data_offsets [{begin}, {end}] do not fit "
                              f"shape {shape} of {info['dtype']}")
        raw = bytearray(body[begin:end])  # a writable copy: torch.frombuffer warns on read-only
        if numel == 0:
            t = torch.empty(shape, dtype=dtype)
        else:
            t = torch.frombuffer(raw, dtype=dtype).reshape(shape)
        out[name] = t
    return out


def load_data(path: str) -> Dict[str, torch.Tensor]:
    """A torch.save'd dict of tensors, or a .safetensors file."""
    if not os.path.exists(path):
        raise OracleError(f"data file {path} does not exist")
    if path.endswith(".safetensors"):
        return read_safetensors(path)
    try:
        data = torch.load(path, map_location="cpu")
    except Exception as e:  # torch raises many types for a bad file
        raise OracleError(f"{path}: cannot read as a torch.save file: {e}")
    if not isinstance(data, dict) or not all(isinstance(v, torch.Tensor) for v in data.values()):
        raise OracleError(f"{path}: expected a dict of tensors, got {type(data).__name__}")
    return dict(data)


# ---------------------------------------------------------------------------------------------
# module and inputs
# ---------------------------------------------------------------------------------------------
def load_module(path: str) -> torch.jit.ScriptModule:
    try:
        return torch.jit.load(path, map_location="cpu")
    except Exception as e:
        raise OracleError(f"{path}: cannot load as a TorchScript archive: {e}")


def forward_arg_names(module) -> List[str]:
    """Names of forward's arguments, without self (scripted and traced modules alike)."""
    return [a.name for a in module.forward.schema.arguments[1:]]


class Input:
    """One forward argument: its tensor for all micro-steps and whether it is batched."""

    def __init__(self, name: str, tensor: torch.Tensor, batched: bool):
        self.name = name
        self.tensor = tensor
        self.batched = batched


def bind_inputs(module, data: Dict[str, torch.Tensor], unbatched: Iterable[str] = ()
                ) -> List[Input]:
    """Matches data tensors to forward arguments, by name or else by position (in0, in1, ...)."""
    names = forward_arg_names(module)
    unbatched = list(unbatched)
    for u in unbatched:
        if u not in names:
            raise OracleError(f"--unbatched {u}: forward has no argument '{u}' "
                              f"(arguments: {', '.join(names)})")
    keys = list(data.keys())
    if all(n in data for n in names):
        chosen = names
    elif all(f"in{i}" in data for i in range(len(names))):
        chosen = [f"in{i}" for i in range(len(names))]
    else:
        missing = [n for n in names if n not in data]
        raise OracleError(f"data has no tensor for forward argument(s) {', '.join(map(repr, missing))} "
                          f"(data keys: {', '.join(map(repr, keys))}; forward arguments: "
                          f"{', '.join(names)})")
    extra = [k for k in keys if k not in chosen]
    if extra:
        raise OracleError(f"data has tensor(s) {', '.join(map(repr, extra))} that match no forward "
                          f"argument (forward arguments: {', '.join(names)})")
    return [Input(n, data[k], n not in unbatched) for n, k in zip(names, chosen)]


def check_sizes(inputs: Sequence[Input], world_size: int, gas: int, steps: int) -> Tuple[int, int]:
    """Returns (S, B) after checking that every input agrees and the run fits in the data."""
    if world_size < 1 or gas < 1 or steps < 0:
        raise OracleError(f"bad run: world size {world_size}, gas {gas}, steps {steps}")
    S: Optional[int] = None
    B: Optional[int] = None
    for i in inputs:
        t = i.tensor
        need = 2 if i.batched else 1
        if t.dim() < need:
            raise OracleError(f"input '{i.name}' has shape {list(t.shape)}; expected "
                              + ("[S, B, ...]" if i.batched else "[S, ...]"))
        if S is None:
            S = t.shape[0]
        elif t.shape[0] != S:
            raise OracleError(f"input '{i.name}' has {t.shape[0]} micro-steps, others have {S}")
        if i.batched:
            if B is None:
                B = t.shape[1]
            elif t.shape[1] != B:
                raise OracleError(f"input '{i.name}' has global micro-batch {t.shape[1]}, others {B}")
    if S is None or B is None:
        raise OracleError("the model has no batched input")
    if B % world_size != 0:
        raise OracleError(f"global micro-batch {B} is not divisible by world size {world_size}")
    if steps * gas > S:
        raise OracleError(f"{steps} steps x gas {gas} need {steps * gas} micro-steps; the data has {S}")
    return S, B


def rank_args(inputs: Sequence[Input], s: int, rank: int, b: int) -> List[torch.Tensor]:
    """Forward arguments of micro-step s on one rank: rows [rank*b, (rank+1)*b) of batched inputs."""
    return [i.tensor[s, rank * b:(rank + 1) * b] if i.batched else i.tensor[s] for i in inputs]


# ---------------------------------------------------------------------------------------------
# one forward
# ---------------------------------------------------------------------------------------------
def forward_losses(module, args: Sequence[torch.Tensor]) -> Tuple[List[torch.Tensor], bool]:
    """Runs forward; returns (scalar loss tensors, is_tuple). Raises unless every loss is a scalar."""
    out = module(*args)
    is_tuple = isinstance(out, (tuple, list))
    losses = list(out) if is_tuple else [out]
    for j, l in enumerate(losses):
        if not isinstance(l, torch.Tensor) or l.dim() != 0:
            what = f"element {j} of the returned tuple" if is_tuple else "the returned value"
            shape = list(l.shape) if isinstance(l, torch.Tensor) else type(l).__name__
            raise OracleError(f"forward must return a scalar loss; {what} is {shape}")
    return losses, is_tuple


# ---------------------------------------------------------------------------------------------
# evaluation oracle
# ---------------------------------------------------------------------------------------------
def eval_losses(model_pt: str, data_pt: str, world_size: int, gas: int, steps: int,
                unbatched: Iterable[str] = ()) -> List[dict]:
    """Per optimizer step, the mean loss over ranks and micro-steps, module in eval mode, no grad.

    Note: in eval mode with grad disabled, nn.TransformerEncoderLayer / nn.MultiheadAttention take
    their fused fast path; it agrees with the training (slow) path to ~1e-7 relative.
    """
    module = load_module(model_pt)
    module.eval()
    inputs = bind_inputs(module, load_data(data_pt), unbatched)
    _, B = check_sizes(inputs, world_size, gas, steps)
    b = B // world_size
    lines = []
    with torch.no_grad():
        for k in range(steps):
            total = 0.0
            per: Optional[List[float]] = None
            is_tuple = False
            for s in range(k * gas, (k + 1) * gas):
                for r in range(world_size):
                    try:
                        losses, is_tuple = forward_losses(module, rank_args(inputs, s, r, b))
                    except RuntimeError as e:
                        raise OracleError(f"forward failed at micro-step {s}, rank {r} of "
                                          f"{world_size}: {e}")
                    vals = [float(l) for l in losses]
                    if per is None:
                        per = [0.0] * len(vals)
                    for j, v in enumerate(vals):
                        per[j] += v
                    total += sum(vals)
            n = world_size * gas
            line = {"step": k + 1, "loss": total / n}
            if is_tuple:
                line["losses"] = [v / n for v in per]
            lines.append(line)
    return lines


# ---------------------------------------------------------------------------------------------
# (training oracle goes here: train_losses(model_pt, data_pt, config, world_size, gas, steps, ...)
#  -> per-step lines plus final parameters; see the module docstring.)
# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# JSON lines and comparison
# ---------------------------------------------------------------------------------------------
def write_jsonl(path: str, lines: Iterable[dict]) -> None:
    with open(path, "w") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")  # floats keep full precision (repr)


def read_jsonl(path: str) -> List[dict]:
    if not os.path.exists(path):
        raise OracleError(f"{path} does not exist")
    out = []
    with open(path) as f:
        for no, text in enumerate(f, 1):
            if not text.strip():
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as e:
                raise OracleError(f"{path}:{no}: not JSON: {e}")
            if not isinstance(obj, dict) or "step" not in obj or "loss" not in obj:
                raise OracleError(f"{path}:{no}: expected an object with 'step' and 'loss'")
            out.append(obj)
    return out


def _by_step(path: str, lines: List[dict]) -> Dict[int, dict]:
    out: Dict[int, dict] = {}
    for line in lines:
        step = line["step"]
        if step in out:
            raise OracleError(f"{path}: step {step} appears twice")
        out[step] = line
    return out


def _close(ours: float, oracle: float, rtol: float, atol: float) -> bool:
    if ours is None or oracle is None:
        return False
    ours, oracle = float(ours), float(oracle)
    if math.isnan(ours) or math.isnan(oracle):
        return False  # a NaN loss is never a match
    if ours == oracle:
        return True  # covers equal infinities
    return abs(ours - oracle) <= atol + rtol * abs(oracle)


def compare_lines(ours: List[dict], oracle: List[dict], rtol: float, atol: float,
                  ours_name: str = "ours", oracle_name: str = "oracle") -> Tuple[bool, str]:
    """Compares 'loss' (and 'losses' where the oracle has them) step by step.

    A value passes when |ours - oracle| <= atol + rtol * |oracle|. Returns (ok, message): on
    failure the message names the first failing step and both values.
    """
    a = _by_step(ours_name, ours)
    o = _by_step(oracle_name, oracle)
    if set(a) != set(o):
        only_a = sorted(set(a) - set(o))
        only_o = sorted(set(o) - set(a))
        return False, (f"step counts differ: {ours_name} has {len(a)} steps, {oracle_name} has "
                       f"{len(o)}" + (f"; only in {ours_name}: {only_a}" if only_a else "")
                       + (f"; only in {oracle_name}: {only_o}" if only_o else ""))
    worst = 0.0
    for step in sorted(o):
        la, lo = a[step], o[step]
        pairs = [("loss", la.get("loss"), lo.get("loss"))]
        if "losses" in lo:
            if not isinstance(la.get("losses"), list) or len(la["losses"]) != len(lo["losses"]):
                return False, (f"step {step}: {oracle_name} has losses {lo['losses']}, "
                               f"{ours_name} has {la.get('losses')}")
            pairs += [(f"losses[{j}]", x, y) for j, (x, y) in enumerate(zip(la["losses"], lo["losses"]))]
        for what, x, y in pairs:
            if not _close(x, y, rtol, atol):
                diff = abs(float(x) - float(y)) if x is not None and y is not None else float("nan")
                rel = diff / abs(float(y)) if y not in (None, 0) else float("inf")
                return False, (f"step {step}: {what} differs: {ours_name} {x!r} vs {oracle_name} {y!r} "
                               f"(abs diff {diff:.3g}, rel diff {rel:.3g}; rtol {rtol:g}, atol {atol:g})")
            if y not in (None, 0) and math.isfinite(float(y)) and math.isfinite(float(x)):
                worst = max(worst, abs(float(x) - float(y)) / abs(float(y)))
    return True, (f"compare: {len(o)} steps match (max rel diff {worst:.3g}; rtol {rtol:g}, "
                  f"atol {atol:g})")


# ---------------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------------
def _cmd_eval(args) -> int:
    lines = eval_losses(args.model, args.data, args.world_size, args.gas, args.steps, args.unbatched)
    write_jsonl(args.out, lines)
    print(f"oracle eval: {len(lines)} steps, world size {args.world_size}, gas {args.gas} -> {args.out}")
    return 0


def _cmd_compare(args) -> int:
    ok, msg = compare_lines(read_jsonl(args.ours), read_jsonl(args.oracle), args.rtol, args.atol,
                            args.ours, args.oracle)
    if ok:
        print(msg)
        return 0
    print(f"compare FAILED: {msg}", file=sys.stderr)
    return 1


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="oracle.py", description="LibTorch numerical oracle")
    sub = p.add_subparsers(dest="cmd", required=True)

    e = sub.add_parser("eval", help="per-step mean losses of forward passes in eval mode")
    e.add_argument("--model", required=True, help="TorchScript archive (.pt)")
    e.add_argument("--data", required=True, help="data: torch.save dict (.pt) or .safetensors")
    e.add_argument("--world-size", type=int, default=1)
    e.add_argument("--gas", type=int, default=1, help="gradient accumulation steps")
    e.add_argument("--steps", type=int, required=True, help="optimizer steps")
    e.add_argument("--unbatched", action="append", default=[], metavar="NAME",
                   help="a forward argument shaped [S, ...] that every rank gets whole (repeatable)")
    e.add_argument("--out", required=True, help="output JSON lines")
    e.set_defaults(func=_cmd_eval)

    c = sub.add_parser("compare", help="compare two loss files step by step")
    c.add_argument("--ours", required=True)
    c.add_argument("--oracle", required=True)
    c.add_argument("--rtol", type=float, default=1e-6)
    c.add_argument("--atol", type=float, default=0.0)
    c.set_defaults(func=_cmd_compare)

    args = p.parse_args(argv)
    try:
        return args.func(args)
    except OracleError as err:
        print(f"oracle.py {args.cmd}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
