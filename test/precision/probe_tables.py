#!/usr/bin/python3
"""Checks lib/Dialect/DS/Transforms/PrecisionTables.def against LibTorch.

Run with /usr/bin/python3 (torch 1.13, CPU). For every line of the table:

  F16_NATIVE        the op runs on Half CPU tensors and returns Half;
  F16_NO_KERNEL     the op raises "... not implemented for 'Half'";
  BF16_NO_KERNEL    the op fails on BFloat16 CPU tensors (and runs in f32);
  AUTOCAST_LOWER    under torch.autocast("cpu", bfloat16), f32 inputs give a
                    bf16 result equal (bit for bit) to the op on inputs cast
                    to bf16 outside autocast;
  AUTOCAST_FP32     bf16 inputs give an f32 result equal to the op on inputs
                    cast to f32;
  AUTOCAST_PROMOTE  mixed bf16/f32 inputs give f32, all-bf16 inputs bf16.

Besides, every probed op that is in none of the autocast lists must run in
its inputs' dtype under autocast (so a list torch has but the table misses
is caught for these), and every probed op not in BF16_NO_KERNEL must have a
bf16 CPU kernel (the bf16 policy assumes one). An op of the table without a
probe here is a failure too. Exits non-zero with one line per disagreement.
"""

import re
import sys
import warnings

import torch
import torch.nn.functional as F

warnings.filterwarnings("ignore")
F32, BF16, F16 = torch.float32, torch.bfloat16, torch.float16


def idx(*values):
    return torch.tensor(values, dtype=torch.long)


