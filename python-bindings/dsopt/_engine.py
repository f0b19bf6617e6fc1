"""dsopt.Engine: DeepSpeed's engine API over a compiled plan.

    loss = engine(*batch)      # forward: one micro-step of this rank
    engine.backward(loss)      # the compiled backward
    engine.step()              # updates on the accumulation boundary only

Everything runs in the native runtime (the same code as ds-run); this module
only maps DeepSpeed's names and argument forms onto it.
"""

import collections
import os
import warnings

from . import _dsopt
from ._plan import Plan, load_plan
from ._tensors import from_native, from_native_list, to_native_list


class Engine:
    """Runs a plan: training (forward, backward, step) and eval forwards.

    plan: a dsopt.Plan or the path of a plan file.
    weights: replaces the plan's initial weights (``.safetensors``, or a
        TorchScript archive), as ``ds-run --weights``.
    seed: overrides the config's ``seed`` (dropout masks, every random draw),
        as ``ds-run --seed``; default: the config's, else 0.
    rank: this process's data-parallel rank (it picks the micro-step seeds).
    check_results: check every op result against the plan (default on).
    """

    def __init__(self, plan, *, weights=None, seed=None, rank=0, check_results=True):
        if not isinstance(plan, Plan):
            if isinstance(plan, (str, bytes, os.PathLike)):
                plan = load_plan(plan)
            else:
                raise TypeError("Engine(plan): expected a dsopt.Plan or the path of a "
                                "plan file, got %s" % type(plan).__name__)
        self._plan = plan  # Keeps a compiled plan's temporary weights alive.
        self._native = _dsopt.Engine(plan._native, os.fspath(weights or ""), seed,
                                     int(rank), bool(check_results))
        self._input_names = [i["name"] for i in plan.inputs]
        described = plan.report()["engines"]
        self._trainable_engines = [e["name"] for e in described if not e["frozen"]]
        self.engines = collections.OrderedDict(
            (e["name"], EngineHandle(self, e)) for e in described)
        self.training = True
        self._last_outputs = None
        self._last_report = None

    # -- DeepSpeed's training API -------------------------------------------
    def __call__(self, *inputs, **named):
        return self.forward(*inputs, **named)

    def forward(self, *inputs, **named):
        """One micro-step's forward on this rank's rows; returns the loss (a
        tuple when the model returns several).

        Arguments in forward's order, by name, or as one tuple/list/dict
        (DeepSpeed's ``engine(batch)``): torch tensors or numpy arrays, shaped
        as ``plan.inputs`` says. In train mode (the default) this is the
        forward of the training step and ``backward`` must follow; after
        ``eval()`` it runs the eval program (no gradients, nothing to undo).
        The inputs are used in place, not copied: do not modify them before
        ``backward`` has run.
        """
        batch = _native_inputs(self._input_names, inputs, named)
        if not self.training:
            return _outputs(from_native_list(self._native.forward_eval(batch)))
        outputs = _outputs(from_native_list(self._native.forward(batch)))
        self._last_outputs = outputs
        return outputs

    def backward(self, loss=None):
        """Runs the compiled backward of the last forward: gradients of the
        sum of its losses, already scaled by 1 / gradient_accumulation_steps
        (as DeepSpeed scales them), accumulate into the gradient buffers.

        `loss` is DeepSpeed's argument: pass what the forward returned (or one
        of its losses, or None). The backward is part of the compiled
        program, so a loss computed from it in Python (``loss * 2``) cannot be
        differentiated and is refused with ValueError.
        """
        if loss is not None and not _is_output(loss, self._last_outputs):
            raise ValueError(
                "backward(loss): pass the loss the last forward returned; the "
                "backward is compiled into the plan and differentiates the sum of "
                "the forward's losses, so a value computed from them in Python "
                "cannot be differentiated")
        self._native.backward()
        self._last_outputs = None

    def step(self):
        """Ends the micro-step; on the accumulation boundary clips, updates
        the parameters, advances the LR schedule and zeroes the gradients.

        Returns ``{"updated": bool, "grad_norm": float, "engines": [{"engine",
        "lr", "grad_norm"}]}`` (``engines`` empty off the boundary).
        """
        report = self._native.step()
        if report["updated"]:
            self._last_report = report
        return report

    def is_gradient_accumulation_boundary(self):
        """True when the next ``step()`` updates the parameters."""
        return self._native.is_gradient_accumulation_boundary()

    def train(self, mode=True):
        """Train mode (the default): forward runs the training step."""
        self.training = bool(mode)
        return self

    def eval(self):
        """Eval mode: forward runs the eval program (as after module.eval())."""
        return self.train(False)

    def save_checkpoint(self, save_dir, tag=None, client_state=None, *, include_frozen=False):
        """DeepSpeed's save_checkpoint: save_dir/<tag>/ (tag None: "global_step<N>") in
        DeepSpeed's layout, then save_dir/latest; one folder per engine of a multi-engine plan
        (save_dir/<engine>/<tag>/), frozen engines only with include_frozen. Call it between
        optimizer steps, on every rank. Returns the tag (DeepSpeed returns True).
        client_state is not supported (the files hold tensors, numbers and strings only)."""
        if client_state:
            raise ValueError("save_checkpoint: client_state is not supported")
        return self._native.save_checkpoint(os.fspath(save_dir), tag or "", include_frozen)

    def load_checkpoint(self, load_dir, tag=None):
        """DeepSpeed's load_checkpoint: parameters, optimizer state, LR schedule, step counters
        and seed from load_dir/<tag>/ (tag None: load_dir/latest's), so that training goes on
        bitwise as if it had not stopped. Returns (load_path, {}) as DeepSpeed does
        (client states are not supported)."""
        return self._native.load_checkpoint(os.fspath(load_dir), tag or ""), {}

    def save_16bit_model(self, save_dir, save_filename="pytorch_model.bin",
                         exclude_frozen_parameters=False):
        """DeepSpeed's save_16bit_model: the whole state dict (in the training dtype: fp32, since
        there is no fp16/bf16 training yet) as save_dir/save_filename, by rank 0; every rank must
        call it. Under ZeRO stage 3 it gathers only when the config sets
        stage3_gather_16bit_weights_on_model_save; otherwise it warns and returns False."""
        saved, message = self._native.save_16bit_model(os.fspath(save_dir), save_filename,
                                                      bool(exclude_frozen_parameters))
        if not saved:
            warnings.warn(message)
        return saved

    # -- DeepSpeed's accessors ----------------------------------------------
    @property
    def global_steps(self):
        """Optimizer steps taken."""
        return self._native.global_steps

    @property
    def micro_steps(self):
        """Micro-steps ended by step()."""
        return self._native.micro_steps

    def gradient_accumulation_steps(self):
        return self._plan.gradient_accumulation_steps

    def train_micro_batch_size_per_gpu(self):
        return self._plan.micro_batch_per_rank

    def train_batch_size(self):
        return (self._plan.micro_batch_per_rank * self._plan.world_size
                * self._plan.gradient_accumulation_steps)

    def get_lr(self):
        """The LR the next update uses, per trainable engine in plan order."""
        return [self._native.next_lr(name) for name in self._trainable_engines]

    @property
    def loss_scale(self):
        """The fp16 loss scale the next step uses, per trainable engine in
        plan order (None for engines without a loss scaler)."""
        return [self._native.loss_scale(name) for name in self._trainable_engines]

    def get_global_grad_norm(self):
        """The last update's gradient norm before clipping (None before it)."""
        return None if self._last_report is None else self._last_report["grad_norm"]

    def engine_reports(self):
        """Per plan engine: parameter, gradient and optimizer bytes on this
        rank now, and the elements its collectives moved since load (the
        objects under "engines" in ``ds-run --report``)."""
        return collections.OrderedDict((r["name"], r) for r in self._native.engine_reports())

    # -- Beyond DeepSpeed ---------------------------------------------------
    @property
    def plan(self):
        return self._plan

    @property
    def seed(self):
        return self._native.seed

    def state_dict(self):
        """Parameters and buffers by qualified name, in plan order. The
        tensors are the engine's own storage (no copy): clone them to keep a
        snapshot across steps."""
        return collections.OrderedDict(
            (name, from_native(item)) for name, item in self._native.state())

    def save_params(self, path):
        """Writes every parameter and buffer as safetensors, atomically (what
        ``ds-run --save-params`` writes)."""
        self._native.save_params(os.fspath(path))

    def gradient(self, name):
        """The accumulated gradient of a trainable parameter (a view of the
        engine's buffer), or None."""
        return from_native(self._native.gradient(name))

    def memory(self):
        """Eval program's measured live-value bytes, plus state bytes."""
        return self._native.memory()

    def train_memory(self):
        """The same for the train program, plus gradient and optimizer bytes."""
        return self._native.train_memory()


