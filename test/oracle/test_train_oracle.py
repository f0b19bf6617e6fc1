"""Self-tests of the training oracle (oracle.train, compare-params) and of the scripts built on it
(train_check.py, grad_table.py).

Run: .venv/bin/python -m pytest test/oracle -q

Nothing here runs the real ds-compile or ds-run: the plumbing of train_check.py and grad_table.py
is exercised with stand-in tools (written to a temporary bin directory) that call the oracle.
"""

import json
import math
import os
import subprocess
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ORACLE = os.path.join(HERE, "oracle.py")
TRAIN_CHECK = os.path.join(HERE, "train_check.py")
GRAD_TABLE = os.path.join(HERE, "grad_table.py")
sys.path.insert(0, HERE)

import oracle  # noqa: E402

# The op list of issue "Train on one process" (the gradient table must cover every one).
ISSUE_OPS = """linear matmul mm bmm add sub mul div neg pow sqrt rsqrt exp log relu gelu silu tanh
sigmoid softmax log_softmax layer_norm batch_norm embedding conv1d conv2d max_pool2d avg_pool2d
adaptive_avg_pool2d flatten view reshape transpose permute contiguous split chunk slice select cat
stack squeeze unsqueeze expand masked_fill where index_select index_add gather sum mean max topk
cross_entropy nll_loss mse_loss kl_div to baddbmm pad repeat detach""".split()


# ---------------------------------------------------------------------------------------------
# tiny models
# ---------------------------------------------------------------------------------------------
class OneLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def forward(self, x, y):
        return F.mse_loss(self.fc(x), y)


class LinearLoss(nn.Module):
    """loss = sum(p * x) / rows: the gradient does not depend on p (constant data => known)."""

    def __init__(self):
        super().__init__()
        self.p = nn.Parameter(torch.tensor([1.0, -2.0], dtype=torch.float64))

    def forward(self, x):
        return (self.p * x).sum() / x.size(0)


class WithUnused(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)
        self.unused = nn.Parameter(torch.full((4,), 2.0, dtype=torch.float64))

    def forward(self, x, y):
        return F.mse_loss(self.fc(x), y)


class BNData(nn.Module):
    """BatchNorm over the data itself: its running statistics depend only on the rank's rows."""

    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(3)
        self.w = nn.Parameter(torch.randn(3, dtype=torch.float64))

    def forward(self, x, y):
        return F.mse_loss(self.bn(x) * self.w, y)


class TwoOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 2)
        self.b = nn.Linear(3, 2)

    def forward(self, x, y):
        return F.mse_loss(self.a(x), y), F.mse_loss(torch.tanh(self.b(x)), y)


class SumOut(TwoOut):
    def forward(self, x, y):
        return F.mse_loss(self.a(x), y) + F.mse_loss(torch.tanh(self.b(x)), y)


class Distill(nn.Module):
    def __init__(self):
        super().__init__()
        self.student = nn.Linear(3, 2)
        self.teacher = nn.Linear(3, 2)

    def forward(self, x, y):
        return F.mse_loss(self.student(x), y) + F.mse_loss(self.student(x), self.teacher(x).detach())


def save(tmp_path, name, module, data, seed=0):
    module = module.double()
    path = str(tmp_path / f"{name}.pt")
    torch.jit.script(module).save(path)
    dpath = str(tmp_path / f"{name}.data.pt")
    torch.save({k: v.contiguous().clone() for k, v in data.items()}, dpath)
    return path, dpath


def linear_files(tmp_path, S=4, Bg=4, name="lin"):
    torch.manual_seed(0)
    m = OneLinear()
    x = torch.randn(S, Bg, 3, dtype=torch.float64)
    y = torch.randn(S, Bg, 2, dtype=torch.float64)
    return save(tmp_path, name, m, {"x": x, "y": y}) + ({"x": x, "y": y},)


def initial_state(model_pt):
    m = torch.jit.load(model_pt)
    return {n: p.detach().clone() for n, p in m.named_parameters()}


def close(a, b, rtol=1e-12, atol=1e-14):
    return torch.allclose(a, b, rtol=rtol, atol=atol)


# ---------------------------------------------------------------------------------------------
# the oracle against hand-written references
# ---------------------------------------------------------------------------------------------
def hand_linear_grads(Wt, bt, x, y, world, gas, k):
    """Gradient of sum over ranks r and micro-steps s of mse(x W^T + b, y) / (world * gas) for
    optimizer step k, written out by hand: d mse / d out = 2 (out - y) / numel."""
    Bg = x.shape[1]
    b = Bg // world
    gW = torch.zeros_like(Wt)
    gb = torch.zeros_like(bt)
    losses = []
    for s in range(k * gas, (k + 1) * gas):
        for r in range(world):
            xr, yr = x[s, r * b:(r + 1) * b], y[s, r * b:(r + 1) * b]
            out = xr @ Wt.T + bt
            losses.append(float(((out - yr) ** 2).mean()))
            dout = 2.0 * (out - yr) / out.numel() / (world * gas)
            gW += dout.T @ xr
            gb += dout.sum(0)
    return gW, gb, sum(losses) / len(losses)