# name -> (inputs(rand) -> list of args, call(*args) -> result). `rand(*shape)`
# makes an f32 tensor; the checks cast the float tensors among the args.
def _probes():
    p = {}
    p["aten::view"] = (lambda r: [r(4, 8)], lambda x: x.view(32))
    p["aten::reshape"] = (lambda r: [r(4, 8)], lambda x: x.reshape(32))
    p["aten::_reshape_alias"] = (lambda r: [r(4, 8)],
                                 lambda x: torch.ops.aten._reshape_alias(x, [32], [1]))
    p["aten::permute"] = (lambda r: [r(2, 4, 8)], lambda x: x.permute(2, 0, 1))
    p["aten::transpose"] = (lambda r: [r(4, 8)], lambda x: x.transpose(0, 1))
    p["aten::t"] = (lambda r: [r(4, 8)], lambda x: x.t())
    p["aten::contiguous"] = (lambda r: [r(4, 8)], lambda x: x.t().contiguous())
    p["aten::expand"] = (lambda r: [r(1, 8)], lambda x: x.expand(4, 8))
    p["aten::expand_as"] = (lambda r: [r(1, 8), r(4, 8)], lambda x, y: x.expand_as(y))
    p["aten::broadcast_tensors"] = (lambda r: [r(1, 8), r(4, 1)],
                                    lambda x, y: torch.broadcast_tensors(x, y)[0])
    p["aten::slice"] = (lambda r: [r(4, 8)], lambda x: x[:, 1:3])
    p["aten::select"] = (lambda r: [r(4, 8)], lambda x: x[1])
    p["aten::narrow"] = (lambda r: [r(4, 8)], lambda x: x.narrow(0, 1, 2))
    p["aten::squeeze"] = (lambda r: [r(4, 1)], lambda x: x.squeeze(1))
    p["aten::unsqueeze"] = (lambda r: [r(4)], lambda x: x.unsqueeze(1))
    p["aten::flatten"] = (lambda r: [r(4, 2, 2)], lambda x: x.flatten(1))
    p["aten::cat"] = (lambda r: [r(4), r(4)], lambda x, y: torch.cat([x, y]))
    p["aten::stack"] = (lambda r: [r(4), r(4)], lambda x, y: torch.stack([x, y]))
    p["aten::index_copy"] = (lambda r: [r(4, 3), r(2, 3)],
                             lambda x, y: torch.index_copy(x, 0, idx(0, 2), y))
    p["aten::split"] = (lambda r: [r(4)], lambda x: torch.split(x, 2)[1])
    p["aten::chunk"] = (lambda r: [r(4)], lambda x: torch.chunk(x, 2)[0])
    p["aten::repeat"] = (lambda r: [r(4)], lambda x: x.repeat(2))
    p["aten::index_select"] = (lambda r: [r(4, 8)],
                               lambda x: torch.index_select(x, 0, idx(0, 1)))
    p["aten::gather"] = (lambda r: [r(4, 8)],
                         lambda x: torch.gather(x, 1, torch.zeros(4, 1, dtype=torch.long)))
    p["aten::embedding"] = (lambda r: [r(4, 8)], lambda w: F.embedding(idx(0, 3), w))
    p["aten::masked_fill"] = (lambda r: [r(4, 4)],
                              lambda x: x.masked_fill(torch.ones(4, 4).tril() == 0, -1e4))
    p["aten::clone"] = (lambda r: [r(4)], lambda x: x.clone())
    p["aten::detach"] = (lambda r: [r(4)], lambda x: x.detach())
    p["aten::to"] = (lambda r: [r(4)], lambda x: x.to(x.dtype, copy=True))
    p["aten::zeros_like"] = (lambda r: [r(4)], lambda x: torch.zeros_like(x))
    p["aten::ones_like"] = (lambda r: [r(4)], lambda x: torch.ones_like(x))
    p["aten::empty_like"] = (lambda r: [r(4)], lambda x: torch.empty_like(x).zero_())
    p["aten::sum"] = (lambda r: [r(4, 8)], lambda x: x.sum())
    p["aten::mean"] = (lambda r: [r(4, 8)], lambda x: x.mean(1))
    p["aten::size"] = (lambda r: [r(4, 8)], lambda x: x.new_zeros(x.size(0)))
    p["aten::dim"] = (lambda r: [r(4, 8)], lambda x: x.new_zeros(x.dim()))
    p["aten::numel"] = (lambda r: [r(4, 8)], lambda x: x.new_zeros(x.numel()))

    p["aten::linear"] = (lambda r: [r(4, 8), r(16, 8), r(16)], F.linear)
    p["aten::addmm"] = (lambda r: [r(4), r(4, 8), r(8, 4)], torch.addmm)
    p["aten::mm"] = (lambda r: [r(4, 8), r(8, 4)], torch.mm)
    p["aten::bmm"] = (lambda r: [r(2, 4, 8), r(2, 8, 4)], torch.bmm)
    p["aten::matmul"] = (lambda r: [r(2, 4, 8), r(8, 4)], torch.matmul)
    p["aten::baddbmm"] = (lambda r: [r(2, 4, 4), r(2, 4, 8), r(2, 8, 4)], torch.baddbmm)
    p["aten::addbmm"] = (lambda r: [r(4, 4), r(2, 4, 8), r(2, 8, 4)], torch.addbmm)
    p["aten::conv1d"] = (lambda r: [r(1, 3, 8), r(4, 3, 3), r(4)], F.conv1d)
    p["aten::conv2d"] = (lambda r: [r(1, 3, 8, 8), r(4, 3, 3, 3), r(4)], F.conv2d)
    p["aten::conv3d"] = (lambda r: [r(1, 2, 4, 4, 4), r(3, 2, 3, 3, 3), r(3)], F.conv3d)
    p["aten::layer_norm"] = (lambda r: [r(4, 8), r(8), r(8)],
                             lambda x, w, b: F.layer_norm(x, (8,), w, b))
    p["aten::native_layer_norm"] = (
        lambda r: [r(4, 8), r(8), r(8)],
        lambda x, w, b: torch.native_layer_norm(x, (8,), w, b, 1e-5)[0])
    p["aten::softmax"] = (lambda r: [r(4, 8)], lambda x: F.softmax(x, -1))
    p["aten::log_softmax"] = (lambda r: [r(4, 8)], lambda x: F.log_softmax(x, -1))
    p["aten::gelu"] = (lambda r: [r(4, 8)], F.gelu)
    p["aten::relu"] = (lambda r: [r(4, 8)], F.relu)
    p["aten::tanh"] = (lambda r: [r(4, 8)], torch.tanh)
    p["aten::sigmoid"] = (lambda r: [r(4, 8)], torch.sigmoid)
    p["aten::silu"] = (lambda r: [r(4, 8)], F.silu)
    p["aten::exp"] = (lambda r: [r(4)], torch.exp)
    p["aten::log"] = (lambda r: [r(4)], lambda x: torch.log(x.abs() + 1))
    p["aten::sqrt"] = (lambda r: [r(4)], lambda x: torch.sqrt(x.abs()))
    p["aten::rsqrt"] = (lambda r: [r(4)], lambda x: torch.rsqrt(x.abs() + 1))
    p["aten::dropout"] = (lambda r: [r(4, 8)], lambda x: F.dropout(x, 0.5, True))
    p["aten::bernoulli"] = (lambda r: [r(4, 8)], lambda x: x.bernoulli(0.5))
    p["aten::batch_norm"] = (
        lambda r: [r(2, 4, 3, 3), r(4), r(4)],
        lambda x, w, b: F.batch_norm(x, None, None, w, b, True))
    p["aten::max_pool2d"] = (lambda r: [r(1, 3, 8, 8)], lambda x: F.max_pool2d(x, 2))
    p["aten::avg_pool2d"] = (lambda r: [r(1, 3, 8, 8)], lambda x: F.avg_pool2d(x, 2))
    p["aten::cross_entropy_loss"] = (lambda r: [r(4, 8)],
                                     lambda x: F.cross_entropy(x, idx(1, 2, 3, 0)))
    p["aten::nll_loss"] = (lambda r: [r(4, 8)],
                           lambda x: F.nll_loss(x, idx(1, 2, 3, 0)))
    p["aten::nll_loss_nd"] = (lambda r: [r(4, 8)],
                              lambda x: torch.ops.aten.nll_loss_nd(x, idx(1, 2, 3, 0)))
    p["aten::nll_loss2d"] = (lambda r: [r(1, 4, 2, 2)],
                             lambda x: F.nll_loss(x, torch.zeros(1, 2, 2, dtype=torch.long)))
    p["aten::topk"] = (lambda r: [r(4, 8)], lambda x: torch.topk(x, 2, -1)[0])
    p["aten::lerp"] = (lambda r: [r(4), r(4)], lambda x, y: torch.lerp(x, y, 0.5))
    p["aten::clamp"] = (lambda r: [r(4)], lambda x: x.clamp(-0.5, 0.5))
    p["aten::mse_loss"] = (lambda r: [r(4, 8), r(4, 8)], F.mse_loss)
    p["aten::kl_div"] = (lambda r: [r(4, 8).log_softmax(-1), r(4, 8).softmax(-1)],
                         lambda x, y: F.kl_div(x, y, reduction="batchmean"))
    p["aten::binary_cross_entropy"] = (lambda r: [r(4).sigmoid(), r(4).sigmoid()],
                                       F.binary_cross_entropy)
    p["aten::binary_cross_entropy_with_logits"] = (
        lambda r: [r(4), r(4).sigmoid()], F.binary_cross_entropy_with_logits)
    p["aten::smooth_l1_loss"] = (lambda r: [r(4), r(4)], F.smooth_l1_loss)
    p["aten::l1_loss"] = (lambda r: [r(4), r(4)], F.l1_loss)
    p["aten::huber_loss"] = (lambda r: [r(4), r(4)], F.huber_loss)
    p["aten::soft_margin_loss"] = (lambda r: [r(4), r(4)], F.soft_margin_loss)

    # Probed for the "not in any autocast list" and bf16-kernel checks only.
    p["aten::add"] = (lambda r: [r(4), r(4)], torch.add)
    p["aten::mul"] = (lambda r: [r(4), r(4)], torch.mul)
    p["aten::div"] = (lambda r: [r(4), r(4)], lambda x, y: x / (y.abs() + 1))
    p["aten::sub"] = (lambda r: [r(4), r(4)], torch.sub)
    p["aten::neg"] = (lambda r: [r(4)], torch.neg)
    p["aten::pow"] = (lambda r: [r(4)], lambda x: torch.pow(x, 2))
    p["aten::where"] = (lambda r: [r(4), r(4)], lambda x, y: torch.where(x > 0, x, y))
    p["aten::erf"] = (lambda r: [r(4)], torch.erf)
    p["aten::conv_transpose2d"] = (lambda r: [r(1, 3, 8, 8), r(3, 4, 3, 3)],
                                   F.conv_transpose2d)
    p["aten::prelu"] = (lambda r: [r(4, 3), r(3)], F.prelu)
    p["aten::group_norm"] = (lambda r: [r(2, 4, 3)], lambda x: F.group_norm(x, 2))
    p["aten::adaptive_avg_pool2d"] = (lambda r: [r(1, 3, 8, 8)],
                                      lambda x: F.adaptive_avg_pool2d(x, 1))
    p["aten::max"] = (lambda r: [r(4, 8)], lambda x: x.max(1)[0])
    p["aten::native_dropout"] = (lambda r: [r(4, 8)],
                                 lambda x: torch.native_dropout(x, 0.5, True)[0])
    p["aten::var_mean"] = (lambda r: [r(4, 8)], lambda x: torch.var_mean(x, 1)[0])
    p["aten::index_add"] = (lambda r: [r(4, 8), r(1, 8)],
                            lambda x, y: torch.index_add(x, 0, idx(0), y))
    p["aten::tril"] = (lambda r: [r(4, 4)], torch.tril)
    p["aten::triu"] = (lambda r: [r(4, 4)], torch.triu)
    p["aten::pad"] = (lambda r: [r(4, 8)], lambda x: F.pad(x, (1, 1)))
    p["aten::cumsum"] = (lambda r: [r(4)], lambda x: x.cumsum(0))
    return p


