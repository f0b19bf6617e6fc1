#!/usr/bin/env python3
"""The LibTorch numerical oracle (docs/oracle.md).

Run with .venv/bin/python (torch 2.15, installed by scripts/setup.sh).

  oracle.py eval --model M.pt --data D.pt|D.safetensors --world-size W --gas G --steps N
                 [--unbatched NAME ...] [--device cpu|cuda[:N]] --out FILE.jsonl
  oracle.py compare --ours OURS.jsonl --oracle ORACLE.jsonl [--rtol 1e-6] [--atol 0]
  oracle.py train --model M.pt --data D.pt --config CFG.json --steps N [--world-size W]
                  [--unbatched NAME ...] [--device cpu|cuda[:N]] --out FILE.jsonl
                  [--save-params FILE.safetensors]
  oracle.py compare-params --ours A.safetensors --oracle B.safetensors [--rtol 1e-4] [--atol 1e-4]

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
loss, and "loss" is the mean of their SUM, i.e. sum(losses). The sum is the scalar that one
shared backward differentiates, so it is the natural single number to report and compare. The
losses are the 0-dim float elements; other elements (a transformers-style model's
logits) are not trained on, as ds-run seeds them with zeros ("losses" appears with two losses
or more, as in ds-run's lines).

Output of eval: JSON lines, one per optimizer step: {"step": k+1, "loss": float} plus "losses": [float, ...]
for tuple-returning models.

Training oracle (train)
-----------------------
train(model, data, config, steps, world_size, unbatched) -> (lines, final_state) reproduces
DeepSpeed's training with autograd and torch.optim. Every submodule in the mode it was saved in
(train unless saved after .eval()); TorchScript's executor optimisations off, so autograd's own
derivative formulas run. Per optimizer step, for each
micro-step of the GAS window and each rank, forward on the rank's rows and backward of
sum(losses) / (W * G). Each rank keeps its own buffers (BatchNorm running statistics move with its
own rows); the saved buffers are rank 0's. Then, per engine with an optimizer: trainable parameters
without a gradient get zeros; the pre-clip global 2-norm is reported as grad_norm and gradients
are clipped to gradient_clipping (default 1.0, 0 disables) as torch.nn.utils.clip_grad_norm_
does; the lr of the scheduler (docs/config.md, including DeepSpeed's lag: update n runs at
iteration n - 2) is set; torch.optim steps (Adam -> AdamW unless adam_w_mode false -> Adam with L2
decay; AdamW; SGD). Batch sizes are completed from the config as DeepSpeed does ("auto" micro
batch from the data). Lines: {"step", "loss" (mean over ranks and micro-steps of the summed
losses), "lr", "grad_norm", "loss_scale": 1.0, "skipped": false} (+ "losses" for tuple outputs;
+ "engines" when several engines train). Mixed precision: see below.

Mixed precision (issue 7; train(), _train_mixed)
------------------------------------------------
The oracle models bf16, fp16 and torch_autocast as our compiler and runtime implement them
(docs/config.md, "Mixed precision"; reference/deepspeed.md). Every engine of a config must have
the same precision settings. Common to the three: gradients are kept PER RANK (each rank's
backward is seeded with loss_scale / G, G = GAS; no 1 / W there) and accumulated over the GAS
window in data_types.grad_accum_dtype (default: the model dtype); at the boundary each
parameter's W rank gradients are averaged as the runtime reduces them (reduce_average): cast to
the communication dtype, summed left to right with every addition done in fp32 on the upcast
operands and rounded to that dtype (W = 2: round(fp32(g0) + fp32(g1))), then divided by W in
that dtype. A parameter no rank saw gets zeros. The averaged gradients are upcast to fp32 and
the engine's fp32 master weights (p.float() of the stored parameters at the start) step with
fp32 optimizer state: clip by the global norm (default 1.0) with clip_grad_norm_'s formula,
torch.optim update, then the stored parameters = master rounded to the model dtype.
  - bf16 (bf16.enabled or bfloat16.enabled) and fp16 (fp16.enabled): module.to(torch.bfloat16)
    / module.to(torch.float16) (parameters and float buffers), float inputs cast to that dtype
    (our compiler inserts that cast), forward and backward with LibTorch's BFloat16 / Half CPU
    kernels (torch 2.15 has both for every operator of the registry, forward and backward:
    test/precision/probe_tables.py; so does our compiler, which runs every op of a native
    engine in its dtype), loss seed loss_scale / G in the loss's dtype (bf16: 1 / G).
    grad_accum_dtype and communication_data_type default to the model dtype. Every parameter
    gradient is of the model dtype; an fp16 one is inf where it overflows fp16's max 65504.
    fp16 only: the seed scale / G is rounded to fp16 (DeepSpeed's FP16_Optimizer.backward
    scales loss.float() and the gradient of the cast rounds it: 2^16 / G overflows for G = 1,
    and that step is skipped, as in DeepSpeed). Overflow = any
    inf/NaN in the engine's averaged gradients (an inf or NaN on any rank, or a sum that
    overflows, ends up there; the runtime reduces the flag with one MAX all-reduce). On
    overflow the step is skipped: no update, gradients dropped, the LR scheduler not advanced
    (DeepSpeed steps the scheduler only when the step was applied; global_steps counts skipped
    steps too), the scaler updates. Else the gradients are unscaled (fp32: g / scale, the scale
    this step used), clipped, the masters step, the parameters = master.half(), then the scaler
    updates. The scaler (LossScaler) is DeepSpeed's static/dynamic one (hysteresis,
    consecutive_hysteresis, loss_scale_window, min_loss_scale); an overflow at min_loss_scale is
    an OracleError, as DeepSpeed raises. Loss lines: "loss_scale" = the scale this step used,
    "skipped", "lr" = the lr this step used or, when skipped, would have used (the next applied
    update's), "grad_norm" = the pre-clip norm of the unscaled averaged gradients; on a skipped
    step the value of the last applied step (0.0 before the first one), which is what
    DeepSpeed's engine.get_global_grad_norm() returns (its optimizers leave _global_grad_norm
    untouched when they skip; it starts at 0.0). DeepSpeed DIFFERENCE (not modelled, on purpose):
    DeepSpeed's FP16_Optimizer (stage 0), ZeRO-1/2 and ZeRO-3 call update_scale BEFORE
    unscaling, so on a clean step where the window doubles the scale they divide the gradients
    (and, stages 0/3, the reported norm) by the NEW scale, i.e. that step's gradients are halved;
    our contract unscales by the scale the step used.
  - torch_autocast (torch_autocast.enabled; dtype bfloat16, the CPU default, or float16):
    parameters, gradients and optimizer state stay fp32; the forward runs under
    torch.autocast("cpu", dtype) (the backward outside it, as torch recommends); bf16: no loss
    scale. float16: DeepSpeed's torch.amp.GradScaler(device="cpu") with torch's defaults (2^16,
    growth_interval 2000), here a real one driving the masters as DeepSpeed's engine does at
    stage 0 (engine._take_model_step): seed scale / G (the fp32 loss's), the averaged
    gradients on the masters, scaler.unscale_(optimizer) (before clipping), overflow = any
    inf/NaN left in them, clip (applied steps), scaler.step(optimizer) (skips the update on an
    overflow), scaler.update() (halves on an overflow, doubles after 2000 clean steps); a
    skipped step leaves the LR schedule and grad_norm as fp16's does (DeepSpeed's ZeRO stages;
    docs/precision.md, "Where we differ", for stage 0 and the rest). CHECKED for torch 2.15: autocast applies to a
    torch.jit.load'ed module run by the interpreter with optimized execution off (the oracle's
    setting) and on: autocast is the AutocastCPU dispatcher key, which every interpreted op passes
    (linear -> bf16 / fp16, relu follows, mse_loss -> fp32), and both dtypes use the same lists.
    LibTorch 2.15's CPU layer_norm takes a bf16 / fp16 input with fp32 weights and returns the
    input's dtype, where our compiler casts the input up to fp32 (docs/precision.md): a
    LayerNorm fed directly by a Linear differs by that rounding; in the transformer model every
    LayerNorm reads the fp32 residual stream, so it agrees. The gradients of parameters owned
    DIRECTLY by a lower_precision_safe_modules class (default torch.nn.Linear, Conv1d, Conv2d,
    Conv3d; exact class: "torch.nn.Linear" names torch.nn.modules.linear.Linear, the demangled
    TorchScript class the plan records; subclasses never match) are reduced in the autocast
    dtype (cast to it, summed as above, divided by W, upcast to fp32); all others in fp32.
The final state (--save-params) holds the parameters and buffers as the module stores them:
bf16 under bf16, fp16 under fp16 (float buffers too), fp32 under torch_autocast; train(...,
masters={}) also returns the fp32 master weights (precision_check.py compares a parameter that
ds-run writes as fp32 with its master).

Tolerances (PRECISION_TOLERANCES; measured against a second implementation)
-----------------------------------------------------------------------
bf16 keeps 8 significant bits: one rounding is up to 2^-9 relative (half an ulp), an ulp is
2^-8..2^-7 relative (3.9e-3..7.8e-3); fp16 keeps 11 (an ulp 2^-11..2^-10). Two correct
implementations differ by where they round (fused kernels, reduction orders, decompositions).
To measure that, the oracle was run against itself with every aten op of the forward and
backward that has a bf16 / fp16 operand intercepted (a TorchDispatchMode) and computed in fp32 on
upcast operands, its results rounded to bf16 / fp16 (test/oracle/round_every_op.py; what our
compiler does for an op without a kernel in that dtype), with torch 2.15:
  round_every_op.py --models build/test/models --model M --mode MODE [--world-size 1]
      [--steps 3] [--config-json '{"optimizer": {"type": "AdamW", "params": {"lr": 0.001}}}']
(W = 2, GAS 2, 4 steps, SGD(lr 0.05, momentum 0.9) unless said), largest differences:
  bf16, transformer: losses 3.3e-3 relative (W = 1: 2.1e-3), grad_norm 1.8e-4, parameters
    within one bf16 ulp (rtol 2^-7) + 4.6e-5 absolute (W = 1; W = 2: 2.5e-5).
  fp16, transformer: losses 1.4e-4 (W = 1: 5.4e-4), grad_norm 4.0e-5, parameters within one
    fp16 ulp (rtol 2^-10) + 4.9e-6 (W = 1; W = 2: 4.0e-6); loss_scale/skipped/lr equal.
  autocast (bf16), transformer: losses 1.3e-4, grad_norm 2.4e-4 (W = 1: 3.5e-4), parameters
    1e-3 relative + 7.4e-5 absolute.
  autocast_fp16, transformer: losses 1.2e-5, grad_norm 5.9e-5, parameters 2^-10 relative +
    3.5e-6 absolute.
  AdamW(lr 1e-3), transformer: losses bf16 1.1e-3, fp16 2.8e-4, autocast 1.3e-4, autocast_fp16
    1.0e-5, grad_norm <= 2.4e-4, but parameters 1.9e-3..2.5e-3 absolute beyond the relative
    tolerance: Adam turns the sign of near-zero gradients into full lr steps, so parameter
    checks of low-precision runs use SGD (its update error is lr * |g| * 2^-8, far below an ulp).
  fp16 with AdamW(lr 1e-3), scale 2^8: mlp losses 3.8e-4, grad_norm 0; transformer losses
    2.8e-4, grad_norm 3.9e-5. fp16_scale (the overflow test's config, GAS 1, 16 steps): equal
    loss_scale/skipped/lr sequences, losses, grad_norm and parameters bitwise equal.
  cancel_probe (make_models.py; its loss is the forward's rounding error), 3 steps: losses
    bitwise equal in every mode (its ops are elementwise: a kernel that computes in fp32 and
    rounds once is what the fp32 recomputation does), grad_norm bf16 3.1e-3, fp16 8.6e-5,
    autocast and autocast_fp16 equal; parameters within the relative tolerance. The fp32 run's
    losses are 1700x (bf16), 30x (fp16), 700x (autocast) and 15x (autocast_fp16) smaller.
The tolerances below leave a factor >= 4 over these: bf16 losses 2^-6 (two ulps), grad_norm
1e-2, parameters rtol 2^-7 (one ulp) + atol 2e-4; fp16 losses 4e-3, grad_norm 2e-3, parameters
rtol 2^-10 (one ulp) + atol 1e-4; autocast losses 2e-3, grad_norm 4e-3, parameters rtol 1e-3 +
atol 4e-4; autocast_fp16 losses 1e-4, grad_norm 4e-4, parameters rtol 2^-10 + atol 2e-5.
cancel_probe's bf16 grad_norm (3.1e-3) needs its test's own --norm-rtol 2e-2. They hold for
models of the transformer's size and gradient scale with SGD-sized updates; tied_lm (losses
~14, gradients ~5) differs by 3.0e-2 in bf16 and 2.3e-2 in fp16 under the same test (grad_norm
1.3e-2 / 7.0e-3, parameters 9.9e-3 / 1.4e-3 beyond the relative tolerance): pass wider
tolerances per test there. lr, loss_scale and skipped are compared exactly. ds-run itself, which
runs the same LibTorch kernels as the oracle, agrees far closer (test/mpi/precision_check.py on
the transformer, W = 2: losses bitwise equal at stage 0 in every mode, grad_norm within 2e-4 at
stages 2 and 3, where the reduction order differs). test_oracle_selfcheck.py keeps the second
implementation as a test (within a quarter of the loss and grad_norm tolerances, half of
param_atol).

compare-params: per tensor, elementwise |ours - oracle| <= atol + rtol * |oracle|; names, shapes
and dtypes must agree; the message names the first failing tensor, the element and both values.

Device (--device, default cpu)
------------------------------
--device cuda[:N] runs the same archive and data under this torch's autograd and torch.optim on
that GPU (scripts/gpu/gpu-check.sh compares ds-run --device cuda with it on the same GPU): the
module is loaded with map_location=device and the data moved there; TF32 is off (cuBLAS matmuls
and cuDNN: torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32 False), so
fp32 stays fp32; autocast and the fp16 autocast GradScaler use that device type; the lines and
saved parameters are the same as on the CPU (parameters copied back to the CPU). Everything
above describes both; with cpu (the default) nothing changes. The tolerances were measured on
the CPU; on a GPU they are a claim that gpu-check.sh tests.

Structure: data loading (load_data / read_safetensors), input binding and per-rank slicing
(bind_inputs / rank_args), running one forward (forward_losses), the evaluation driver
(eval_losses), JSON-lines IO and comparison (compare_lines), the training oracle (resolve_batch,
make_optimizer, scheduler_lr, train), safetensors writing and parameter comparison
(write_safetensors, compare_params, compare_train_lines), CLI.
"""

