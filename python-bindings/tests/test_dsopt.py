"""Tests of the dsopt package: compile, export, run, errors.

The Python training loop is held to ds-run bit for bit: both drive the same
runtime over the same plan and rows, so any difference is a bug in the
bindings (a copy that changes layout, a dtype conversion, a missed call).
"""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import dsopt
from dsopt import _dsopt
from dsopt._tensors import from_native_list, to_native_list

from conftest import ROOT

ADAMW_GAS2 = {
    "train_micro_batch_size_per_gpu": "auto",
    "gradient_accumulation_steps": 2,
    "gradient_clipping": 1.0,
    "optimizer": {"type": "AdamW", "params": {"lr": 0.01, "weight_decay": 0.01}},
    "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0.0, "warmup_max_lr": 0.01,
                                                 "warmup_num_steps": 3,
                                                 "warmup_type": "linear"}},
}


class TinyNet(nn.Module):
    """A regression MLP with dropout p = 0 (train and eval forwards agree)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc1 = nn.Linear(6, 16)
        self.drop = nn.Dropout(0.0)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x, y):
        return F.mse_loss(self.fc2(self.drop(torch.relu(self.fc1(x)))), y)


class Scaled(nn.Module):
    """A forward with an unbatched argument (a per-feature scale)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x, scale, y):
        return F.mse_loss(self.fc(x * scale), y)


def tiny_batch(rows=4, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(rows, 6, generator=g), torch.randn(rows, 3, generator=g)


def tiny_plan(**kwargs):
    config = dict(ADAMW_GAS2, train_micro_batch_size_per_gpu=4)
    return dsopt.compile(TinyNet(), config, tiny_batch(), **kwargs)


def train(engine, batches):
    """DeepSpeed's loop; returns each optimizer step's mean loss."""
    gas = engine.gradient_accumulation_steps()
    means, total = [], 0.0
    for i, batch in enumerate(batches):
        loss = engine(*batch)
        engine.backward(loss)
        engine.step()
        total += loss.item()
        if (i + 1) % gas == 0:
            means.append(total / gas)
            total = 0.0
    return means


# -- compile ----------------------------------------------------------------------------------
def _python(code, drop_pythonpath=False):
    env = dict(os.environ)
    if drop_pythonpath:
        env.pop("PYTHONPATH", None)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd="/")


def test_import_refuses_another_torch_version():
    # The native module links one exact LibTorch: under another torch version the import stops
    # before loading it, naming both versions.
    proc = _python("import torch; torch.__version__ = '2.0.0+other'; import dsopt")
    assert proc.returncode != 0
    assert ("dsopt was built against torch %s, but this Python has torch 2.0.0+other"
            % torch.__version__) in proc.stderr, proc.stderr


def test_import_without_pythonpath_in_the_build_environment():
    # Configuring writes dsopt-build.pth into the virtual environment CMake built against.
    if sys.prefix == sys.base_prefix:
        pytest.skip("not a virtual environment: the build writes no .pth file here")
    proc = _python("import dsopt, torch; print(dsopt.__file__); print(torch.__version__)",
                   drop_pythonpath=True)
    assert proc.returncode == 0, proc.stderr
    path, version = proc.stdout.split()
    assert path.endswith(os.path.join("python", "dsopt", "__init__.py")), path
    assert version == torch.__version__ and version.startswith("2."), version


def test_compile_nn_module():
    model = TinyNet()
    x, y = tiny_batch()
    plan = tiny_plan()
    assert plan.can_train and plan.world_size == 1 and plan.micro_batch_per_rank == 4
    assert plan.gradient_accumulation_steps == 2
    assert [(i["name"], i["shape"], i["batched"]) for i in plan.inputs] == [
        ("x", [4, 6], True), ("y", [4, 3], True)]
    assert plan.outputs == ["loss"]

    engine = dsopt.Engine(plan)
    loss = engine(x, y)
    assert torch.allclose(loss, model(x, y), rtol=1e-6, atol=0)
    assert not engine.is_gradient_accumulation_boundary()  # GAS 2: micro-step 0 of 2.
    engine.backward(loss)
    engine.step()
    assert engine.global_steps == 0 and engine.micro_steps == 1
    assert engine.is_gradient_accumulation_boundary()


