"""Ranks for Python scripts: ``mpirun -n W python train.py`` or
``torchrun --nproc-per-node W train.py``.

Under a launcher every engine of the process trains data-parallel over the
communicators ds-run uses (the runtime's RankGroup, one per process: MPI
initialises once; docs/launching.md): MPI or the store channel for CPU
engines, NCCL for GPU engines. Without one the process is rank 0 of 1 and
nothing starts MPI. Every rank runs the same script, so the engines'
collectives start in the same order on every rank, as they must.
"""

import atexit
import os
import sys
import weakref

from . import _dsopt
from ._tensors import to_native

# The launcher variables the runtime looks at (LaunchInfo::fromEnvironment):
# MPI's, and torchrun's RANK / WORLD_SIZE.
_LAUNCHER_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "RANK",
                       "WORLD_SIZE")

_group = None
_communicator = None
# Engines holding the communicator; their native halves are dropped at exit
# so that MPI is finalised (every rank meets at a last barrier) before the
# interpreter goes.
_holders = weakref.WeakSet()


def launched():
    """Whether a launcher (mpirun, torchrun) started this process."""
    return any(os.environ.get(name) for name in _LAUNCHER_VARIABLES)


def launcher_rank():
    """This process's rank as the launcher's variables give it (0 without a
    launcher), read without starting anything."""
    for name in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "RANK"):
        value = os.environ.get(name)
        if value and value.isdigit():
            return int(value)
    return 0


def _rank_group():
    global _group
    if _group is None:
        _group = _dsopt.rank_group()
        if _group.size > 1:
            sys.excepthook = _abort_on_uncaught
    return _group


def init_distributed():
    """DeepSpeed's ``deepspeed.init_distributed()``: the process's host
    communicator (MPI under mpirun, the store channel under torchrun, else
    one local rank), made once."""
    global _communicator
    if _communicator is None:
        if launched():
            _communicator = _rank_group().host_communicator()
        else:
            _communicator = _dsopt.local_communicator()
    return _communicator


def get_rank():
    """This process's data-parallel rank."""
    return init_distributed().rank


def get_world_size():
    """The number of ranks (1 without a launcher)."""
    return init_distributed().size


def barrier():
    init_distributed().barrier()


def all_reduce(tensor, op="sum"):
    """Reduces a contiguous CPU tensor over the ranks, in place ("sum",
    "avg" or "max"); returns it. For logging (mean losses), not training:
    the engines reduce their own gradients."""
    init_distributed().all_reduce(to_native(tensor, "all_reduce(tensor)"), op)
    return tensor


def engine_communicator(plan_world_size, device):
    """The communicator an engine of this world size trains over on `device`
    ("cpu", "cuda", "cuda:N": NCCL for GPUs), or None (one process emulating
    a rank, as before launchers were supported)."""
    if not launched():
        return None
    init_distributed()
    communicator = _rank_group().communicator(device)
    if communicator.size != plan_world_size:
        raise ValueError(
            "the plan was compiled for world_size %d, but %d rank(s) were launched "
            "(compile with world_size=dsopt.get_world_size(), as dsopt.initialize does)"
            % (plan_world_size, communicator.size))
    return communicator


def hold(engine):
    _holders.add(engine)


def _abort_on_uncaught(kind, value, traceback):
    """An uncaught exception on one rank ends the job: the other ranks would
    otherwise wait in their next collective until its timeout."""
    sys.__excepthook__(kind, value, traceback)
    if _communicator is not None and _communicator.size > 1:
        sys.stderr.flush()
        _communicator.abort(1)


@atexit.register
def _finalize():
    global _communicator
    global _group
    for engine in list(_holders):
        engine._release_native()
    _communicator = None
    _group = None
    _dsopt.leave_rank_group()