@pytest.mark.parametrize("world", [1, 2])
def test_linear_sgd_gas2_matches_hand_computation(tmp_path, world):
    model, data, d = linear_files(tmp_path)
    cfg = {"train_micro_batch_size_per_gpu": 4 // world, "gradient_accumulation_steps": 2,
           "gradient_clipping": 0.0, "optimizer": {"type": "SGD", "params": {"lr": 0.1}}}
    lines, state = oracle.train(model, data, cfg, 2, world)
    init = initial_state(model)
    Wt, bt = init["fc.weight"], init["fc.bias"]
    for k in range(2):
        gW, gb, loss = hand_linear_grads(Wt, bt, d["x"], d["y"], world, 2, k)
        assert lines[k]["step"] == k + 1
        assert math.isclose(lines[k]["loss"], loss, rel_tol=1e-12)
        assert math.isclose(lines[k]["grad_norm"], float(torch.sqrt((gW ** 2).sum() + (gb ** 2).sum())),
                            rel_tol=1e-12)
        assert lines[k]["lr"] == 0.1 and lines[k]["loss_scale"] == 1.0 and lines[k]["skipped"] is False
        Wt = Wt - 0.1 * gW
        bt = bt - 0.1 * gb
    assert close(state["fc.weight"], Wt) and close(state["fc.bias"], bt)
    assert set(state) == {"fc.weight", "fc.bias"}


def test_adamw_and_adam_l2_match_hand_computation(tmp_path):
    model, data, d = linear_files(tmp_path)
    lr, wd, b1, b2, eps = 0.01, 0.1, 0.9, 0.99, 1e-8
    for typ, extra, decoupled in (("AdamW", {}, True), ("Adam", {}, True),
                                  ("Adam", {"adam_w_mode": False}, False)):
        cfg = {"train_batch_size": 4, "gradient_clipping": 0.0,
               "optimizer": {"type": typ, "params": dict(lr=lr, weight_decay=wd, betas=[b1, b2],
                                                         eps=eps, **extra)}}
        lines, state = oracle.train(model, data, cfg, 3)
        init = initial_state(model)
        p = [init["fc.weight"], init["fc.bias"]]
        m = [torch.zeros_like(t) for t in p]
        v = [torch.zeros_like(t) for t in p]
        for k in range(3):
            g = list(hand_linear_grads(p[0], p[1], d["x"], d["y"], 1, 1, k)[:2])
            for i in range(2):
                if not decoupled:
                    g[i] = g[i] + wd * p[i]
                m[i] = b1 * m[i] + (1 - b1) * g[i]
                v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i]
                mhat = m[i] / (1 - b1 ** (k + 1))
                vhat = v[i] / (1 - b2 ** (k + 1))
                if decoupled:
                    p[i] = p[i] * (1 - lr * wd)
                p[i] = p[i] - lr * mhat / (torch.sqrt(vhat) + eps)
        assert close(state["fc.weight"], p[0], 1e-10, 1e-13), (typ, extra)
        assert close(state["fc.bias"], p[1], 1e-10, 1e-13), (typ, extra)


def test_optimizer_defaults():
    params = [nn.Parameter(torch.zeros(2))]
    opt, lr = oracle.make_optimizer(params, {"type": "Adam"})
    assert isinstance(opt, torch.optim.AdamW) and lr == 1e-3
    g = opt.param_groups[0]
    assert g["weight_decay"] == 0.0 and g["betas"] == (0.9, 0.999) and g["eps"] == 1e-8
    opt, _ = oracle.make_optimizer(params, {"type": "AdamW", "params": {"torch_adam": True}})
    assert isinstance(opt, torch.optim.AdamW) and opt.param_groups[0]["weight_decay"] == 0.01
    opt, _ = oracle.make_optimizer(params, {"type": "Adam", "params": {"torch_adam": True,
                                                                       "adam_w_mode": False}})
    assert type(opt) is torch.optim.Adam and opt.param_groups[0]["weight_decay"] == 0.0
    opt, _ = oracle.make_optimizer(params, {"type": "sgd", "params": {
        "lr": 0.5, "momentum": 0.9, "nesterov": True, "weight_decay": 0.1}})
    g = opt.param_groups[0]
    assert isinstance(opt, torch.optim.SGD)
    assert (g["lr"], g["momentum"], g["nesterov"], g["weight_decay"], g["dampening"]) == \
        (0.5, 0.9, True, 0.1, 0.0)
    with pytest.raises(oracle.OracleError, match="adam_w_mode"):
        oracle.make_optimizer(params, {"type": "AdamW", "params": {"adam_w_mode": False}})
    with pytest.raises(oracle.OracleError, match="Lamb"):
        oracle.make_optimizer(params, {"type": "Lamb"})


