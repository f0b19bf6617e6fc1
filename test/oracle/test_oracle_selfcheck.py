"""Self-check of the Python test side: the model generator and the LibTorch oracle.

Run: .venv/bin/python -m pytest test/oracle -q
"""

import json
import math
import os
import subprocess
import sys

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
MAKE_MODELS = os.path.join(HERE, "..", "models", "make_models.py")
ORACLE = os.path.join(HERE, "oracle.py")
sys.path.insert(0, HERE)

import oracle  # noqa: E402

REQUIRED_MODELS = ["mlp", "transformer", "encoder", "cnn", "moe", "two_models", "two_losses",
                   "loss_and_logits",
                   "traced_mlp", "ops_zoo", "ops_zoo_conv", "resnet", "tied_lm",
                   "dropout", "three_engines", "through_frozen", "two_paths", "gpt_sdpa",
                   "gpt_sdpa_dropout",
                   "mha_lm", "encoder_causal", "traced_transformer", "traced_gpt_sdpa",
                   "nograd_distill", "eval_teacher", "dropout_blocks"]

ERROR_FILES = ["bad_unsupported_op.pt", "bad_unsupported_op.data.pt", "bad_dynamic_loop.pt",
               "bad_dynamic_loop.data.pt", "not_torchscript.pt", "truncated.pt",
               "mismatched.data.pt", "mlp_odd_batch.data.pt"]