def test_compile_device(tmp_path):
    # The default target is the CPU; device="cuda" (or a torch.device of that
    # type) compiles for CUDA: the plan says so, on file too, and records the
    # torch version that compiled it.
    cpu = tiny_plan()
    assert cpu.device == "cpu"
    assert cpu.torch_version == torch.__version__
    for device in ("cuda", torch.device("cuda", 1)):
        plan = tiny_plan(device=device)
        assert plan.device == "cuda"
        assert 'ds.target_device = "cuda"' in plan.mlir("ds-assign-engines")
    plan.save(tmp_path / "cuda.plan")
    loaded = dsopt.load_plan(tmp_path / "cuda.plan")
    assert (loaded.device, loaded.torch_version) == ("cuda", torch.__version__)
    assert json.loads(loaded.to_json())["device"] == "cuda"
    with pytest.raises(ValueError, match="device must be 'cpu' or 'cuda', got 'tpu'"):
        tiny_plan(device="tpu")


def test_engine_device(tmp_path):
    # A plan runs on the kind of device it was compiled for; without a GPU,
    # "cuda" raises naming why, never trains on the CPU.
    cpu = tiny_plan()
    engine = dsopt.Engine(cpu, device="cpu")
    assert engine(*tiny_batch()).dim() == 0
    with pytest.raises(RuntimeError, match="unknown device 'tpu'"):
        dsopt.Engine(cpu, device="tpu")
    cuda = tiny_plan(device="cuda")
    with pytest.raises(RuntimeError, match="compiled for device 'cuda' .* this run is on cpu"):
        dsopt.Engine(cuda, device="cpu")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is visible: the no-GPU error cannot show")
    for plan, device in ((cpu, "cuda"), (cuda, None), (cuda, "cuda:0")):
        with pytest.raises(RuntimeError, match="no CUDA device is visible"):
            dsopt.Engine(plan, device=device)


def test_compile_script_module_and_path_agree(tmp_path):
    script = torch.jit.script(TinyNet())
    path = tmp_path / "tiny.pt"
    script.save(str(path))
    config_path = tmp_path / "ds_config.json"
    config_path.write_text(json.dumps(dict(ADAMW_GAS2, train_micro_batch_size_per_gpu=4)))
    from_script = dsopt.compile(script, dict(ADAMW_GAS2, train_micro_batch_size_per_gpu=4),
                                tiny_batch())
    from_path = dsopt.compile(path, str(config_path), tiny_batch())
    # Same plan but for where the weights live.
    a, b = from_script.report(), from_path.report()
    assert a.pop("weights")["path"] != b.pop("weights")["path"]
    assert a == b
    assert from_path.weights == {"kind": "torchscript", "path": str(path)}


def test_compile_data_file_and_world_size(models):
    data = os.path.join(models, "mlp.data.pt")
    plan = dsopt.compile(os.path.join(models, "mlp.pt"), ADAMW_GAS2, data, world_size=2)
    assert plan.world_size == 2 and plan.micro_batch_per_rank == 4  # B = 8 rows, 2 ranks
    # Per-rank tensors are repeated world_size times into the global batch.
    tensors = torch.load(data)
    x, y = tensors["x"][0][:4], tensors["y"][0][:4]
    again = dsopt.compile(os.path.join(models, "mlp.pt"), ADAMW_GAS2, (x, y), world_size=2)
    assert again.inputs == plan.inputs and again.world_size == 2


def test_unbatched_example_input():
    x, scale, y = torch.randn(4, 4), torch.rand(4), torch.randn(4, 2)
    plan = dsopt.compile(Scaled(), {"train_micro_batch_size_per_gpu": 4,
                                    "optimizer": {"type": "SGD", "params": {"lr": 0.1}}},
                         (x, scale, y), world_size=2, unbatched=["scale"])
    assert [(i["name"], i["shape"], i["batched"]) for i in plan.inputs] == [
        ("x", [4, 4], True), ("scale", [4], False), ("y", [4, 2], True)]


def test_multi_engine_dict_config(models):
    path = os.path.join(models, "two_models.pt")  # Distillation: student + teacher.
    engines = {"student": {"train_micro_batch_size_per_gpu": "auto",
                           "optimizer": {"type": "AdamW", "params": {"lr": 0.001}}},
               "teacher": {"train_micro_batch_size_per_gpu": "auto"}}
    plan = dsopt.compile(path, {"engines": engines}, os.path.join(models, "two_models.data.pt"))
    report = plan.report()
    assert [(e["name"], e["frozen"]) for e in report["engines"]] == [
        ("student", False), ("teacher", True)]


