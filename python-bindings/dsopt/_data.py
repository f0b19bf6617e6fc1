"""Data files and safetensors, read by the runtime's own readers.

DataFile gives a Python loop exactly the rows ds-run feeds each micro-step
(the same reader and slicing), which is what makes a Python training loop and
ds-run comparable bit for bit.
"""

import collections
import os

from . import _distributed, _dsopt
from ._tensors import from_native, from_native_list, to_native


class DataFile:
    """A data file (``torch.save`` dict or ``.safetensors``; ``[S, B, ...]``
    per forward argument) checked against a plan, as ds-run loads it.

    ``data[s]`` / ``data.micro_step(s, rank)`` is micro-step s of a rank (by
    default this process's: its MPI rank under mpirun, else 0): a tuple of
    tensors in forward's order, views into the file's tensors.
    """

    def __init__(self, path, plan, unbatched=()):
        from ._plan import Plan, load_plan
        if not isinstance(plan, Plan):
            plan = load_plan(plan)
        if isinstance(unbatched, str):
            unbatched = [unbatched]
        self._native = _dsopt.DataFile(os.fspath(path), plan._native, list(unbatched))

    @property
    def num_micro_steps(self):
        return self._native.num_micro_steps

    def micro_step(self, step, rank=None):
        if rank is None:
            rank = _distributed.get_rank()
        return tuple(from_native_list(self._native.micro_step(int(step), int(rank))))

    def __len__(self):
        return self.num_micro_steps

    def __getitem__(self, step):
        if step < 0:
            step += self.num_micro_steps
        return self.micro_step(step)

    def __iter__(self):
        for step in range(self.num_micro_steps):
            yield self.micro_step(step)


def load_data(path, plan, unbatched=()):
    """DataFile(path, plan, unbatched)."""
    return DataFile(path, plan, unbatched)


def read_safetensors(path):
    """Every tensor of a .safetensors file, by name, in the file's order."""
    return collections.OrderedDict(
        (name, from_native(item))
        for name, item in _dsopt.read_safetensors(os.fspath(path)))


def write_safetensors(path, tensors):
    """Writes a dict of name -> tensor as .safetensors, atomically."""
    _dsopt.write_safetensors(
        os.fspath(path),
        [(str(name), to_native(t, name)) for name, t in tensors.items()])