def test_unused_parameter_steps_with_zero_gradient(tmp_path):
    torch.manual_seed(1)
    x = torch.randn(2, 4, 3, dtype=torch.float64)
    y = torch.randn(2, 4, 2, dtype=torch.float64)
    model, data = save(tmp_path, "unused", WithUnused(), {"x": x, "y": y})
    cfg = {"train_batch_size": 4, "optimizer": {"type": "AdamW", "params": {"lr": 0.1, "weight_decay": 0.1}}}
    _, state = oracle.train(model, data, cfg, 2)
    # zero gradient: Adam's update is 0 / (0 + eps) = 0, only the decoupled decay acts
    assert close(state["unused"], torch.full((4,), 2.0 * (1 - 0.01) ** 2, dtype=torch.float64))
    cfg["optimizer"] = {"type": "SGD", "params": {"lr": 0.1, "momentum": 0.9}}
    _, state = oracle.train(model, data, cfg, 2)
    assert torch.equal(state["unused"], torch.full((4,), 2.0, dtype=torch.float64))


# ---------------------------------------------------------------------------------------------
# learning-rate schedules
# ---------------------------------------------------------------------------------------------
def linear_loss_files(tmp_path, steps=6):
    x = torch.tensor([3.0, 4.0], dtype=torch.float64).expand(steps, 2, 2).contiguous()
    return save(tmp_path, "linloss", LinearLoss(), {"x": x})


def test_warmup_lr_sequence_and_its_use(tmp_path):
    model, data = linear_loss_files(tmp_path)
    sched = {"type": "WarmupLR", "params": {"warmup_min_lr": 0.01, "warmup_max_lr": 0.1,
                                            "warmup_num_steps": 10, "warmup_type": "linear"}}
    cfg = {"train_micro_batch_size_per_gpu": 2, "gradient_clipping": 0.0,
           "optimizer": {"type": "SGD", "params": {"lr": 0.5}}, "scheduler": sched}
    lines, state = oracle.train(model, data, cfg, 4)
    # DeepSpeed's lag: the first update runs at iteration -1 (warmup_min_lr), the second at 0
    lrs = [l["lr"] for l in lines]
    assert lrs == pytest.approx([0.01, 0.01, 0.019, 0.028], rel=1e-15, abs=0)
    # the gradient is constant ([3, 4]): the parameter moved by sum(lr) * g
    expect = torch.tensor([1.0, -2.0], dtype=torch.float64) - sum(lrs) * torch.tensor([3.0, 4.0],
                                                                                     dtype=torch.float64)
    assert close(state["p"], expect)

    sched["params"]["warmup_type"] = "log"
    lines, _ = oracle.train(model, data, cfg, 4)
    inv = 1.0 / math.log(10)
    delta = 0.1 - 0.01  # DeepSpeed's delta_lr, as it computes it
    assert [l["lr"] for l in lines] == [0.01, 0.01, 0.01 + delta * (inv * math.log(2)),
                                        0.01 + delta * (inv * math.log(3))]
    # warmup_max_lr defaults to the optimizer's lr (DeepSpeed 0.19); no scheduler: constant lr
    del sched["params"]["warmup_max_lr"]
    sched["params"]["warmup_num_steps"] = 2
    lines, _ = oracle.train(model, data, cfg, 5)
    assert [l["lr"] for l in lines] == [0.01, 0.01, 0.01 + 0.49 * 1.0, 0.5, 0.5]
    del cfg["scheduler"]
    assert [l["lr"] for l in oracle.train(model, data, cfg, 3)[0]] == [0.5, 0.5, 0.5]


