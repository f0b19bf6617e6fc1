"""dsopt.compile, dsopt.load_plan and dsopt.Plan.

The native compiler reads files: a TorchScript archive, a DeepSpeed config and
a data file whose shapes the plan is specialised on. This module turns what a
Python user has at hand (an nn.Module, a dict, a few tensors) into those files,
in a temporary folder, and calls the same pipeline as ds-compile.
"""

import json
import os
import shutil
import sys
import tempfile
import warnings
from collections.abc import Mapping

import torch

from . import _distributed, _dsopt
from ._leaf import marked_paths, with_leaf_names
from ._tensors import as_tensor

_PathTypes = (str, bytes, os.PathLike)


class Plan:
    """A compiled (or loaded) plan: what ds-compile writes and ds-run runs.

    A plan compiled from an ``nn.Module`` or ``ScriptModule`` takes its initial
    weights from an archive in a temporary folder that lives as long as the
    plan; ``save`` copies that archive next to the plan file.
    """

    def __init__(self, native, owned_dir=None, out_spec=None):
        self._native = native
        # tempfile.TemporaryDirectory holding the model archive, or None.
        self._owned_dir = owned_dir
        # The pytree structure of an exported model's outputs (a
        # transformers ModelOutput, a dict, ...), which the engine's forward
        # returns; None: a tensor or a tuple.
        self._out_spec = out_spec

    # -- export -------------------------------------------------------------
    def save(self, path):
        """Writes the plan file (validated, atomically) to `path`.

        The plan's weights stay where they are, referenced by absolute path,
        except an archive dsopt.compile wrote to a temporary folder: it is
        copied to ``<path without extension>.weights.pt`` and referenced
        relative to the plan, so the two files move together. A relative
        weights path of a loaded plan is rewritten relative to `path`.
        """
        path = os.path.abspath(os.fspath(path))
        native = self._native.copy()
        weights = native.weights
        if weights is not None:
            source = weights["path"]
            if not os.path.isabs(source):
                source = os.path.join(self._native.base_dir or os.getcwd(), source)
            folder = os.path.dirname(path)
            if self._owned_dir is not None:
                target = os.path.splitext(path)[0] + ".weights.pt"
                shutil.copyfile(source, target)
                native.set_weights(weights["kind"], os.path.basename(target))
            elif not os.path.isabs(weights["path"]):
                native.set_weights(weights["kind"],
                                   os.path.relpath(os.path.abspath(source), folder))
        native.save(path)

    # -- inspection ---------------------------------------------------------
    def mlir(self, stage="final"):
        """The IR after `stage`, as text.

        Stages, in pipeline order: ``"import"``, ``"ds-assign-engines"``,
        ``"ds-assign-precision"``, then for a trainable model ``"ds-autodiff"``,
        ``"ds-scale-loss"``, ``"canonicalize"``,
        ``"cse"``, ``"ds-rematerialize"``, ``"ds-lower-optimizer"``, ``"ds-zero-partition"``,
        ``"ds-engine-backward"``, ``"ds-schedule-collectives"``, ``"ds-verify-collectives"``, and
        ``"final"`` (the IR the plan is emitted from). Only
        plans compiled in this process with ``keep_ir=True`` carry IR;
        anything else raises ValueError naming the stages there are.
        """
        return self._native.mlir(stage)

    @property
    def stages(self):
        """The stages ``mlir`` accepts for this plan (empty when loaded)."""
        return list(self._native.stages)

    def report(self):
        """The plan's summary as a dict (keys in docs/python.md)."""
        return self._native.report()

    def to_json(self):
        """The plan file's text."""
        return self._native.to_json()

    @property
    def inputs(self):
        """Forward arguments: dicts with name, dtype, shape (one micro-step of
        one rank), batched."""
        return self._native.inputs

    @property
    def outputs(self):
        return list(self._native.outputs)

    @property
    def world_size(self):
        return self._native.world_size

    @property
    def device(self):
        """The device the plan was compiled for: ``"cpu"`` or ``"cuda"``."""
        return self._native.device

    @property
    def torch_version(self):
        """The torch version that compiled the plan (``torch.__version__``
        of the build's LibTorch); empty for hand-written plans."""
        return self._native.torch_version

    @property
    def micro_batch_per_rank(self):
        return self._native.micro_batch_per_rank

    @property
    def gradient_accumulation_steps(self):
        return self._native.gradient_accumulation_steps

    @property
    def can_train(self):
        """Whether the plan has a train program (some engine trains)."""
        return self._native.can_train

    @property
    def weights(self):
        """``{"kind", "path"}`` of the initial weights, or None."""
        return self._native.weights

    @property
    def warnings(self):
        """Warnings the compiler emitted."""
        return list(self._native.warnings)

    @property
    def origin(self):
        """The plan file it was loaded from, or ``"<compiled plan>"``."""
        return self._native.origin

    def __repr__(self):
        return "<dsopt.Plan %s: inputs %s, outputs %s, world_size %d, gas %d>" % (
            self.origin, [i["name"] for i in self.inputs], self.outputs,
            self.world_size, self.gradient_accumulation_steps)


