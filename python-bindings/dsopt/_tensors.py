"""Tensors across the native boundary, without copies.

Python's torch and the native module load the same libtorch (Debian's), so a
DLPack capsule hands the storage itself to the other side. torch 1.13's DLPack
has no bool dtype: bool tensors travel as their uint8 view plus a flag, which
is why every item is a ``(capsule, is_bool)`` pair (see src/Tensors.h).
"""

import torch
from torch.utils import dlpack as _dlpack

try:  # numpy is optional: arrays are accepted when it is there.
    import numpy as _np
except ImportError:  # pragma: no cover
    _np = None


def as_tensor(value, what):
    """A CPU torch.Tensor sharing `value`'s memory where possible.

    torch tensors are taken as they are (detached: the runtime does its own
    backward); numpy arrays through torch.from_numpy (no copy) unless numpy
    cannot share them (negative strides), which costs one copy.
    """
    if isinstance(value, torch.Tensor):
        tensor = value
    elif _np is not None and isinstance(value, _np.ndarray):
        try:
            tensor = torch.from_numpy(value)
        except (TypeError, ValueError):
            tensor = torch.from_numpy(_np.ascontiguousarray(value))
    else:
        raise TypeError("%s: expected a torch.Tensor or a numpy.ndarray, got %s"
                        % (what, type(value).__name__))
    if tensor.device.type != "cpu":
        raise ValueError("%s: the runtime runs on the CPU; got a tensor on %s"
                         % (what, tensor.device))
    return tensor.detach()


def to_native(value, what="tensor"):
    tensor = as_tensor(value, what)
    if tensor.dtype == torch.bool:
        return (_dlpack.to_dlpack(tensor.view(torch.uint8)), True)
    return (_dlpack.to_dlpack(tensor), False)


def from_native(item):
    if item is None:
        return None
    capsule, is_bool = item
    tensor = _dlpack.from_dlpack(capsule)
    return tensor.view(torch.bool) if is_bool else tensor


def to_native_list(values, what):
    return [to_native(v, "%s[%d]" % (what, i)) for i, v in enumerate(values)]


def from_native_list(items):
    return [from_native(item) for item in items]