# -- export -----------------------------------------------------------------------------------
def test_save_load_round_trip(tmp_path):
    plan = tiny_plan()
    plan.save(tmp_path / "tiny.plan")
    # The archive of a module compiled from Python travels with the plan.
    assert (tmp_path / "tiny.weights.pt").exists()
    moved = tmp_path / "moved"
    shutil.copytree(tmp_path, moved, ignore=shutil.ignore_patterns("moved"))
    loaded = dsopt.load_plan(moved / "tiny.plan")
    assert loaded.weights == {"kind": "torchscript", "path": "tiny.weights.pt"}
    # A .pt2 (torch.export.save) is a third kind (since plan version 8).
    loaded._native.set_weights("pt2", "tiny.pt2")
    assert loaded.weights == {"kind": "pt2", "path": "tiny.pt2"}
    assert json.loads(loaded.to_json())["version"] == 9
    with pytest.raises(ValueError, match="'torchscript', 'safetensors' or 'pt2'"):
        loaded._native.set_weights("onnx", "tiny.onnx")
    loaded._native.set_weights("torchscript", "tiny.weights.pt")
    a, b = plan.report(), loaded.report()
    a.pop("weights"), b.pop("weights")
    assert a == b
    assert json.loads(loaded.to_json())["programs"] == json.loads(plan.to_json())["programs"]

    # Trained from memory or from the file: the same numbers.
    batches = [tiny_batch(seed=s) for s in range(4)]
    assert train(dsopt.Engine(plan), batches) == train(dsopt.Engine(str(moved / "tiny.plan")),
                                                       batches)
    # Saving a loaded plan elsewhere keeps its weights reachable.
    (tmp_path / "elsewhere").mkdir()
    loaded.save(tmp_path / "elsewhere" / "tiny.plan")
    again = dsopt.load_plan(tmp_path / "elsewhere" / "tiny.plan")
    assert again.weights["path"] == os.path.join("..", "moved", "tiny.weights.pt")
    dsopt.Engine(again)


def test_mlir_after_each_pass(tmp_path):
    plan = tiny_plan()
    assert plan.stages == ["import", "ds-assign-engines", "ds-check-parameter-use",
                           "ds-lower-dropout", "ds-assign-precision",
                           "ds-autodiff", "ds-scale-loss", "canonicalize",
                           "cse", "ds-rematerialize", "ds-lower-optimizer",
                           "ds-zero-partition",
                           "ds-engine-backward", "ds-schedule-collectives",
                           "ds-verify-collectives", "final"]
    assert "ds.backward_epilogue @model" in plan.mlir("ds-engine-backward")
    assert "ds.grad" in plan.mlir("ds-autodiff")
    assert "ds.optimizer_step @model" in plan.mlir("ds-lower-optimizer")
    assert "ds.bucket @model_bucket0" in plan.mlir("ds-zero-partition")
    assert "ds.grad" not in plan.mlir("import")
    assert "ds.engine @model" in plan.mlir("ds-assign-engines")
    assert plan.mlir() == plan.mlir("final")
    with pytest.raises(ValueError, match="stages of this compile are: import"):
        plan.mlir("ds-bogus")
    plan.save(tmp_path / "p.plan")
    with pytest.raises(ValueError, match="carries no IR"):
        dsopt.load_plan(tmp_path / "p.plan").mlir("cse")
    assert dsopt.compile(TinyNet(), dict(ADAMW_GAS2, train_micro_batch_size_per_gpu=4),
                         tiny_batch(), keep_ir=False).stages == []


def test_report():
    report = tiny_plan().report()
    params = 6 * 16 + 16 + 16 * 3 + 3
    assert report["state"]["count"] == {"param": 4, "buffer": 0, "trainable_param": 4}
    assert report["state"]["bytes"] == {"param": 4 * params, "buffer": 0,
                                        "trainable_param": 4 * params}
    train_program = report["programs"]["train"]
    assert train_program["ops_by_kind"]["grad"] == 4
    assert train_program["forward_ops"] + train_program["backward_ops"] == train_program["ops"]
    assert report["programs"]["eval"]["predicted_peak_bytes"] > 0
    optimizer = report["engines"][0].pop("optimizer")
    assert report["engines"] == [{"name": "model", "module": "", "frozen": False,
                                  "zero_stage": 0,
                                  "params": ["fc1.weight", "fc1.bias", "fc2.weight",
                                             "fc2.bias"]}]
    assert (optimizer["type"], optimizer["scheduler"]) == ("adamw", "WarmupLR")


