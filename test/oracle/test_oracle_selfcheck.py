"""Self-check of the Python test side: the model generator and the LibTorch oracle.

Run: /usr/bin/python3 -m pytest test/oracle -q
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
                   "traced_mlp", "ops_zoo", "ops_zoo_conv", "resnet", "tied_lm",
                   "dropout", "three_engines", "through_frozen", "two_paths"]

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
    for f in ERROR_FILES + ["mlp.data.safetensors", "error_cases.json"]:
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
            assert isinstance(out, tuple) and len(out) == 2
            outs = list(out)
        else:
            assert isinstance(out, torch.Tensor)
            outs = [out]
        for o in outs:
            assert o.dim() == 0 and math.isfinite(float(o)), (name, b, o)


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