def test_scheduler_formulas_match_the_config_library():
    """The values of unittests/Config/SchedulerTest.cpp (worked out from DeepSpeed's sources)."""
    lr = oracle.scheduler_lr
    s = {"type": "WarmupLR", "params": {"warmup_min_lr": 0.01, "warmup_max_lr": 0.1,
                                        "warmup_num_steps": 10}}
    assert lr(s, 0.5, -1) == 0.01 and lr(s, 0.5, 0) == 0.01
    assert lr(s, 0.5, 4) == pytest.approx(0.0729073003897, abs=1e-12)
    assert lr(s, 0.5, 9) == pytest.approx(0.1, rel=1e-15) and lr(s, 0.5, 10) == 0.1
    assert lr({"type": "WarmupLR"}, 0.5, 5000) == 0.5
    one = {"type": "WarmupLR", "params": {"warmup_max_lr": 0.1, "warmup_num_steps": 1,
                                          "warmup_type": "linear"}}
    assert lr(one, 0.5, 1) == 0.05 and lr(one, 0.5, 2) == 0.1  # warmup_num_steps clamped to 2
    d = {"type": "WarmupDecayLR", "params": {"warmup_max_lr": 0.1, "warmup_num_steps": 10,
                                             "warmup_type": "linear", "total_num_steps": 110}}
    assert lr(d, 0.5, -1) == 0.0 and lr(d, 0.5, 5) == pytest.approx(0.05, rel=1e-15)
    assert lr(d, 0.5, 10) == pytest.approx(0.1) and lr(d, 0.5, 60) == pytest.approx(0.05)
    assert lr(d, 0.5, 109) == pytest.approx(0.001) and lr(d, 0.5, 110) == 0.0 and lr(d, 0.5, 200) == 0.0
    assert lr({"type": "WarmupDecayLR", "params": {"total_num_steps": 5000}}, 0.5, 1000) == 0.001
    c = {"type": "WarmupCosineLR", "params": {"warmup_min_ratio": 0.1, "cos_min_ratio": 0.01,
                                              "warmup_num_steps": 10, "warmup_type": "linear",
                                              "total_num_steps": 110}}
    assert lr(c, 0.2, -1) == 0.0 and lr(c, 0.2, 0) == pytest.approx(0.02, rel=1e-15)
    assert lr(c, 0.2, 5) == pytest.approx(0.11, rel=1e-15)
    assert lr(c, 0.2, 10) == pytest.approx(0.2 * 0.99975574738, abs=1e-11)
    assert lr(c, 0.2, 59) == pytest.approx(0.101, abs=1e-15)
    assert lr(c, 0.2, 109) == pytest.approx(0.002, abs=1e-15) and lr(c, 0.2, 1000) == pytest.approx(0.002, abs=1e-15)
    # the first update of WarmupCosineLR runs at lr 0
    assert oracle.scheduler_lr_for_update(c, 0.2, 0) == 0.0
    assert oracle.scheduler_lr_for_update(c, 0.2, 1) == pytest.approx(0.02, rel=1e-15)
    with pytest.raises(oracle.OracleError, match="total_num_steps"):
        lr({"type": "WarmupDecayLR"}, 0.5, 0)
    with pytest.raises(oracle.OracleError, match="not supported"):
        lr({"type": "OneCycle"}, 0.5, 0)


# ---------------------------------------------------------------------------------------------
# clipping
# ---------------------------------------------------------------------------------------------
def test_clipping_reports_the_pre_clip_norm(tmp_path):
    model, data = linear_loss_files(tmp_path)  # gradient [3, 4]: norm 5
    g = torch.tensor([3.0, 4.0], dtype=torch.float64)
    p0 = torch.tensor([1.0, -2.0], dtype=torch.float64)
    base = {"train_micro_batch_size_per_gpu": 2, "optimizer": {"type": "SGD", "params": {"lr": 0.1}}}
    # default gradient_clipping 1.0: clipped to norm 1 (coefficient 1 / (5 + 1e-6))
    lines, state = oracle.train(model, data, base, 1)
    assert lines[0]["grad_norm"] == 5.0
    assert close(state["p"], p0 - 0.1 * g * (1.0 / (5.0 + 1e-6)))
    # disabled
    lines, state = oracle.train(model, data, dict(base, gradient_clipping=0.0), 1)
    assert lines[0]["grad_norm"] == 5.0 and close(state["p"], p0 - 0.1 * g)
    # above the norm: unchanged
    lines, state = oracle.train(model, data, dict(base, gradient_clipping=10.0), 1)
    assert lines[0]["grad_norm"] == 5.0 and close(state["p"], p0 - 0.1 * g)
    # two steps: still the pre-clip norm each time
    lines, _ = oracle.train(model, data, dict(base, gradient_clipping=2.0), 2)
    assert [l["grad_norm"] for l in lines] == [5.0, 5.0]


# ---------------------------------------------------------------------------------------------
# buffers, tuples, engines, batch sizes
# ---------------------------------------------------------------------------------------------
def test_batchnorm_buffers_follow_rank_0(tmp_path):
    torch.manual_seed(3)
    S, Bg, W, G = 4, 4, 2, 2
    x = torch.randn(S, Bg, 3, dtype=torch.float64) * 2 + 1
    y = torch.randn(S, Bg, 3, dtype=torch.float64)
    model, data = save(tmp_path, "bn", BNData(), {"x": x, "y": y})
    cfg = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": G,
           "optimizer": {"type": "SGD", "params": {"lr": 0.1}}}
    _, state = oracle.train(model, data, cfg, 2, W)
    b = Bg // W
    mean = torch.zeros(3, dtype=torch.float64)
    var = torch.ones(3, dtype=torch.float64)
    other = mean.clone()
    for s in range(S):
        rows = x[s, :b]
        mean = 0.9 * mean + 0.1 * rows.mean(0)
        var = 0.9 * var + 0.1 * rows.var(0, unbiased=True)
        other = 0.9 * other + 0.1 * x[s, b:].mean(0)
    assert close(state["bn.running_mean"], mean) and close(state["bn.running_var"], var)
    assert int(state["bn.num_batches_tracked"]) == S and state["bn.num_batches_tracked"].dtype == torch.int64
    assert not close(other, mean, 1e-3, 1e-3)  # rank 1's rows would give something else


