"""dsopt as DeepSpeed users write it: initialize's 4-tuple, losses that are
autograd nodes (engine.backward of a computed loss, a shared loss.backward()),
per-engine config dicts, leaf-module marks, ranks.

The examples (examples/*/train.py, ctest example-*) train each pattern
against the oracle; these tests hold the API pieces to the existing paths.
"""

import json
import os
import types
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import dsopt

SGD = {"train_micro_batch_size_per_gpu": 4,
       "optimizer": {"type": "SGD", "params": {"lr": 0.1}}}
WARMUP = dict(SGD, scheduler={"type": "WarmupLR", "params": {
    "warmup_min_lr": 0.0, "warmup_max_lr": 0.1, "warmup_num_steps": 4,
    "warmup_type": "linear"}})


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc1 = nn.Linear(6, 8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x, y):
        return F.mse_loss(self.fc2(torch.tanh(self.fc1(x))), y)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(4, 4)

    def forward(self, x):
        return self.inner(x)


class Pair(nn.Module):
    """Two submodules, each an engine of the {"engines": ...} form."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.a = nn.Sequential(Block(), nn.Tanh(), Block())
        self.b = Block()

    def forward(self, x, y):
        return F.mse_loss(self.a(x), y), F.mse_loss(self.b(x), y)


def batch(seed=0, features=6, outputs=3):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(4, features, generator=g), torch.randn(4, outputs, generator=g)


def pair_batch(seed=0):
    return batch(seed, 4, 4)


@pytest.fixture(scope="module")
def net_plan():
    return dsopt.compile(Net(), SGD, batch())


def gradients(engine):
    return {name: engine.gradient(name).clone() for name in engine.state_dict()}


def test_initialize_returns_deepspeeds_tuple():
    engine, optimizer, loader, scheduler = dsopt.initialize(
        model=Net(), config=WARMUP, example_inputs=batch())
    assert isinstance(engine, dsopt.Engine) and loader is None
    assert optimizer is engine.optimizer and scheduler is engine.lr_scheduler
    assert engine.world_size == 1 and engine.global_rank == 0
    for step in range(3):
        loss = engine(*batch(step))
        engine.backward(loss)
        engine.step()
        # The views read the engine: the LR of the next update.
        assert scheduler.get_last_lr() == engine.get_lr()
        assert optimizer.param_groups[0]["lr"] == engine.get_lr()[0]
        assert scheduler.last_batch_iteration == step
    assert optimizer.param_groups[0]["type"] == "sgd"

    # args.deepspeed_config, as DeepSpeed reads it; no scheduler -> None.
    args = types.SimpleNamespace(deepspeed_config=SGD)
    engine, optimizer, _, scheduler = dsopt.initialize(args, model=Net(),
                                                       example_inputs=batch())
    assert scheduler is None and optimizer is not None
    # A config without "optimizer": a frozen engine, forwards only, no optimizer.
    frozen, optimizer, _, _ = dsopt.initialize(
        model=Net(), config={"train_micro_batch_size_per_gpu": 4}, example_inputs=batch())
    assert optimizer is None
    assert torch.equal(frozen(*batch(1)), engine.eval()(*batch(1)))

    with pytest.raises(TypeError, match="example_inputs"):
        dsopt.initialize(model=Net(), config=SGD)
    with pytest.raises(TypeError, match="optimizer=...\\): not supported"):
        dsopt.initialize(model=Net(), config=SGD, example_inputs=batch(),
                         optimizer=torch.optim.SGD(Net().parameters(), lr=0.1))


def test_optimizer_step_ends_the_micro_step_once(net_plan):
    """Accelerate's loop (backward, optimizer.step(), scheduler.step(), zero_grad())
    and DeepSpeed's (engine.step(), then optimizer.step() is a no-op) both take one
    step per micro-step."""
    deepspeed, accelerate = dsopt.Engine(net_plan), dsopt.Engine(net_plan)
    for step in range(3):
        loss = deepspeed(*batch(step))
        deepspeed.backward(loss)
        deepspeed.step()
        deepspeed.optimizer.step()
        loss = accelerate(*batch(step))
        loss.backward()
        accelerate.optimizer.step()
        accelerate.optimizer.zero_grad()
    assert deepspeed.global_steps == accelerate.global_steps == 3
    for name, tensor in deepspeed.state_dict().items():
        assert torch.equal(tensor, accelerate.state_dict()[name]), name


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_backward_of_a_computed_loss_scales_the_seed(net_plan, precision):
    """backward(c * loss) and (c * loss).backward() give c times the gradients of
    backward(loss): bitwise for a power of two (16-bit gradients too)."""
    if precision != "fp32":  # fp16: a static scale that does not overflow.
        settings = {"enabled": True, "loss_scale": 64} if precision == "fp16" else {
            "enabled": True}
        net_plan = dsopt.compile(Net(), dict(SGD, **{precision: settings}), batch())
    plain, scaled, autograd = (dsopt.Engine(net_plan) for _ in range(3))
    plain.backward(plain(*batch()))
    scaled.backward(scaled(*batch()) * 4)
    (autograd(*batch()) / 3).backward()
    expected = gradients(plain)
    for name, grad in gradients(scaled).items():
        assert torch.equal(grad, expected[name] * 4), name
    # 1/3 seeds the backward in the loss's dtype (as autograd seeds it), so
    # the gradients round differently from expected / 3: a few units in the
    # last place of the dtype, relative to the gradient's largest element.
    rtol = {"fp32": 2 ** -19, "bf16": 2 ** -5, "fp16": 2 ** -8}[precision]
    for name, grad in gradients(autograd).items():
        third = expected[name] / 3
        torch.testing.assert_close(grad, third, rtol=rtol,
                                   atol=rtol * float(third.abs().max()), msg=name)


def test_independent_engines_equal_engines_trained_alone(net_plan):
    """The seed's independent loop (every forward, then every backward and step)
    leaves each engine as if it had trained alone."""
    second_plan = dsopt.compile(Net(), dict(SGD, gradient_accumulation_steps=2), batch())
    together = [dsopt.Engine(net_plan), dsopt.Engine(second_plan)]
    alone = [dsopt.Engine(net_plan), dsopt.Engine(second_plan)]
    for step in range(4):
        losses = [engine(*batch(step)) for engine in together]
        for engine, loss in zip(together, losses):
            engine.backward(loss)
            engine.step()
    for engine in alone:
        for step in range(4):
            engine.backward(engine(*batch(step)))
            engine.step()
    assert [e.global_steps for e in together] == [4, 2]
    for mine, reference in zip(together, alone):
        for name, tensor in mine.state_dict().items():
            assert torch.equal(tensor, reference.state_dict()[name]), name


def test_shared_loss_through_the_engines(net_plan):
    """loss = l1 + l2 / 2; loss.backward() runs each engine's backward with its
    weight; _backward_epilogue checks that the backward reached the engine."""
    shared = [dsopt.Engine(net_plan), dsopt.Engine(net_plan)]
    separate = [dsopt.Engine(net_plan), dsopt.Engine(net_plan)]
    losses = [engine(*batch()) for engine in shared]
    with pytest.raises(RuntimeError, match="has not been back-propagated"):
        shared[0]._backward_epilogue()
    (losses[0] + losses[1] / 2).backward()
    for engine in shared:
        engine._backward_epilogue()
    separate[0].backward(separate[0](*batch()))
    separate[1].backward(separate[1](*batch()) / 2)
    for mine, reference in zip(shared, separate):
        expected = gradients(reference)
        for name, grad in gradients(mine).items():
            assert torch.equal(grad, expected[name]), name

    # A loss whose forward the engine has moved past.
    engine = shared[0]
    engine.step()
    stale = engine(*batch(1))
    engine(*batch(2))
    with pytest.raises(RuntimeError, match="earlier forward"):
        stale.backward()


def without_weights(plan):
    document = json.loads(plan.to_json())
    del document["weights"]  # A temporary archive of its own.
    return document


def test_session_shared_loss():
    """A multi-engine plan (one root): loss.backward() of the sum of its losses is
    backward(); weights that differ are refused (one compiled seed)."""
    engines = {"a": SGD, "b": dict(SGD, optimizer={"type": "AdamW",
                                                    "params": {"lr": 0.01}})}
    plan = dsopt.compile(Pair(), {"engines": engines}, pair_batch())
    # The same engines as a dict keyed by submodule (Accelerate's plugin names).
    assert without_weights(dsopt.compile(Pair(), engines, pair_batch())) == \
        without_weights(plan)
    summed, reference = dsopt.Engine(plan), dsopt.Engine(plan)
    loss_a, loss_b = summed(*pair_batch())
    (loss_a + loss_b).backward()
    summed.engines["a"]._backward_epilogue()
    reference(*pair_batch())
    reference.backward()
    expected = gradients(reference)
    for name, grad in gradients(summed).items():
        assert torch.equal(grad, expected[name]), name
    # Weights that differ: each loss's own cotangent seeds the one backward,
    # as autograd differentiates the same sum.
    summed.step()
    weighted = dsopt.Engine(plan)
    loss_a, loss_b = weighted(*pair_batch())
    (loss_a + loss_b / 2).backward()
    model = Pair()
    x, y = pair_batch()
    loss_a, loss_b = model(x, y)
    (loss_a + loss_b / 2).backward()
    for name, param in model.named_parameters():
        torch.testing.assert_close(weighted.gradient(name), param.grad, rtol=1e-6,
                                   atol=1e-7, msg=name)


def test_config_dicts_that_are_not_engines(tmp_path):
    # Keys that are no submodule of the model: an ordinary DeepSpeed config
    # (which has no batch size).
    with pytest.raises(dsopt.CompileError, match="config dict: train_micro_batch"):
        dsopt.compile(Pair(), {"a": SGD, "bogus": SGD}, pair_batch())
    # Engine configs by path, relative to the current directory.
    (tmp_path / "b.json").write_text(json.dumps(SGD))
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        plan = dsopt.compile(Pair(), {"a": SGD, "b": "b.json"}, pair_batch())
    finally:
        os.chdir(cwd)
    assert [e["name"] for e in plan.report()["engines"]] == ["a", "b"]


def leaf_names(plan):
    return {e["name"]: e["ds_config"]["zero_optimization"].get("leaf_module", {}).get("names")
            for e in json.loads(plan.to_json())["engines"]}


def test_leaf_module_marks():
    model = Pair()
    assert dsopt.set_z3_leaf_modules(model, [Block]) == [model.a[0], model.a[2], model.b]
    assert dsopt.get_z3_leaf_modules(model) == [model.a[0], model.a[2], model.b]
    dsopt.unset_z3_leaf_modules(model, ["Block"])
    assert dsopt.get_z3_leaf_modules(model) == []
    dsopt.set_z3_leaf_modules(model, ["%s.Block" % __name__])
    assert dsopt.z3_leaf_module(model.b)
    dsopt.unset_z3_leaf_modules(model, [Block])
    assert dsopt.set_z3_leaf_modules_by_name(model, ["a.2"]) == [model.a[2]]
    assert dsopt.set_z3_leaf_modules_by_suffix(model, ["b"]) == [model.b]
    with pytest.raises(ValueError, match="no module of Pair matches 'c'"):
        dsopt.set_z3_leaf_modules_by_name(model, ["c"])
    assert dsopt.set_z3_leaf_modules_by_suffix(model, ["c"], raise_if_not_found=False) == []

    # compile: the marked paths become leaf_module names, from the root for one
    # engine (names already in the config are kept) ...
    stage3 = dict(SGD, zero_optimization={"stage": 3})
    config = dict(stage3, zero_optimization={"stage": 3, "leaf_module": {"names": ["a.0"]}})
    plan = dsopt.compile(model, config, pair_batch())
    assert leaf_names(plan) == {"model": ["a.0", "a.2", "b"]}
    # ... relative to its engine's module for several; an engine's own module
    # cannot be its leaf.
    with pytest.raises(ValueError, match="'b' is the module of engine 'b' itself"):
        dsopt.compile(model, {"a": stage3, "b": stage3}, pair_batch())
    dsopt.set_z3_leaf_modules_by_suffix(model, ["b"], flag=False)
    plan = dsopt.compile(model, {"a": stage3, "b": stage3}, pair_batch())
    assert leaf_names(plan) == {"a": ["2"], "b": None}
    # TorchScript keeps the marks as attributes of a scripted module, and compile
    # reads them there too.
    plan = dsopt.compile(torch.jit.script(model), {"a": stage3, "b": stage3}, pair_batch())
    assert leaf_names(plan) == {"a": ["2"], "b": None}
    # torch.jit.trace and torch.export drop the attribute but keep the parameters, through
    # which the marks are found.
    x = torch.randn(4, 4)
    traced = torch.jit.trace(model, (x, x), check_trace=False)
    assert not hasattr(getattr(traced.a, "2"), "_z3_leaf")
    plan = dsopt.compile(traced, {"a": stage3, "b": stage3}, pair_batch())
    assert leaf_names(plan) == {"a": ["2"], "b": None}
    program = torch.export.export(model, (x, x))
    plan = dsopt.compile(program, {"a": stage3, "b": stage3}, pair_batch())
    assert leaf_names(plan) == {"a": ["2"], "b": None}
    dsopt.unset_z3_leaf_modules(model, [Block])


def test_leaf_mark_partly_in_a_capture():
    """A marked module whose parameters a capture holds only in part is refused by name."""
    model = Pair()
    dsopt.set_z3_leaf_modules_by_name(model, ["a"])
    traced = torch.jit.trace(model, (torch.randn(4, 4),) * 2, check_trace=False)
    model.a[2].inner.weight = nn.Parameter(torch.randn(4, 4))  # no longer the traced one
    with pytest.raises(ValueError, match=r"marked as a ZeRO-3 leaf \(Sequential\) is only "
                                         r"partly in the captured model: its parameters "
                                         r"2.inner.weight are not"):
        dsopt.compile(traced, SGD, pair_batch())


def test_ranks_without_a_launcher(net_plan):
    assert (dsopt.get_rank(), dsopt.get_world_size()) == (0, 1)
    # rank= emulates one rank of several in this process (no communicator).
    plan = dsopt.compile(Net(), SGD, batch(), world_size=2)
    engine = dsopt.Engine(plan, rank=1)
    assert (engine.global_rank, engine.world_size) == (1, 1)
    # all_reduce over one rank is the identity.
    value = torch.tensor([3.0])
    assert torch.equal(dsopt.all_reduce(value), torch.tensor([3.0]))


def test_compile_warnings_once_per_job_grouped(monkeypatch):
    """The compiler's warnings: one CompileWarning listing them all, saying how to silence
    it, on rank 0 only (every rank compiles; Plan.warnings keeps them on each)."""
    config = {"train_micro_batch_size_per_gpu": "auto", "gradient_clipping": "auto",
              "optimizer": {"type": "SGD", "params": {"lr": "auto"}}}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plan = dsopt.compile(Net(), config, batch())
    ours = [w for w in caught if issubclass(w.category, dsopt.CompileWarning)]
    assert len(plan.warnings) >= 2, plan.warnings
    assert len(ours) == 1, [str(w.message) for w in ours]
    text = str(ours[0].message)
    assert text.startswith("%d compile warnings:" % len(plan.warnings)), text
    assert all(m in text for m in plan.warnings)
    assert 'filterwarnings("ignore", category=dsopt.CompileWarning)' in text
    assert ours[0].filename == __file__  # points at the caller, not at dsopt
    # Another rank of a launched job stays silent and keeps the list.
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "1")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        other = dsopt.compile(Net(), config, batch())
    assert not [w for w in caught if issubclass(w.category, dsopt.CompileWarning)]
    assert other.warnings == plan.warnings


def test_auto_values_from_overrides_and_mixed_precision():
    """ds-compile's --set and --mixed-precision: what TrainingArguments fill in."""
    config = {"train_micro_batch_size_per_gpu": "auto", "bf16": {"enabled": "auto"},
              "optimizer": {"type": "SGD", "params": {"lr": "auto"}}}
    with pytest.warns(dsopt.CompileWarning, match="optimizer.params.lr: \"auto\" = 5e-05"):
        plan = dsopt.compile(Net(), config, batch())
    assert dsopt.Engine(plan).get_lr() == [5e-05]
    for overrides in ({"optimizer.params.lr": 0.25}, ["optimizer.params.lr=0.25"]):
        engine, optimizer, _, _ = dsopt.initialize(
            model=Net(), config=config, example_inputs=batch(), overrides=overrides,
            mixed_precision="bf16")
        assert optimizer.param_groups[0]["lr"] == 0.25
        recorded = json.loads(engine.plan.to_json())["engines"][0]["ds_config"]
        assert recorded["bf16"] == {"enabled": True}
        assert recorded["optimizer"]["params"]["lr"] == 0.25
    with pytest.raises(dsopt.CompileError, match="mixed"):
        dsopt.compile(Net(), config, batch(), mixed_precision="fp8")