# -- run --------------------------------------------------------------------------------------
def run_ds(bin_dir, plan_path, data_path, steps, tmp_path):
    losses, params = tmp_path / "ds.jsonl", tmp_path / "ds.safetensors"
    subprocess.run([os.path.join(bin_dir, "ds-run"), str(plan_path), "--data", str(data_path),
                    "--steps", str(steps), "--losses", str(losses),
                    "--save-params", str(params)], check=True, stdout=subprocess.DEVNULL)
    lines = [json.loads(line) for line in open(losses)]
    return lines, dsopt.read_safetensors(params)


@pytest.mark.parametrize("model,feed", [("mlp", "datafile"), ("transformer", "torch.load")])
def test_python_loop_equals_ds_run(bin_dir, models, tmp_path, model, feed):
    data_path = os.path.join(models, model + ".data.pt")
    plan = dsopt.compile(os.path.join(models, model + ".pt"), ADAMW_GAS2, data_path)
    plan.save(tmp_path / "model.plan")
    steps = 3
    expected, params = run_ds(bin_dir, tmp_path / "model.plan", data_path, steps, tmp_path)

    engine = dsopt.Engine(str(tmp_path / "model.plan"))
    if feed == "datafile":  # The rows ds-run feeds, by its own reader.
        batches = list(dsopt.load_data(data_path, plan))[:steps * 2]
    else:  # What a user writes: micro-step s is data[k][s] (one rank).
        data = torch.load(data_path)
        batches = [tuple(data[i["name"]][s] for i in plan.inputs) for s in range(steps * 2)]
    losses = train(engine, batches)

    assert losses == [line["loss"] for line in expected]  # Bitwise, not approximately.
    state = engine.state_dict()
    assert list(state) == list(params)
    for name, tensor in params.items():
        assert torch.equal(state[name], tensor), name


