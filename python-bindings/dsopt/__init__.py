"""dsopt: compile a TorchScript model and a DeepSpeed config into a plan, and
train it from Python with DeepSpeed's engine API.

    import dsopt
    plan = dsopt.compile(model, ds_config, example_inputs)   # deepspeed.initialize
    engine = dsopt.Engine(plan)
    for batch in micro_batches:
        loss = engine(*batch)
        engine.backward(loss)
        engine.step()

The compiler and the runtime are this project's C++ libraries (the native
module _dsopt), the same code ds-compile and ds-run run. Guide: docs/python.md.
"""

import torch as _torch

from ._build import TORCH_VERSION as _BUILT_TORCH

# _dsopt links one exact LibTorch; loaded next to another torch it would share
# the process with a second, incompatible copy.
if _torch.__version__ != _BUILT_TORCH:
    raise ImportError(
        "dsopt was built against torch %s, but this Python has torch %s: rebuild dsopt "
        "with this torch (cmake -DDS_PYTHON=%s) or use the environment it was built in"
        % (_BUILT_TORCH, _torch.__version__, __import__("sys").executable))

from ._dsopt import CompileError, ConfigError, EngineError, PlanError
from ._data import DataFile, load_data, read_safetensors, write_safetensors
from ._distributed import (all_reduce, barrier, get_rank, get_world_size,
                           init_distributed)
from ._engine import Engine
from ._initialize import initialize
from ._leaf import (get_z3_leaf_modules, set_z3_leaf_modules,
                    set_z3_leaf_modules_by_name, set_z3_leaf_modules_by_suffix,
                    unset_z3_leaf_modules, z3_leaf_module)
from ._plan import CompileWarning, Plan, compile, load_plan

# Defined in the native module; shown as dsopt.X in tracebacks.
for _error in (CompileError, ConfigError, EngineError, PlanError):
    _error.__module__ = __name__
del _error

__all__ = [
    "CompileError", "CompileWarning", "ConfigError", "DataFile", "Engine", "EngineError", "Plan",
    "PlanError", "all_reduce", "barrier", "compile", "get_rank", "get_world_size",
    "get_z3_leaf_modules", "init_distributed", "initialize", "load_data", "load_plan",
    "read_safetensors", "set_z3_leaf_modules", "set_z3_leaf_modules_by_name",
    "set_z3_leaf_modules_by_suffix", "unset_z3_leaf_modules", "write_safetensors",
    "z3_leaf_module",
]