class Classifier(nn.Module):
    """Returns what a transformers model returns: a loss and the logits."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(2)
        self.fc1 = nn.Linear(6, 8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x, labels):
        logits = self.fc2(torch.tanh(self.fc1(x)))
        return F.cross_entropy(logits, labels), logits


class LogitsOnly(Classifier):
    def forward(self, x, labels):
        return self.fc2(torch.tanh(self.fc1(x)))


def classifier_batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(4, 6, generator=g), torch.randint(0, 3, (4,), generator=g)


def distillation_loss(loss, logits, teacher_logits):
    """The task loss plus a KL term on the logits (Hinton's distillation)."""
    kl = F.kl_div(F.log_softmax(logits / 2, dim=-1), F.softmax(teacher_logits / 2, dim=-1),
                  reduction="batchmean")
    return loss + 4 * kl


def assert_gradients_equal_autograd(engine, model, rtol=1e-6):
    for name, param in model.named_parameters():
        torch.testing.assert_close(engine.gradient(name), param.grad, rtol=rtol,
                                   atol=1e-7, msg=name)


@pytest.mark.parametrize("model_class", [Classifier, LogitsOnly])
def test_outputs_of_any_kind_train_with_autograd_gradients(model_class):
    """An engine's outputs are autograd outputs whatever their shape: a loss
    computed from the logits in Python (distillation) back-propagates through
    the compiled backward as a vector-Jacobian product, equal to autograd on
    the same module, for three steps of SGD."""
    engine, _, _, _ = dsopt.initialize(model=model_class(), config=SGD,
                                       example_inputs=classifier_batch())
    assert [o["kind"] for o in engine.plan.report()["outputs"]] == (
        ["loss", "tensor"] if model_class is Classifier else ["tensor"])
    model = model_class()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    teacher = torch.Generator().manual_seed(7)
    for step in range(3):
        x, labels = classifier_batch(step)
        teacher_logits = torch.randn(4, 3, generator=teacher)
        for run, train in (("dsopt", engine), ("eager", model)):
            out = train(x, labels)
            if model_class is LogitsOnly:
                out = (F.cross_entropy(out, labels), out)
            loss = distillation_loss(*out, teacher_logits)
            loss.backward()
        assert_gradients_equal_autograd(engine, model)
        engine.step()
        # The plan's gradient_clipping (1.0, DeepSpeed's default here).
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
    for name, param in model.named_parameters():
        torch.testing.assert_close(engine.state_dict()[name], param.detach(),
                                   rtol=1e-6, atol=1e-7, msg=name)


def test_outputs_no_gradient_reaches_count_as_zeros():
    """backward of the loss alone: the logits' cotangent is zeros, so the
    gradients are those of engine.backward(loss) (ds-run's seeds) bitwise."""
    plan = dsopt.compile(Classifier(), SGD, classifier_batch())
    by_autograd, by_engine = dsopt.Engine(plan), dsopt.Engine(plan)
    loss, logits = by_autograd(*classifier_batch())
    assert logits.requires_grad and logits.shape == (4, 3)
    loss.backward()
    by_engine.backward(by_engine(*classifier_batch())[0])
    expected = gradients(by_engine)
    for name, grad in gradients(by_autograd).items():
        assert torch.equal(grad, expected[name]), name
    # Only the logits' gradient (the loss output unused): autograd's.
    logits_only = dsopt.Engine(plan)
    _, logits = logits_only(*classifier_batch())
    (logits ** 2).sum().backward()
    model = Classifier()
    (model(*classifier_batch())[1] ** 2).sum().backward()
    assert_gradients_equal_autograd(logits_only, model)


def test_transformers_model_as_the_user_has_it():
    """A transformers model with no subclass and no wrapper: initialize exports
    it, the engine returns its ModelOutput (.loss, .logits), and a loss
    combined from both in Python trains equal to autograd on the same model."""
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=64,
                                     n_positions=16, use_cache=False, attn_pdrop=0.0,
                                     resid_pdrop=0.0, embd_pdrop=0.0)

    def make():
        torch.manual_seed(5)
        return transformers.GPT2LMHeadModel(config)

    g = torch.Generator().manual_seed(9)
    ids = [torch.randint(0, 64, (2, 8), generator=g) for _ in range(3)]
    engine, _, _, _ = dsopt.initialize(
        model=make(), example_inputs={"input_ids": ids[0], "labels": ids[0]},
        config={"train_micro_batch_size_per_gpu": 2, "gradient_clipping": 0.0,
                "optimizer": {"type": "SGD", "params": {"lr": 0.1}}})
    model = make()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    target = torch.softmax(torch.randn(2, 8, 64, generator=g), dim=-1)
    for step in range(3):
        for train in (engine, model):
            out = train(input_ids=ids[step], labels=ids[step])
            assert isinstance(out, transformers.modeling_outputs.CausalLMOutputWithCrossAttentions)
            kl = F.kl_div(F.log_softmax(out.logits, dim=-1), target, reduction="batchmean")
            (out.loss + 0.5 * kl).backward()
        assert_gradients_equal_autograd(engine, model, rtol=1e-4)
        engine.step()
        optimizer.step()
        optimizer.zero_grad()
    for name, param in model.named_parameters():
        torch.testing.assert_close(engine.state_dict()[name], param.detach(), rtol=1e-4,
                                   atol=1e-6, msg=name)
    # GPT-2's default key/value cache does not export: the error says what to set.
    config.use_cache = True
    with pytest.raises(dsopt.CompileError, match="set use_cache=False"):
        dsopt.initialize(model=transformers.GPT2LMHeadModel(config),
                         example_inputs={"input_ids": ids[0], "labels": ids[0]},
                         config={"train_micro_batch_size_per_gpu": 2})