def test_session_drives_every_engine(bin_dir, models, tmp_path):
    """Several engines: one forward, backward and step per micro-step, as ds-run does; each
    engine answers for itself through engine.engines[name]."""
    data_path = os.path.join(models, "two_losses.data.pt")
    engines = {"a": {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": 2,
                     "zero_optimization": {"stage": 2},
                     "optimizer": {"type": "AdamW", "params": {"lr": 0.01}}},
               "b": {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": 2,
                     "zero_optimization": {"stage": 1},
                     "optimizer": {"type": "SGD", "params": {"lr": 0.05}}}}
    plan = dsopt.compile(os.path.join(models, "two_losses.pt"), {"engines": engines}, data_path)
    plan.save(tmp_path / "model.plan")
    expected, params = run_ds(bin_dir, tmp_path / "model.plan", data_path, 2, tmp_path)

    session = dsopt.Engine(str(tmp_path / "model.plan"))
    assert list(session.engines) == ["a", "b"]
    a, b = session.engines["a"], session.engines["b"]
    assert (a.zero_stage, b.zero_stage, a.frozen) == (2, 1, False)
    assert a.parameters == ["a.fc1.weight", "a.fc1.bias", "a.fc2.weight", "a.fc2.bias"]
    assert (a.get_lr(), b.get_lr()) == (0.01, 0.05)
    # fp32 engines have no loss scaler.
    assert (a.loss_scale, b.loss_scale, session.loss_scale) == (None, None, [None, None])
    for s, batch in enumerate(list(dsopt.load_data(data_path, plan))[:4]):
        loss_a, loss_b = session(batch)
        session.backward((loss_a, loss_b))
        session.step()
        if s % 2 == 1:
            line = expected[s // 2]
            assert a.get_global_grad_norm() == line["engines"]["a"]["grad_norm"]
            assert b.get_global_grad_norm() == line["engines"]["b"]["grad_norm"]
    for name, tensor in b.state_dict().items():
        assert torch.equal(tensor, params[name]), name
    reports = session.engine_reports()
    assert reports["a"]["optimizer_state_bytes"] == 2 * 4 * sum(
        params[n].numel() for n in a.parameters)
    # One checkpoint folder per engine; loading names the checkpoint's root.
    assert session.save_checkpoint(tmp_path / "ckpt") == "global_step2"
    assert sorted(os.listdir(tmp_path / "ckpt")) == ["a", "b", "latest"]
    resumed = dsopt.Engine(str(tmp_path / "model.plan"))
    path, _ = resumed.load_checkpoint(tmp_path / "ckpt")
    assert path == str(tmp_path / "ckpt")
    for name, tensor in resumed.engines["b"].state_dict().items():
        assert torch.equal(tensor, params[name]), name
    assert reports["b"]["grad_bytes"] == 4 * sum(params[n].numel() for n in b.parameters)


def test_eval_mode_and_numpy():
    model = TinyNet().eval()
    engine = dsopt.Engine(tiny_plan())
    x, y = tiny_batch()
    engine.eval()
    assert torch.allclose(engine(x.numpy(), y.numpy()), model(x, y), rtol=1e-6, atol=0)
    assert engine(x=x, y=y).item() == engine((x, y)).item() == engine({"x": x, "y": y}).item()
    assert engine.micro_steps == 0  # Eval forwards are not micro-steps.
    engine.train()
    loss = engine(np.ascontiguousarray(x.numpy()), y.numpy())
    engine.backward(loss)
    engine.step()


def test_zero_copy():
    tensors = [torch.randn(3, 5), torch.randn(4, 6)[:, ::2], torch.tensor([True, False]),
               torch.zeros(2, dtype=torch.bfloat16)]
    back = from_native_list(_dsopt._roundtrip(to_native_list(tensors, "t")))
    for a, b in zip(tensors, back):
        assert (a.data_ptr(), a.stride(), a.dtype) == (b.data_ptr(), b.stride(), b.dtype)
    array = np.arange(4, dtype=np.float32)
    from_native_list(_dsopt._roundtrip(to_native_list([array], "a")))[0][0] = 7
    assert array[0] == 7

    # state_dict() hands out the engine's own storage: steps show through.
    engine = dsopt.Engine(tiny_plan())
    weight = engine.state_dict()["fc1.weight"]
    before = weight.clone()
    # Three updates: the warmup's first LRs are 0 (WarmupLR from warmup_min_lr 0).
    train(engine, [tiny_batch(seed=s) for s in range(6)])
    assert weight.data_ptr() == engine.state_dict()["fc1.weight"].data_ptr()
    assert not torch.equal(weight, before)


def test_save_params_and_weights(tmp_path):
    engine = dsopt.Engine(tiny_plan())
    train(engine, [tiny_batch(seed=s) for s in range(6)])
    engine.save_params(tmp_path / "p.safetensors")
    restored = dsopt.Engine(tiny_plan(), weights=tmp_path / "p.safetensors")
    for name, tensor in engine.state_dict().items():
        assert torch.equal(restored.state_dict()[name], tensor)


def test_checkpoint_resume_is_bitwise(tmp_path):
    # 4 optimizer steps (GAS 2) straight, and 2 + save + load + 2: equal bit for bit.
    batches = [tiny_batch(seed=s) for s in range(8)]
    full = dsopt.Engine(tiny_plan())
    full_losses = train(full, batches)
    first = dsopt.Engine(tiny_plan())
    train(first, batches[:4])
    assert first.save_checkpoint(tmp_path / "ckpt") == "global_step2"
    assert (tmp_path / "ckpt" / "latest").read_text() == "global_step2"
    resumed = dsopt.Engine(tiny_plan())
    path, client_state = resumed.load_checkpoint(tmp_path / "ckpt")
    assert path == os.path.join(tmp_path / "ckpt", "global_step2") and client_state == {}
    assert (resumed.global_steps, resumed.micro_steps) == (2, 4)
    assert resumed.get_lr() == first.get_lr()
    assert train(resumed, batches[4:]) == full_losses[2:]
    for name, tensor in full.state_dict().items():
        assert torch.equal(resumed.state_dict()[name], tensor), name
    # Python's torch.load reads what the runtime wrote.
    states = torch.load(tmp_path / "ckpt" / "global_step2" / "mp_rank_00_model_states.pt")
    assert states["global_steps"] == 2 and states["dp_world_size"] == 1
    assert states["optimizer"]["loss_scaler"]["cur_scale"] == 1.0
    # Inside an accumulation window there is no consistent point to save.
    full(*batches[0])
    with pytest.raises(dsopt.EngineError, match="between optimizer steps"):
        full.save_checkpoint(tmp_path / "mid")


KILLED_RESAVE = """
import sys, torch, dsopt
sys.path.insert(0, sys.argv[2])
from test_dsopt import tiny_plan, tiny_batch, train
engine = dsopt.Engine(tiny_plan())
train(engine, [tiny_batch(seed=s) for s in range(4)])
engine.save_checkpoint(sys.argv[1], "same")
torch.save(engine.state_dict(), sys.argv[1] + "/first.pt")
train(engine, [tiny_batch(seed=s) for s in range(4, 8)])
engine.save_checkpoint(sys.argv[1], "same")  # Killed after its first file.
"""


def test_killed_resave_of_a_tag_keeps_the_old_checkpoint(tmp_path):
    # The second save of tag "same" dies (SIGKILL) after writing its model states into the
    # staging folder: DIR/same must still hold the first save, whole and loadable.
    env = dict(os.environ, DS_TEST_CHECKPOINT_KILL="0:2")
    proc = subprocess.run([sys.executable, "-c", KILLED_RESAVE, str(tmp_path),
                           os.path.dirname(os.path.abspath(__file__))],
                          env=env, capture_output=True, text=True)
    assert proc.returncode == -9, proc.stderr
    assert "killed after checkpoint file 2" in proc.stderr
    engine = dsopt.Engine(tiny_plan())
    engine.load_checkpoint(tmp_path, "same")
    assert engine.global_steps == 2
    first = torch.load(tmp_path / "first.pt")
    for name, tensor in engine.state_dict().items():
        assert torch.equal(first[name], tensor), name
    # Saving the tag again replaces it whole and clears the staging folder.
    train(engine, [tiny_batch(seed=s) for s in range(4)])
    engine.save_checkpoint(tmp_path, "same")
    assert sorted(os.listdir(tmp_path)) == ["first.pt", "latest", "same"]
    again = dsopt.Engine(tiny_plan())
    again.load_checkpoint(tmp_path)
    assert again.global_steps == 4


def test_save_16bit_model(tmp_path):
    engine = dsopt.Engine(tiny_plan())
    train(engine, [tiny_batch(seed=s) for s in range(4)])
    assert engine.save_16bit_model(tmp_path / "out")
    saved = torch.load(tmp_path / "out" / "pytorch_model.bin")
    assert list(saved) == list(engine.state_dict())
    for name, tensor in engine.state_dict().items():
        assert saved[name].dtype == torch.float32 and torch.equal(saved[name], tensor)
    module = torch.jit.script(TinyNet())
    module.load_state_dict(saved)
    assert torch.equal(module.fc1.weight, engine.state_dict()["fc1.weight"])

    # ZeRO stage 3 gathers only when the config asks for it.
    stage3 = dict(ADAMW_GAS2, train_micro_batch_size_per_gpu=4,
                  zero_optimization={"stage": 3})
    plan = dsopt.compile(TinyNet(), stage3, tiny_batch())
    with pytest.warns(UserWarning, match="stage3_gather_16bit_weights_on_model_save"):
        assert not dsopt.Engine(plan).save_16bit_model(tmp_path / "z3", "model.bin")
    assert not (tmp_path / "z3").exists()
    stage3["zero_optimization"]["stage3_gather_16bit_weights_on_model_save"] = True
    engine = dsopt.Engine(dsopt.compile(TinyNet(), stage3, tiny_batch()))
    assert engine.save_16bit_model(tmp_path / "z3", "model.bin")
    saved = torch.load(tmp_path / "z3" / "model.bin")
    for name, tensor in engine.state_dict().items():
        assert torch.equal(saved[name], tensor), name



def test_save_16bit_model_per_engine(models, tmp_path):
    """A multi-engine plan: one file per engine (names relative to it), a frozen ZeRO-3 teacher
    gathered when its config gathers, exclude_frozen_parameters leaving its parameters out; a
    teacher that does not gather is skipped with a warning while the student is saved."""
    student = dict(ADAMW_GAS2, train_micro_batch_size_per_gpu="auto")
    teacher = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": 2,
               "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0,
                                     "stage3_gather_16bit_weights_on_model_save": True}}
    data = os.path.join(models, "two_models.data.pt")
    engine = dsopt.Engine(dsopt.compile(os.path.join(models, "two_models.pt"),
                                        {"engines": {"student": student, "teacher": teacher}},
                                        data))
    whole = engine.state_dict()
    for exclude in (False, True):
        out = tmp_path / ("exclude" if exclude else "all")
        assert engine.save_16bit_model(out, exclude_frozen_parameters=exclude)
        for name in ("student", "teacher"):
            want = {k[len(name) + 1:]: v for k, v in whole.items() if k.startswith(name + ".")}
            if exclude and name == "teacher":
                want = {}
            saved = torch.load(out / name / "pytorch_model.bin")
            assert list(saved) == list(want), (name, exclude)
            for key, tensor in want.items():
                assert torch.equal(saved[key], tensor), (name, key)

    teacher["zero_optimization"]["stage3_gather_16bit_weights_on_model_save"] = False
    engine = dsopt.Engine(dsopt.compile(os.path.join(models, "two_models.pt"),
                                        {"engines": {"student": student, "teacher": teacher}},
                                        data))
    with pytest.warns(UserWarning, match='engine "teacher" is ZeRO stage 3.*the other engines'):
        assert not engine.save_16bit_model(tmp_path / "skip")
    assert os.listdir(tmp_path / "skip") == ["student"]