def load_plan(path):
    """Reads and validates a plan file (dsopt.PlanError when it is invalid)."""
    return Plan(_dsopt.load_plan(os.fspath(path)))


class CompileWarning(UserWarning):
    """A warning of the compiler (an "auto" config value that fell to a
    default, ...): what ds-compile prints as "warning:"."""


def _device_type(device):
    """"cpu" or "cuda" from compile's ``device`` (a str or a torch.device;
    "cuda:1" is "cuda": the plan records the kind of device, the run picks
    one)."""
    kind = getattr(device, "type", device)
    if isinstance(kind, str):
        kind = kind.split(":", 1)[0]
    if kind not in ("cpu", "cuda"):
        raise ValueError("device must be 'cpu' or 'cuda', got %r" % (device,))
    return kind


def compile(module_or_path, config, example_inputs, world_size=1, *,
            unbatched=(), keep_ir=True, mixed_precision=None, overrides=None,
            device="cpu"):
    """Compiles a model with a DeepSpeed config into a Plan.

    module_or_path: a ``torch.jit.ScriptModule`` (scripted or traced), an
        ``nn.Module`` (scripted here with torch.jit.script; one that does not
        script, as transformers' models, is exported with
        ``torch.export.export`` on example_inputs instead), a
        ``torch.export.ExportedProgram``, or the path of a TorchScript archive
        or of a ``.pt2`` from ``torch.export.save``.
    config: a DeepSpeed config as a dict or the path of its JSON file; the
        multi-engine form ``{"engines": {"student": {...}, "teacher": ...}}``
        too, or the same without ``"engines"`` when every key is a submodule
        path of the model (relative engine config paths in a dict resolve
        against the current directory). Leaf modules marked on an nn.Module
        (dsopt.set_z3_leaf_modules...) are added to each engine's
        ``zero_optimization.leaf_module.names``.
    example_inputs: one micro-step of one rank: a tuple of tensors (or numpy
        arrays) in forward's order, a dict by argument name, or the path of a
        data file (``[S, B, ...]`` per argument, as ds-run reads). From
        tensors the data file is built by repeating each batched tensor
        world_size times along its first dimension.
    world_size: data-parallel ranks.
    unbatched: names of forward arguments that are not batched (every rank
        gets them whole).
    keep_ir: keep the IR after every pass for ``Plan.mlir(stage)``.
    mixed_precision: "bf16", "fp16" or "no": what ``"auto"`` in
        ``bf16.enabled`` / ``fp16.enabled`` means (ds-compile
        --mixed-precision; None: not given).
    overrides: ds-compile's ``--set``: a dict of dotted keys to values
        (``{"optimizer.params.lr": 1e-3, "engines.student.gradient_clipping":
        0.5}``; values as JSON) or a list of ``"KEY=VALUE"`` strings, applied
        in order.
    device: the device the plan is compiled for, ``"cpu"`` or ``"cuda"``
        (ds-compile --device; a ``torch.device`` of either type, its index
        ignored): that device's autocast lists and generator state, recorded
        as ``Plan.device``.

    Errors the compiler reports raise dsopt.CompileError (a ValueError) with
    its message; its warnings are issued as dsopt.CompileWarning (and kept in
    ``Plan.warnings``); wrong argument types raise TypeError.
    """
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError("world_size must be a positive int, got %r" % (world_size,))
    if isinstance(unbatched, str):
        unbatched = [unbatched]
    unbatched = [str(name) for name in unbatched]
    device = _device_type(device)

    tmp = tempfile.TemporaryDirectory(prefix="dsopt-")
    try:
        leaf_paths = marked_paths(module_or_path)  # Before scripting drops the marks.
        model_path, script = _model_file(module_or_path, tmp.name, example_inputs,
                                         world_size, unbatched)
        config = _engines_form(config, lambda: _module_names(model_path, script))
        if leaf_paths:
            config = with_leaf_names(_config_dict(config), leaf_paths,
                                     _config_dir(config))
        config_path, config_json = _config_args(config)
        data_path = _example_file(example_inputs, model_path, script, world_size,
                                  unbatched, tmp.name)
        native = _dsopt.compile(model_path, config_path, config_json, os.getcwd(),
                                "config dict", data_path, world_size, unbatched,
                                bool(keep_ir), mixed_precision or "",
                                _override_args(overrides), device)
    except BaseException:
        tmp.cleanup()
        raise
    _warn(native.warnings, _caller_stacklevel())
    out_spec = _out_spec(script)
    if script is None:  # The weights are the user's archive.
        tmp.cleanup()
        return Plan(native, out_spec=out_spec)
    return Plan(native, owned_dir=tmp, out_spec=out_spec)