import argparse
import json
import math
import os
import re
import struct
import sys
import warnings
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import torch

# torch 2.x marks TorchScript deprecated ("Please switch to torch.compile or torch.export"); the
# oracle loads the archives users have, and the warning would repeat in every test's output.
warnings.filterwarnings("ignore", message=r".*is deprecated\. Please switch to", category=FutureWarning)


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


def load_data(path: str):
    """A torch.save'd dict of tensors, or a .safetensors file: Dict[str, Tensor]; or a
    torch.save'd list of such dicts, one per micro-step (shapes may differ): a list."""
    if not os.path.exists(path):
        raise OracleError(f"data file {path} does not exist")
    if path.endswith(".safetensors"):
        return read_safetensors(path)
    try:
        data = torch.load(path, map_location="cpu")
    except Exception as e:  # torch raises many types for a bad file
        raise OracleError(f"{path}: cannot read as a torch.save file: {e}")
    def is_dict(d):
        return isinstance(d, dict) and all(isinstance(v, torch.Tensor) for v in d.values())
    if isinstance(data, list) and data and all(is_dict(d) for d in data):
        return [dict(d) for d in data]
    if not is_dict(data):
        raise OracleError(f"{path}: expected a dict of tensors or a list of such dicts, got "
                          f"{type(data).__name__}")
    return dict(data)


# ---------------------------------------------------------------------------------------------
# module and inputs
# ---------------------------------------------------------------------------------------------
def load_module(path: str, device: str = "cpu") -> torch.jit.ScriptModule:
    try:
        return torch.jit.load(path, map_location=device)
    except Exception as e:
        raise OracleError(f"{path}: cannot load as a TorchScript archive: {e}")


def check_device(device: str) -> str:
    """'cpu', or 'cuda' / 'cuda:N' when this torch sees that GPU; TF32 off on the GPU."""
    if device == "cpu":
        return device
    if not re.fullmatch(r"cuda(:\d+)?", device):
        raise OracleError(f"--device {device!r}: expected cpu, cuda or cuda:N")
    if not torch.cuda.is_available():
        raise OracleError(f"--device {device}: no CUDA device is visible to this torch "
                          f"({torch.__version__})")
    index = int(device.split(":")[1]) if ":" in device else 0
    if index >= torch.cuda.device_count():
        raise OracleError(f"--device {device}: this torch sees {torch.cuda.device_count()} "
                          "CUDA device(s)")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return device


def data_to(data, device: str):
    """load_data's result with every tensor on `device` (unchanged on the CPU)."""
    if device == "cpu":
        return data
    if isinstance(data, list):
        return [data_to(d, device) for d in data]
    return {k: v.to(device) for k, v in data.items()}


def forward_arg_names(module) -> List[str]:
    """Names of forward's arguments, without self (scripted and traced modules alike)."""
    return [a.name for a in module.forward.schema.arguments[1:]]


class Input:
    """One forward argument: its tensor for all micro-steps ([S, ...], or a list of S tensors
    whose shapes may differ) and whether it is batched."""

    def __init__(self, name: str, tensor, batched: bool):
        self.name = name
        self.tensor = tensor
        self.batched = batched

    def rows(self, s: int) -> int:
        """Rows of micro-step s (batched inputs)."""
        return self.tensor[s].shape[0]


def bind_inputs(module, data, unbatched: Iterable[str] = ()) -> List[Input]:
    """Matches data tensors to forward arguments, by name or else by position (in0, in1, ...).
    A list of per-micro-step dicts binds by its first dict; each Input then holds a list."""
    if isinstance(data, list):
        first = bind_inputs(module, data[0], unbatched)
        keys = [next(k for k, v in data[0].items() if v is i.tensor) for i in first]
        return [Input(i.name, [d[k] for d in data], i.batched) for i, k in zip(first, keys)]
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
        if isinstance(t, list):  # micro-steps of their own shapes: B is the first one's
            S = len(t) if S is None else S
            if i.batched and B is None:
                B = t[0].shape[0]
            continue
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
    """Forward arguments of micro-step s on one rank: rows [rank*b, (rank+1)*b) of batched inputs.
    A micro-step of the list form with other rows than the first (a short last batch) splits
    its rows evenly over the ranks as well."""
    args = []
    for i in inputs:
        t = i.tensor[s]
        if i.batched:
            bs = b * t.shape[0] // i.rows(0)
            t = t[rank * bs:(rank + 1) * bs]
        args.append(t)
    return args