def test_tuple_outputs_backpropagate_their_sum(tmp_path):
    torch.manual_seed(4)
    x = torch.randn(4, 4, 3, dtype=torch.float64)
    y = torch.randn(4, 4, 2, dtype=torch.float64)
    torch.manual_seed(5)
    two = save(tmp_path, "two", TwoOut(), {"x": x, "y": y})
    torch.manual_seed(5)
    one = save(tmp_path, "one", SumOut(), {"x": x, "y": y})
    cfg = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2,
           "optimizer": {"type": "AdamW", "params": {"lr": 0.01}}}
    lt, st = oracle.train(two[0], two[1], cfg, 2, 2)
    lo, so = oracle.train(one[0], one[1], cfg, 2, 2)
    for a, b in zip(lt, lo):
        assert len(a["losses"]) == 2 and "losses" not in b
        assert math.isclose(a["loss"], sum(a["losses"]), rel_tol=1e-12)
        assert math.isclose(a["loss"], b["loss"], rel_tol=1e-12)
    for n in so:
        assert close(st[n], so[n], 1e-9, 1e-12), n


def test_engines_frozen_teacher(tmp_path):
    torch.manual_seed(6)
    x = torch.randn(2, 4, 3, dtype=torch.float64)
    y = torch.randn(2, 4, 2, dtype=torch.float64)
    model, data = save(tmp_path, "distill", Distill(), {"x": x, "y": y})
    student = {"train_micro_batch_size_per_gpu": 4, "optimizer": {"type": "SGD", "params": {"lr": 0.1}},
               "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 5}}}
    cfg = {"engines": {"student": student, "teacher": {"train_micro_batch_size_per_gpu": 4}}}
    init = initial_state(model)
    # warmup_min_lr 0: the first two updates (iterations -1 and 0) have lr 0 and change nothing
    lines, state = oracle.train(model, data, cfg, 2)
    assert [l["lr"] for l in lines] == [0.0, 0.0] and "engines" not in lines[0]
    assert torch.equal(state["student.weight"], init["student.weight"])
    lines, state = oracle.train(model, data, dict(cfg, engines=dict(
        cfg["engines"], student=dict(student, scheduler=None))), 2)
    assert torch.equal(state["teacher.weight"], init["teacher.weight"])
    assert not torch.equal(state["student.weight"], init["student.weight"])
    # two trainable engines: per-engine lr and grad_norm
    cfg["engines"]["teacher"] = {"train_micro_batch_size_per_gpu": 4,
                                 "optimizer": {"type": "SGD", "params": {"lr": 0.2}}}
    lines, state = oracle.train(model, data, cfg, 1)
    assert set(lines[0]["engines"]) == {"student", "teacher"}
    assert lines[0]["engines"]["teacher"]["lr"] == 0.2
    assert torch.equal(state["teacher.weight"], init["teacher.weight"])  # detached: zero gradient
    cfg["engines"]["teacher"]["gradient_accumulation_steps"] = 2
    with pytest.raises(oracle.OracleError):
        oracle.train(model, data, cfg, 1)


def test_resolve_batch():
    r = oracle.resolve_batch
    assert r({"train_batch_size": 16, "train_micro_batch_size_per_gpu": 2}, 4, 8) == (2, 2, 16)
    assert r({"train_batch_size": 16, "gradient_accumulation_steps": 2}, 4, 8) == (2, 2, 16)
    assert r({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 3}, 4, 8) == (2, 3, 24)
    assert r({"train_batch_size": 8}, 4, 8) == (2, 1, 8)
    assert r({"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": 2}, 2, 8) == (4, 2, 16)
    assert r({"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
              "train_batch_size": "auto"}, 2, 8) == (4, 1, 8)
    with pytest.raises(oracle.OracleError, match="does not match the data"):
        r({"train_micro_batch_size_per_gpu": 2}, 2, 8)
    with pytest.raises(oracle.OracleError, match="train_batch_size 10"):
        r({"train_batch_size": 10, "train_micro_batch_size_per_gpu": 2,
           "gradient_accumulation_steps": 2}, 2, 4)
    with pytest.raises(oracle.OracleError):
        r({"gradient_accumulation_steps": 2}, 1, 4)


def test_train_errors(tmp_path):
    model, data, _ = linear_files(tmp_path)
    with pytest.raises(oracle.OracleError, match="need 6 micro-steps"):
        oracle.train(model, data, {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2,
                                   "optimizer": {"type": "SGD"}}, 3)
    # torch 2.x autocasts to float16 on CPU too: the oracle trains it (1.13 refused it).
    lines, _ = oracle.train(model, data, {"train_micro_batch_size_per_gpu": 4,
                                          "optimizer": {"type": "SGD"},
                                          "torch_autocast": {"enabled": True, "dtype": "fp16"}}, 1)
    assert len(lines) == 1 and math.isfinite(lines[0]["loss"])
    with pytest.raises(oracle.OracleError, match="cannot both be enabled"):
        oracle.train(model, data, {"train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": True},
                                   "fp16": {"enabled": True}, "optimizer": {"type": "SGD"}}, 1)
    with pytest.raises(oracle.OracleError, match="cannot be enabled together with bf16"):
        oracle.train(model, data, {"train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": True},
                                   "torch_autocast": {"enabled": True}, "optimizer": {"type": "SGD"}},
                     1)
    with pytest.raises(oracle.OracleError, match="optimizer"):
        oracle.train(model, data, {"train_micro_batch_size_per_gpu": 4}, 1)