class LossAndAux(nn.Module):
    """Returns (loss, aux, logits): an MoE model's loss already holds its aux."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(4)
        self.fc = nn.Linear(6, 3)

    def forward(self, x, labels):
        logits = self.fc(x)
        aux = (self.fc.weight ** 2).sum()
        return F.cross_entropy(logits, labels) + 0.1 * aux, aux, logits


def test_backward_of_one_output_is_its_gradient_alone():
    """engine.backward(out[0]) differentiates that output only, as
    out[0].backward() does: another scalar output (an aux loss) adds nothing.
    Results of one row stay tensors: the kinds go by rank, not by size."""
    engine, _, _, _ = dsopt.initialize(model=LossAndAux(), config=SGD,
                                       example_inputs=classifier_batch())
    out = engine(*classifier_batch())
    engine.backward(out[0])
    model = LossAndAux()
    model(*classifier_batch())[0].backward()
    assert_gradients_equal_autograd(engine, model)

    x, labels = classifier_batch()
    one_row = dsopt.compile(LossAndAux(), dict(SGD, train_micro_batch_size_per_gpu=1),
                            (x[:1], labels[:1]))
    assert [o["kind"] for o in one_row.report()["outputs"]] == ["loss", "loss", "tensor"]


def test_inputs_that_require_grad_are_refused():
    """Gradients do not flow into an engine's inputs: an input that requires
    them is refused in grad mode, naming it, rather than left without."""
    engine, _, _, _ = dsopt.initialize(model=Classifier(), config=SGD,
                                       example_inputs=classifier_batch())
    x, labels = classifier_batch()
    features = nn.Linear(6, 6)(x)
    with pytest.raises(ValueError, match="input 'x' requires grad"):
        engine(features, labels)
    loss, _ = engine(features.detach(), labels)
    loss.backward()
    with torch.no_grad():
        engine(features, labels)  # Nothing to differentiate: taken as it is.
    engine.backward()


class SplitByRouting(nn.Module):
    """JetMoE's experts: tokens sorted by the expert they chose, split by each expert's
    count (`.tolist()`: sizes the data decides), one weight per expert, concatenated back.
    Exported, the split's pieces are a list whose length the example fixes but whose sizes
    it does not; each piece's gradient comes back through the list."""

    def __init__(self):
        super().__init__()
        self.route = nn.Linear(6, 3)
        self.experts = nn.Parameter(torch.randn(3, 4, 6) * 0.3)
        self.head = nn.Linear(4, 3)

    def forward(self, x, labels):
        expert = self.route(x).argmax(-1)
        counts = (expert[:, None] == torch.arange(3)).sum(0).tolist()
        order = torch.argsort(expert, stable=True)
        pieces = x[order].split(counts, dim=0)
        out = torch.cat([F.linear(p, self.experts[i]) for i, p in enumerate(pieces)], 0)
        logits = self.head(torch.relu(out))
        return F.cross_entropy(logits, labels[order])


def test_split_by_sizes_from_the_data_trains_with_autograd_gradients():
    model = SplitByRouting()
    torch.manual_seed(3)
    x, labels = torch.randn(8, 6), torch.randint(0, 3, (8,))
    program = torch.export.export(model, (x, labels))
    engine, _, _, _ = dsopt.initialize(model=program, example_inputs=(x, labels),
                                       config=dict(SGD, train_micro_batch_size_per_gpu=8))
    # Another batch routes differently (an expert may get no token): the sizes are the run's.
    for step in range(3):
        g = torch.Generator().manual_seed(step)
        x, labels = torch.randn(8, 6, generator=g), torch.randint(0, 3, (8,), generator=g)
        engine(x, labels).backward()
        model.zero_grad()
        model(x, labels).backward()
        for name, param in model.named_parameters():
            if param.grad is None:  # the router: argmax passes no gradient
                continue
            torch.testing.assert_close(engine.gradient(name), param.grad, rtol=1e-5,
                                       atol=1e-7, msg=name)
        engine.step()
        with torch.no_grad():
            for name, param in model.named_parameters():
                param.copy_(engine.state_dict()[name])