# ---------------------------------------------------------------------------------------------
# one forward
# ---------------------------------------------------------------------------------------------
def forward_losses(module, args: Sequence[torch.Tensor]) -> Tuple[List[torch.Tensor], bool]:
    """Runs forward; returns (scalar loss tensors, several): several when the forward returns
    more than one loss (ds-run then reports "losses"). Of a tuple, the float elements of one
    0-dim elements are the losses (ds-run's outputs of kind "loss", each seeded with 1); the others
    (logits, indices) get no gradient, as ds-run seeds them with zeros. Raises unless there is a
    loss."""
    out = module(*args)
    is_tuple = isinstance(out, (tuple, list))
    outputs = list(out) if is_tuple else [out]
    losses = [o for o in outputs if isinstance(o, torch.Tensor) and o.is_floating_point()
              and o.dim() == 0]
    if not losses:
        if is_tuple:
            raise OracleError("forward must return a scalar loss; no element of the returned "
                              "tuple is one")
        shape = list(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise OracleError(f"forward must return a scalar loss; the returned value is {shape}")
    return losses, is_tuple and len(losses) > 1


# ---------------------------------------------------------------------------------------------
# evaluation oracle
# ---------------------------------------------------------------------------------------------
def eval_losses(model_pt: str, data_pt: str, world_size: int, gas: int, steps: int,
                unbatched: Iterable[str] = (), device: str = "cpu") -> List[dict]:
    """Per optimizer step, the mean loss over ranks and micro-steps, module in eval mode, no grad.

    Note: in eval mode with grad disabled, nn.TransformerEncoderLayer / nn.MultiheadAttention take
    their fused fast path; it agrees with the training (slow) path to ~1e-7 relative.
    """
    device = check_device(device)
    module = load_module(model_pt, device)
    module.eval()
    inputs = bind_inputs(module, data_to(load_data(data_pt), device), unbatched)
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
# training oracle: DeepSpeed config -> batch sizes, engines, optimizer, scheduler
# ---------------------------------------------------------------------------------------------
def _given(section: dict, key: str):
    """A config value, None when absent or null (null means "not set", as in DeepSpeed)."""
    v = section.get(key) if isinstance(section, dict) else None
    return v


def _batch_int(cfg: dict, key: str, what: str) -> Optional[int]:
    v = _given(cfg, key)
    if v is None or v == "auto":
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v) or v < 1:
        raise OracleError(f"{what}{key}: expected an integer >= 1, got {v!r}")
    return int(v)


def resolve_batch(config: dict, world_size: int, data_micro_batch: Optional[int],
                  what: str = "") -> Tuple[int, int, int]:
    """(micro batch per rank, GAS, train batch) completed as DeepSpeed does (docs/config.md).

    "auto" micro-batch: B / world_size from the data; an "auto" GAS or train batch size counts as
    not given. When data_micro_batch (B) is given, micro * world_size must equal it.
    """
    W = world_size
    train = _batch_int(config, "train_batch_size", what)
    micro = _batch_int(config, "train_micro_batch_size_per_gpu", what)
    gas = _batch_int(config, "gradient_accumulation_steps", what)
    if _given(config, "train_micro_batch_size_per_gpu") == "auto" or (
            micro is None and train is None and any(
                _given(config, k) == "auto" for k in ("train_batch_size",
                                                       "gradient_accumulation_steps"))):
        if data_micro_batch is None:
            raise OracleError(f"{what}train_micro_batch_size_per_gpu: \"auto\" needs the data's "
                              "global micro-batch")
        if data_micro_batch % W:
            raise OracleError(f"{what}train_micro_batch_size_per_gpu: \"auto\": global micro-batch "
                              f"{data_micro_batch} is not divisible by world size {W}")
        micro = data_micro_batch // W

    def exact(num: int, den: int, name: str) -> int:
        if num % den:
            raise OracleError(f"{what}{name}: {num} is not divisible by {den}")
        return num // den

    if train is not None and micro is not None and gas is not None:
        if train != micro * gas * W:
            raise OracleError(f"{what}train_batch_size {train} != train_micro_batch_size_per_gpu "
                              f"{micro} * gradient_accumulation_steps {gas} * world size {W}")
    elif train is not None and micro is not None:
        gas = exact(train, micro * W, "gradient_accumulation_steps = train_batch_size / "
                                      "(micro * world size)")
    elif train is not None and gas is not None:
        micro = exact(train, gas * W, "train_micro_batch_size_per_gpu = train_batch_size / "
                                      "(gas * world size)")
    elif micro is not None:
        gas = 1 if gas is None else gas
        train = micro * gas * W
    elif train is not None:
        gas = 1
        micro = exact(train, W, "train_micro_batch_size_per_gpu = train_batch_size / world size")
    else:
        raise OracleError(f"{what}train_batch_size or train_micro_batch_size_per_gpu must be given")
    if train is None:
        train = micro * gas * W
    if data_micro_batch is not None and micro * W != data_micro_batch:
        raise OracleError(f"{what}train_micro_batch_size_per_gpu {micro} * world size {W} = "
                          f"{micro * W} does not match the data's global micro-batch "
                          f"{data_micro_batch}")
    return micro, gas, train


def engine_configs(config: dict) -> List[Tuple[str, dict]]:
    """[(engine key, engine config)] in file order; a plain config is one engine keyed ""."""
    if not isinstance(config, dict):
        raise OracleError(f"config: expected a JSON object, got {type(config).__name__}")
    if "engines" not in config:
        return [("", config)]
    if len(config) != 1:
        raise OracleError("config: a document with \"engines\" must have no other top-level key")
    out = []
    for key, cfg in config["engines"].items():
        if isinstance(cfg, str):
            raise OracleError(f"engines.{key}: engine configs given as file paths must be inlined "
                              "for the oracle (pass a dict)")
        out.append((key, cfg))
    return out


# ---------------------------------------------------------------------------------------------
# mixed precision: the config, rounding of reductions, the fp16 loss scaler
# ---------------------------------------------------------------------------------------------
# The spellings of DeepSpeed's DtypeEnum, as lib/Config/Precision.cpp reads data_types and
# torch_autocast.dtype (communication_data_type: fp32/fp16/bf16, case-insensitive).
_DTYPE_SPELLINGS = {
    "fp32": torch.float32, "float32": torch.float32, "float": torch.float32,
    "torch.float32": torch.float32,
    "fp16": torch.float16, "float16": torch.float16, "half": torch.float16,
    "torch.float16": torch.float16,
    "bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "torch.bfloat16": torch.bfloat16,
}

DEFAULT_SAFE_MODULES = ("torch.nn.Linear", "torch.nn.Conv1d", "torch.nn.Conv2d", "torch.nn.Conv3d")


def _dtype_named(value, what: str) -> torch.dtype:
    dtype = _DTYPE_SPELLINGS.get(value) if isinstance(value, str) else None
    if dtype is None:
        raise OracleError(f"{what}: unknown dtype {value!r} (expected fp32, fp16 or bf16, or their "
                          "float32/float16/bfloat16/torch.* spellings)")
    return dtype


class Precision:
    """The mixed-precision mode of an engine config (docs/config.md, "Mixed precision").

    mode: "fp32", "bf16", "fp16" or "autocast" (grad_scaler: with float16). model_dtype: the dtype the module's parameters
    are stored in (bf16, fp16; fp32 for fp32 and autocast). grad_accum_dtype: data_types.
    grad_accum_dtype, default the model dtype. comm_dtype: communication_data_type, default the
    model dtype (autocast: per parameter, see comm_dtype_for). fp16: the resolved fp16 section.
    """

    def __init__(self):
        self.mode = "fp32"
        self.model_dtype = torch.float32
        self.grad_accum_dtype = torch.float32
        self.comm_dtype = torch.float32
        self.autocast_dtype = torch.bfloat16
        self.safe_modules: Tuple[str, ...] = DEFAULT_SAFE_MODULES
        self.fp16: Optional[dict] = None

    @property
    def grad_scaler(self) -> bool:
        """fp16 autocast: DeepSpeed adds a torch.amp.GradScaler (engine.py, stage_1_and_2.py,
        stage3.py); bf16 autocast has none."""
        return self.mode == "autocast" and self.autocast_dtype == torch.float16

    def key(self) -> tuple:
        return (self.mode, self.model_dtype, self.grad_accum_dtype, self.comm_dtype,
                self.autocast_dtype, tuple(self.safe_modules),
                json.dumps(self.fp16, sort_keys=True))

    def comm_dtype_for(self, module_class: str) -> torch.dtype:
        """The dtype a parameter's gradient is reduced in. torch_autocast: the autocast dtype for
        parameters owned directly by a lower-precision-safe module (exact class), fp32 else."""
        if self.mode == "autocast":
            safe = any(safe_module_matches(spec, module_class) for spec in self.safe_modules)
            return self.autocast_dtype if safe else torch.float32
        return self.comm_dtype


def safe_module_matches(spec: str, module_class: str) -> bool:
    """Exact class match of a lower_precision_safe_modules entry against a module's demangled
    qualified class name (as the plan records it, e.g. "torch.nn.modules.linear.Linear").
    "torch.nn.X" (the public alias) names torch.nn.modules.<file>.X; any other entry must equal
    the qualified name. TorchScript keeps no base classes: subclasses never match."""
    if spec == module_class:
        return True
    if spec.startswith("torch.nn.") and spec.count(".") == 2:
        bare = spec.rsplit(".", 1)[1]
        parts = module_class.split(".")
        return (len(parts) == 5 and parts[:3] == ["torch", "nn", "modules"]
                and parts[4] == bare)
    return False


_MANGLE = re.compile(r"___torch_mangle_\d+\.")


def module_class_name(module) -> str:
    """The demangled qualified class of a ScriptModule: __torch__.torch.nn.modules.linear.
    ___torch_mangle_3.Linear -> torch.nn.modules.linear.Linear."""
    try:
        name = module._c._type().qualified_name()
    except AttributeError:  # an eager module
        cls = type(module)
        return f"{cls.__module__}.{cls.__qualname__}"
    name = _MANGLE.sub("", name)
    if name.startswith("__torch__."):
        name = name[len("__torch__."):]
    return name


def parameter_owner_classes(module) -> Dict[str, str]:
    """{qualified parameter name: class of the module that owns it directly}. A tied parameter
    belongs to the first module (in named_modules order) that holds it."""
    out: Dict[str, str] = {}
    seen = set()
    for mname, sub in module.named_modules():
        cls = module_class_name(sub)
        for pname, p in sub.named_parameters(recurse=False):
            if id(p) in seen:
                continue
            seen.add(id(p))
            out[f"{mname}.{pname}" if mname else pname] = cls
    return out