def _out_spec(program):
    """The output structure of an ExportedProgram, unless it is a plain
    tensor or tuple of tensors (which the engine returns as they are)."""
    if not isinstance(program, torch.export.ExportedProgram):
        return None
    spec = program.call_spec.out_spec
    if spec is None or spec.is_leaf() or spec.type is tuple and all(
            spec.child(i).is_leaf() for i in range(spec.num_children)):
        return None
    return spec


def _model_file(module_or_path, folder, example_inputs, world_size, unbatched):
    """(model file path, the ScriptModule or ExportedProgram written there, or
    None when the user gave a path)."""
    if isinstance(module_or_path, _PathTypes):
        return os.fsdecode(os.fspath(module_or_path)), None
    if isinstance(module_or_path, torch.export.ExportedProgram):
        return _save_program(module_or_path, folder)
    if isinstance(module_or_path, torch.jit.ScriptModule):
        script = module_or_path
    elif isinstance(module_or_path, torch.nn.Module):
        try:
            with warnings.catch_warnings():  # torch 2.x deprecates TorchScript.
                warnings.filterwarnings("ignore", category=FutureWarning,
                                        message=r".*is deprecated")
                script = torch.jit.script(module_or_path)
        except Exception as script_error:
            # Models that do not script (transformers') export.
            return _save_program(_export(module_or_path, example_inputs, world_size,
                                         unbatched, script_error), folder)
    else:
        raise TypeError("expected a torch.jit.ScriptModule, an nn.Module, a "
                        "torch.export.ExportedProgram or the path of a model file, got %s"
                        % type(module_or_path).__name__)
    path = os.path.join(folder, "model.pt")
    script.save(path)
    return path, script


def _save_program(program, folder):
    # torch.vmap (transformers' attention masks) exports as functorch batching calls, which
    # are no ATen operators; decomposing with an empty table writes them as ATen operators.
    if any(getattr(node.target, "__module__", None) == "torch._functorch.predispatch"
           for node in program.graph.nodes):
        program = program.run_decompositions({})
    path = os.path.join(folder, "model.pt2")
    torch.export.save(program, path)
    return path, program