# -- errors -----------------------------------------------------------------------------------
def test_errors_carry_the_cpp_message(models, tmp_path):
    config = dict(ADAMW_GAS2, train_micro_batch_size_per_gpu=8)
    data = os.path.join(models, "mlp.data.pt")
    with pytest.raises(ValueError, match="cannot open the model: no such file"):
        dsopt.compile(tmp_path / "missing.pt", config, data)
    with pytest.raises(dsopt.CompileError, match="bogus: unknown key"):
        dsopt.compile(os.path.join(models, "mlp.pt"), dict(config, bogus=1), data)
    with pytest.raises(ValueError, match=r"\(4\) \* world size \(1\) = 4 does not match the "
                                         r"data's global micro-batch B = 8"):
        dsopt.compile(os.path.join(models, "mlp.pt"),
                      dict(config, train_micro_batch_size_per_gpu=4), data)
    with pytest.raises(ValueError, match="unsupported operator 'aten::fft_rfft'"):
        dsopt.compile(os.path.join(models, "bad_unsupported_op.pt"), config,
                      os.path.join(models, "bad_unsupported_op.data.pt"))
    with pytest.raises(ValueError, match="example_inputs has 1 tensor"):
        dsopt.compile(TinyNet(), config, (torch.zeros(8, 6),))
    with pytest.raises(ValueError, match="world_size"):
        dsopt.compile(TinyNet(), config, tiny_batch(), world_size=0)
    with pytest.raises(TypeError):
        dsopt.compile(42, config, data)
    with pytest.raises(TypeError):
        dsopt.compile(TinyNet(), 42, tiny_batch())

    (tmp_path / "bad.plan").write_text('{"format": "ds-plan", "version": 10}')
    with pytest.raises(dsopt.PlanError, match="newer than this runtime supports"):
        dsopt.load_plan(tmp_path / "bad.plan")

    engine = dsopt.Engine(tiny_plan())
    with pytest.raises(RuntimeError, match=r"expected float32 \[4, 6\], got float32 \[4, 5\]"):
        engine(torch.zeros(4, 5), torch.zeros(4, 3))
    with pytest.raises(dsopt.EngineError, match="expected 2 input"):
        engine(torch.zeros(4, 6))
    with pytest.raises(RuntimeError, match="no forward"):
        engine.backward()
    with pytest.raises(RuntimeError, match="call backward\\(\\) first"):
        engine.step()
    loss = engine(*tiny_batch())
    with pytest.raises(ValueError, match="does not come from the engine's forward"):
        engine.backward(torch.tensor(2.0))
    engine.backward(loss)  # The engine is still usable after every error above.
    engine.step()
    with pytest.raises(dsopt.EngineError, match="cannot load weights"):
        dsopt.Engine(tiny_plan(), weights=tmp_path / "missing.safetensors")
    with pytest.raises(dsopt.EngineError):
        dsopt.load_data(data, tiny_plan())