def _fp16_settings(sec: dict, what: str) -> dict:
    """The fp16 section with DeepSpeed's defaults, validated as lib/Config/Precision.cpp does."""
    for key in ("auto_cast", "fp16_master_weights_and_grads"):
        if sec.get(key):
            raise OracleError(f"{what}fp16.{key}: true is not supported")

    def num(key, default):
        v = sec.get(key)
        if v is None:
            return default
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise OracleError(f"{what}fp16.{key}: expected a number, got {v!r}")
        return v

    out = {
        "loss_scale": float(num("loss_scale", 0)),
        "initial_scale_power": num("initial_scale_power", 16),
        "loss_scale_window": num("loss_scale_window", 1000),
        "hysteresis": num("hysteresis", 2),
        "consecutive_hysteresis": bool(sec.get("consecutive_hysteresis") or False),
        "min_loss_scale": float(num("min_loss_scale", 1)),
    }
    if out["loss_scale"] < 0:
        raise OracleError(f"{what}fp16.loss_scale: must be >= 0")
    for key, lo, hi in (("initial_scale_power", 0, 64), ("loss_scale_window", 1, None),
                        ("hysteresis", 1, None)):
        v = out[key]
        if v != int(v) or v < lo or (hi is not None and v > hi):
            raise OracleError(f"{what}fp16.{key}: expected an integer in [{lo}, {hi or 'inf'}], "
                              f"got {v!r}")
        out[key] = int(v)
    if out["min_loss_scale"] <= 0:
        raise OracleError(f"{what}fp16.min_loss_scale: must be > 0")
    return out


def precision_config(cfg: dict, what: str = "") -> Precision:
    """Reads fp16, bf16 (or bfloat16), torch_autocast, data_types and communication_data_type."""
    prec = Precision()
    if "bf16" in cfg and "bfloat16" in cfg:
        raise OracleError(f"{what}bfloat16: give either \"bf16\" or its old name \"bfloat16\", "
                          "not both")

    def enabled(key):
        sec = cfg.get(key)
        return isinstance(sec, dict) and bool(sec.get("enabled"))

    fp16 = enabled("fp16")
    bf16 = enabled("bf16") or enabled("bfloat16")
    autocast = enabled("torch_autocast")
    if fp16 and bf16:
        raise OracleError(f"{what}bf16.enabled: fp16 and bf16 cannot both be enabled")
    if autocast and (fp16 or bf16):
        raise OracleError(f"{what}torch_autocast.enabled: torch_autocast cannot be enabled "
                          f"together with {'fp16' if fp16 else 'bf16'}")
    if fp16:
        prec.mode, prec.model_dtype = "fp16", torch.float16
        prec.fp16 = _fp16_settings(cfg["fp16"], what)
    elif bf16:
        prec.mode, prec.model_dtype = "bf16", torch.bfloat16
    elif autocast:
        sec = cfg["torch_autocast"]
        prec.mode = "autocast"
        if sec.get("dtype") is not None:
            prec.autocast_dtype = _dtype_named(sec["dtype"], f"{what}torch_autocast.dtype")
        if prec.autocast_dtype == torch.float32:
            raise OracleError(f"{what}torch_autocast.dtype: autocast needs a lower-precision dtype")
        mods = sec.get("lower_precision_safe_modules")
        if mods is not None:
            if not isinstance(mods, list) or not all(isinstance(m, str) for m in mods):
                raise OracleError(f"{what}torch_autocast.lower_precision_safe_modules: expected a "
                                  "list of class names")
            prec.safe_modules = tuple(mods)
    prec.grad_accum_dtype = prec.model_dtype
    prec.comm_dtype = prec.model_dtype
    dt = cfg.get("data_types")
    if isinstance(dt, dict) and dt.get("grad_accum_dtype") is not None:
        prec.grad_accum_dtype = _dtype_named(dt["grad_accum_dtype"],
                                             f"{what}data_types.grad_accum_dtype")
    comm = cfg.get("communication_data_type")
    if comm is not None:
        lower = str(comm).lower()
        if lower not in ("fp32", "fp16", "bf16"):
            raise OracleError(f"{what}communication_data_type: must be \"fp32\", \"fp16\" or "
                              f"\"bf16\", got {comm!r}")
        prec.comm_dtype = _DTYPE_SPELLINGS[lower]
    if prec.mode == "autocast" and prec.grad_accum_dtype != torch.float32:
        raise OracleError(f"{what}data_types.grad_accum_dtype: torch_autocast keeps fp32 "
                          "gradients; the oracle models only fp32 accumulation there")
    return prec


def round_sum(acc: Optional[torch.Tensor], g: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """acc + g in `dtype` as a bf16/fp16 kernel does it: both upcast to fp32, added, rounded once."""
    g = g.to(dtype)
    if acc is None:
        return g.clone()
    if dtype == torch.float32:
        return acc + g
    return (acc.float() + g.float()).to(dtype)


def reduce_average(rank_grads: Sequence[torch.Tensor], comm_dtype: torch.dtype) -> torch.Tensor:
    """The data-parallel average as our runtime computes it in the communication dtype.

    Each rank's accumulated gradient g_r is cast to comm_dtype (a rounding when it is narrower
    than the accumulation dtype); the sum folds left, g_0 + g_1 + ... + g_{W-1}, each addition in
    fp32 on the upcast operands and rounded to comm_dtype (the runtime's user-defined MPI_Op; for
    W = 2 this is exactly round(fp32(g0) + fp32(g1))); the sum is then divided by W in
    comm_dtype (fp32 division, rounded once; exact for W a power of two barring subnormals).
    For W > 2 MPI may add in another order: a difference of one rounding per addition, covered
    by the tolerances. Returns a tensor of comm_dtype (the caller upcasts to fp32)."""
    acc: Optional[torch.Tensor] = None
    for g in rank_grads:
        acc = round_sum(acc, g, comm_dtype)
    assert acc is not None
    return (acc.float() / len(rank_grads)).to(comm_dtype)


class LossScaler:
    """DeepSpeed's fp16 loss scaler (deepspeed/runtime/fp16/loss_scaler.py; our C++ twin is
    include/ds/Runtime/LossScaler.h): static when fp16.loss_scale > 0 (the scale never changes,
    overflowing steps are still skipped), else DynamicLossScaler.update_scale:

      overflow: when hysteresis == 1 or the hysteresis left is 1, the scale halves (not below
        min_loss_scale; an overflow AT min_loss_scale is an error, DeepSpeed's "Current loss
        scale already at minimum"), else the hysteresis left drops by one; last_overflow = it.
      clean:   consecutive_hysteresis refills the hysteresis left at once; when
        stable = it - last_overflow - 1 is > 0 and a multiple of loss_scale_window the scale
        doubles (and, without consecutive_hysteresis, the hysteresis left is refilled).
      it += 1 after every update.
    fp16 None: bf16/fp32/autocast, a static scale of 1."""

    def __init__(self, fp16: Optional[dict] = None):
        self.dynamic = False
        self.scale = 1.0
        self.iteration = 0
        self.last_overflow = -1
        self.hysteresis = 2
        self.hysteresis_left = 2
        self.window = 1000
        self.min_scale = 1.0
        self.consecutive = False
        self.factor = 2.0
        if fp16 is None:
            return
        fp16 = _fp16_settings(fp16, "") if "min_loss_scale" not in fp16 else fp16
        self.dynamic = fp16["loss_scale"] == 0
        self.scale = (math.ldexp(1.0, fp16["initial_scale_power"]) if self.dynamic
                      else fp16["loss_scale"])
        self.window = fp16["loss_scale_window"]
        self.min_scale = fp16["min_loss_scale"]
        self.hysteresis = self.hysteresis_left = fp16["hysteresis"]
        self.consecutive = fp16["consecutive_hysteresis"]

    def update(self, overflow: bool) -> bool:
        """After a step's overflow check; returns whether the update is applied."""
        if not self.dynamic:
            self.iteration += 1
            return not overflow
        if overflow:
            if self.hysteresis == 1 or self.hysteresis_left == 1:
                if self.scale == self.min_scale:
                    raise OracleError(
                        f"fp16: the gradients overflowed with the loss scale already at "
                        f"min_loss_scale ({self.min_scale:g}): it cannot decrease any more "
                        "(DeepSpeed: \"Current loss scale already at minimum\")")
                self.scale = max(self.scale / self.factor, self.min_scale)
            else:
                self.hysteresis_left -= 1
            self.last_overflow = self.iteration
        else:
            if self.consecutive:
                self.hysteresis_left = self.hysteresis
            stable = self.iteration - self.last_overflow - 1
            if stable > 0 and stable % self.window == 0:
                if not self.consecutive:
                    self.hysteresis_left = self.hysteresis
                self.scale *= self.factor
        self.iteration += 1
        return not overflow


# Per precision mode (autocast: bf16; autocast_fp16: torch_autocast.dtype float16): (loss_rtol,
# norm_rtol, param_rtol, param_atol); see the module docstring, "Tolerances". lr, loss_scale and
# skipped are always compared exactly (lr_rtol 0).
PRECISION_TOLERANCES = {
    "fp32": {"loss_rtol": 1e-5, "norm_rtol": 1e-4, "param_rtol": 1e-4, "param_atol": 1e-4},
    "bf16": {"loss_rtol": 2.0 ** -6, "norm_rtol": 1e-2, "param_rtol": 2.0 ** -7,
             "param_atol": 2e-4},
    "autocast": {"loss_rtol": 2e-3, "norm_rtol": 4e-3, "param_rtol": 1e-3, "param_atol": 4e-4},
    "autocast_fp16": {"loss_rtol": 1e-4, "norm_rtol": 4e-4, "param_rtol": 2.0 ** -10,
                      "param_atol": 2e-5},
    "fp16": {"loss_rtol": 4e-3, "norm_rtol": 2e-3, "param_rtol": 2.0 ** -10, "param_atol": 1e-4},
}


def _float_param(params: dict, key: str, default: float) -> float:
    v = params.get(key)
    return float(default if v is None else v)


def make_optimizer(params: List[torch.Tensor], opt: dict) -> Tuple[torch.optim.Optimizer, float]:
    """torch.optim optimizer for a DeepSpeed "optimizer" section; returns (optimizer, lr).

    Adam: AdamW (decoupled decay) unless adam_w_mode is false (then torch.optim.Adam, L2 decay);
    AdamW: torch.optim.AdamW; SGD: torch.optim.SGD. DeepSpeed's defaults: lr 1e-3, betas
    (0.9, 0.999), eps 1e-8, weight_decay 0 (0.01 with torch_adam and decoupled decay).
    """
    typ = str(opt.get("type", "")).lower()
    p = opt.get("params") or {}
    lr = _float_param(p, "lr", 1e-3)
    if typ in ("adam", "adamw"):
        for key, bad in (("amsgrad", True), ("bias_correction", False)):
            if p.get(key) is not None and bool(p[key]) == bad:
                raise OracleError(f"optimizer.params.{key}: {str(bad).lower()} is not supported")
        if p.get("max_grad_norm") is not None:
            raise OracleError("optimizer.params.max_grad_norm is not supported (use gradient_clipping)")
        adam_w_mode = p.get("adam_w_mode")
        decoupled = True if adam_w_mode is None else bool(adam_w_mode)
        if typ == "adamw" and not decoupled:
            raise OracleError("optimizer.params.adam_w_mode: AdamW accepts only true")
        torch_adam = bool(p.get("torch_adam") or False)
        wd = _float_param(p, "weight_decay", 0.01 if (torch_adam and decoupled) else 0.0)
        betas = p.get("betas")
        betas = (0.9, 0.999) if betas is None else (float(betas[0]), float(betas[1]))
        eps = _float_param(p, "eps", 1e-8)
        cls = torch.optim.AdamW if decoupled else torch.optim.Adam
        return cls(params, lr=lr, betas=betas, eps=eps, weight_decay=wd), lr
    if typ == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=_float_param(p, "momentum", 0.0),
                               dampening=_float_param(p, "dampening", 0.0),
                               weight_decay=_float_param(p, "weight_decay", 0.0),
                               nesterov=bool(p.get("nesterov") or False)), lr
    raise OracleError(f"optimizer.type: {opt.get('type')!r} is not supported by the oracle "
                      "(Adam, AdamW, SGD)")