def _export(module, example_inputs, world_size, unbatched, script_error):
    """torch.export.export of `module` on one rank's micro-step; a
    CompileError naming both failures when it does not export either."""
    args, kwargs = (), {}
    try:
        if isinstance(example_inputs, Mapping):
            kwargs = {str(k): as_tensor(v, "example_inputs[%r]" % (k,)).cpu()
                      for k, v in example_inputs.items()}
        elif isinstance(example_inputs, _PathTypes):
            # A data file holds [S, B, ...] per argument (or a list of per-micro-step
            # dicts): one rank's rows of micro-step 0, as the compiler reads them.
            data = _read_data_file(os.fsdecode(os.fspath(example_inputs)))
            step = data[0] if isinstance(data, list) else {k: v[0] for k, v in data.items()}
            kwargs = {str(k): (v if k in unbatched else v[: v.shape[0] // world_size]).cpu()
                      for k, v in step.items()}
            # Positional keys (in0, in1, ...) are forward's arguments in order.
            if kwargs and all(k == "in%d" % i for i, k in enumerate(kwargs)):
                args, kwargs = tuple(kwargs.values()), {}
        else:
            if isinstance(example_inputs, torch.Tensor) or _is_array(example_inputs):
                example_inputs = (example_inputs,)
            args = tuple(as_tensor(v, "example_inputs[%d]" % i).cpu()
                         for i, v in enumerate(example_inputs))
        return torch.export.export(module, args, kwargs)
    except Exception as export_error:
        hint = ""
        if "Cache" in _first_line(export_error):
            hint = (" (a transformers model returns its key/value cache: set use_cache=False "
                    "in its config, and the engine returns its other outputs)")
        raise _dsopt.CompileError(
            "%s neither scripts nor exports. torch.jit.script: %s. torch.export.export: %s%s"
            % (type(module).__name__, _first_line(script_error),
               _first_line(export_error), hint)) from export_error


def _read_data_file(path):
    """A data file as the compiler reads it: a torch.save dict or list, or a
    .safetensors file."""
    if path.endswith(".safetensors"):
        from ._data import read_safetensors
        return dict(read_safetensors(path))
    return torch.load(path)


def _first_line(error):
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _program_input_names(program):
    """The user inputs of an ExportedProgram, in order."""
    return [spec.arg.name for spec in program.graph_signature.input_specs
            if spec.kind == torch.export.graph_signature.InputKind.USER_INPUT]


def _config_args(config):
    """(config path, "") or ("", JSON text)."""
    if isinstance(config, _PathTypes):
        return os.fsdecode(os.fspath(config)), ""
    if isinstance(config, Mapping):
        return "", json.dumps(config)
    raise TypeError("config must be a dict or the path of a JSON file, got %s"
                    % type(config).__name__)


def _warn(messages, level):
    """The compiler's warnings as one dsopt.CompileWarning, issued on rank 0
    only: every rank compiles the same model, and one copy speaks for the
    job (each rank's Plan.warnings keeps them all)."""
    if not messages or _distributed.launcher_rank() != 0:
        return
    if len(messages) == 1:
        text = messages[0]
    else:
        text = "%d compile warnings:\n" % len(messages) + "\n".join(
            "  - " + m for m in messages)
    text += ("\n(silence them with warnings.filterwarnings(\"ignore\", "
             "category=dsopt.CompileWarning))")
    warnings.warn(text, CompileWarning, stacklevel=level + 1)  # + _warn


def _caller_stacklevel():
    """warnings.warn's stacklevel of the first caller outside this package."""
    package = os.path.dirname(os.path.abspath(__file__))
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.dirname(
            os.path.abspath(frame.f_code.co_filename)) == package:
        frame, level = frame.f_back, level + 1
    return level


def _override_args(overrides):
    """ds-compile's --set arguments: ["KEY=VALUE", ...]."""
    if overrides is None:
        return []
    if isinstance(overrides, Mapping):
        return ["%s=%s" % (key, json.dumps(value)) for key, value in overrides.items()]
    if isinstance(overrides, str):
        overrides = [overrides]
    return [str(item) for item in overrides]


def _engines_form(config, module_names):
    """A dict of per-engine configs keyed by submodule path ({"student":
    cfg2, "teacher": "zero3.json"}, as Accelerate names its plugins) as the
    {"engines": {...}} document; any other config unchanged."""
    if not isinstance(config, Mapping) or not config or "engines" in config:
        return config
    if not all(isinstance(v, (Mapping,) + _PathTypes) for v in config.values()):
        return config
    names = module_names()
    if names is None or not all(key in names for key in config):
        return config
    return {"engines": dict(config)}


def _module_names(model_path, script):
    """The model's named_modules() paths, or None when TorchScript cannot
    load it (the compiler reports a bad archive better)."""
    if isinstance(script, torch.export.ExportedProgram):
        # Every prefix of a state name is a module path.
        names = {""}
        for key in script.state_dict:
            parts = key.split(".")[:-1]
            names.update(".".join(parts[:i + 1]) for i in range(len(parts)))
        return names
    try:
        if script is None:
            script = torch.jit.load(model_path)
        return {name for name, _ in script.named_modules()}
    except Exception:
        return None


def _config_dict(config):
    if isinstance(config, Mapping):
        return config
    if isinstance(config, _PathTypes):
        path = os.fsdecode(os.fspath(config))
        try:
            with open(path) as f:
                return json.load(f)
        except (OSError, ValueError) as error:
            raise _dsopt.CompileError(
                "%s: cannot add the leaf modules marked on the model to this config: %s"
                % (path, error)) from error
    return config  # _config_args reports the type.


def _config_dir(config):
    """The folder relative engine config paths resolve against."""
    if isinstance(config, _PathTypes):
        return os.path.dirname(os.path.abspath(os.fsdecode(os.fspath(config))))
    return os.getcwd()


def _forward_arg_names(model_path, script):
    """forward's argument names, or None when TorchScript cannot tell."""
    if isinstance(script, torch.export.ExportedProgram):
        return _program_input_names(script)
    try:
        if script is None:
            script = torch.jit.load(model_path)
        return [a.name for a in script.forward.schema.arguments][1:]
    except Exception:  # The compiler reports a bad archive better.
        return None


def _example_file(example_inputs, model_path, script, world_size, unbatched, folder):
    """The data file for the compiler: the user's path, or one built from
    per-rank tensors as [1, world_size * rows, ...] (unbatched: [1, ...])."""
    if isinstance(example_inputs, _PathTypes):
        return os.fsdecode(os.fspath(example_inputs))
    if isinstance(example_inputs, Mapping):
        named = list(example_inputs.items())
    else:
        if isinstance(example_inputs, (torch.Tensor,)) or _is_array(example_inputs):
            example_inputs = (example_inputs,)
        if not isinstance(example_inputs, (tuple, list)):
            raise TypeError("example_inputs must be a tuple of tensors, a dict of "
                            "tensors or the path of a data file, got %s"
                            % type(example_inputs).__name__)
        names = _forward_arg_names(model_path, script)
        if names is not None and len(names) != len(example_inputs):
            raise ValueError("example_inputs has %d tensor(s), but forward takes %d (%s)"
                             % (len(example_inputs), len(names), ", ".join(names)))
        if names is None:  # Positional keys; the compiler checks the count.
            names = ["in%d" % i for i in range(len(example_inputs))]
        named = list(zip(names, example_inputs))

    data = {}
    for name, value in named:
        # The compiler runs the model on the CPU, whatever the plan's device.
        tensor = as_tensor(value, "example_inputs[%r]" % (name,)).cpu()
        if name in unbatched:
            # A fresh storage: torch.save writes whole storages.
            data[str(name)] = tensor.unsqueeze(0).clone(
                memory_format=torch.contiguous_format)
            continue
        if tensor.dim() == 0:
            raise ValueError("example_inputs[%r] is a 0-dim tensor, which has no batch "
                             "dimension; name it in unbatched=[...]" % (name,))
        rows = tensor.repeat((world_size,) + (1,) * (tensor.dim() - 1))  # A copy.
        data[str(name)] = rows.unsqueeze(0)
    path = os.path.join(folder, "example.pt")
    torch.save(data, path)
    return path


def _is_array(value):
    return type(value).__module__ == "numpy" and type(value).__name__ == "ndarray"