# Required op -> the TorchScript node kinds that count as covering it (after inlining).
REQUIRED_OPS = {
    "linear": ["aten::linear"], "matmul": ["aten::matmul"], "mm": ["aten::mm"], "bmm": ["aten::bmm"],
    "add": ["aten::add"], "sub": ["aten::sub"], "mul": ["aten::mul"], "div": ["aten::div"],
    "neg": ["aten::neg"], "pow": ["aten::pow"], "sqrt": ["aten::sqrt"], "rsqrt": ["aten::rsqrt"],
    "exp": ["aten::exp"], "log": ["aten::log"], "relu": ["aten::relu"], "gelu": ["aten::gelu"],
    "silu": ["aten::silu"], "tanh": ["aten::tanh"], "sigmoid": ["aten::sigmoid"],
    "softmax": ["aten::softmax"], "log_softmax": ["aten::log_softmax"],
    "layer_norm": ["aten::layer_norm"], "batch_norm": ["aten::batch_norm"],
    "embedding": ["aten::embedding"], "dropout": ["aten::dropout"], "conv1d": ["aten::conv1d"],
    "conv2d": ["aten::conv2d"], "max_pool2d": ["aten::max_pool2d"], "avg_pool2d": ["aten::avg_pool2d"],
    "adaptive_avg_pool2d": ["aten::adaptive_avg_pool2d"], "flatten": ["aten::flatten"],
    "view": ["aten::view"], "reshape": ["aten::reshape"], "transpose": ["aten::transpose"],
    "permute": ["aten::permute"], "contiguous": ["aten::contiguous"], "split": ["aten::split"],
    "chunk": ["aten::chunk"], "slice": ["aten::slice"], "select": ["aten::select"],
    "cat": ["aten::cat"], "stack": ["aten::stack"], "squeeze": ["aten::squeeze"],
    "unsqueeze": ["aten::unsqueeze"], "expand": ["aten::expand"], "masked_fill": ["aten::masked_fill"],
    "where": ["aten::where"], "index_select": ["aten::index_select"], "index_add": ["aten::index_add"],
    "gather": ["aten::gather"], "nonzero": ["aten::nonzero"], "numel": ["aten::numel"],
    "sum": ["aten::sum"], "mean": ["aten::mean"], "max": ["aten::max"], "topk": ["aten::topk"],
    "cross_entropy": ["aten::cross_entropy_loss"], "nll_loss": ["aten::nll_loss_nd", "aten::nll_loss"],
    "mse_loss": ["aten::mse_loss"], "kl_div": ["aten::kl_div"], "detach": ["aten::detach"],
    "to": ["aten::to"], "baddbmm": ["aten::baddbmm"], "pad": ["aten::pad", "aten::constant_pad_nd"],
    "repeat": ["aten::repeat"], "arange": ["aten::arange"], "ones": ["aten::ones"],
    "zeros": ["aten::zeros"], "zeros_like": ["aten::zeros_like"], "tril": ["aten::tril"],
    "lt": ["aten::lt"], "gt": ["aten::gt"], "eq": ["aten::eq"], "bitwise_not": ["aten::bitwise_not"],
}


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    out = tmp_path_factory.mktemp("models")
    r = subprocess.run([sys.executable, MAKE_MODELS, str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return str(out)


@pytest.fixture(scope="session")
def manifest(models):
    with open(os.path.join(models, "manifest.json")) as f:
        return json.load(f)


def all_nodes(block):
    for n in block.nodes():
        yield n
        for b in n.blocks():
            yield from all_nodes(b)


def run_oracle(*args):
    return subprocess.run([sys.executable, ORACLE] + list(args), capture_output=True, text=True)


# ---------------------------------------------------------------------------------------------
# make_models.py
# ---------------------------------------------------------------------------------------------
def test_eval_teacher_is_saved_in_eval_mode(models):
    """The archive keeps the teacher's .eval() (make_models must not reset the modes)."""
    m = torch.jit.load(os.path.join(models, "eval_teacher.pt"))
    modes = {name: sub.training for name, sub in m.named_modules()}
    assert modes[""] and modes["student"] and modes["student.fc1"]
    assert not modes["teacher"] and not modes["teacher.bn"] and not modes["teacher.drop"]


def test_manifest_lists_required_models(models, manifest):
    assert sorted(manifest) == sorted(REQUIRED_MODELS)
    for name, entry in manifest.items():
        assert set(entry) == {"inputs", "unbatched", "returns", "notes"}
        assert entry["returns"] in ("scalar", "tuple")
        assert set(entry["unbatched"]) <= set(entry["inputs"])
        assert os.path.exists(os.path.join(models, name + ".pt"))
        data = torch.load(os.path.join(models, name + ".data.pt"))
        assert list(data) == entry["inputs"], name
        for key, t in data.items():
            assert t.shape[0] == 8, (name, key)
            if key not in entry["unbatched"]:
                assert t.shape[1] == 8, (name, key)
            assert t.dtype in (torch.float32, torch.int64), (name, key, t.dtype)
    assert manifest["two_losses"]["returns"] == "tuple"
    for f in ERROR_FILES + ["mlp.data.safetensors", "error_cases.json", "fp16_scale.pt",
                            "fp16_scale.data.pt", "cancel_probe.pt", "cancel_probe.data.pt"]:
        assert os.path.exists(os.path.join(models, f)), f


@pytest.mark.parametrize("name", REQUIRED_MODELS)
def test_model_runs_on_micro_step_0(models, manifest, name):
    entry = manifest[name]
    m = torch.jit.load(os.path.join(models, name + ".pt"))
    m.eval()
    assert oracle.forward_arg_names(m) == entry["inputs"]
    data = torch.load(os.path.join(models, name + ".data.pt"))
    for b in (8, 2):  # world size 1 and rank 0 of world size 4
        args = [data[k][0] if k in entry["unbatched"] else data[k][0, :b] for k in entry["inputs"]]
        with torch.no_grad():
            out = m(*args)
        if entry["returns"] == "tuple":
            assert isinstance(out, tuple) and len(out) >= 2
            outs = list(out)
        else:
            assert isinstance(out, torch.Tensor)
            outs = [out]
        # The losses (a transformers-style model's logits are further outputs).
        with torch.no_grad():
            losses = [float(o) for o in oracle.forward_losses(m, args)[0]]
        assert losses == [float(o) for o in outs if o.dim() == 0], name
        assert all(math.isfinite(o) for o in losses), (name, b, losses)


def test_module_paths(models):
    m = torch.jit.load(os.path.join(models, "transformer.pt"))
    names = dict(m.named_modules())
    assert "blocks.0.attn.qkv" in names and "blocks.1.mlp.fc" in names
    moe = torch.jit.load(os.path.join(models, "moe.pt"))
    assert moe.moe.original_name == "SparseMoeBlock"
    two = dict(torch.jit.load(os.path.join(models, "two_models.pt")).named_children())
    assert two["student"].original_name == "Student" and two["teacher"].original_name == "Teacher"
    tl = dict(torch.jit.load(os.path.join(models, "two_losses.pt")).named_children())
    assert set(tl) == {"a", "b"}


def test_moe_routes_differently(models):
    m = torch.jit.load(os.path.join(models, "moe.pt"))
    x = torch.load(os.path.join(models, "moe.data.pt"))["x"]
    counts = []
    with torch.no_grad():
        for s in range(x.shape[0]):
            route = m.moe.gate(m.proj_in(x[s])).argmax(dim=-1)
            counts.append(tuple(int((route == e).sum()) for e in range(4)))
    assert len(set(counts)) >= 2, counts
    assert any(0 in c for c in counts), counts  # the `if idx.numel() > 0` branch goes both ways
    g = m.inlined_graph
    assert any(n.kind() == "prim::If" and any(i.node().kind() == "aten::gt" for i in n.inputs())
               for n in all_nodes(g))


def test_op_coverage(models, manifest):
    kinds = set()
    for name in manifest:
        m = torch.jit.load(os.path.join(models, name + ".pt"))
        kinds |= {n.kind() for n in all_nodes(m.inlined_graph)}
    missing = [op for op, ks in REQUIRED_OPS.items() if not any(k in kinds for k in ks)]
    assert not missing, missing


def test_error_cases(models):
    d = models
    g = torch.jit.load(os.path.join(d, "bad_unsupported_op.pt")).inlined_graph
    assert any(n.kind() == "aten::fft_rfft" for n in all_nodes(g))
    g = torch.jit.load(os.path.join(d, "bad_dynamic_loop.pt")).inlined_graph
    assert any(n.kind() == "prim::Loop" for n in all_nodes(g))
    for bad in ("not_torchscript.pt", "truncated.pt"):
        with pytest.raises(Exception):
            torch.jit.load(os.path.join(d, bad))
    assert "x" not in torch.load(os.path.join(d, "mismatched.data.pt"))
    assert torch.load(os.path.join(d, "mlp_odd_batch.data.pt"))["x"].shape[1] == 6
    with open(os.path.join(d, "mlp.pt"), "rb") as f:
        full = f.read()
    assert os.path.getsize(os.path.join(d, "truncated.pt")) == len(full) // 2


def test_deterministic(models, tmp_path):
    r = subprocess.run([sys.executable, MAKE_MODELS, str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for f in sorted(os.listdir(models)):
        with open(os.path.join(models, f), "rb") as a, open(os.path.join(tmp_path, f), "rb") as b:
            assert a.read() == b.read(), f


# ---------------------------------------------------------------------------------------------
# oracle.py
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_safetensors_matches_pt(models, name):
    a = oracle.load_data(os.path.join(models, name + ".data.safetensors"))
    b = torch.load(os.path.join(models, name + ".data.pt"))
    assert list(a) == list(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and torch.equal(a[k], b[k]), k


def test_eval_world_size_invariant_for_mlp(models):
    m, d = os.path.join(models, "mlp.pt"), os.path.join(models, "mlp.data.pt")
    ref = oracle.eval_losses(m, d, 1, 2, 4)
    assert [l["step"] for l in ref] == [1, 2, 3, 4]
    for w in (2, 4):
        ok, msg = oracle.compare_lines(oracle.eval_losses(m, d, w, 2, 4), ref, 1e-6, 0.0)
        assert ok, msg
    st = oracle.eval_losses(m, os.path.join(models, "mlp.data.safetensors"), 2, 2, 4)
    assert st == oracle.eval_losses(m, d, 2, 2, 4)


@pytest.mark.parametrize("name", REQUIRED_MODELS)
def test_eval_world_sizes(models, manifest, name):
    """Rows interact only through batch statistics (ops_zoo_conv's F.batch_norm(training=True));
    in every other model the eval loss must not depend on the world size."""
    m, d = os.path.join(models, name + ".pt"), os.path.join(models, name + ".data.pt")
    unb = manifest[name]["unbatched"]
    ref = oracle.eval_losses(m, d, 1, 2, 4, unb)
    got = oracle.eval_losses(m, d, 4, 2, 4, unb)
    ok, msg = oracle.compare_lines(got, ref, 1e-6, 0.0)
    if name == "ops_zoo_conv":
        assert not ok, "batch statistics should make the loss depend on the world size"
    else:
        assert ok, msg


def test_eval_tuple_and_unbatched(models):
    lines = oracle.eval_losses(os.path.join(models, "two_losses.pt"),
                               os.path.join(models, "two_losses.data.pt"), 4, 2, 2)
    for l in lines:
        assert len(l["losses"]) == 2
        assert math.isclose(l["loss"], sum(l["losses"]), rel_tol=1e-12)
    lines = oracle.eval_losses(os.path.join(models, "ops_zoo.pt"),
                               os.path.join(models, "ops_zoo.data.pt"), 4, 1, 8, unbatched=["table"])
    assert len(lines) == 8 and all(math.isfinite(l["loss"]) for l in lines)


def test_eval_errors(models):
    m = os.path.join(models, "mlp.pt")
    with pytest.raises(oracle.OracleError, match="'x'"):
        oracle.eval_losses(m, os.path.join(models, "mismatched.data.pt"), 1, 1, 1)
    with pytest.raises(oracle.OracleError, match="6 is not divisible by world size 4"):
        oracle.eval_losses(m, os.path.join(models, "mlp_odd_batch.data.pt"), 4, 1, 1)
    with pytest.raises(oracle.OracleError, match="need 10 micro-steps"):
        oracle.eval_losses(m, os.path.join(models, "mlp.data.pt"), 1, 2, 5)
    with pytest.raises(oracle.OracleError, match="TorchScript"):
        oracle.eval_losses(os.path.join(models, "truncated.pt"), os.path.join(models, "mlp.data.pt"),
                           1, 1, 1)


def _write(path, lines):
    with open(path, "w") as f:
        for l in lines:
            f.write(json.dumps(l) + "\n")


def test_compare_cli(models, tmp_path):
    ref = str(tmp_path / "oracle.jsonl")
    r = run_oracle("eval", "--model", os.path.join(models, "mlp.pt"), "--data",
                   os.path.join(models, "mlp.data.pt"), "--world-size", "2", "--gas", "2",
                   "--steps", "3", "--out", ref)
    assert r.returncode == 0, r.stderr
    lines = oracle.read_jsonl(ref)
    assert len(lines) == 3

    r = run_oracle("compare", "--ours", ref, "--oracle", ref, "--rtol", "1e-6")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("\n") == 1 and "3 steps match" in r.stdout

    bumped = [dict(l) for l in lines]
    bumped[1]["loss"] = lines[1]["loss"] * (1 + 1e-3)
    ours = str(tmp_path / "ours.jsonl")
    _write(ours, bumped)
    r = run_oracle("compare", "--ours", ours, "--oracle", ref, "--rtol", "1e-6")
    assert r.returncode != 0
    assert "step 2" in r.stderr and repr(bumped[1]["loss"]) in r.stderr and repr(lines[1]["loss"]) in r.stderr
    # a looser tolerance accepts it
    assert run_oracle("compare", "--ours", ours, "--oracle", ref, "--rtol", "2e-3").returncode == 0

    _write(ours, lines[:2])
    r = run_oracle("compare", "--ours", ours, "--oracle", ref)
    assert r.returncode != 0 and "step counts differ" in r.stderr


def test_compare_tuple_losses(tmp_path):
    ref = [{"step": 1, "loss": 3.0, "losses": [1.0, 2.0]}]
    ok, _ = oracle.compare_lines(ref, ref, 1e-6, 0.0)
    assert ok
    bad = [{"step": 1, "loss": 3.0, "losses": [1.0, 2.002]}]
    ok, msg = oracle.compare_lines(bad, ref, 1e-6, 0.0)
    assert not ok and "losses[1]" in msg
    ok, msg = oracle.compare_lines([{"step": 1, "loss": 3.0}], ref, 1e-6, 0.0)
    assert not ok and "losses" in msg
    ok, msg = oracle.compare_lines([{"step": 1, "loss": float("nan")}], [{"step": 1, "loss": 1.0}],
                                   1e-6, 0.0)
    assert not ok


# ---------------------------------------------------------------------------------------------
# mixed precision (issue 7): the loss scaler, bf16 reductions, autocast, skipped steps
# ---------------------------------------------------------------------------------------------
def dynamic_fp16(power, window, hysteresis, consecutive, **extra):
    sec = {"enabled": True, "loss_scale": 0, "initial_scale_power": power,
           "loss_scale_window": window, "hysteresis": hysteresis,
           "consecutive_hysteresis": consecutive}
    sec.update(extra)
    return sec


def trace(scaler, pattern):
    scales, hysteresis, applied = [], [], []
    for c in pattern:
        applied.append(scaler.update(c == "O"))
        scales.append(scaler.scale)
        hysteresis.append(scaler.hysteresis_left)
    return scales, hysteresis, applied


# The sequences of unittests/Runtime/LossScalerTest.cpp (our C++ scaler), which were traced by
# hand through DeepSpeed's DynamicLossScaler.update_scale: both implementations must agree.
def test_loss_scaler_dynamic_with_hysteresis():
    s = oracle.LossScaler(dynamic_fp16(4, 2, 2, False))
    assert s.scale == 16.0
    scales, hyst, applied = trace(s, "OONNNONN")
    assert scales == [16, 8, 8, 8, 16, 16, 16, 16]
    assert hyst == [1, 1, 1, 1, 2, 1, 1, 1]
    assert applied == [False, False, True, True, True, False, True, True]
    assert s.iteration == 8 and s.last_overflow == 5


def test_loss_scaler_consecutive_hysteresis_refills_after_every_clean_step():
    scales, hyst, _ = trace(oracle.LossScaler(dynamic_fp16(4, 2, 2, True)), "OONNNONN")
    assert scales == [16, 8, 8, 8, 16, 16, 16, 16]
    assert hyst == [1, 1, 2, 2, 2, 1, 2, 2]


def test_loss_scaler_window_doubles_after_every_window_of_clean_steps():
    scales, _, _ = trace(oracle.LossScaler(dynamic_fp16(3, 3, 1, False)), "ONNNNNNN")
    assert scales == [4, 4, 4, 4, 8, 8, 8, 16]


def test_loss_scaler_overflow_at_the_minimum_is_an_error():
    s = oracle.LossScaler(dynamic_fp16(1, 1000, 1, False, min_loss_scale=1))
    assert s.update(True) is False and s.scale == 1.0
    with pytest.raises(oracle.OracleError, match="already at min_loss_scale"):
        s.update(True)


def test_loss_scaler_static_scale_skips_but_never_changes():
    s = oracle.LossScaler({"enabled": True, "loss_scale": 128})
    assert not s.dynamic
    scales, _, applied = trace(s, "ONO")
    assert scales == [128, 128, 128] and applied == [False, True, False]


def test_loss_scaler_without_fp16_the_scale_is_one():
    s = oracle.LossScaler(None)
    assert s.scale == 1.0 and s.update(False) and s.scale == 1.0


def test_loss_scaler_min_scale_clamps_and_defaults():
    s = oracle.LossScaler(dynamic_fp16(2, 1000, 1, False, min_loss_scale=3))
    assert trace(s, "O")[0] == [3]  # 4 -> max(2, 3) = 3
    with pytest.raises(oracle.OracleError, match="min_loss_scale"):
        s.update(True)  # 3 is the minimum
    d = oracle.LossScaler({"enabled": True})  # DeepSpeed's defaults: 2^16, window 1000, hyst. 2
    assert d.dynamic and d.scale == 65536.0 and d.window == 1000 and d.hysteresis_left == 2
    with pytest.raises(oracle.OracleError, match="initial_scale_power"):
        oracle.LossScaler({"enabled": True, "initial_scale_power": 65})


def test_bf16_reduction_rounding():
    bf = torch.bfloat16
    g0 = torch.tensor([1.0 + 2 ** -7, 3.0], dtype=bf)
    g1 = torch.tensor([2 ** -8, 2 ** -9], dtype=bf)
    # 1 + 2^-7 + 2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6: rounds to even (1 + 2^-6);
    # 3 + 2^-9 rounds to 3. Then / 2, exactly.
    got = oracle.reduce_average([g0, g1], bf)
    assert got.dtype == bf and got.float().tolist() == [(1 + 2 ** -6) / 2, 1.5]
    # in fp32 the same average keeps every bit
    got32 = oracle.reduce_average([g0.float(), g1.float()], torch.float32)
    assert got32.tolist() == [(1 + 2 ** -7 + 2 ** -8) / 2, (3 + 2 ** -9) / 2]
    # accumulation across micro-steps rounds at every addition, like a bf16 add kernel
    acc = oracle.round_sum(None, torch.tensor([1.0], dtype=bf), bf)
    acc = oracle.round_sum(acc, torch.tensor([2 ** -9], dtype=bf), bf)
    assert acc.float().item() == 1.0
    # fp16: the sum of two finite gradients can overflow
    h = oracle.reduce_average([torch.tensor([60000.0]).half(), torch.tensor([10000.0]).half()],
                              torch.float16)
    assert math.isinf(h.item())


class _PX(torch.nn.Module):
    """loss = sum(p * x) / rows: dL/dp is the mean of the rank's rows of x."""

    def __init__(self):
        super().__init__()
        self.p = torch.nn.Parameter(torch.tensor([0.5, 0.25]))

    def forward(self, x):
        return (self.p * x).sum() / x.size(0)


def test_bf16_training_reduces_in_bf16(tmp_path):
    """W = 2, one row per rank, SGD lr 1, no clipping: the bf16 master after one step is
    p - round_bf16(round_bf16(g0 + g1) / 2), not p - (g0 + g1) / 2."""
    model = str(tmp_path / "px.pt")
    torch.jit.script(_PX()).save(model)
    x = torch.tensor([[[1.0 + 2 ** -7, 1.0], [2 ** -8, 2 ** -8]]])  # [S=1, B=2, 2]
    data = str(tmp_path / "px.data.pt")
    torch.save({"x": x}, data)
    cfg = {"train_micro_batch_size_per_gpu": 1, "gradient_clipping": 0, "bf16": {"enabled": True},
           "optimizer": {"type": "SGD", "params": {"lr": 1.0}}}
    masters = {}
    lines, state = oracle.train(model, data, cfg, 1, 2, masters=masters)
    assert state["p"].dtype == torch.bfloat16 and masters["p"].dtype == torch.float32
    # 1 + 2^-8 is halfway between 1 and 1 + 2^-7: rounds to even, 1
    assert masters["p"].tolist() == [0.5 - (1 + 2 ** -6) / 2, 0.25 - 0.5]
    assert state["p"].float().tolist() == masters["p"].to(torch.bfloat16).float().tolist()
    assert lines[0]["loss_scale"] == 1.0 and lines[0]["skipped"] is False
    # communication_data_type fp32: the same gradients average exactly
    masters32 = {}
    oracle.train(model, data, dict(cfg, communication_data_type="fp32"), 1, 2, masters=masters32)
    assert masters32["p"].tolist() == [0.5 - (1 + 2 ** -7 + 2 ** -8) / 2,
                                       0.25 - (1 + 2 ** -8) / 2]


def test_autocast_applies_to_loaded_script_modules(tmp_path):
    """torch.autocast("cpu", bf16 or fp16) reaches the ops of a torch.jit.load'ed module run
    by the interpreter with optimized execution off (the oracle's setting): autocast is a
    dispatcher key, and every op of the interpreter goes through the dispatcher."""

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)

        def forward(self, x):
            h = self.fc(x)
            return h, torch.relu(h), F_mse(h, x)

    path = str(tmp_path / "ac.pt")
    torch.jit.script(M()).save(path)
    m = torch.jit.load(path)
    x = torch.randn(2, 4)
    for dtype in (torch.bfloat16, torch.float16):
        for optimized in (False, True):
            with torch.jit.optimized_execution(optimized):
                with torch.autocast("cpu", dtype=dtype):
                    h, r, l = m(x)
            # linear is on the lower-precision list, relu follows its input, mse_loss runs in fp32
            assert (h.dtype, r.dtype, l.dtype) == (dtype, dtype, torch.float32)
    # torch 2.x's CPU layer_norm takes a 16-bit input with fp32 weights and keeps the input's
    # dtype (1.13 refused it); the compiler casts such an input up instead (docs/precision.md).
    ln = torch.nn.LayerNorm(4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert ln(torch.nn.Linear(4, 4)(x)).dtype == torch.bfloat16


def F_mse(a, b):
    return torch.nn.functional.mse_loss(a, b)


def test_safe_module_matching(models):
    m = torch.jit.load(os.path.join(models, "transformer.pt"))
    owners = oracle.parameter_owner_classes(m)
    assert owners["blocks.0.attn.qkv.weight"] == "torch.nn.modules.linear.Linear"
    assert owners["tok_emb.weight"] == "torch.nn.modules.sparse.Embedding"
    assert owners["blocks.0.ln1.weight"] == "torch.nn.modules.normalization.LayerNorm"
    prec = oracle.precision_config({"torch_autocast": {"enabled": True}})
    assert prec.mode == "autocast" and prec.autocast_dtype == torch.bfloat16
    assert prec.comm_dtype_for("torch.nn.modules.linear.Linear") == torch.bfloat16
    assert prec.comm_dtype_for("torch.nn.modules.conv.Conv2d") == torch.bfloat16
    assert prec.comm_dtype_for("torch.nn.modules.sparse.Embedding") == torch.float32
    assert prec.comm_dtype_for("torch.nn.modules.normalization.LayerNorm") == torch.float32
    assert prec.comm_dtype_for("MyLinear") == torch.float32  # exact class, no subclasses
    only_ln = oracle.precision_config({"torch_autocast": {
        "enabled": True, "lower_precision_safe_modules": ["torch.nn.modules.normalization.LayerNorm"]}})
    assert only_ln.comm_dtype_for("torch.nn.modules.normalization.LayerNorm") == torch.bfloat16
    assert only_ln.comm_dtype_for("torch.nn.modules.linear.Linear") == torch.float32


def test_autocast_training_rounds_only_safe_module_gradients(models):
    """transformer under torch_autocast on W = 2, SGD lr 1 without clipping, one step: Linear
    weights move by a bf16-rounded average, Embedding and LayerNorm by the fp32 one; the
    forward/backward per rank is replayed here with torch.autocast on the loaded module."""
    model, data = os.path.join(models, "transformer.pt"), os.path.join(models, "transformer.data.pt")
    cfg = {"train_micro_batch_size_per_gpu": 4, "gradient_clipping": 0,
           "torch_autocast": {"enabled": True},
           "optimizer": {"type": "SGD", "params": {"lr": 1.0}}}
    masters = {}
    lines, state = oracle.train(model, data, cfg, 1, 2, masters=masters)
    m = torch.jit.load(model)
    m.train()
    d = torch.load(data)
    before = {n: p.detach().clone() for n, p in m.named_parameters()}
    grads = []
    with torch.jit.optimized_execution(False):
        for r in range(2):
            for p in m.parameters():
                p.grad = None
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = m(d["idx"][0, 4 * r:4 * r + 4], d["targets"][0, 4 * r:4 * r + 4])
            loss.backward()
            grads.append({n: p.grad.clone() for n, p in m.named_parameters()})
    for name, p0 in before.items():
        safe = ".qkv." in name or ".proj." in name or ".fc." in name or name.startswith("head.")
        if safe:
            s = (grads[0][name].bfloat16().float() + grads[1][name].bfloat16().float()).bfloat16()
            avg = (s.float() / 2).bfloat16().float()
        else:
            avg = (grads[0][name] + grads[1][name]) / 2
        assert torch.equal(masters[name], p0 - avg), name
        assert state[name].dtype == torch.float32
    assert lines[0]["skipped"] is False and lines[0]["loss_scale"] == 1.0


def test_bf16_training_keeps_bf16_state(models):
    # torch 2.x has BFloat16 CPU kernels for every op the models use (mse_loss included): the
    # bf16 oracle runs the module in bf16 with LibTorch's own kernels.
    cfg = {"train_micro_batch_size_per_gpu": "auto", "bf16": {"enabled": True},
           "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}
    lines, state = oracle.train(os.path.join(models, "mlp.pt"), os.path.join(models, "mlp.data.pt"),
                                cfg, 2, 2)
    assert all(math.isfinite(l["loss"]) for l in lines)
    assert all(t.dtype == torch.bfloat16 for t in state.values())
    a, b = torch.randn(3).bfloat16(), torch.randn(3).bfloat16()
    assert torch.nn.functional.mse_loss(a, b).dtype == torch.bfloat16


FP16_SCALE_CONFIG = {
    "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": 1,
    "fp16": {"enabled": True, "initial_scale_power": 17, "loss_scale_window": 3, "hysteresis": 2},
    "optimizer": {"type": "AdamW", "params": {"lr": 0.01}},
    "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0.001, "warmup_max_lr": 0.01,
                                                 "warmup_num_steps": 6, "warmup_type": "linear"}}}


def test_fp16_overflow_skips_and_pauses_the_schedule(models):
    """The fp16_scale model on W = 2 (the mpi-precision-fp16 test's run): scales >= 2^15
    overflow, <= 2^14 do not (make_models.py, build_fp16_scale)."""
    model = os.path.join(models, "fp16_scale.pt")
    data = os.path.join(models, "fp16_scale.data.pt")
    masters = {}
    lines, state = oracle.train(model, data, FP16_SCALE_CONFIG, 16, 2, masters=masters)
    E = 2 ** 14
    assert [l["loss_scale"] for l in lines] == [8 * E, 8 * E, 4 * E, 2 * E, E, E, E, E,
                                                2 * E, 2 * E, E, E, E, E, 2 * E, 2 * E]
    skipped = [l["skipped"] for l in lines]
    assert [i + 1 for i, s in enumerate(skipped) if s] == [1, 2, 3, 4, 9, 10, 15, 16]
    # The scheduler steps only after applied updates: the n-th applied update runs at iteration
    # n - 2; a skipped step reports the lr the next applied update will use.
    applied = 0
    for l in lines:
        assert l["lr"] == oracle.scheduler_lr(FP16_SCALE_CONFIG["scheduler"], 0.01, applied - 1)
        if not l["skipped"]:
            applied += 1
    assert applied == 8
    # grad_norm: DeepSpeed's get_global_grad_norm keeps the last applied step's value (0.0
    # before the first one) on a skipped step.
    last = 0.0
    for l in lines:
        if l["skipped"]:
            assert l["grad_norm"] == last
        else:
            assert l["grad_norm"] > 0
            last = l["grad_norm"]
    # fp16 storage: the saved parameters are fp16 and equal the masters rounded
    for name, t in state.items():
        assert t.dtype == torch.float16 and torch.equal(t, masters[name].half()), name
    # Skipped steps change nothing: a run of the first 4 (all skipped) leaves the initial values.
    _, s4 = oracle.train(model, data, FP16_SCALE_CONFIG, 4, 2)
    init = {n: p.detach().half() for n, p in torch.jit.load(model).named_parameters()}
    assert all(torch.equal(s4[n], init[n]) for n in init)
    # At W = 1 the gradients are half as large at the peak: 2^15 no longer overflows.
    lines1, _ = oracle.train(model, data, FP16_SCALE_CONFIG, 6, 1)
    assert [l["skipped"] for l in lines1] == [True, True, True, False, False, False]


def test_fp16_static_scale_and_grad_norm_is_unscaled(models):
    model = os.path.join(models, "fp16_scale.pt")
    data = os.path.join(models, "fp16_scale.data.pt")
    cfg = dict(FP16_SCALE_CONFIG, fp16={"enabled": True, "loss_scale": 1024})
    ref = dict(FP16_SCALE_CONFIG)
    del ref["fp16"]
    lines, _ = oracle.train(model, data, cfg, 3, 2)
    lines32, _ = oracle.train(model, data, ref, 3, 2)
    assert [l["loss_scale"] for l in lines] == [1024.0] * 3
    assert not any(l["skipped"] for l in lines)
    for a, b in zip(lines, lines32):
        assert a["lr"] == b["lr"]
        assert math.isclose(a["grad_norm"], b["grad_norm"], rel_tol=1e-3)
        assert math.isclose(a["loss"], b["loss"], rel_tol=2e-3)


def test_compare_train_lines_demands_equal_scale_sequences():
    ref = [{"step": 1, "loss": 2.0, "lr": 0.1, "grad_norm": 0.0, "loss_scale": 65536.0,
            "skipped": True},
           {"step": 2, "loss": 2.0, "lr": 0.1, "grad_norm": 3.0, "loss_scale": 32768.0,
            "skipped": False}]
    ok, msg = oracle.compare_train_lines(ref, ref, 1e-5, 0.0)
    assert ok and "2^16 S, 2^15" in msg and "(exact)" in msg
    ok, msg = oracle.compare_train_lines([ref[0], dict(ref[1], skipped=True)], ref, 1e-5, 0.0)
    assert not ok and "step 2" in msg and "skipped" in msg
    ok, msg = oracle.compare_train_lines([dict(ref[0], loss_scale=32768.0), ref[1]], ref, 1e-5, 0.0)
    assert not ok and "step 1" in msg
    ok, msg = oracle.compare_train_lines([ref[0], dict(ref[1], lr=0.1 + 1e-18)], ref, 1e-5, 0.0)
    assert ok  # 0.1 + 1e-18 == 0.1 in double
    ok, msg = oracle.compare_train_lines([ref[0], dict(ref[1], lr=0.1000000000000001)], ref,
                                         1e-5, 0.0)
    assert not ok and "lr" in msg
    # without loss_scale/skipped on our side: 1.0 and false
    plain = [{"step": 1, "loss": 1.0, "lr": 0.1, "grad_norm": 1.0, "loss_scale": 1.0,
              "skipped": False}]
    assert oracle.compare_train_lines([{"step": 1, "loss": 1.0, "lr": 0.1, "grad_norm": 1.0}],
                                      plain, 1e-5)[0]


def test_precision_config_errors():
    with pytest.raises(oracle.OracleError, match="communication_data_type"):
        oracle.precision_config({"bf16": {"enabled": True}, "communication_data_type": "fp8"})
    with pytest.raises(oracle.OracleError, match="grad_accum_dtype"):
        oracle.precision_config({"bf16": {"enabled": True}, "data_types": {"grad_accum_dtype": "x"}})
    p = oracle.precision_config({"bfloat16": {"enabled": True},
                                 "data_types": {"grad_accum_dtype": "fp32"},
                                 "communication_data_type": "FP32"})
    assert (p.mode, p.grad_accum_dtype, p.comm_dtype) == ("bf16", torch.float32, torch.float32)
    p = oracle.precision_config({"fp16": {"enabled": True}})
    assert (p.model_dtype, p.grad_accum_dtype, p.comm_dtype) == (torch.float16,) * 3
    with pytest.raises(oracle.OracleError, match="auto_cast"):
        oracle.precision_config({"fp16": {"enabled": True, "auto_cast": True}})


def test_cancel_probe_losses_measure_the_forward_precision(models):
    """cancel_probe (make_models.py): the oracle's autocast and bf16 losses are >100x its fp32
    ones, so the mpi-precision cancel_probe tests fail a runtime that computes in fp32."""
    model = os.path.join(models, "cancel_probe.pt")
    data = os.path.join(models, "cancel_probe.data.pt")
    cfg = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": 2,
           "optimizer": {"type": "SGD", "params": {"lr": 0.05, "momentum": 0.9}}}
    fp32, _ = oracle.train(model, data, cfg, 2, 2)
    ac, ac_state = oracle.train(model, data, dict(cfg, torch_autocast={"enabled": True}), 2, 2)
    bf, bf_state = oracle.train(model, data, dict(cfg, bf16={"enabled": True}), 2, 2)
    for a, b, f in zip(ac, bf, fp32):
        assert f["loss"] < 2e-6
        assert a["loss"] > 100 * f["loss"] and b["loss"] > 100 * f["loss"]
    assert ac_state["fc.weight"].dtype == torch.float32
    assert bf_state["fc.weight"].dtype == torch.bfloat16


def test_bf16_engines_frozen_teacher_stays_and_settings_must_agree(models):
    model = os.path.join(models, "two_models.pt")
    data = os.path.join(models, "two_models.data.pt")

    def engine(trains, **extra):
        cfg = {"train_micro_batch_size_per_gpu": "auto", "bf16": {"enabled": True}}
        if trains:
            cfg["optimizer"] = {"type": "SGD", "params": {"lr": 0.1}}
        cfg.update(extra)
        return cfg

    lines, state = oracle.train(model, data, {"engines": {"student": engine(True),
                                                          "teacher": engine(False)}}, 2, 2)
    init = dict(torch.jit.load(model).named_parameters())
    for name, p in init.items():
        assert state[name].dtype == torch.bfloat16
        if name.startswith("teacher."):
            assert torch.equal(state[name], p.detach().bfloat16()), name
    assert not torch.equal(state["student.fc1.weight"], init["student.fc1.weight"].detach().bfloat16())
    with pytest.raises(oracle.OracleError, match="engines.teacher: engines with different"):
        oracle.train(model, data, {"engines": {"student": engine(True),
                                               "teacher": engine(False, bf16={"enabled": False})}},
                     1, 2)


def test_fp16_scale_overflows_the_same_when_every_op_rounds(models):
    """The mpi-precision fp16 test compares the loss_scale/skipped sequence exactly, while the
    runtime rounds every op to fp16 and the oracle only parameters, inputs and gradients: the
    fp16_scale model must overflow on the same steps either way (round_every_op.py)."""
    import round_every_op
    model = os.path.join(models, "fp16_scale.pt")
    data = os.path.join(models, "fp16_scale.data.pt")
    a = oracle.train(model, data, FP16_SCALE_CONFIG, 16, 2)
    b = round_every_op.train_rounding_every_op(torch.float16, model, data, FP16_SCALE_CONFIG, 16, 2)
    got = round_every_op.compare(*a, *b, 2.0 ** -10)
    assert got["sequences_equal"], got
    assert got["param_abs"] <= 1e-3 and got["loss_rel"] <= 2e-3, got


@pytest.mark.parametrize("model,mode", [("transformer", "bf16"), ("transformer", "autocast"),
                                        ("cancel_probe", "autocast")])
def test_round_every_op_stays_within_the_tolerances(models, model, mode):
    """The measurement behind PRECISION_TOLERANCES (oracle.py, "Tolerances"), kept as a test:
    a second implementation that rounds every op stays within them (SGD, W = 2, GAS 2)."""
    import round_every_op
    cfg = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": 2,
           "optimizer": {"type": "SGD", "params": {"lr": 0.05, "momentum": 0.9}},
           ("bf16" if mode == "bf16" else "torch_autocast"): {"enabled": True}}
    m, d = os.path.join(models, model + ".pt"), os.path.join(models, model + ".data.pt")
    a = oracle.train(m, d, cfg, 3, 2)
    b = round_every_op.train_rounding_every_op(torch.bfloat16, m, d, cfg, 3, 2)
    tol = oracle.PRECISION_TOLERANCES[mode]
    got = round_every_op.compare(*a, *b, tol["param_rtol"])
    assert got["sequences_equal"]
    assert got["loss_rel"] <= tol["loss_rtol"] / 4, got
    assert got["grad_norm_rel"] <= tol["norm_rtol"] / 4, got
    assert got["param_atol_needed"] <= tol["param_atol"] / 2, got
    # and the fp32 oracle would fail cancel_probe's autocast loss
    if model == "cancel_probe":
        f = oracle.train(m, d, {k: v for k, v in cfg.items() if k != "torch_autocast"}, 3, 2)
        assert all(x["loss"] < y["loss"] / 100 for x, y in zip(f[0], a[0]))