_SCHEDULER_DEFAULTS = {
    "WarmupLR": {"warmup_min_lr": 0.0, "warmup_max_lr": None, "warmup_num_steps": 1000,
                 "warmup_type": "log"},
    "WarmupDecayLR": {"warmup_min_lr": 0.0, "warmup_max_lr": 0.001, "warmup_num_steps": 1000,
                      "warmup_type": "log", "total_num_steps": None},
    "WarmupCosineLR": {"warmup_min_ratio": 0.0, "cos_min_ratio": 0.0001, "warmup_num_steps": 1000,
                       "warmup_type": "log", "total_num_steps": None},
}


def scheduler_params(scheduler: dict) -> Tuple[str, dict]:
    """(type, params with DeepSpeed 0.19's defaults filled in) of a "scheduler" section."""
    typ = scheduler.get("type")
    if typ not in _SCHEDULER_DEFAULTS:
        raise OracleError(f"scheduler.type: {typ!r} is not supported (WarmupLR, WarmupDecayLR, "
                          "WarmupCosineLR)")
    given = scheduler.get("params") or {}
    params = dict(_SCHEDULER_DEFAULTS[typ])
    for k, v in given.items():
        if k == "last_batch_iteration":
            if v not in (None, -1):
                raise OracleError("scheduler.params.last_batch_iteration: only -1 is supported")
            continue
        if k not in params:
            raise OracleError(f"scheduler.params.{k}: unknown key for scheduler {typ}")
        if v is not None:
            params[k] = v
    if params["warmup_type"] not in ("log", "linear"):
        raise OracleError(f"scheduler.params.warmup_type: must be \"log\" or \"linear\", got "
                          f"{params['warmup_type']!r}")
    if "total_num_steps" in params and params["total_num_steps"] is None:
        raise OracleError(f"scheduler.params.total_num_steps: missing: required by {typ}")
    return typ, params


def scheduler_lr(scheduler: dict, base_lr: float, step: int) -> float:
    """DeepSpeed's lr at last_batch_iteration = step (-1 at construction), docs/config.md.

    Operation for operation as lib/Config/Scheduler.cpp (and DeepSpeed's lr_schedules.py), so
    that the values agree bit for bit: W = max(2, warmup_num_steps), the log warmup multiplies
    by a precomputed 1 / log(W).
    """
    typ, p = scheduler_params(scheduler)
    W = max(2, int(p["warmup_num_steps"]))

    def gamma(i: int) -> float:
        if p["warmup_type"] == "log":
            inverse_log_warm_up = 1.0 / math.log(float(W))
            return inverse_log_warm_up * math.log(float(i + 1))
        return float(i) / float(W)

    if typ == "WarmupCosineLR":
        if step < 0:
            return 0.0
        if step < W:
            ratio = gamma(step)
            ratio_delta = 1.0 - float(p["warmup_min_ratio"])
            ratio = float(p["warmup_min_ratio"]) + ratio * ratio_delta
        else:
            real_last_step = step - W + 1
            real_total_steps = max(1, int(p["total_num_steps"]) - W)
            progress = min(1.0, float(real_last_step) / float(real_total_steps))
            ratio_delta = 1.0 - float(p["cos_min_ratio"])
            ratio = (1.0 + math.cos(math.pi * progress)) / 2.0
            ratio = max(0.0, float(p["cos_min_ratio"]) + ratio_delta * ratio)
        return base_lr * ratio
    min_lr = float(p["warmup_min_lr"])
    max_lr = base_lr if p["warmup_max_lr"] is None else float(p["warmup_max_lr"])
    if step < 0:
        return min_lr
    if step < W:
        g = gamma(step)
    elif typ == "WarmupLR":
        g = 1.0
    else:
        T = int(p["total_num_steps"])
        g = max(0.0, float(T - step) / max(1.0, float(T - W)))
    delta_lr = max_lr - min_lr
    return min_lr + delta_lr * g


def scheduler_lr_for_update(scheduler: Optional[dict], base_lr: float, applied: int) -> float:
    """The lr of the next optimizer update after `applied` updates.

    DeepSpeed sets the lr of iteration -1 at construction and steps the scheduler after every
    applied update, so update n (1-based) runs at iteration n - 2: the first two updates of a
    warmup share warmup_min_lr (log warmup: log(1) = 0), and WarmupCosineLR's first update has
    lr 0.
    """
    if scheduler is None:
        return base_lr
    return scheduler_lr(scheduler, base_lr, applied - 1)


def global_grad_norm(grads: Sequence[torch.Tensor]) -> torch.Tensor:
    """torch.nn.utils.clip_grad_norm_'s total 2-norm without the clipping (torch 2.15's
    get_total_norm: the norm of the per-tensor norms, foreach on CPU)."""
    if not grads:
        return torch.tensor(0.0)
    return torch.nn.utils.get_total_norm([g.detach() for g in grads], 2.0)


def clip_grad_norm(params: Sequence[torch.Tensor], clip: float) -> torch.Tensor:
    """The pre-clip global norm of the parameters' gradients; clips them to `clip` as
    torch.nn.utils.clip_grad_norm_ does when clip > 0 (DeepSpeed's gradient_clipping; 0 only
    measures)."""
    if clip > 0 and params:
        return torch.nn.utils.clip_grad_norm_(params, clip)
    return global_grad_norm([p.grad for p in params])


class _Engine:
    """One trainable engine of the oracle: its parameters, optimizer, schedule and clipping."""

    def __init__(self, key: str, cfg: dict, named: List[Tuple[str, torch.Tensor]]):
        self.key = key
        self.names = [n for n, _ in named]
        self.params = [p for _, p in named]
        self.optimizer, self.base_lr = make_optimizer(self.params, cfg["optimizer"])
        self.scheduler = cfg.get("scheduler") or None
        if self.scheduler is not None:
            scheduler_params(self.scheduler)  # validate now, not at the first step
        clip = cfg.get("gradient_clipping")
        self.clip = 1.0 if clip is None else float(clip)
        if self.clip < 0:
            raise OracleError(f"engine '{key}': gradient_clipping must be >= 0, got {clip!r}")
        self.applied = 0

    def step(self) -> Tuple[float, float]:
        """Zero-fills missing gradients, clips, sets the lr, steps; returns (lr, pre-clip norm)."""
        for p in self.params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        norm = clip_grad_norm(self.params, self.clip)
        lr = scheduler_lr_for_update(self.scheduler, self.base_lr, self.applied)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.optimizer.step()
        self.applied += 1
        return lr, float(norm)