PROBES = _probes()
AUTOCAST_OTHER_EXPECTED = {
    # CPU autocast of 1.13 keeps these in the inputs' dtype (reference notes).
    "aten::softmax", "aten::log_softmax", "aten::layer_norm", "aten::sum",
    "aten::mean",
}


def read_table(path):
    lists = {}
    pattern = re.compile(r'^(F16_NATIVE|F16_NO_KERNEL|BF16_NO_KERNEL|AUTOCAST_LOWER|'
                         r'AUTOCAST_FP32|AUTOCAST_PROMOTE)\("([^"]+)"\)\s*$')
    with open(path) as f:
        for line in f:
            m = pattern.match(line.strip())
            if m:
                lists.setdefault(m.group(1), []).append(m.group(2))
    return lists


def run(name, dtype, autocast=False, mixed=False):
    """Runs probe `name` on inputs of `dtype` (mixed: the first float input
    bf16, the others f32); returns (result or None, exception text)."""
    build, call = PROBES[name]
    gen = torch.Generator().manual_seed(0)
    args = build(lambda *s: torch.randn(*s, generator=gen))
    cast = []
    for i, a in enumerate(args):
        d = (BF16 if i == 0 else F32) if mixed else dtype
        cast.append(a.to(d) if a.is_floating_point() else a)
    try:
        if autocast:
            with torch.autocast("cpu", dtype=BF16):
                return call(*cast), ""
        return call(*cast), ""
    except RuntimeError as e:
        return None, str(e).split("\n")[0]