class EngineHandle:
    """One engine of a multi-engine plan, as a DeepSpeed engine of its own.

    The session (``Engine``) drives every engine with one ``forward``,
    ``backward`` and ``step``: there is no per-engine backward or step to call
    (DeepSpeed's ``_backward_epilogue()`` per engine is placed by the
    compiler). A handle answers the per-engine questions: ``engine.engines
    ["student"].get_lr()``.
    """

    def __init__(self, session, described):
        self._session = session
        self.name = described["name"]
        self.module = described["module"]
        self.frozen = described["frozen"]
        self.zero_stage = described["zero_stage"]
        self.parameters = list(described["params"])

    def get_lr(self):
        """The LR this engine's next update uses (None when frozen)."""
        return None if self.frozen else self._session._native.next_lr(self.name)

    @property
    def loss_scale(self):
        """The fp16 loss scale this engine's next step uses (None without a
        loss scaler: fp32, bf16, autocast, frozen)."""
        return None if self.frozen else self._session._native.loss_scale(self.name)

    def get_global_grad_norm(self):
        """This engine's last gradient norm before clipping (None before its
        first update, or when frozen)."""
        report = self._session._last_report
        if report is None:
            return None
        for entry in report["engines"]:
            if entry["engine"] == self.name:
                return entry["grad_norm"]
        return None

    def state_dict(self):
        """This engine's parameters, whole, by qualified name (at ZeRO stage 3
        a collective, as ``Engine.state_dict``)."""
        every = self._session.state_dict()
        return collections.OrderedDict((n, every[n]) for n in self.parameters)

    def report(self):
        """This engine's bytes and traffic (``Engine.engine_reports()``)."""
        return self._session.engine_reports()[self.name]

    def __repr__(self):
        return "EngineHandle(%r, module=%r, frozen=%r, zero_stage=%d)" % (
            self.name, self.module, self.frozen, self.zero_stage)