class _MixedEngine(_Engine):
    """A trainable engine under bf16, fp16 or torch_autocast: fp32 master weights (p.float() of
    the stored parameters) and fp32 optimizer state; the model's parameters are copies of the
    masters in the model dtype."""

    def __init__(self, key: str, cfg: dict, named: List[Tuple[str, torch.Tensor]],
                 prec: Precision, owner_classes: Dict[str, str], device_type: str = "cpu"):
        self.model_params = [p for _, p in named]
        masters = [(n, p.detach().float().clone().requires_grad_(True)) for n, p in named]
        super().__init__(key, cfg, masters)
        self.prec = prec
        self.comm_dtypes = [prec.comm_dtype_for(owner_classes.get(n, "")) for n, _ in named]
        self.scaler = LossScaler(prec.fp16 if prec.mode == "fp16" else None)
        # fp16 autocast: DeepSpeed's torch.amp.GradScaler(device=...), torch's defaults.
        self.grad_scaler = (torch.amp.GradScaler(device=device_type) if prec.grad_scaler
                            else None)
        self._optimizer_steps = 0

        def count_step(*_):
            self._optimizer_steps += 1
        self.optimizer.register_step_post_hook(count_step)
        self.last_norm = 0.0  # DeepSpeed's optimizer._global_grad_norm starts at 0.

    @property
    def loss_scale(self) -> float:
        """The scale of this step's backward seed."""
        if self.grad_scaler is not None:
            return float(self.grad_scaler.get_scale())
        return self.scaler.scale

    def accumulate(self, acc: List[Optional[torch.Tensor]]) -> None:
        """Adds this micro-step's .grad of every parameter (of the parameter's dtype: bf16 / fp16
        in the native modes, fp32 under autocast) to one rank's accumulators (in
        grad_accum_dtype)."""
        dtype = self.prec.grad_accum_dtype
        for i, p in enumerate(self.model_params):
            if p.grad is not None:
                acc[i] = round_sum(acc[i], p.grad, dtype)

    def step_mixed(self, rank_acc: List[List[Optional[torch.Tensor]]]) -> dict:
        """Reduces, checks for overflow (fp16), unscales, clips, steps the masters, copies them
        to the model dtype; returns {"lr", "grad_norm", "loss_scale", "skipped"}."""
        if self.grad_scaler is not None:
            return self._step_grad_scaler(rank_acc)
        scale = self.scaler.scale
        reduced = []
        for i, p in enumerate(self.model_params):
            zeros = torch.zeros(p.shape, dtype=self.prec.grad_accum_dtype, device=p.device)
            grads = [acc[i] if acc[i] is not None else zeros for acc in rank_acc]
            reduced.append(reduce_average(grads, self.comm_dtypes[i]).float())
        overflow = self.prec.mode == "fp16" and any(not bool(torch.isfinite(g).all())
                                                    for g in reduced)
        lr = scheduler_lr_for_update(self.scheduler, self.base_lr, self.applied)
        if not overflow:
            for master, g in zip(self.params, reduced):
                master.grad = g / scale if scale != 1.0 else g
            norm = clip_grad_norm(self.params, self.clip)
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            self.optimizer.step()
            with torch.no_grad():
                for p, master in zip(self.model_params, self.params):
                    p.copy_(master.detach().to(self.prec.model_dtype))
            self.applied += 1
            self.last_norm = float(norm)
        for master in self.params:
            master.grad = None
        self.scaler.update(overflow)
        return {"lr": lr, "grad_norm": self.last_norm, "loss_scale": scale, "skipped": overflow}

    def _step_grad_scaler(self, rank_acc: List[List[Optional[torch.Tensor]]]) -> dict:
        """fp16 autocast: torch.amp.GradScaler's unscale_ / step / update on the fp32 masters,
        in the order of DeepSpeed's engine._take_model_step (unscale_ before clipping)."""
        scaler = self.grad_scaler
        scale = float(scaler.get_scale())
        for i, master in enumerate(self.params):
            grads = [acc[i] if acc[i] is not None
                     else torch.zeros(master.shape, dtype=self.prec.grad_accum_dtype,
                                      device=master.device)
                     for acc in rank_acc]
            master.grad = reduce_average(grads, self.comm_dtypes[i]).float()
        lr = scheduler_lr_for_update(self.scheduler, self.base_lr, self.applied)
        scaler.unscale_(self.optimizer)
        overflow = any(not bool(torch.isfinite(m.grad).all()) for m in self.params)
        if not overflow:
            norm = clip_grad_norm(self.params, self.clip)
            for group in self.optimizer.param_groups:
                group["lr"] = lr
        steps_before = self.optimizer_steps()
        scaler.step(self.optimizer)  # skips optimizer.step() on an inf / NaN
        if (self.optimizer_steps() != steps_before) == overflow:
            raise OracleError("torch.amp.GradScaler and the oracle disagree on an overflow")
        scaler.update()
        if not overflow:
            with torch.no_grad():
                for p, master in zip(self.model_params, self.params):
                    p.copy_(master.detach())
            self.applied += 1
            self.last_norm = float(norm)
        for master in self.params:
            master.grad = None
        return {"lr": lr, "grad_norm": self.last_norm, "loss_scale": scale, "skipped": overflow}

    def optimizer_steps(self) -> int:
        """How often optimizer.step() ran (counted by a hook)."""
        return self._optimizer_steps


def _owner(name: str, keys: Sequence[str]) -> Optional[str]:
    """The engine owning a qualified name: the longest key that is a module-path prefix."""
    best = None
    for key in keys:
        if key == "" or name == key or name.startswith(key + "."):
            if best is None or len(key) > len(best):
                best = key
    return best


def _snapshot_buffers(module) -> Dict[str, torch.Tensor]:
    return {n: b.detach().clone() for n, b in module.named_buffers()}


def _load_buffers(module, saved: Dict[str, torch.Tensor]) -> None:
    with torch.no_grad():
        for n, b in module.named_buffers():
            b.copy_(saved[n])


_M64 = (1 << 64) - 1


def _splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def micro_step_seed(seed: int, step: int, micro: int, rank: int) -> int:
    """The seed of one micro-step's random draws, as the runtime computes it (docs/runtime.md):
    dropout masks depend only on (seed, optimizer step, position in the accumulation window, rank)."""
    h = _splitmix64(seed)
    h = _splitmix64(h ^ step)
    h = _splitmix64(h ^ micro)
    return _splitmix64(h ^ rank)


def train(model_pt: str, data_pt: str, config, steps: int, world_size: int = 1,
          unbatched: Iterable[str] = (), seed: Optional[int] = None,
          masters: Optional[Dict[str, torch.Tensor]] = None, device: str = "cpu"
          ) -> Tuple[List[dict], Dict[str, torch.Tensor]]:
    """The LibTorch oracle of DeepSpeed data-parallel training (docs/oracle.md).

    config: a DeepSpeed config dict (or a path to a JSON file); {"engines": {...}} with inline
    engine configs is accepted too. Submodules in the modes they were saved in. Per optimizer
    step k, for each micro-step
    s of the GAS window and each rank r, the forward runs on rank r's rows and back-propagates
    sum(losses) / (W * G) (tuple outputs: the sum of the elements). Every rank keeps its own
    buffers (BatchNorm running statistics updated from its own rows); the returned buffers are
    rank 0's. Per trainable engine: a parameter with requires_grad and no .grad gets a zero
    gradient; the pre-clip global norm is clipped to gradient_clipping (default 1.0; 0 disables)
    with clip_grad_norm_'s semantics; the scheduler's lr is set; the optimizer steps. TorchScript's
    graph-executor optimisations are off (torch.jit.optimized_execution(False)): every op runs
    through the dispatcher and autograd records its own derivative formulas, with no symbolic
    autodiff or profiling-dependent graphs.

    bf16 / fp16 / torch_autocast configs train as the module docstring's "Mixed precision"
    says (_train_mixed); masters, when given a dict, receives every trained parameter's fp32
    master weight (fp32 training: the parameter itself).

    Returns (lines, final_state): lines {"step", "loss", "lr", "grad_norm", "loss_scale": 1.0,
    "skipped": false} (+ "losses" for tuple outputs; + "engines": {key: {"lr", "grad_norm"}} when
    there are several trainable engines, the top-level lr/grad_norm then being the first one's),
    final_state all parameters and buffers by qualified name.

    device: "cpu" (the default) or "cuda[:N]" (module docstring, "Device"); final_state and
    masters are CPU tensors either way.
    """
    device = check_device(device)
    if isinstance(config, str):
        with open(config) as f:
            config = json.load(f)
    if seed is None:
        seed = int(config.get("seed", 0)) if isinstance(config, dict) else 0
    engines_cfg = engine_configs(config)
    module = load_module(model_pt, device)
    # Every submodule keeps the mode it was saved in, as in the user's own loop: a teacher saved
    # after .eval() runs without dropout and with BatchNorm on its running statistics.
    inputs = bind_inputs(module, data_to(load_data(data_pt), device), unbatched)
    _, B = check_sizes(inputs, world_size, 1, 0)
    gas = None
    prec: Optional[Precision] = None
    for key, cfg in engines_cfg:
        what = f"engines.{key}." if len(engines_cfg) > 1 else ""
        p_cfg = precision_config(cfg, what)
        if prec is not None and p_cfg.key() != prec.key():
            raise OracleError(f"{what.rstrip('.')}: engines with different mixed-precision "
                              "settings are not modelled by the oracle (give every engine "
                              "the same fp16/bf16/torch_autocast/data_types/"
                              "communication_data_type)")
        prec = p_cfg
        _, g, _ = resolve_batch(cfg, world_size, B, what)
        if gas is not None and g != gas:
            raise OracleError(f"engines disagree on gradient_accumulation_steps: {gas} vs {g}")
        gas = g
    _, B = check_sizes(inputs, world_size, gas, steps)
    b = B // world_size

    assert prec is not None
    if prec.mode != "fp32":
        return _train_mixed(module, inputs, engines_cfg, prec, steps, world_size, gas, b, seed,
                            masters, device)

    keys = [k for k, _ in engines_cfg]
    owned: Dict[str, List[Tuple[str, torch.Tensor]]] = {k: [] for k in keys}
    for name, p in module.named_parameters():
        owner = _owner(name, keys)
        if owner is not None and p.requires_grad:
            owned[owner].append((name, p))
    engines = [_Engine(k, cfg, owned[k]) for k, cfg in engines_cfg if cfg.get("optimizer")]
    if not engines:
        raise OracleError("no engine has an \"optimizer\" section: nothing to train")

    rank_buffers = [_snapshot_buffers(module) for _ in range(world_size)]
    n = world_size * gas
    lines = []
    with torch.jit.optimized_execution(False):
        for k in range(steps):
            for e in engines:
                for p in e.params:
                    p.grad = None
            total = 0.0
            per: Optional[List[float]] = None
            is_tuple = False
            for s in range(k * gas, (k + 1) * gas):
                for r in range(world_size):
                    _load_buffers(module, rank_buffers[r])
                    torch.manual_seed(micro_step_seed(seed, k, s - k * gas, r))
                    try:
                        losses, is_tuple = forward_losses(module, rank_args(inputs, s, r, b))
                        loss = losses[0]
                        for extra in losses[1:]:
                            loss = loss + extra
                        (loss / n).backward()
                    except RuntimeError as err:
                        raise OracleError(f"training step {k + 1}: forward/backward failed at "
                                          f"micro-step {s}, rank {r} of {world_size}: {err}")
                    rank_buffers[r] = _snapshot_buffers(module)
                    vals = [float(l.detach()) for l in losses]
                    if per is None:
                        per = [0.0] * len(vals)
                    for j, v in enumerate(vals):
                        per[j] += v
                    total += sum(vals)
            results = [e.step() for e in engines]
            line = {"step": k + 1, "loss": total / n}
            if is_tuple:
                line["losses"] = [v / n for v in per]
            line.update({"lr": results[0][0], "grad_norm": results[0][1], "loss_scale": 1.0,
                         "skipped": False})
            if len(engines) > 1:
                line["engines"] = {e.key: {"lr": lr, "grad_norm": norm}
                                   for e, (lr, norm) in zip(engines, results)}
            lines.append(line)
    _load_buffers(module, rank_buffers[0])
    final_state: Dict[str, torch.Tensor] = {}
    for name, p in module.named_parameters():
        final_state[name] = _on_cpu(p)
    for name, buf in module.named_buffers():
        final_state[name] = _on_cpu(buf)
    if masters is not None:
        for e in engines:
            for name, param in zip(e.names, e.params):
                masters[name] = _on_cpu(param)
    return lines, final_state


