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

from ._dsopt import CompileError, ConfigError, EngineError, PlanError
from ._data import DataFile, load_data, read_safetensors, write_safetensors
from ._engine import Engine
from ._plan import Plan, compile, load_plan

# Defined in the native module; shown as dsopt.X in tracebacks.
for _error in (CompileError, ConfigError, EngineError, PlanError):
    _error.__module__ = __name__
del _error

__all__ = [
    "CompileError", "ConfigError", "DataFile", "Engine", "EngineError", "Plan",
    "PlanError", "compile", "load_data", "load_plan", "read_safetensors",
    "write_safetensors",
]