def _native_inputs(names, inputs, named):
    if named:
        if inputs:
            raise TypeError("pass the forward's arguments by position or by name, "
                            "not both")
        return _by_name(names, named)
    if len(inputs) == 1 and isinstance(inputs[0], dict):
        return _by_name(names, inputs[0])
    if len(inputs) == 1 and isinstance(inputs[0], (tuple, list)):
        inputs = tuple(inputs[0])
    return to_native_list(inputs, "inputs")


def _by_name(names, named):
    unknown = [key for key in named if key not in names]
    if unknown:
        raise TypeError("unknown forward argument(s) %s; forward takes %s"
                        % (", ".join(map(repr, unknown)), ", ".join(names)))
    missing = [name for name in names if name not in named]
    if missing:
        raise TypeError("missing forward argument(s) %s" % ", ".join(map(repr, missing)))
    return to_native_list([named[name] for name in names], "inputs")


def _outputs(tensors):
    return tensors[0] if len(tensors) == 1 else tuple(tensors)


def _is_output(loss, outputs):
    if outputs is None:
        return True  # The native backward reports a missing forward itself.
    if loss is outputs:
        return True
    if not isinstance(outputs, tuple):
        return False
    if isinstance(loss, (tuple, list)):  # Several engines' losses at once.
        return len(loss) > 0 and all(any(l is t for t in outputs) for l in loss)
    return any(loss is t for t in outputs)