def _on_cpu(t: torch.Tensor) -> torch.Tensor:
    """A detached copy of t on the CPU (a clone on the CPU, as before devices)."""
    t = t.detach()
    return t.clone() if t.device.type == "cpu" else t.cpu()


def _train_mixed(module, inputs: Sequence[Input], engines_cfg: List[Tuple[str, dict]],
                 prec: Precision, steps: int, world_size: int, gas: int, b: int, seed: int,
                 masters: Optional[Dict[str, torch.Tensor]], device: str = "cpu"
                 ) -> Tuple[List[dict], Dict[str, torch.Tensor]]:
    """train() under bf16, fp16 or torch_autocast (see the module docstring, "Mixed precision").

    Per optimizer step, for each micro-step and rank: gradients cleared, forward (bf16 / fp16:
    the module and the float inputs in bf16 / fp16, LibTorch's BFloat16 / Half CPU kernels;
    autocast: fp32 parameters under torch.autocast("cpu", dtype)), backward of every returned
    loss with the seed loss_scale / G in the loss's dtype (1 / G without fp16),
    the parameters' .grad added to the rank's accumulators. At the boundary each engine reduces
    (reduce_average), checks for overflow (fp16), steps its fp32 masters and writes them back.
    """
    keys = [k for k, _ in engines_cfg]
    if prec.mode in ("bf16", "fp16"):
        module.to(prec.model_dtype)  # parameters and float buffers
    owner_classes = parameter_owner_classes(module)
    owned: Dict[str, List[Tuple[str, torch.Tensor]]] = {k: [] for k in keys}
    for name, p in module.named_parameters():
        owner = _owner(name, keys)
        if owner is not None and p.requires_grad:
            owned[owner].append((name, p))
    device_type = torch.device(device).type
    engines = [_MixedEngine(k, cfg, owned[k], prec, owner_classes, device_type)
               for k, cfg in engines_cfg if cfg.get("optimizer")]
    if not engines:
        raise OracleError("no engine has an \"optimizer\" section: nothing to train")
    if (prec.mode == "fp16" or prec.grad_scaler) and len(engines) > 1:
        raise OracleError(f"{'fp16' if prec.mode == 'fp16' else 'fp16 autocast'} with several "
                          "trainable engines (one loss scale each) is not modelled by the oracle")
    all_params = [p for _, p in module.named_parameters()]

    def cast_input(t: torch.Tensor) -> torch.Tensor:
        if t.is_floating_point() and prec.mode in ("bf16", "fp16"):
            return t.to(prec.model_dtype)
        return t

    rank_buffers = [_snapshot_buffers(module) for _ in range(world_size)]
    n = world_size * gas
    lines = []
    with torch.jit.optimized_execution(False):
        for k in range(steps):
            rank_acc = [[[None] * len(e.model_params) for _ in range(world_size)]
                        for e in engines]
            scale = engines[0].loss_scale
            total = 0.0
            per: Optional[List[float]] = None
            is_tuple = False
            for s in range(k * gas, (k + 1) * gas):
                for r in range(world_size):
                    _load_buffers(module, rank_buffers[r])
                    torch.manual_seed(micro_step_seed(seed, k, s - k * gas, r))
                    for p in all_params:
                        p.grad = None
                    args = [cast_input(t) for t in rank_args(inputs, s, r, b)]
                    try:
                        with (torch.autocast(device_type, dtype=prec.autocast_dtype)
                              if prec.mode == "autocast" else _NullContext()):
                            losses, is_tuple = forward_losses(module, args)
                        grad_scaler = engines[0].grad_scaler
                        if grad_scaler is not None:
                            # DeepSpeed's engine.backward: scaler.scale(loss / G).backward().
                            torch.autograd.backward([grad_scaler.scale(l / gas) for l in losses])
                        else:
                            # Made in fp32, then rounded: CUDA's fill refuses a value fp16
                            # cannot hold (2^17) where the CPU's rounds it to inf.
                            seeds = [torch.full((), scale / gas, dtype=torch.float32,
                                                device=l.device).to(l.dtype) for l in losses]
                            torch.autograd.backward(losses, seeds)
                    except RuntimeError as err:
                        raise OracleError(f"training step {k + 1}: forward/backward failed at "
                                          f"micro-step {s}, rank {r} of {world_size} "
                                          f"({prec.mode}): {err}")
                    for e, acc in zip(engines, rank_acc):
                        e.accumulate(acc[r])
                    rank_buffers[r] = _snapshot_buffers(module)
                    vals = [float(l.detach()) for l in losses]
                    if per is None:
                        per = [0.0] * len(vals)
                    for j, v in enumerate(vals):
                        per[j] += v
                    total += sum(vals)
            results = [e.step_mixed(acc) for e, acc in zip(engines, rank_acc)]
            line = {"step": k + 1, "loss": total / n}
            if is_tuple:
                line["losses"] = [v / n for v in per]
            line.update(results[0])
            if len(engines) > 1:
                line["engines"] = {e.key: {"lr": res["lr"], "grad_norm": res["grad_norm"]}
                                   for e, res in zip(engines, results)}
            lines.append(line)
    for p in all_params:
        p.grad = None
    _load_buffers(module, rank_buffers[0])
    final_state: Dict[str, torch.Tensor] = {}
    for name, p in module.named_parameters():
        final_state[name] = _on_cpu(p)
    for name, buf in module.named_buffers():
        final_state[name] = _on_cpu(buf)
    if masters is not None:
        for e in engines:
            for name, master in zip(e.names, e.params):
                masters[name] = _on_cpu(master)
    return lines, final_state


class _NullContext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# ---------------------------------------------------------------------------------------------
# safetensors writing and parameter comparison
# ---------------------------------------------------------------------------------------------
_ST_NAMES = {dtype: name for name, dtype in _ST_DTYPES.items()}


def write_safetensors(path: str, tensors: Dict[str, torch.Tensor]) -> None:
    """The safetensors format, by hand (as make_models.py writes it): u64 LE header size, JSON
    header {name: {dtype, shape, data_offsets}}, raw little-endian tensor bytes."""
    if sys.byteorder != "little":
        raise OracleError("writing safetensors needs a little-endian machine")
    header = {}
    blobs = []
    offset = 0
    for name, t in tensors.items():
        t = t.detach().contiguous().clone()
        if t.dtype not in _ST_NAMES:
            raise OracleError(f"{path}: tensor '{name}' has unsupported dtype {t.dtype}")
        if t.dtype == torch.bfloat16:
            raw = t.view(torch.int16).numpy().tobytes()
        else:
            raw = t.numpy().tobytes()
        header[name] = {"dtype": _ST_NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    hdr = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hdr += b" " * ((8 - len(hdr) % 8) % 8)  # spaces: tensor data starts 8-byte aligned
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hdr)))
        f.write(hdr)
        for raw in blobs:
            f.write(raw)
    os.replace(tmp, path)


def compare_params(ours: Dict[str, torch.Tensor], oracle: Dict[str, torch.Tensor], rtol: float,
                   atol: float, ours_name: str = "ours", oracle_name: str = "oracle"
                   ) -> Tuple[bool, str]:
    """Per tensor, elementwise |ours - oracle| <= atol + rtol * |oracle| (NaN never matches).

    Returns (ok, message). On failure the message names the first failing tensor (in the oracle's
    order), its largest error, where it is and both values; on success it reports the largest
    absolute error over all tensors and the largest fraction of the tolerance used.
    """
    only_o = [k for k in oracle if k not in ours]
    only_a = [k for k in ours if k not in oracle]
    if only_o or only_a:
        return False, ("tensor names differ" + (f"; missing in {ours_name}: {only_o}" if only_o else "")
                       + (f"; only in {ours_name}: {only_a}" if only_a else ""))
    worst_abs, worst_abs_at = 0.0, ""
    worst_use, worst_use_at = 0.0, ""
    for name, o in oracle.items():
        a = ours[name]
        if list(a.shape) != list(o.shape):
            return False, f"tensor '{name}': shape {list(a.shape)} in {ours_name}, {list(o.shape)} in {oracle_name}"
        if a.dtype != o.dtype:
            return False, f"tensor '{name}': dtype {a.dtype} in {ours_name}, {o.dtype} in {oracle_name}"
        if o.numel() == 0:
            continue
        a64 = a.detach().to(torch.float64)
        o64 = o.detach().to(torch.float64)
        diff = (a64 - o64).abs()
        bound = atol + rtol * o64.abs()
        diff = torch.where(a64 == o64, torch.zeros_like(diff), diff)  # equal infinities match
        diff = torch.where(torch.isnan(diff), torch.full_like(diff, math.inf), diff)
        bad = diff > bound
        if bool(bad.any()):
            # report the worst violation (largest diff / bound)
            use = torch.where(bound > 0, diff / bound, torch.where(diff > 0, torch.full_like(diff, math.inf), diff))
            flat = int(torch.argmax(torch.where(bad, use, torch.full_like(use, -1.0))))
            idx = tuple(int(i) for i in _unravel(flat, list(o.shape)))
            nbad = int(bad.sum())
            return False, (f"tensor '{name}' differs at {list(idx)} ({nbad} of {o.numel()} elements out "
                           f"of tolerance): {ours_name} {a64.reshape(-1)[flat].item()!r} vs "
                           f"{oracle_name} {o64.reshape(-1)[flat].item()!r} (abs err "
                           f"{diff.reshape(-1)[flat].item():.3g}, tensor max abs err "
                           f"{float(diff.max()):.3g}; rtol {rtol:g}, atol {atol:g})")
        m = float(diff.max())
        if m > worst_abs or not worst_abs_at:
            flat = int(torch.argmax(diff))
            worst_abs, worst_abs_at = m, f"'{name}'{list(_unravel(flat, list(o.shape)))}"
        with torch.no_grad():
            use = torch.where(bound > 0, diff / bound, torch.zeros_like(diff))
        u = float(use.max())
        if u > worst_use or not worst_use_at:
            worst_use, worst_use_at = u, f"'{name}'"
    return True, (f"compare-params: {len(oracle)} tensors match (max abs err {worst_abs:.3g} at "
                  f"{worst_abs_at}; max tolerance use {worst_use:.3g} in {worst_use_at}; rtol {rtol:g}, "
                  f"atol {atol:g})")