# ---------------------------------------------------------------------------------------------
# CLI: train, compare-params
# ---------------------------------------------------------------------------------------------
def run_py(script, *args):
    return subprocess.run([sys.executable, script] + [str(a) for a in args], capture_output=True,
                          text=True)


def test_safetensors_round_trip(tmp_path):
    state = {"a.weight": torch.randn(3, 2), "b": torch.randn(4, dtype=torch.float64),
             "n": torch.tensor(7), "e": torch.zeros(0, 3), "h": torch.randn(2).to(torch.bfloat16)}
    path = str(tmp_path / "s.safetensors")
    oracle.write_safetensors(path, state)
    back = oracle.read_safetensors(path)
    assert list(back) == list(state)
    for k in state:
        assert back[k].dtype == state[k].dtype and torch.equal(back[k], state[k]), k


def test_train_cli(tmp_path):
    model, data, _ = linear_files(tmp_path)
    cfg = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": 2,
           "optimizer": {"type": "AdamW", "params": {"lr": 1e-2}}}
    cpath = tmp_path / "cfg.json"
    cpath.write_text(json.dumps(cfg))
    out, params = tmp_path / "o.jsonl", tmp_path / "o.safetensors"
    r = run_py(ORACLE, "train", "--model", model, "--data", data, "--config", cpath, "--steps", 2,
               "--world-size", 2, "--out", out, "--save-params", params)
    assert r.returncode == 0, r.stderr
    lines, state = oracle.train(model, data, cfg, 2, 2)
    assert oracle.read_jsonl(str(out)) == lines
    back = oracle.read_safetensors(str(params))
    assert list(back) == list(state) and all(torch.equal(back[k], state[k]) for k in state)
    r = run_py(ORACLE, "train", "--model", model, "--data", data, "--config", cpath, "--steps", 9,
               "--out", out)
    assert r.returncode == 2 and "micro-steps" in r.stderr


def test_compare_params_cli(tmp_path):
    torch.manual_seed(7)
    ref = {"fc.weight": torch.randn(4, 3), "fc.bias": torch.randn(4),
           "bn.num_batches_tracked": torch.tensor(3)}
    a, b = str(tmp_path / "ours.safetensors"), str(tmp_path / "oracle.safetensors")
    oracle.write_safetensors(b, ref)
    oracle.write_safetensors(a, ref)
    r = run_py(ORACLE, "compare-params", "--ours", a, "--oracle", b, "--rtol", "1e-4", "--atol", "1e-4")
    assert r.returncode == 0, r.stderr
    assert "3 tensors match" in r.stdout

    small = {k: v.clone() for k, v in ref.items()}
    small["fc.weight"][1, 2] += 5e-5  # within 1e-4 + 1e-4 * |x|
    oracle.write_safetensors(a, small)
    assert run_py(ORACLE, "compare-params", "--ours", a, "--oracle", b).returncode == 0

    bad = {k: v.clone() for k, v in ref.items()}
    bad["fc.weight"][2, 1] += 1e-2
    oracle.write_safetensors(a, bad)
    r = run_py(ORACLE, "compare-params", "--ours", a, "--oracle", b, "--rtol", "1e-4", "--atol", "1e-4")
    assert r.returncode == 1
    assert "'fc.weight'" in r.stderr and "[2, 1]" in r.stderr and "0.01" in r.stderr

    bad = dict(ref)
    bad["bn.num_batches_tracked"] = torch.tensor(4)
    ok, msg = oracle.compare_params(bad, ref, 1e-4, 1e-4)
    assert not ok and "bn.num_batches_tracked" in msg
    ok, msg = oracle.compare_params({k: v for k, v in ref.items() if k != "fc.bias"}, ref, 1e-4, 1e-4)
    assert not ok and "missing" in msg and "fc.bias" in msg
    ok, msg = oracle.compare_params(dict(ref, **{"fc.bias": torch.randn(5)}), ref, 1e-4, 1e-4)
    assert not ok and "shape" in msg
    nan = dict(ref, **{"fc.bias": ref["fc.bias"].clone()})
    nan["fc.bias"][0] = float("nan")
    ok, msg = oracle.compare_params(nan, ref, 1e-4, 1e-4)
    assert not ok and "fc.bias" in msg


