"""Tensors across the native boundary, without copies.

Python's torch and the native module load the same libtorch (the torch wheel's),
so a DLPack capsule hands the storage itself to the other side (see src/Tensors.h).
"""

import torch
from torch.utils import dlpack as _dlpack

try:  # numpy is optional: arrays are accepted when it is there.
    import numpy as _np
except ImportError:  # pragma: no cover
    _np = None


def as_tensor(value, what):
    """A torch.Tensor sharing `value`'s memory where possible, on its own
    device (the engine copies host inputs to its device and names a tensor on
    another device; files are written from host copies).

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
    return tensor.detach()


def to_native(value, what="tensor"):
    return _dlpack.to_dlpack(as_tensor(value, what))


def from_native(item):
    if item is None:
        return None
    return _dlpack.from_dlpack(item)


def to_native_list(values, what):
    return [to_native(v, "%s[%d]" % (what, i)) for i, v in enumerate(values)]


def from_native_list(items):
    return [from_native(item) for item in items]