# -- the README example -----------------------------------------------------------------------
def test_train_example_equals_ds_run(bin_dir, tmp_path):
    out = tmp_path / "example"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    run = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "transformer",
                                                       "train.py"),
                          "--steps", "4", "--out", str(out), "--losses",
                          str(tmp_path / "py.jsonl")],
                         env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "loss: step 1" in run.stdout

    config = os.path.join(ROOT, "examples", "transformer", "ds_config.json")
    subprocess.run([os.path.join(bin_dir, "ds-compile"), str(out / "model.pt"), "--config",
                    config, "--example-inputs", str(out / "data.pt"), "-o",
                    str(tmp_path / "model.plan")], check=True)
    expected, _ = run_ds(bin_dir, tmp_path / "model.plan", out / "data.pt", 4, tmp_path)
    ours = [json.loads(line) for line in open(tmp_path / "py.jsonl")]
    assert [(l["loss"], l["lr"], l["grad_norm"]) for l in ours] == [
        (l["loss"], l["lr"], l["grad_norm"]) for l in expected]


class NoScript(nn.Module):
    """A forward TorchScript cannot compile (`**kwargs`), as transformers' are."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(5)
        self.fc1 = nn.Linear(6, 16)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x, y, **kwargs):
        return F.mse_loss(self.fc2(torch.tanh(self.fc1(x))), y)


class NeitherScriptNorExport(NoScript):
    def forward(self, x, y, **kwargs):
        if x.sum() > 0:  # A data-dependent Python branch: torch.export refuses it.
            x = x * 2
        return F.mse_loss(self.fc2(torch.tanh(self.fc1(x))), y)


def _losses(plan, batches):
    engine = dsopt.Engine(plan)
    out = []
    for x, y in batches:
        loss = engine(x, y)
        engine.backward(loss)
        engine.step()
        out.append(float(loss.detach()))
    return out


def test_compile_exports_a_module_that_does_not_script():
    # The module is exported (torch.export) instead; the plan's weights are the
    # program's, read in place; it trains as its traced twin's plan does.
    config = {"train_micro_batch_size_per_gpu": "auto",
              "optimizer": {"type": "AdamW", "params": {"lr": 0.01}}}
    torch.manual_seed(1)
    batches = [(torch.randn(4, 6), torch.randn(4, 3)) for _ in range(3)]
    model = NoScript()
    plan = dsopt.compile(model, config, batches[0])
    assert plan.weights["kind"] == "pt2", plan.weights
    traced = torch.jit.trace(NoScript(), batches[0])
    twin = dsopt.compile(traced, config, batches[0])
    assert twin.weights["kind"] == "torchscript"
    assert _losses(plan, batches) == _losses(twin, batches)

    # An ExportedProgram is taken as it is; a dict of example inputs too.
    program = torch.export.export(NoScript(), batches[0])
    plan = dsopt.compile(program, config, {"x": batches[0][0], "y": batches[0][1]})
    assert plan.weights["kind"] == "pt2"
    assert _losses(plan, batches) == _losses(twin, batches)


def test_compile_names_both_failures_when_a_module_neither_scripts_nor_exports():
    config = {"train_micro_batch_size_per_gpu": "auto", "optimizer": {"type": "SGD",
                                                                      "params": {"lr": 0.1}}}
    with pytest.raises(dsopt.CompileError,
                       match=r"NeitherScriptNorExport neither scripts nor exports\. "
                             r"torch\.jit\.script: .*torch\.export\.export: "):
        dsopt.compile(NeitherScriptNorExport(), config,
                      (torch.randn(4, 6), torch.randn(4, 3)))


def test_compile_exports_from_a_data_file(tmp_path):
    # example_inputs as a data file ([S, B, ...], one rank's rows are exported;
    # positional keys in0, in1 are forward's arguments in order).
    config = {"train_micro_batch_size_per_gpu": "auto",
              "optimizer": {"type": "SGD", "params": {"lr": 0.05}}}
    torch.manual_seed(2)
    x, y = torch.randn(3, 8, 6), torch.randn(3, 8, 3)
    for keys in (("x", "y"), ("in0", "in1")):
        path = tmp_path / ("data_%s.pt" % keys[0])
        torch.save({keys[0]: x, keys[1]: y}, path)
        plan = dsopt.compile(NoScript(), config, path, world_size=2)
        assert plan.weights["kind"] == "pt2"
        assert [(i["shape"], i["batched"]) for i in plan.inputs] == [([4, 6], True),
                                                                     ([4, 3], True)]


class NoGradBlock(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(4, 4)
        self.g = nn.Linear(4, 4)

    def forward(self, x, y):
        h = self.fc(x)
        with torch.no_grad():
            s = self.g(h) * 2
        return ((h + s - y) ** 2).mean()


def test_exported_no_grad_block():
    """torch.export keeps a `with torch.no_grad():` block as a graph of its own
    (wrap_with_set_grad_enabled): imported in place, its results carry no
    gradient, as eager autograd's (g gets none, fc the rest)."""
    x, y = torch.randn(2, 4), torch.randn(2, 4)
    program = torch.export.export(NoGradBlock(), (x, y))
    plan = dsopt.compile(program, {"train_micro_batch_size_per_gpu": 2,
                                   "optimizer": {"type": "SGD"}}, (x, y))
    engine = dsopt.Engine(plan)
    engine(x, y).backward()
    model = NoGradBlock()
    model(x, y).backward()
    for name, param in model.named_parameters():
        expected = param.grad if param.grad is not None else torch.zeros_like(param)
        assert torch.equal(engine.gradient(name), expected), name