def test_compare_train_lines():
    ref = [{"step": 1, "loss": 2.0, "lr": 0.1, "grad_norm": 3.0, "loss_scale": 1.0, "skipped": False}]
    assert oracle.compare_train_lines(ref, ref, 1e-5)[0]
    ok, msg = oracle.compare_train_lines([dict(ref[0], lr=0.2)], ref, 1e-5)
    assert not ok and "lr" in msg
    ok, msg = oracle.compare_train_lines([dict(ref[0], grad_norm=3.1)], ref, 1e-5)
    assert not ok and "grad_norm" in msg
    ok, msg = oracle.compare_train_lines([{k: v for k, v in ref[0].items() if k != "grad_norm"}], ref, 1e-5)
    assert not ok and "grad_norm" in msg
    ok, msg = oracle.compare_train_lines([dict(ref[0], skipped=True)], ref, 1e-5)
    assert not ok and "skipped" in msg
    ok, msg = oracle.compare_train_lines([dict(ref[0], loss=2.001)], ref, 1e-5)
    assert not ok and "loss" in msg


# ---------------------------------------------------------------------------------------------
# grad_table.py
# ---------------------------------------------------------------------------------------------
def test_grad_table_list_covers_every_op():
    r = run_py(GRAD_TABLE, "--list")
    assert r.returncode == 0, r.stderr
    listed = r.stdout.split("\n")
    assert listed[-1] == ""
    listed = listed[:-1]
    # One op per line: the issue's ops in the issue's order, then the extra ones.
    assert listed[:len(ISSUE_OPS)] == ISSUE_OPS
    assert len(set(listed)) == len(listed)
    r = run_py(GRAD_TABLE, "--list-cases")
    ops_with_cases = {line.split("/")[0] for line in r.stdout.split()}
    assert ops_with_cases == set(listed)
    # The ops CTest also runs through the tools are ops of the table.
    import grad_table
    assert grad_table.TOOL_OPS and set(grad_table.TOOL_OPS) <= set(listed)