def _unravel(flat: int, shape: List[int]) -> List[int]:
    idx = []
    for d in reversed(shape):
        idx.append(flat % d)
        flat //= d
    return list(reversed(idx))


def expected_for(ours: Dict[str, torch.Tensor], state: Dict[str, torch.Tensor],
                 masters: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """The oracle tensors to compare ours with: the stored ones, or the fp32 master
    (train(..., masters=...)) where ds-run wrote fp32 and the oracle stores bf16/fp16."""
    out = {}
    for name, t in state.items():
        a = ours.get(name)
        if (a is not None and a.dtype == torch.float32 and t.dtype != a.dtype
                and name in masters):
            out[name] = masters[name]
        else:
            out[name] = t
    return out


def load_params(path: str) -> Dict[str, torch.Tensor]:
    if not os.path.exists(path):
        raise OracleError(f"{path} does not exist")
    return read_safetensors(path)


def compare_train_lines(ours: List[dict], oracle: List[dict], loss_rtol: float,
                        lr_rtol: float = 1e-12, norm_rtol: float = 1e-4,
                        ours_name: str = "ours", oracle_name: str = "oracle") -> Tuple[bool, str]:
    """Training loss lines: loss(es) as compare_lines does (rtol loss_rtol), then per step lr
    (rtol lr_rtol; lr_rtol 0 demands exact equality, as the mixed-precision checks do),
    grad_norm (rtol norm_rtol), loss_scale and skipped (always exactly equal: the sequences of
    scales and skipped steps of fp16 runs must be the oracle's), and per-engine lr and
    grad_norm where both sides have an "engines" object. Missing loss_scale/skipped on our side
    count as 1.0/false. Returns (ok, message); the message of an fp16 run lists the sequence.
    Tolerances per precision mode: PRECISION_TOLERANCES."""
    ok, msg = compare_lines(ours, oracle, loss_rtol, 0.0, ours_name, oracle_name)
    if not ok:
        return ok, msg
    a = _by_step(ours_name, ours)
    o = _by_step(oracle_name, oracle)
    worst_lr = worst_norm = 0.0
    for step in sorted(o):
        la, lo = a[step], o[step]
        checks = [("lr", la.get("lr"), lo.get("lr"), lr_rtol),
                  ("grad_norm", la.get("grad_norm"), lo.get("grad_norm"), norm_rtol)]
        if isinstance(la.get("engines"), dict) and isinstance(lo.get("engines"), dict):
            for key, eo in lo["engines"].items():
                ea = la["engines"].get(key)
                if not isinstance(ea, dict):
                    return False, f"step {step}: {ours_name} has no engine '{key}' in \"engines\""
                checks += [(f"engines['{key}'].lr", ea.get("lr"), eo["lr"], lr_rtol),
                           (f"engines['{key}'].grad_norm", ea.get("grad_norm"), eo["grad_norm"],
                            norm_rtol)]
        for what, x, y, rtol in checks:
            if x is None:
                return False, f"step {step}: {ours_name} has no '{what}'"
            if not _close(x, y, rtol, 0.0):
                return False, (f"step {step}: {what} differs: {ours_name} {x!r} vs {oracle_name} "
                               f"{y!r} (rtol {rtol:g})")
            if y not in (None, 0) and math.isfinite(float(y)):
                rel = abs(float(x) - float(y)) / abs(float(y))
                if what.endswith("lr"):
                    worst_lr = max(worst_lr, rel)
                else:
                    worst_norm = max(worst_norm, rel)
        if (bool(la.get("skipped", False)) != bool(lo.get("skipped", False))
                or float(la.get("loss_scale", 1.0)) != float(lo.get("loss_scale", 1.0))):
            return False, (f"step {step}: {ours_name} has loss_scale {la.get('loss_scale')!r}, skipped "
                           f"{la.get('skipped')!r}; {oracle_name} has {lo.get('loss_scale')!r}, "
                           f"{lo.get('skipped')!r} (loss_scale and skipped must be equal; "
                           f"{ours_name}: {_scale_sequence(ours)}; {oracle_name}: "
                           f"{_scale_sequence(oracle)})")
    extra = ""
    if any(l.get("skipped") for l in oracle) or any(l.get("loss_scale", 1.0) != 1.0 for l in oracle):
        extra = f"; loss_scale/skipped equal: {_scale_sequence(oracle)}"
    return True, (msg + f"; lr max rel diff {worst_lr:.3g}" + (" (exact)" if lr_rtol == 0 else "")
                  + f", grad_norm max rel diff {worst_norm:.3g} (rtol {norm_rtol:g})" + extra)


def _scale_sequence(lines: List[dict]) -> str:
    """'2^17 S, 2^16 S, 2^14, ...': each step's loss scale (as a power of two when it is one)
    and S when the step was skipped."""
    out = []
    for line in sorted(lines, key=lambda l: l["step"]):
        scale = float(line.get("loss_scale", 1.0))
        m, e = math.frexp(scale)
        text = f"2^{e - 1}" if m == 0.5 else f"{scale:g}"
        out.append(text + (" S" if line.get("skipped") else ""))
    return ", ".join(out)


# ---------------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------------
def _cmd_eval(args) -> int:
    lines = eval_losses(args.model, args.data, args.world_size, args.gas, args.steps, args.unbatched,
                        args.device)
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


def _cmd_train(args) -> int:
    try:
        with open(args.config) as f:
            config = json.load(f)
    except OSError as e:
        raise OracleError(f"{args.config}: {e.strerror}")
    except json.JSONDecodeError as e:
        raise OracleError(f"{args.config}: not JSON: {e}")
    lines, state = train(args.model, args.data, config, args.steps, args.world_size, args.unbatched,
                         device=args.device)
    write_jsonl(args.out, lines)
    if args.save_params:
        write_safetensors(args.save_params, state)
    print(f"oracle train: {len(lines)} steps, world size {args.world_size} -> {args.out}"
          + (f", {args.save_params}" if args.save_params else ""))
    return 0


def _cmd_compare_params(args) -> int:
    ok, msg = compare_params(load_params(args.ours), load_params(args.oracle), args.rtol, args.atol,
                             args.ours, args.oracle)
    if ok:
        print(msg)
        return 0
    print(f"compare-params FAILED: {msg}", file=sys.stderr)
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
    e.add_argument("--device", default="cpu",
                   help="cpu (default) or cuda[:N]: run on that GPU, TF32 off")
    e.add_argument("--out", required=True, help="output JSON lines")
    e.set_defaults(func=_cmd_eval)

    c = sub.add_parser("compare", help="compare two loss files step by step")
    c.add_argument("--ours", required=True)
    c.add_argument("--oracle", required=True)
    c.add_argument("--rtol", type=float, default=1e-6)
    c.add_argument("--atol", type=float, default=0.0)
    c.set_defaults(func=_cmd_compare)

    t = sub.add_parser("train", help="train with autograd + torch.optim as DeepSpeed would")
    t.add_argument("--model", required=True, help="TorchScript archive (.pt)")
    t.add_argument("--data", required=True, help="data: torch.save dict (.pt) or .safetensors")
    t.add_argument("--config", required=True, help="DeepSpeed config (JSON)")
    t.add_argument("--steps", type=int, required=True, help="optimizer steps")
    t.add_argument("--world-size", type=int, default=1)
    t.add_argument("--unbatched", action="append", default=[], metavar="NAME",
                   help="a forward argument shaped [S, ...] that every rank gets whole (repeatable)")
    t.add_argument("--device", default="cpu",
                   help="cpu (default) or cuda[:N]: run on that GPU, TF32 off")
    t.add_argument("--out", required=True, help="output JSON lines")
    t.add_argument("--save-params", default=None, metavar="FILE.safetensors",
                   help="write the final parameters and (rank 0's) buffers")
    t.set_defaults(func=_cmd_train)

    cp = sub.add_parser("compare-params", help="compare two parameter files tensor by tensor")
    cp.add_argument("--ours", required=True, help=".safetensors")
    cp.add_argument("--oracle", required=True, help=".safetensors")
    cp.add_argument("--rtol", type=float, default=1e-4)
    cp.add_argument("--atol", type=float, default=1e-4)
    cp.set_defaults(func=_cmd_compare_params)

    args = p.parse_args(argv)
    try:
        return args.func(args)
    except OracleError as err:
        print(f"oracle.py {args.cmd}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