def same(a, b):
    return a.dtype == b.dtype and torch.equal(a, b)


def main(argv):
    table = read_table(argv[1])
    failures = []
    listed = {n for names in table.values() for n in names}
    for n in sorted(listed - PROBES.keys()):
        failures.append(f"{n}: in the table but the probe script has no probe for it")

    for n in table.get("F16_NATIVE", []):
        out, err = run(n, F16)
        if out is None or out.dtype != F16:
            failures.append(f"F16_NATIVE {n}: expected a Half CPU kernel, got {err or out.dtype}")
    for n in table.get("F16_NO_KERNEL", []):
        out, err = run(n, F16)
        if "not implemented for 'Half'" not in err:
            failures.append(f"F16_NO_KERNEL {n}: ran in f16 ({out.dtype if out is not None else err})")
    for n in table.get("BF16_NO_KERNEL", []):
        # "not implemented for 'BFloat16'", or (conv_transpose2d) a bf16 path
        # that is broken where the f32 one works.
        out, err = run(n, BF16)
        ok32, err32 = run(n, F32)
        if out is not None or ok32 is None:
            failures.append(f"BF16_NO_KERNEL {n}: ran in bf16, or failed in f32 too ({err32})")
    for n in sorted(PROBES.keys() - set(table.get("BF16_NO_KERNEL", []))):
        out, err = run(n, BF16)
        if out is None:
            failures.append(f"{n}: has no bf16 CPU kernel ({err}) but is not in BF16_NO_KERNEL")

    lower = set(table.get("AUTOCAST_LOWER", []))
    fp32 = set(table.get("AUTOCAST_FP32", []))
    promote = set(table.get("AUTOCAST_PROMOTE", []))
    for n in sorted(lower):
        out, err = run(n, F32, autocast=True)
        ref, _ = run(n, BF16)
        if out is None or ref is None or not same(out, ref):
            failures.append(f"AUTOCAST_LOWER {n}: f32 inputs under autocast gave "
                            f"{err or out.dtype}, not the op on bf16 inputs")
    for n in sorted(fp32):
        out, err = run(n, BF16, autocast=True)
        ref, _ = run(n, F32 if True else None)
        # The reference: inputs made in f32, rounded to bf16, then cast back.
        build, call = PROBES[n]
        gen = torch.Generator().manual_seed(0)
        args = [a.to(BF16).to(F32) if a.is_floating_point() else a
                for a in build(lambda *s: torch.randn(*s, generator=gen))]
        ref = call(*args)
        if out is None or not same(out, ref):
            failures.append(f"AUTOCAST_FP32 {n}: bf16 inputs under autocast gave "
                            f"{err or out.dtype}, not the op on inputs cast to f32")
    for n in sorted(promote):
        out, err = run(n, F32, autocast=True, mixed=True)
        low, err2 = run(n, BF16, autocast=True)
        if out is None or out.dtype != F32 or low is None or low.dtype != BF16:
            failures.append(f"AUTOCAST_PROMOTE {n}: mixed gave {err or out.dtype}, "
                            f"bf16 gave {err2 or low.dtype}")
    for n in sorted(PROBES.keys() - lower - fp32 - promote):
        for dtype in (F32, BF16):
            out, err = run(n, dtype, autocast=True)
            if out is not None and out.is_floating_point() and out.dtype != dtype:
                failures.append(f"{n}: in no autocast list of the table, but autocast "
                                f"turned {dtype} inputs into {out.dtype}")
    for n in AUTOCAST_OTHER_EXPECTED & (lower | fp32 | promote):
        failures.append(f"{n}: LibTorch 1.13's CPU autocast leaves it alone, "
                        f"but the table lists it")

    for f in failures:
        print("FAIL", f)
    print(f"{len(listed)} table entries, {len(PROBES)} probes, {len(failures)} disagreements")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