def test_grad_table_cases_against_eager_autograd(tmp_path):
    """--self-check: the cases script, contain their op, and the oracle's derived gradients
    equal eager autograd's; detach's parameter gets none and every other parameter a non-zero
    one. (Every row of the in-process table, grad-table-in-process-K, makes the same checks on
    every case; here the option itself, on an op with buffers and one with a no_grad
    parameter.)"""
    r = run_py(GRAD_TABLE, "--self-check", "--op", "batch_norm", "--op", "detach", "--op", "add",
               "--workdir", tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "FAIL" not in r.stdout
    import grad_table
    n = 2 * len([c for c in grad_table.CASES if c.op in ("batch_norm", "detach", "add")])
    assert f"{n} of {n} cases pass" in r.stdout


# ---------------------------------------------------------------------------------------------
# train_check.py and grad_table.py plumbing, with stand-in tools (never the real ds-run)
# ---------------------------------------------------------------------------------------------
FAKE_COMPILE = """\
#!{python}
# stand-in ds-compile: records its arguments as the "plan"
import json, sys
a = sys.argv[1:]
plan = {{"model": a[0], "unbatched": []}}
i = 1
while i < len(a):
    if a[i] == "--unbatched":
        plan["unbatched"].append(a[i + 1])
    plan[a[i].lstrip("-")] = a[i + 1]
    i += 2
with open(plan["o"], "w") as f:
    json.dump(plan, f)
"""

FAKE_RUN = """\
#!{python}
# stand-in ds-run: trains with the oracle; FAKE_PERTURB adds to the first element of one tensor
import json, os, sys
sys.path.insert(0, {here!r})
import oracle, torch
a = sys.argv[1:]
with open(a[0]) as f:
    plan = json.load(f)
opts = {{}}
i = 1
while i < len(a):
    opts[a[i].lstrip("-")] = a[i + 1]
    i += 2
with open(plan["config"]) as f:
    cfg = json.load(f)
lines, state = oracle.train(plan["model"], opts["data"], cfg, int(opts["steps"]),
                            int(plan.get("world-size", 1)), plan["unbatched"])
p = os.environ.get("FAKE_PERTURB")
if p:
    name = os.environ.get("FAKE_TENSOR") or next(iter(state))
    state[name].view(-1)[0] += float(p)
oracle.write_jsonl(opts["losses"], lines)
oracle.write_safetensors(opts["save-params"], state)
"""


@pytest.fixture
def fake_bin(tmp_path):
    d = tmp_path / "bin"
    d.mkdir()
    for name, text in (("ds-compile", FAKE_COMPILE), ("ds-run", FAKE_RUN)):
        path = d / name
        path.write_text(text.format(python=sys.executable, here=HERE))
        path.chmod(0o755)
    return str(d)


def test_train_check_with_stand_in_tools(tmp_path, fake_bin, monkeypatch):
    models = tmp_path / "models"
    models.mkdir()
    torch.manual_seed(8)
    m = OneLinear()
    torch.jit.script(m).save(str(models / "lin.pt"))
    torch.save({"x": torch.randn(6, 4, 3), "y": torch.randn(6, 4, 2)}, str(models / "lin.data.pt"))
    cfg = json.dumps({"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": 2,
                      "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}})
    args = [TRAIN_CHECK, "--bin", fake_bin, "--models", models, "--model", "lin", "--config-json", cfg,
            "--steps", 3]
    r = run_py(*args)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PASS" in r.stdout and "max abs err" in r.stdout

    monkeypatch.setenv("FAKE_PERTURB", "1e-2")
    monkeypatch.setenv("FAKE_TENSOR", "fc.bias")
    r = run_py(*args)
    assert r.returncode == 1
    assert "fc.bias" in r.stdout and "FAILED" in r.stderr and "final parameters" in r.stderr

    monkeypatch.delenv("FAKE_PERTURB")
    r = run_py(TRAIN_CHECK, "--bin", str(tmp_path), "--models", models, "--model", "lin",
               "--config-json", cfg, "--steps", 3)
    assert r.returncode == 1 and "ds-compile" in r.stderr


def test_grad_table_with_stand_in_tools(tmp_path, fake_bin, monkeypatch):
    r = run_py(GRAD_TABLE, "--bin", fake_bin, "--op", "add", "--op", "batch_norm", "--case",
               "bcast_4x1", "--case", "bn1d", "--workdir", tmp_path / "w")
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [l for l in r.stdout.splitlines() if l.startswith(("add ", "batch_norm "))]
    assert len(rows) == 4 and all(l.rstrip().endswith("PASS") for l in rows)
    assert "4 of 4 cases pass" in r.stdout

    # a wrong gradient (a 1e-6 change of p after the step) fails the f64 rows
    monkeypatch.setenv("FAKE_PERTURB", "1e-6")
    r = run_py(GRAD_TABLE, "--bin", fake_bin, "--op", "add", "--case", "row", "--workdir",
               tmp_path / "w2")
    assert r.returncode == 1
    row = [l for l in r.stdout.splitlines() if l.startswith("add ") and " f64 " in l][0]
    assert "FAIL" in row and "'p'" in row
    r = run_py(GRAD_TABLE, "--bin", fake_bin, "--op", "nonexistent")
    assert r.returncode == 2


PRECISION_CHECK = os.path.join(HERE, "..", "mpi", "precision_check.py")


@pytest.mark.parametrize("mode", ["bf16", "autocast", "fp16"])
def test_precision_check_with_stand_in_tools(tmp_path, fake_bin, monkeypatch, mode):
    """precision_check.py's plumbing (the real runs: test/mpi/CMakeLists.txt, mpi-precision-*):
    a stand-in ds-run that trains with the oracle passes, a perturbed
    parameter or a changed loss-scale sequence fails."""
    models = tmp_path / "models"
    models.mkdir()
    torch.manual_seed(8)
    torch.jit.script(OneLinear().float()).save(str(models / "lin.pt"))
    torch.save({"x": torch.randn(6, 4, 3), "y": torch.randn(6, 4, 2)}, str(models / "lin.data.pt"))
    extra = {}
    if mode == "fp16":
        extra = {"fp16": {"initial_scale_power": 30, "loss_scale_window": 2},
                 "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 3}}}
    args = [PRECISION_CHECK, "--bin", fake_bin, "--models", models, "--model", "lin", "--mode",
            mode, "--world-size", 2, "--gas", 1, "--steps", 6, "--stages", 0, 2,
            "--launcher=", "--config-json", json.dumps(extra)]
    if mode == "fp16":
        args += ["--min-skipped", 1]
    r = run_py(*args)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PASS" in r.stdout and r.stdout.count("losses OK") == 2
    if mode == "fp16":
        assert "2^30 S" in r.stdout

    monkeypatch.setenv("FAKE_PERTURB", "0.25")
    monkeypatch.setenv("FAKE_TENSOR", "fc.bias")
    r = run_py(*args)
    assert r.returncode == 1 and "fc.bias" in r.stderr and "stage 0" in r.stderr
    monkeypatch.delenv("FAKE_PERTURB")
    if mode == "fp16":
        r = run_py(*(args[:-2] + ["--min-skipped", 7]))
        assert r.returncode == 1 and "--min-skipped" in r.stderr
