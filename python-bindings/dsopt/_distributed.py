"""Ranks for Python scripts: ``mpirun -n W python train.py``.

Under an MPI launcher every engine of the process trains data-parallel over
the communicator ds-run uses (lib/Runtime/Comm, one per process: MPI
initialises once); without one the process is rank 0 of 1 and nothing
starts MPI. Every rank runs the same script, so the engines' collectives
start in the same order on every rank, as they must.
"""

import atexit
import os
import sys
import weakref

from . import _dsopt
from ._tensors import to_native

# The launcher variables ds-run's World looks at (tools/ds-run/World.cpp).
_LAUNCHER_SIZE_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE")
_LAUNCHER_VARIABLES = _LAUNCHER_SIZE_VARIABLES + ("PMIX_RANK",)

_communicator = None
# Engines holding the communicator; their native halves are dropped at exit
# so that MPI is finalised (every rank meets at a last barrier) before the
# interpreter goes.
_holders = weakref.WeakSet()


def launched():
    """Whether an MPI launcher (mpirun) started this process."""
    return any(os.environ.get(name) for name in _LAUNCHER_VARIABLES)


def init_distributed():
    """DeepSpeed's ``deepspeed.init_distributed()``: the process's
    communicator (MPI under a launcher, else one local rank), made once."""
    global _communicator
    if _communicator is None:
        if launched():
            _communicator = _dsopt.mpi_communicator()
            sys.excepthook = _abort_on_uncaught
            expected = _launcher_size()
            if expected is not None and expected != _communicator.size:
                raise RuntimeError(
                    "launched with %d ranks, but MPI reports %d: the launcher does not "
                    "belong to the MPI library dsopt was built with"
                    % (expected, _communicator.size))
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


def engine_communicator(plan_world_size):
    """The communicator an engine of this world size trains over, or None
    (one process emulating a rank, as before launchers were supported)."""
    if not launched():
        return None
    communicator = init_distributed()
    if communicator.size != plan_world_size:
        raise ValueError(
            "the plan was compiled for world_size %d, but %d rank(s) were launched "
            "(compile with world_size=dsopt.get_world_size(), as dsopt.initialize does)"
            % (plan_world_size, communicator.size))
    return communicator


def hold(engine):
    _holders.add(engine)


def _launcher_size():
    for name in _LAUNCHER_SIZE_VARIABLES:
        value = os.environ.get(name)
        if value:
            return int(value)
    return None


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
    for engine in list(_holders):
        engine._release_native()
    _communicator = None
