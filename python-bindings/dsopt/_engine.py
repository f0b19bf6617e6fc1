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
import weakref

import torch

from . import _distributed, _dsopt
from ._plan import Plan, load_plan
from ._tensors import from_native, from_native_list, to_native, to_native_list
from ._views import LRSchedulerView, OptimizerView


class Engine:
    """Runs a plan: training (forward, backward, step) and eval forwards.

    plan: a dsopt.Plan or the path of a plan file.
    weights: replaces the plan's initial weights (``.safetensors``, a
        TorchScript archive or a torch.export ``.pt2``), as ``ds-run --weights``.
    seed: overrides the config's ``seed`` (dropout masks, every random draw),
        as ``ds-run --seed``; default: the config's, else 0.
    rank: emulate this data-parallel rank in a process of its own (it picks
        the micro-step seeds; nothing is reduced across processes). Default:
        the launcher's rank under mpirun (the engine then trains over MPI,
        as ds-run does; the plan's world_size must be the number of ranks),
        else 0.
    check_results: check every op result against the plan (default on).
    device: where the plan runs, as ``ds-run --device``: "cpu", "cuda"
        (cuda:LOCAL_RANK) or "cuda:N"; default: the device the plan was
        compiled for. Without a visible GPU "cuda" raises, naming why.
    """

    def __init__(self, plan, *, weights=None, seed=None, rank=None, check_results=True,
                 device=None):
        if not isinstance(plan, Plan):
            if isinstance(plan, (str, bytes, os.PathLike)):
                plan = load_plan(plan)
            else:
                raise TypeError("Engine(plan): expected a dsopt.Plan or the path of a "
                                "plan file, got %s" % type(plan).__name__)
        self._plan = plan  # Keeps a compiled plan's temporary weights alive.
        communicator = None
        if rank is None:
            communicator = _distributed.engine_communicator(
                plan.world_size, str(device or plan.device))
        self._native = _dsopt.Engine(plan._native, os.fspath(weights or ""), seed,
                                     int(rank or 0), bool(check_results), communicator,
                                     str(device or ""))  # str(torch.device) too
        if communicator is not None:
            _distributed.hold(self)
        self._input_names = [i["name"] for i in plan.inputs]
        described = plan.report()["engines"]
        self._trainable_engines = [e["name"] for e in described if not e["frozen"]]
        self.engines = collections.OrderedDict(
            (e["name"], EngineHandle(self, e)) for e in described)
        self.training = True
        self._last_outputs = None
        self._last_report = None
        # Autograd: the forward whose losses are live (its number), and where
        # the micro-step is.
        self._forwards = 0
        self._anchor = torch.zeros((), requires_grad=True)
        self._awaiting_backward = False
        self._awaiting_step = False
        can_train = plan.can_train
        self.optimizer = OptimizerView(self, described) if can_train else None
        scheduled = any(e["optimizer"] and e["optimizer"]["scheduler"] for e in described)
        self.lr_scheduler = LRSchedulerView(self) if scheduled else None

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
        values = _forward_arguments(self._input_names, inputs, named)
        batch = to_native_list(values, "inputs")
        spec = self._plan._out_spec
        if not self.training or not self._plan.can_train:
            return _outputs(from_native_list(self._native.forward_eval(batch)), spec)
        if not torch.is_grad_enabled():
            outputs = self._forward_native(batch)
        else:
            _refuse_differentiable_inputs(self._input_names, values)
            # The outputs are autograd outputs: loss.backward() of anything
            # computed from them (across engines, with other models' outputs)
            # runs this engine's backward with their gradients.
            outputs = _CompiledStep.apply(self._anchor, self, batch)
        self._last_outputs = tuple(outputs)
        return _outputs(list(outputs), spec)

    def _forward_native(self, batch):
        losses = from_native_list(self._native.forward(batch))
        self._forwards += 1
        self._awaiting_backward = True
        self._awaiting_step = False
        return tuple(losses)

    def _backward_native(self, seed_scale=1.0, forward=None, cotangents=None):
        if forward is not None and forward != self._forwards:
            raise RuntimeError(
                "backward: this loss comes from an earlier forward of the engine; the "
                "engine keeps only its last forward's activations")
        if cotangents is not None:
            self._native.backward_with([None if g is None else to_native(g, "gradient")
                                        for g in cotangents])
        else:
            self._native.backward(float(seed_scale))
        self._last_outputs = None
        self._awaiting_backward = False
        self._awaiting_step = True

    def backward(self, loss=None, retain_graph=False, scale_wrt_gas=True):
        """Runs the compiled backward of the last forward: gradients of the
        loss, already scaled by 1 / gradient_accumulation_steps (as DeepSpeed
        scales them), accumulate into the gradient buffers.

        `loss` is DeepSpeed's argument: what the forward returned (or one of
        its losses, or None): the backward of the sum of the forward's
        losses. A loss computed from the losses in Python (``loss * 2``,
        ``loss1 + loss2`` over several engines) is back-propagated by torch's
        autograd, which runs each engine's compiled backward with its share
        of the seed (what ``loss.backward()`` does too). A value not computed
        from the forward's losses is refused with ValueError.
        """
        if not scale_wrt_gas:
            raise ValueError("backward(scale_wrt_gas=False) is not supported: the "
                             "compiled backward divides by gradient_accumulation_steps")
        if loss is None:
            self._backward_native()
            return
        if _is_output(loss, self._last_outputs):
            if self._last_outputs is None or not self._native.takes_cotangents:
                self._backward_native()
                return
            # The backward of the given output(s) alone, as autograd's
            # loss.backward() (another loss output, an aux loss, gets none).
            given = loss if isinstance(loss, (tuple, list)) else (loss,)
            self._backward_native(cotangents=[
                torch.ones_like(t) if any(t is g for g in given) else None
                for t in self._last_outputs])
            return
        if not isinstance(loss, torch.Tensor) or loss.grad_fn is None:
            raise ValueError(
                "backward(loss): pass the loss the last forward returned, or a value "
                "computed from it with torch; this one does not come from the "
                "engine's forward, so there is nothing to differentiate")
        loss.backward(retain_graph=retain_graph)

    def _backward_epilogue(self):
        """DeepSpeed's per-engine epilogue after a shared ``loss.backward()``:
        the compiled backward has reduced the gradients already, so this only
        checks that the backward reached this engine's loss."""
        if self._awaiting_backward:
            raise RuntimeError(
                "_backward_epilogue: the last forward's loss has not been "
                "back-propagated (loss.backward() did not reach it)")

    def step(self):
        """Ends the micro-step; on the accumulation boundary clips, updates
        the parameters, advances the LR schedule and zeroes the gradients.

        Returns ``{"updated": bool, "grad_norm": float, "engines": [{"engine",
        "lr", "grad_norm"}]}`` (``engines`` empty off the boundary).
        """
        report = self._native.step()
        self._awaiting_step = False
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
        """DeepSpeed's save_16bit_model, by rank 0; every rank must call it. Each engine's
        parameters and buffers whole, in the dtype they are stored in (bf16 / fp16 under native
        mixed precision, else fp32): save_dir/save_filename for a one-engine plan,
        save_dir/<engine>/save_filename with names relative to the engine for several.
        exclude_frozen_parameters leaves out the parameters that do not train (buffers stay).
        A ZeRO stage 3 engine, trainable or frozen, is gathered when its config sets
        stage3_gather_16bit_weights_on_model_save; otherwise it is skipped (the other engines
        are saved) with a warning, and the call returns False (docs/checkpoint.md)."""
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

    @property
    def global_rank(self):
        """This process's data-parallel rank."""
        return self._native.rank

    @property
    def world_size(self):
        """The ranks this engine trains over (1 when it emulates one rank)."""
        return self._native.world_size

    # -- Beyond DeepSpeed ---------------------------------------------------
    @property
    def plan(self):
        return self._plan

    def _release_native(self):
        """Drops the native engine (at exit, so that MPI can finalise)."""
        self._native = None

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
    ``backward`` (or ``loss.backward()`` of the sum of its losses) and
    ``step``: there is no per-engine backward or step to call (DeepSpeed's
    ``_backward_epilogue()`` per engine is placed by the compiler; the
    handle's only checks that the backward ran). A handle answers the
    per-engine questions: ``engine.engines["student"].get_lr()``.
    """

    def __init__(self, session, described):
        self._session = session
        self.name = described["name"]
        self.module = described["module"]
        self.frozen = described["frozen"]
        self.zero_stage = described["zero_stage"]
        self.parameters = list(described["params"])

    def _backward_epilogue(self):
        self._session._backward_epilogue()

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


class _CompiledStep(torch.autograd.Function):
    """The engine's forward as an autograd node: its backward runs the
    compiled backward, seeded with the gradients that reached the outputs
    (a vector-Jacobian product; an output no gradient reached counts as
    zeros)."""

    @staticmethod
    def forward(ctx, anchor, engine, batch):
        # Weak: the engine keeps its last outputs, whose graph holds ctx.
        ctx.engine = weakref.ref(engine)
        ctx.forward_number = engine._forwards + 1
        ctx.set_materialize_grads(False)  # None: no gradient, no zeros made.
        outputs = engine._forward_native(batch)
        ctx.floats = [o.dtype.is_floating_point for o in outputs]
        ctx.mark_non_differentiable(*[o for o in outputs
                                      if not o.dtype.is_floating_point])
        return outputs

    @staticmethod
    def backward(ctx, *grads):
        engine = ctx.engine()
        if engine is None:
            raise RuntimeError("backward: the engine of this loss no longer exists")
        if engine._native.takes_cotangents:
            engine._backward_native(forward=ctx.forward_number, cotangents=grads)
        else:  # A version 8 plan: one seed for the sum of its losses.
            floats = [g for g, is_float in zip(grads, ctx.floats) if is_float]
            engine._backward_native(_seed_scale(floats), ctx.forward_number)
        return None, None, None


def _seed_scale(grads):
    """The one factor the compiled backward can take: it seeds every loss of
    the forward alike (the backward of their sum)."""
    scales = set()
    for grad in grads:
        if grad is None:
            scales.add(0.0)
            continue
        first = grad.reshape(-1)[0]
        if not bool((grad == first).all()):
            raise RuntimeError(
                "backward: the gradient reaching a loss must be the same number for "
                "each of its elements")
        scales.add(float(first))
    if len(scales) != 1:
        raise RuntimeError(
            "backward: the compiled backward differentiates the sum of the forward's "
            "losses, so each must be used with the same weight; got weights %s"
            % sorted(scales))
    return scales.pop()


def _refuse_differentiable_inputs(names, values):
    """Gradients do not flow into an engine's inputs: an input that requires
    them (another trainable model's output) would silently get none."""
    for name, value in zip(names, values):
        if isinstance(value, torch.Tensor) and value.requires_grad:
            raise ValueError(
                "forward: input %r requires grad, but gradients do not flow into an "
                "engine's inputs (it would get none): pass %s.detach(), or compute it "
                "under torch.no_grad() (a teacher's outputs)" % (name, name))


def _forward_arguments(names, inputs, named):
    """forward's arguments in order, from positions, names, or one
    tuple/list/dict."""
    if named:
        if inputs:
            raise TypeError("pass the forward's arguments by position or by name, "
                            "not both")
        return _by_name(names, named)
    if len(inputs) == 1 and isinstance(inputs[0], dict):
        return _by_name(names, inputs[0])
    if len(inputs) == 1 and isinstance(inputs[0], (tuple, list)):
        inputs = tuple(inputs[0])
    return list(inputs)


def _by_name(names, named):
    unknown = [key for key in named if key not in names]
    if unknown:
        raise TypeError("unknown forward argument(s) %s; forward takes %s"
                        % (", ".join(map(repr, unknown)), ", ".join(names)))
    missing = [name for name in names if name not in named]
    if missing:
        raise TypeError("missing forward argument(s) %s" % ", ".join(map(repr, missing)))
    return [named[name] for name in names]


def _outputs(tensors, spec=None):
    """What the model returns: rebuilt from `spec` (the pytree structure of
    an exported model's outputs: a transformers ModelOutput, a dict, ...)
    when there is one, else the tensor, or a tuple of several."""
    if spec is not None and spec.num_leaves == len(tensors):
        return torch.utils._pytree.tree_unflatten(list(tensors), spec)
    return tensors[0] if len(tensors) == 1 else tuple(tensors)


def _is_output(loss, outputs):
    """Whether `loss` is one of the last forward's outputs (flat tuple), or a
    list of them (several engines' losses at once)."""
    if outputs is None:
        return True  # The native backward reports a missing forward itself.
    if isinstance(loss, (tuple, list)):
        return len(loss) > 0 and all(any(l is t for t in outputs) for l in loss)
    return any(loss is t for t in outputs)
