#!/usr/bin/env python3
"""Checks include/ds/Dialect/DS/Utils/PrecisionTables.def against the installed torch.

  probe_tables.py PrecisionTables.def [--registry AtenOps.def]     check every line (ctest)
  probe_tables.py --survey [--registry AtenOps.def]                print what torch does

Run with .venv/bin/python (torch 2.x, CPU; the tables were last probed with torch 2.15.0).
For every line of the table:

  F16_NO_KERNEL     the op fails on Half CPU tensors: its forward, or the backward autograd
                    runs for it (every backward kernel -ds-autodiff's rules call is an op of the
                    registry and probed here too), raises;
  BF16_NO_KERNEL    the same for BFloat16;
  AUTOCAST_LOWER    under torch.autocast("cpu", dtype), f32 inputs give a result of `dtype`
                    equal (bit for bit) to the op on inputs cast to `dtype` outside autocast;
  AUTOCAST_FP32     `dtype` inputs give an f32 result equal to the op on inputs cast to f32;
  AUTOCAST_PROMOTE  mixed `dtype`/f32 inputs give f32, all-`dtype` inputs `dtype`;
  FOLLOWS_INPUT     a Half / BFloat16 input with f32 weights gives a result of the input's
                    dtype (no promotion);
each autocast line for both autocast dtypes, bfloat16 and float16 (one table serves both).

Besides, every probed op not in F16_NO_KERNEL / BF16_NO_KERNEL must have a Half / BFloat16 CPU
kernel, forward and backward (the native fp16 / bf16 policies run every other op in the
engine's dtype); every probed op in none of the autocast lists must run in its inputs' dtype
under autocast, for both dtypes (one without a kernel in that dtype: f32 inputs stay f32 and
that dtype's inputs fail as outside autocast), so a list torch has but the table misses is
caught; every operator with an AutocastCPU kernel in the dispatcher whose base name is in the
registry must be probed; and every operator of the registry
(include/ds/Dialect/DS/IR/AtenOps.def) that takes a tensor must be probed, or be named in
NOT_PROBED with the reason. An op of the table without a probe is a failure too. Then the check
must be able to fail: wrong copies of the table (the first line of each list moved to the next
list, aten::linear claimed to have no Half / BFloat16 kernel) must each disagree. Exits
non-zero with one line per disagreement.

--survey runs every probe and prints, per op, what torch does (kernels per dtype, forward and
backward; the autocast behaviour for both dtypes; mixed-dtype results): the starting point for
rewriting the table after a torch upgrade.

A table entry is an operator base name (`aten::linear`, every overload) or a qualified overload
(`aten::_convolution.deprecated`, that overload only), as the pass looks them up.
"""

import argparse
import functools
import os
import re
import sys
import warnings

import torch
import torch.nn.functional as F

warnings.filterwarnings("ignore")
F32, BF16, F16 = torch.float32, torch.bfloat16, torch.float16
LOW = (BF16, F16)
NAMES = {F32: "f32", BF16: "bf16", F16: "f16"}
HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_REGISTRY = os.path.join(HERE, "..", "..", "include", "ds", "Dialect", "DS", "IR",
                                "AtenOps.def")
aten = torch.ops.aten


def idx(*values):
    return torch.tensor(values, dtype=torch.long)


def _conv_bwd(g, x, w):
    return aten.convolution_backward(g, x, w, [4], [1, 1], [0, 0], [1, 1], False, [0, 0], 1,
                                     [True, True, True])[0]


def _mha(q, wqkv, bqkv, wo, bo):
    return aten._native_multi_head_attention(q, q, q, 8, 2, wqkv, bqkv, wo, bo,
                                             need_weights=False)[0]


def _encoder_layer(src, wqkv, bqkv, wo, bo, n1w, n1b, n2w, n2b, f1w, f1b, f2w, f2b):
    return aten._transformer_encoder_layer_fwd(src, 8, 2, wqkv, bqkv, wo, bo, False, False,
                                               1e-5, n1w, n1b, n2w, n2b, f1w, f1b, f2w, f2b)


# name -> (inputs(rand) -> list of args, call(*args) -> result or tuple). `rand(*shape)` makes
# an f32 tensor; the checks cast the float tensors among the args to the probed dtype. A name
# is an operator base name, or a qualified overload when only that overload is meant.
def _probes():
    p = {}
    # data movement and metadata
    p["prim::abs"] = (lambda r: [r(4)], torch.ops.prim.abs)
    p["aten::view"] = (lambda r: [r(4, 8)], lambda x: x.view(32))
    p["aten::reshape"] = (lambda r: [r(4, 8)], lambda x: x.reshape(32))
    p["aten::_unsafe_view"] = (lambda r: [r(4, 8)], lambda x: aten._unsafe_view(x, [32]))
    p["aten::_reshape_alias"] = (lambda r: [r(4, 8)],
                                 lambda x: aten._reshape_alias(x, [32], [1]))
    p["aten::permute"] = (lambda r: [r(2, 4, 8)], lambda x: x.permute(2, 0, 1))
    p["aten::transpose"] = (lambda r: [r(4, 8)], lambda x: x.transpose(0, 1))
    p["aten::t"] = (lambda r: [r(4, 8)], lambda x: x.t())
    p["aten::flip"] = (lambda r: [r(4, 8)], lambda x: torch.flip(x, [1]))
    p["aten::roll"] = (lambda r: [r(4, 8)], lambda x: torch.roll(x, [1, -3], [0, 1]))
    p["aten::view_as"] = (lambda r: [r(4, 8)], lambda x: x.view_as(x.t().contiguous().t()))
    p["aten::reshape_as"] = (lambda r: [r(4, 8)], lambda x: x.reshape_as(x.reshape(8, 4)))
    p["aten::contiguous"] = (lambda r: [r(4, 8)], lambda x: x.t().contiguous())
    p["aten::expand"] = (lambda r: [r(1, 8)], lambda x: x.expand(4, 8))
    p["aten::expand_as"] = (lambda r: [r(1, 8), r(4, 8)], lambda x, y: x.expand_as(y))
    p["aten::expand_copy"] = (lambda r: [r(1, 8)], lambda x: aten.expand_copy(x, [4, 8]))
    p["aten::as_strided"] = (lambda r: [r(4, 8)], lambda x: x.as_strided((4, 4), (8, 2), 1))
    p["aten::diagonal"] = (lambda r: [r(4, 8)], lambda x: torch.diagonal(x, 1))
    p["aten::alias_copy"] = (lambda r: [r(4)], aten.alias_copy)
    p["aten::alias"] = (lambda r: [r(4)], aten.alias)
    p["aten::broadcast_tensors"] = (lambda r: [r(1, 8), r(4, 1)],
                                    lambda x, y: torch.broadcast_tensors(x, y)[0])
    p["aten::slice"] = (lambda r: [r(4, 8)], lambda x: x[:, 1:3])
    p["aten::select"] = (lambda r: [r(4, 8)], lambda x: x[1])
    p["aten::narrow"] = (lambda r: [r(4, 8)], lambda x: x.narrow(0, 1, 2))
    p["aten::squeeze"] = (lambda r: [r(4, 1)], lambda x: x.squeeze(1))
    p["aten::unsqueeze"] = (lambda r: [r(4)], lambda x: x.unsqueeze(1))
    p["aten::flatten"] = (lambda r: [r(4, 2, 2)], lambda x: x.flatten(1))
    p["aten::unflatten"] = (lambda r: [r(4, 8)], lambda x: x.unflatten(1, (2, 4)))
    p["aten::cat"] = (lambda r: [r(4), r(4)], lambda x, y: torch.cat([x, y]))
    p["aten::stack"] = (lambda r: [r(4), r(4)], lambda x, y: torch.stack([x, y]))
    p["aten::index_copy"] = (lambda r: [r(4, 3), r(2, 3)],
                             lambda x, y: torch.index_copy(x, 0, idx(0, 2), y))
    p["aten::split"] = (lambda r: [r(4)], lambda x: torch.split(x, 2)[1])
    p["aten::split_with_sizes"] = (lambda r: [r(4)], lambda x: x.split_with_sizes([1, 3])[1])
    p["aten::chunk"] = (lambda r: [r(4)], lambda x: torch.chunk(x, 2)[0])
    p["aten::unsafe_chunk"] = (lambda r: [r(4)], lambda x: aten.unsafe_chunk(x, 2)[0])
    p["aten::unbind"] = (lambda r: [r(2, 4)], lambda x: x.unbind(0)[1])
    p["aten::repeat"] = (lambda r: [r(4)], lambda x: x.repeat(2))
    p["aten::repeat_interleave"] = (lambda r: [r(4, 3)],
                                    lambda x: x.repeat_interleave(2, dim=1))
    p["aten::index_put"] = (lambda r: [r(4, 8), r(3, 8)],
                            lambda x, v: x.index_put((torch.tensor([0, 2, 0]),), v,
                                                     accumulate=True))
    p["aten::index_select"] = (lambda r: [r(4, 8)],
                               lambda x: torch.index_select(x, 0, idx(0, 1)))
    p["aten::index"] = (lambda r: [r(4, 8)], lambda x: x[idx(0, 2)])
    p["aten::gather"] = (lambda r: [r(4, 8)],
                         lambda x: torch.gather(x, 1, torch.zeros(4, 1, dtype=torch.long)))
    p["aten::scatter"] = (lambda r: [r(4, 8), r(4, 1)],
                          lambda x, y: x.scatter(1, torch.zeros(4, 1, dtype=torch.long), y))
    p["aten::scatter_add"] = (lambda r: [r(4, 8), r(4, 1)],
                              lambda x, y: x.scatter_add(1, torch.zeros(4, 1, dtype=torch.long),
                                                         y))
    p["aten::scatter_reduce"] = (
        lambda r: [r(4, 8), r(4, 2)],
        lambda x, y: x.scatter_reduce(1, torch.zeros(4, 2, dtype=torch.long), y, "amax"))
    p["aten::index_add"] = (lambda r: [r(4, 8), r(1, 8)],
                            lambda x, y: torch.index_add(x, 0, idx(0), y))
    p["aten::embedding"] = (lambda r: [r(4, 8)], lambda w: F.embedding(idx(0, 3), w))
    p["aten::embedding_bag"] = (
        lambda r: [r(10, 8)],
        lambda w: aten.embedding_bag(w, idx(0, 2, 4, 5, 4, 3, 2, 9), idx(0, 4), False, 1, False,
                                     None, False)[0])
    p["aten::_embedding_bag"] = (
        lambda r: [r(10, 8)],
        lambda w: aten._embedding_bag(w, idx(0, 2, 4, 5, 4, 3, 2, 9), idx(0, 4), False, 1, False,
                                      None, False, -1)[0])
    p["aten::masked_fill"] = (lambda r: [r(4, 4)],
                              lambda x: x.masked_fill(torch.ones(4, 4).tril() == 0, -1e4))
    p["aten::masked_select"] = (lambda r: [r(4, 4)],
                                lambda x: x.masked_select(torch.ones(4, 4).tril() == 0))
    p["aten::masked_scatter"] = (
        lambda r: [r(4, 4), r(16)],
        lambda x, s: x.masked_scatter(torch.ones(4, 4).tril() == 0, s))
    p["aten::where"] = (lambda r: [r(4), r(4)], lambda x, y: torch.where(x > 0, x, y))
    p["aten::tril"] = (lambda r: [r(4, 4)], torch.tril)
    p["aten::triu"] = (lambda r: [r(4, 4)], torch.triu)
    p["aten::pad"] = (lambda r: [r(4, 8)], lambda x: F.pad(x, (1, 1)))
    p["aten::constant_pad_nd"] = (lambda r: [r(4, 8)],
                                  lambda x: aten.constant_pad_nd(x, [1, 1], 0.5))
    for pad, shape, padding in (("1d", (1, 3, 8), [2, 1]), ("2d", (1, 3, 8, 8), [2, 1, 1, 2]),
                                ("3d", (1, 2, 4, 4, 4), [1, 2, 2, 1, 1, 1])):
        for kind in ("reflection", "replication"):
            p[f"aten::{kind}_pad{pad}"] = (
                lambda r, shape=shape: [r(*shape)],
                lambda x, op=getattr(aten, f"{kind}_pad{pad}"), padding=padding: op(x, padding))
    p["aten::clone"] = (lambda r: [r(4)], lambda x: x.clone())
    p["aten::detach"] = (lambda r: [r(4)], lambda x: x.detach())
    p["aten::to"] = (lambda r: [r(4)], lambda x: x.to(x.dtype, copy=True))
    p["aten::type_as"] = (lambda r: [r(4), r(4)], lambda x, y: x.type_as(y))
    p["aten::copy_"] = (lambda r: [r(4), r(4)], lambda x, y: x.clone().copy_(y))
    p["aten::fill_"] = (lambda r: [r(4)], lambda x: x.clone().fill_(2.0))
    p["aten::zero_"] = (lambda r: [r(4)], lambda x: x.clone().zero_())
    p["aten::zeros_like"] = (lambda r: [r(4)], lambda x: torch.zeros_like(x))
    p["aten::ones_like"] = (lambda r: [r(4)], lambda x: torch.ones_like(x))
    p["aten::empty_like"] = (lambda r: [r(4)], lambda x: torch.empty_like(x).zero_())
    p["aten::full_like"] = (lambda r: [r(4)], lambda x: torch.full_like(x, 2.0))
    p["aten::new_zeros"] = (lambda r: [r(4)], lambda x: x.new_zeros(3))
    p["aten::new_empty"] = (lambda r: [r(4)], lambda x: x.new_empty(3).zero_())
    p["aten::lift_fresh_copy"] = (lambda r: [r(4)], torch.ops.aten.lift_fresh_copy)
    p["aten::new_ones"] = (lambda r: [r(4)], lambda x: x.new_ones(3))
    p["aten::new_full"] = (lambda r: [r(4)], lambda x: x.new_full((3,), 2.0))
    p["aten::size"] = (lambda r: [r(4, 8)], lambda x: x.new_zeros(x.size(0)))
    p["aten::dim"] = (lambda r: [r(4, 8)], lambda x: x.new_zeros(x.dim()))
    p["aten::numel"] = (lambda r: [r(4, 8)], lambda x: x.new_zeros(x.numel()))
    p["aten::len"] = (lambda r: [r(4, 8)], lambda x: x.new_zeros(len(x)))
    p["aten::item"] = (lambda r: [r(1)], lambda x: x.new_full((1,), x.item()))
    p["aten::is_nonzero"] = (lambda r: [r(1)], lambda x: x.new_full((1,), float(x.is_nonzero())))
    p["aten::sum_to_size"] = (lambda r: [r(4, 8)], lambda x: x.sum_to_size(1, 8))
    p["aten::nonzero"] = (lambda r: [r(4)], lambda x: torch.nonzero(x > 0))
    p["aten::unique_consecutive"] = (lambda r: [r(8)],
                                     lambda x: torch.unique_consecutive(x))
    p["aten::sort"] = (lambda r: [r(8)], lambda x: torch.sort(x)[0])
    p["aten::argsort"] = (lambda r: [r(8)], torch.argsort)
    p["aten::argmax"] = (lambda r: [r(4, 8)], lambda x: torch.argmax(x, 1))
    p["aten::argmin"] = (lambda r: [r(4, 8)], lambda x: torch.argmin(x, 1))
    p["aten::topk"] = (lambda r: [r(4, 8)], lambda x: torch.topk(x, 2, -1)[0])
    # reductions
    p["aten::sum"] = (lambda r: [r(4, 8)], lambda x: x.sum())
    p["aten::mean"] = (lambda r: [r(4, 8)], lambda x: x.mean(1))
    p["aten::cumsum"] = (lambda r: [r(4)], lambda x: x.cumsum(0))
    p["aten::max"] = (lambda r: [r(4, 8)], lambda x: x.max(1)[0])
    p["aten::min"] = (lambda r: [r(4, 8)], lambda x: x.min(1)[0])
    p["aten::amax"] = (lambda r: [r(4, 8)], lambda x: x.amax(1))
    p["aten::amin"] = (lambda r: [r(4, 8)], lambda x: x.amin(1))
    p["aten::logsumexp"] = (lambda r: [r(4, 8)], lambda x: x.logsumexp(1))
    p["aten::var"] = (lambda r: [r(4, 8)], lambda x: x.var(1))
    p["aten::std"] = (lambda r: [r(4, 8)], lambda x: x.std(1))
    p["aten::var_mean"] = (lambda r: [r(4, 8)], lambda x: torch.var_mean(x, 1)[0])
    # elementwise
    p["aten::add"] = (lambda r: [r(4), r(4)], torch.add)
    p["aten::sub"] = (lambda r: [r(4), r(4)], torch.sub)
    p["aten::rsub"] = (lambda r: [r(4), r(4)], torch.rsub)
    p["aten::mul"] = (lambda r: [r(4), r(4)], torch.mul)
    p["aten::div"] = (lambda r: [r(4), r(4)], lambda x, y: x / (y.abs() + 1))
    p["aten::neg"] = (lambda r: [r(4)], torch.neg)
    p["aten::abs"] = (lambda r: [r(4)], torch.abs)
    p["aten::sgn"] = (lambda r: [r(4)], torch.sgn)
    p["aten::sign"] = (lambda r: [r(4)], torch.sign)
    p["aten::pow"] = (lambda r: [r(4)], lambda x: torch.pow(x, 2))
    p["aten::square"] = (lambda r: [r(4)], torch.square)
    p["aten::sqrt"] = (lambda r: [r(4)], lambda x: torch.sqrt(x.abs() + 1))
    p["aten::rsqrt"] = (lambda r: [r(4)], lambda x: torch.rsqrt(x.abs() + 1))
    p["aten::reciprocal"] = (lambda r: [r(4)], lambda x: torch.reciprocal(x.abs() + 1))
    p["aten::exp"] = (lambda r: [r(4)], torch.exp)
    p["aten::expm1"] = (lambda r: [r(4)], torch.expm1)
    p["aten::log1p"] = (lambda r: [r(4)], lambda x: torch.log1p(x.abs()))
    p["aten::cos"] = (lambda r: [r(4)], torch.cos)
    p["aten::sin"] = (lambda r: [r(4)], torch.sin)
    p["aten::tan"] = (lambda r: [r(4)], lambda x: torch.tan(x.tanh()))
    p["aten::sinh"] = (lambda r: [r(4)], torch.sinh)
    p["aten::cosh"] = (lambda r: [r(4)], torch.cosh)
    p["aten::asin"] = (lambda r: [r(4)], lambda x: torch.asin(x.tanh() * 0.9))
    p["aten::acos"] = (lambda r: [r(4)], lambda x: torch.acos(x.tanh() * 0.9))
    p["aten::atan"] = (lambda r: [r(4)], torch.atan)
    p["aten::asinh"] = (lambda r: [r(4)], torch.asinh)
    p["aten::acosh"] = (lambda r: [r(4)], lambda x: torch.acosh(x.abs() + 1.5))
    p["aten::atanh"] = (lambda r: [r(4)], lambda x: torch.atanh(x.tanh() * 0.9))
    p["aten::atan2"] = (lambda r: [r(4), r(4)], torch.atan2)
    p["aten::log2"] = (lambda r: [r(4)], lambda x: torch.log2(x.abs() + 1))
    p["aten::log10"] = (lambda r: [r(4)], lambda x: torch.log10(x.abs() + 1))
    p["aten::trunc"] = (lambda r: [r(4)], torch.trunc)
    p["aten::fmod"] = (lambda r: [r(4), r(4)], lambda x, y: torch.fmod(x, y.abs() + 0.5))
    p["aten::cumprod"] = (lambda r: [r(4, 8)], lambda x: torch.cumprod(x, 1))
    p["aten::prod"] = (lambda r: [r(4, 8)], lambda x: torch.prod(x, 1))
    p["aten::einsum"] = (lambda r: [r(2, 4, 8), r(8, 4)],
                         lambda x, y: torch.einsum("bij,jk->bik", x, y))
    p["aten::linalg_vector_norm"] = (lambda r: [r(4, 8)],
                                     lambda x: torch.linalg.vector_norm(x, 2, [1]))
    p["aten::cdist"] = (lambda r: [r(4, 8), r(5, 8)], torch.cdist)
    p["aten::_cdist_forward"] = (lambda r: [r(4, 8), r(5, 8)],
                                 lambda x, y: aten._cdist_forward(x, y, 2.0, None))
    p["aten::pdist"] = (lambda r: [r(4, 8)], F.pdist)
    p["aten::_pdist_forward"] = (lambda r: [r(4, 8)], lambda x: aten._pdist_forward(x, 2.0))
    p["aten::numpy_T"] = (lambda r: [r(4, 8)], lambda x: x.T * 1.0)
    p["aten::eye"] = (lambda r: [r(4)], lambda x: torch.eye(4, dtype=x.dtype) * x)
    p["aten::diff"] = (lambda r: [r(4, 8)], lambda x: torch.diff(x, dim=-1))
    p["aten::log"] = (lambda r: [r(4)], lambda x: torch.log(x.abs() + 1))
    p["aten::erf"] = (lambda r: [r(4)], torch.erf)
    p["aten::floor"] = (lambda r: [r(4)], torch.floor)
    p["aten::ceil"] = (lambda r: [r(4)], torch.ceil)
    p["aten::round"] = (lambda r: [r(4)], torch.round)
    p["aten::remainder"] = (lambda r: [r(4)], lambda x: torch.remainder(x, 0.5))
    p["aten::floor_divide"] = (lambda r: [r(4)], lambda x: torch.floor_divide(x, 0.5))
    p["aten::clamp"] = (lambda r: [r(4)], lambda x: x.clamp(-0.5, 0.5))
    p["aten::clamp_min"] = (lambda r: [r(4)], lambda x: x.clamp_min(-0.5))
    p["aten::clamp_max"] = (lambda r: [r(4)], lambda x: x.clamp_max(0.5))
    p["aten::maximum"] = (lambda r: [r(4), r(4)], torch.maximum)
    p["aten::minimum"] = (lambda r: [r(4), r(4)], torch.minimum)
    p["aten::lerp"] = (lambda r: [r(4), r(4)], lambda x, y: torch.lerp(x, y, 0.5))
    for cmp in ("eq", "ne", "lt", "le", "gt", "ge"):
        p["aten::" + cmp] = (lambda r: [r(4), r(4)],
                             lambda x, y, cmp=cmp: getattr(torch, cmp)(x, y).to(x.dtype))
    p["aten::logical_and"] = (lambda r: [r(4), r(4)],
                              lambda x, y: torch.logical_and(x, y).to(x.dtype))
    p["aten::logical_or"] = (lambda r: [r(4), r(4)],
                             lambda x, y: torch.logical_or(x, y).to(x.dtype))
    p["aten::logical_not"] = (lambda r: [r(4)], lambda x: torch.logical_not(x).to(x.dtype))
    p["aten::logical_xor"] = (lambda r: [r(4), r(4)],
                              lambda x, y: torch.logical_xor(x, y).to(x.dtype))
    p["aten::isnan"] = (lambda r: [r(4)], lambda x: torch.isnan(x.log()).to(x.dtype))
    p["aten::isinf"] = (lambda r: [r(4)], lambda x: torch.isinf(x / (x > 0)).to(x.dtype))
    p["aten::any"] = (lambda r: [r(4)], lambda x: torch.any(x).to(x.dtype))
    p["aten::all"] = (lambda r: [r(4)], lambda x: torch.all(x).to(x.dtype))
    p["aten::bitwise_and"] = (lambda r: [r(4), r(4)],
                              lambda x, y: torch.bitwise_and(x > 0, y > 0).to(x.dtype))
    p["aten::bitwise_or"] = (lambda r: [r(4), r(4)],
                             lambda x, y: torch.bitwise_or(x > 0, y > 0).to(x.dtype))
    p["aten::bitwise_xor"] = (lambda r: [r(4), r(4)],
                              lambda x, y: torch.bitwise_xor(x > 0, y > 0).to(x.dtype))
    p["aten::copy"] = (lambda r: [r(4), r(4)], lambda x, y: aten.copy(x, y))
    p["aten::fill"] = (lambda r: [r(4)], lambda x: aten.fill(x, 2.0))
    p["aten::slice_scatter"] = (lambda r: [r(4, 8), r(4, 3)],
                                lambda x, y: torch.slice_scatter(x, y, 1, 2, 5))
    p["aten::select_scatter"] = (lambda r: [r(4, 8), r(4)],
                                 lambda x, y: torch.select_scatter(x, y, 1, 2))
    p["aten::_to_copy"] = (lambda r: [r(4)], lambda x: aten._to_copy(x))
    p["aten::scalar_tensor"] = (lambda r: [r(4)], lambda x: x * aten.scalar_tensor(2.0, dtype=x.dtype))
    # activations
    p["aten::relu"] = (lambda r: [r(4, 8)], F.relu)
    p["aten::gelu"] = (lambda r: [r(4, 8)], F.gelu)
    p["aten::tanh"] = (lambda r: [r(4, 8)], torch.tanh)
    p["aten::sigmoid"] = (lambda r: [r(4, 8)], torch.sigmoid)
    p["aten::silu"] = (lambda r: [r(4, 8)], F.silu)
    p["aten::elu"] = (lambda r: [r(4, 8)], F.elu)
    p["aten::leaky_relu"] = (lambda r: [r(4, 8)], F.leaky_relu)
    p["aten::hardtanh"] = (lambda r: [r(4, 8)], F.hardtanh)
    p["aten::softplus"] = (lambda r: [r(4, 8)], F.softplus)
    p["aten::hardswish"] = (lambda r: [r(4, 8)], lambda x: F.hardswish(4 * x))
    p["aten::hardsigmoid"] = (lambda r: [r(4, 8)], lambda x: F.hardsigmoid(4 * x))
    p["aten::log_sigmoid"] = (lambda r: [r(4, 8)], F.logsigmoid)
    p["aten::prelu"] = (lambda r: [r(4, 3), r(3)], F.prelu)
    p["aten::softmax"] = (lambda r: [r(4, 8)], lambda x: F.softmax(x, -1))
    p["aten::_softmax"] = (lambda r: [r(4, 8)], lambda x: aten._softmax(x, -1, False))
    p["aten::log_softmax"] = (lambda r: [r(4, 8)], lambda x: F.log_softmax(x, -1))
    p["aten::_safe_softmax"] = (lambda r: [r(4, 8)], lambda x: aten._safe_softmax(x, -1))
    p["aten::_log_softmax"] = (lambda r: [r(4, 8)], lambda x: aten._log_softmax(x, -1, False))
    # linear algebra, convolution, attention
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
    p["aten::conv_transpose2d"] = (lambda r: [r(1, 3, 8, 8), r(3, 4, 3, 3)],
                                   F.conv_transpose2d)
    p["aten::im2col"] = (lambda r: [r(1, 3, 8, 8)],
                         lambda x: aten.im2col(x, [2, 2], [1, 1], [0, 0], [2, 2]))
    p["aten::col2im"] = (lambda r: [r(1, 12, 16)],
                         lambda x: aten.col2im(x, [8, 8], [2, 2], [1, 1], [0, 0], [2, 2]))
    p["aten::convolution"] = (
        lambda r: [r(1, 3, 8, 8), r(4, 3, 3, 3), r(4)],
        lambda x, w, b: aten.convolution(x, w, b, [1, 1], [0, 0], [1, 1], False, [0, 0], 1))
    p["aten::_convolution"] = (
        lambda r: [r(1, 3, 8, 8), r(4, 3, 3, 3), r(4)],
        lambda x, w, b: aten._convolution(x, w, b, [1, 1], [0, 0], [1, 1], False, [0, 0], 1,
                                          False, False, True, True))
    p["aten::_convolution.deprecated"] = (
        lambda r: [r(1, 3, 8, 8), r(4, 3, 3, 3), r(4)],
        lambda x, w, b: aten._convolution.deprecated(x, w, b, [1, 1], [0, 0], [1, 1], False,
                                                     [0, 0], 1, False, False, True))
    p["aten::scaled_dot_product_attention"] = (
        lambda r: [r(2, 2, 4, 8), r(2, 2, 4, 8), r(2, 2, 4, 8)],
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    p["aten::_scaled_dot_product_flash_attention_for_cpu"] = (
        lambda r: [r(2, 2, 4, 8), r(2, 2, 4, 8), r(2, 2, 4, 8)],
        lambda q, k, v: aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, True)[0])
    p["aten::_native_multi_head_attention"] = (
        lambda r: [r(2, 4, 8), r(24, 8), r(24), r(8, 8), r(8)], _mha)
    p["aten::_transformer_encoder_layer_fwd"] = (
        lambda r: [r(2, 4, 8), r(24, 8), r(24), r(8, 8), r(8), r(8), r(8), r(8), r(8),
                   r(16, 8), r(16), r(8, 16), r(8)], _encoder_layer)
    # normalization, dropout, pooling
    p["aten::layer_norm"] = (lambda r: [r(4, 8), r(8), r(8)],
                             lambda x, w, b: F.layer_norm(x, (8,), w, b))
    p["aten::native_layer_norm"] = (
        lambda r: [r(4, 8), r(8), r(8)],
        lambda x, w, b: torch.native_layer_norm(x, (8,), w, b, 1e-5)[0])
    p["aten::rms_norm"] = (lambda r: [r(4, 8), r(8)], lambda x, w: F.rms_norm(x, (8,), w))
    p["aten::group_norm"] = (lambda r: [r(2, 4, 3), r(4), r(4)],
                             lambda x, w, b: F.group_norm(x, 2, w, b))
    p["aten::native_group_norm"] = (
        lambda r: [r(2, 4, 3), r(4), r(4)],
        lambda x, w, b: aten.native_group_norm(x, w, b, 2, 4, 3, 2, 1e-5)[0])
    p["aten::batch_norm"] = (
        lambda r: [r(2, 4, 3, 3), r(4), r(4)],
        lambda x, w, b: F.batch_norm(x, None, None, w, b, True))
    p["aten::native_batch_norm"] = (
        lambda r: [r(2, 4, 3, 3), r(4), r(4)],
        lambda x, w, b: torch.native_batch_norm(x, w, b, None, None, True, 0.1, 1e-5)[0])
    p["aten::_native_batch_norm_legit_functional"] = (
        lambda r: [r(2, 4, 3, 3), r(4), r(4)],
        lambda x, w, b: aten._native_batch_norm_legit_functional(
            x, w, b, torch.zeros(4, dtype=x.dtype), torch.ones(4, dtype=x.dtype), True, 0.1,
            1e-5)[0])
    p["aten::_native_batch_norm_legit_no_training"] = (
        lambda r: [r(2, 4, 3, 3), r(4), r(4)],
        lambda x, w, b: aten._native_batch_norm_legit_no_training(
            x, w, b, torch.zeros(4, dtype=x.dtype), torch.ones(4, dtype=x.dtype), 0.1,
            1e-5)[0])
    p["aten::_native_batch_norm_legit.no_stats"] = (
        lambda r: [r(2, 4, 3, 3), r(4), r(4)],
        lambda x, w, b: aten._native_batch_norm_legit.no_stats(x, w, b, True, 0.1, 1e-5)[0])
    p["aten::instance_norm"] = (lambda r: [r(2, 4, 3), r(4), r(4)],
                                lambda x, w, b: F.instance_norm(x, weight=w, bias=b))
    p["aten::dropout"] = (lambda r: [r(4, 8)], lambda x: F.dropout(x, 0.5, True))
    p["aten::native_dropout"] = (lambda r: [r(4, 8)],
                                 lambda x: torch.native_dropout(x, 0.5, True)[0])
    p["aten::bernoulli"] = (lambda r: [r(4, 8)], lambda x: x.bernoulli(0.5))
    p["aten::max_pool1d"] = (lambda r: [r(1, 3, 8)], lambda x: F.max_pool1d(x, 2))
    p["aten::max_pool2d"] = (lambda r: [r(1, 3, 8, 8)], lambda x: F.max_pool2d(x, 2))
    p["aten::max_pool2d_with_indices"] = (
        lambda r: [r(1, 3, 8, 8)], lambda x: aten.max_pool2d_with_indices(x, [2, 2])[0])
    p["aten::avg_pool1d"] = (lambda r: [r(1, 3, 8)], lambda x: F.avg_pool1d(x, 2))
    p["aten::avg_pool2d"] = (lambda r: [r(1, 3, 8, 8)], lambda x: F.avg_pool2d(x, 2))
    p["aten::adaptive_avg_pool1d"] = (lambda r: [r(2, 3, 7)], lambda x: F.adaptive_avg_pool1d(x, 3))
    p["aten::adaptive_avg_pool2d"] = (lambda r: [r(1, 3, 8, 8)],
                                      lambda x: F.adaptive_avg_pool2d(x, 1))
    p["aten::_adaptive_avg_pool2d"] = (lambda r: [r(1, 3, 8, 8)],
                                       lambda x: aten._adaptive_avg_pool2d(x, [1, 1]))
    p["aten::max_pool3d"] = (lambda r: [r(1, 2, 4, 4, 4)], lambda x: F.max_pool3d(x, 2))
    p["aten::max_pool3d_with_indices"] = (
        lambda r: [r(1, 2, 4, 4, 4)], lambda x: aten.max_pool3d_with_indices(x, [2, 2, 2])[0])
    p["aten::avg_pool3d"] = (lambda r: [r(1, 2, 4, 4, 4)], lambda x: F.avg_pool3d(x, 2))
    p["aten::adaptive_avg_pool3d"] = (lambda r: [r(1, 2, 4, 4, 4)],
                                      lambda x: F.adaptive_avg_pool3d(x, 1))
    p["aten::_adaptive_avg_pool3d"] = (lambda r: [r(1, 2, 4, 4, 4)],
                                       lambda x: aten._adaptive_avg_pool3d(x, [1, 1, 1]))
    # resampling
    p["aten::upsample_nearest2d"] = (lambda r: [r(1, 3, 4, 4)],
                                     lambda x: aten.upsample_nearest2d(x, [8, 8]))
    p["aten::upsample_bilinear2d"] = (lambda r: [r(1, 3, 4, 4)],
                                      lambda x: aten.upsample_bilinear2d(x, [8, 8], False))
    p["aten::grid_sampler"] = (lambda r: [r(1, 3, 8, 8), r(1, 4, 4, 2).tanh()],
                               lambda x, g: aten.grid_sampler(x, g, 0, 0, False))
    p["aten::grid_sampler_2d"] = (lambda r: [r(1, 3, 8, 8), r(1, 4, 4, 2).tanh()],
                                  lambda x, g: aten.grid_sampler_2d(x, g, 0, 0, False))
    # losses
    p["aten::mse_loss"] = (lambda r: [r(4, 8), r(4, 8)], F.mse_loss)
    p["aten::cross_entropy_loss"] = (lambda r: [r(4, 8)],
                                     lambda x: F.cross_entropy(x, idx(1, 2, 3, 0)))
    p["aten::nll_loss"] = (lambda r: [r(4, 8)],
                           lambda x: F.nll_loss(x, idx(1, 2, 3, 0)))
    p["aten::nll_loss_nd"] = (lambda r: [r(4, 8)],
                              lambda x: aten.nll_loss_nd(x, idx(1, 2, 3, 0)))
    p["aten::nll_loss2d"] = (lambda r: [r(1, 4, 2, 2)],
                             lambda x: F.nll_loss(x, torch.zeros(1, 2, 2, dtype=torch.long)))
    p["aten::nll_loss_forward"] = (
        lambda r: [r(4, 8)], lambda x: aten.nll_loss_forward(x, idx(1, 2, 3, 0), None, 1, -100)[0])
    p["aten::nll_loss2d_forward"] = (
        lambda r: [r(1, 4, 2, 2)],
        lambda x: aten.nll_loss2d_forward(x, torch.zeros(1, 2, 2, dtype=torch.long), None, 1,
                                          -100)[0])
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
    # backward kernels the gradient rules call
    p["aten::gelu_backward"] = (lambda r: [r(4, 8), r(4, 8)], aten.gelu_backward)
    p["aten::tanh_backward"] = (lambda r: [r(4, 8), r(4, 8)], aten.tanh_backward)
    p["aten::sigmoid_backward"] = (lambda r: [r(4, 8), r(4, 8)], aten.sigmoid_backward)
    p["aten::silu_backward"] = (lambda r: [r(4, 8), r(4, 8)], aten.silu_backward)
    p["aten::threshold_backward"] = (lambda r: [r(4, 8), r(4, 8)],
                                     lambda g, x: aten.threshold_backward(g, x, 0))
    p["aten::elu_backward"] = (lambda r: [r(4, 8), r(4, 8)],
                               lambda g, x: aten.elu_backward(g, 1.0, 1.0, 1.0, False, x))
    p["aten::leaky_relu_backward"] = (
        lambda r: [r(4, 8), r(4, 8)], lambda g, x: aten.leaky_relu_backward(g, x, 0.01, False))
    p["aten::hardtanh_backward"] = (lambda r: [r(4, 8), r(4, 8)],
                                    lambda g, x: aten.hardtanh_backward(g, x, -1.0, 1.0))
    p["aten::hardswish_backward"] = (lambda r: [r(4, 8), r(4, 8)],
                                     lambda g, x: aten.hardswish_backward(g, 4 * x))
    p["aten::hardsigmoid_backward"] = (lambda r: [r(4, 8), r(4, 8)],
                                       lambda g, x: aten.hardsigmoid_backward(g, 4 * x))
    p["aten::softplus_backward"] = (lambda r: [r(4, 8), r(4, 8)],
                                    lambda g, x: aten.softplus_backward(g, x, 1.0, 20.0))
    p["aten::_softmax_backward_data"] = (
        lambda r: [r(4, 8), r(4, 8).softmax(-1)],
        lambda g, y: aten._softmax_backward_data(g, y, -1, y.dtype))
    p["aten::_log_softmax_backward_data"] = (
        lambda r: [r(4, 8), r(4, 8).log_softmax(-1)],
        lambda g, y: aten._log_softmax_backward_data(g, y, -1, y.dtype))
    p["aten::_scaled_dot_product_flash_attention_for_cpu_backward"] = (
        lambda r: [r(2, 2, 4, 8), r(2, 2, 4, 8), r(2, 2, 4, 8), r(2, 2, 4, 8)],
        lambda g, q, k, v: aten._scaled_dot_product_flash_attention_for_cpu_backward(
            g, q, k, v, *aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, True),
            0.0, True)[0])
    p["aten::native_layer_norm_backward"] = (
        lambda r: [r(4, 8), r(4, 8), r(8), r(8)],
        lambda g, x, w, b: aten.native_layer_norm_backward(
            g, x, [8], *torch.native_layer_norm(x, [8], w, b, 1e-5)[1:], w, b,
            [True, True, True])[0])
    p["aten::native_batch_norm_backward"] = (
        lambda r: [r(2, 4, 3), r(2, 4, 3), r(4), r(4)],
        lambda g, x, w, b: aten.native_batch_norm_backward(
            g, x, w, None, None, *torch.native_batch_norm(x, w, b, None, None, True, 0.1,
                                                          1e-5)[1:],
            True, 1e-5, [True, True, True])[0])
    p["aten::native_group_norm_backward"] = (
        lambda r: [r(2, 4, 3), r(2, 4, 3), r(4), r(4)],
        lambda g, x, w, b: aten.native_group_norm_backward(
            g, x, *aten.native_group_norm(x, w, b, 2, 4, 3, 2, 1e-5)[1:], w, 2, 4, 3, 2,
            [True, True, True])[0])
    p["aten::convolution_backward"] = (lambda r: [r(1, 4, 6, 6), r(1, 3, 8, 8), r(4, 3, 3, 3)],
                                       _conv_bwd)
    p["aten::native_dropout_backward"] = (
        lambda r: [r(4, 8)],
        lambda g: aten.native_dropout_backward(g, torch.ones(4, 8, dtype=torch.bool), 2.0))
    p["aten::embedding_dense_backward"] = (
        lambda r: [r(2, 8)], lambda g: aten.embedding_dense_backward(g, idx(0, 3), 4, -1, False))
    p["aten::_embedding_bag_dense_backward"] = (
        lambda r: [r(2, 8), r(10, 8)],
        lambda g, w: aten._embedding_bag_dense_backward(
            g, idx(0, 2, 4, 5, 4, 3, 2, 9),
            *aten._embedding_bag(w, idx(0, 2, 4, 5, 4, 3, 2, 9), idx(0, 4), False, 1, False,
                                 None, False, -1)[1:],
            10, False, 1, None, -1))
    p["aten::_embedding_bag_backward"] = (
        lambda r: [r(2, 8), r(10, 8)],
        lambda g, w: aten._embedding_bag_backward(
            g, idx(0, 2, 4, 5, 4, 3, 2, 9), idx(0, 4),
            *aten._embedding_bag(w, idx(0, 2, 4, 5, 4, 3, 2, 9), idx(0, 4), False, 0, False,
                                 None, False, -1)[1:],
            10, False, 0, False, None, -1))
    p["aten::index_select_backward"] = (
        lambda r: [r(2, 8)], lambda g: aten.index_select_backward(g, [4, 8], 0, idx(0, 1)))
    p["aten::select_backward"] = (lambda r: [r(8)],
                                  lambda g: aten.select_backward(g, [4, 8], 0, 1))
    p["aten::slice_backward"] = (lambda r: [r(2, 8)],
                                 lambda g: aten.slice_backward(g, [4, 8], 0, 1, 3, 1))
    p["aten::diagonal_backward"] = (lambda r: [r(4)],
                                    lambda g: aten.diagonal_backward(g, [4, 8], 1, 0, 1))
    p["aten::max_pool2d_with_indices_backward"] = (
        lambda r: [r(1, 3, 4, 4), r(1, 3, 8, 8)],
        lambda g, x: aten.max_pool2d_with_indices_backward(
            g, x, [2, 2], [2, 2], [0, 0], [1, 1], False,
            aten.max_pool2d_with_indices(x, [2, 2])[1]))
    p["aten::max_pool3d_with_indices_backward"] = (
        lambda r: [r(1, 2, 2, 2, 2), r(1, 2, 4, 4, 4)],
        lambda g, x: aten.max_pool3d_with_indices_backward(
            g, x, [2, 2, 2], [2, 2, 2], [0, 0, 0], [1, 1, 1], False,
            aten.max_pool3d_with_indices(x, [2, 2, 2])[1]))
    p["aten::avg_pool2d_backward"] = (
        lambda r: [r(1, 3, 4, 4), r(1, 3, 8, 8)],
        lambda g, x: aten.avg_pool2d_backward(g, x, [2, 2], [2, 2], [0, 0], False, True, None))
    p["aten::avg_pool3d_backward"] = (
        lambda r: [r(1, 2, 2, 2, 2), r(1, 2, 4, 4, 4)],
        lambda g, x: aten.avg_pool3d_backward(g, x, [2, 2, 2], [2, 2, 2], [0, 0, 0], False, True,
                                              None))
    p["aten::_adaptive_avg_pool2d_backward"] = (
        lambda r: [r(1, 3, 1, 1), r(1, 3, 8, 8)], aten._adaptive_avg_pool2d_backward)
    p["aten::_adaptive_avg_pool3d_backward"] = (
        lambda r: [r(1, 2, 1, 1, 1), r(1, 2, 4, 4, 4)], aten._adaptive_avg_pool3d_backward)
    p["aten::upsample_nearest2d_backward"] = (
        lambda r: [r(1, 3, 8, 8)],
        lambda g: aten.upsample_nearest2d_backward(g, [8, 8], [1, 3, 4, 4]))
    p["aten::upsample_bilinear2d_backward"] = (
        lambda r: [r(1, 3, 8, 8)],
        lambda g: aten.upsample_bilinear2d_backward(g, [8, 8], [1, 3, 4, 4], False))
    p["aten::grid_sampler_2d_backward"] = (
        lambda r: [r(1, 3, 4, 4), r(1, 3, 8, 8), r(1, 4, 4, 2).tanh()],
        lambda g, x, grid: aten.grid_sampler_2d_backward(g, x, grid, 0, 0, False,
                                                         [True, True])[0])
    for pad, shape, padding in (("1d", (1, 3, 8), [2, 1]), ("2d", (1, 3, 8, 8), [2, 1, 1, 2]),
                                ("3d", (1, 2, 4, 4, 4), [1, 2, 2, 1, 1, 1])):
        for kind in ("reflection", "replication"):
            fwd = getattr(aten, f"{kind}_pad{pad}")
            p[f"aten::{kind}_pad{pad}_backward"] = (
                lambda r, shape=shape, fwd=fwd, padding=padding: [
                    r(*fwd(torch.empty(shape), padding).shape), r(*shape)],
                lambda g, x, op=getattr(aten, f"{kind}_pad{pad}_backward"), padding=padding:
                    op(g, x, padding))
    p["aten::_cdist_backward"] = (
        lambda r: [r(4, 5), r(4, 8), r(5, 8)],
        lambda g, x, y: aten._cdist_backward(g, x, y, 2.0, aten._cdist_forward(x, y, 2.0, None)))
    p["aten::_pdist_backward"] = (
        lambda r: [r(6), r(4, 8)],
        lambda g, x: aten._pdist_backward(g, x, 2.0, aten._pdist_forward(x, 2.0)))
    p["aten::mse_loss_backward"] = (lambda r: [r(()), r(4, 8), r(4, 8)],
                                    lambda g, x, y: aten.mse_loss_backward(g, x, y, 1))
    p["aten::nll_loss_backward"] = (
        lambda r: [r(()), r(4, 8)],
        lambda g, x: aten.nll_loss_backward(g, x, idx(1, 2, 3, 0), None, 1, -100,
                                            torch.tensor(4.0, dtype=x.dtype)))
    p["aten::nll_loss2d_backward"] = (
        lambda r: [r(()), r(1, 4, 2, 2)],
        lambda g, x: aten.nll_loss2d_backward(g, x, torch.zeros(1, 2, 2, dtype=torch.long), None,
                                              1, -100, torch.tensor(4.0, dtype=x.dtype)))
    return p


PROBES = _probes()

# Registry operators (base names) no probe needs: they take no tensor, or no float tensor
# operand reaches them in a model (-ds-assign-precision never changes their dtypes), or they
# make tensors of an explicit dtype.
NOT_PROBED = {
    "aten::Bool": "scalar conversion", "aten::Float": "scalar conversion",
    "aten::Int": "scalar conversion", "aten::ScalarImplicit": "scalar conversion",
    "aten::__and__": "bool/int only", "aten::__or__": "bool/int only",
    "aten::__not__": "bool", "aten::__is__": "identity", "aten::__isnot__": "identity",
    "aten::__getitem__": "list", "aten::_set_item": "dict", "aten::append": "list",
    "aten::format": "string", "aten::floordiv": "scalars",
    "aten::bitwise_not": "integer / bool tensors only",
    "aten::one_hot": "integer tensors only",
    "aten::arange": "factory: the dtype argument decides",
    "aten::tensor": "factory: the dtype argument decides",
    "aten::zeros": "factory: the dtype argument decides",
    "aten::ones": "factory: the dtype argument decides",
    "aten::full": "factory: the dtype argument decides",
    "aten::empty": "factory: the dtype argument decides",
    "prim::NumToTensor": "from a scalar (no tensor operand)",
    "prim::index": "of a device", "prim::max": "scalars and lists",
    "prim::min": "scalars and lists",
}

# AUTOCAST_LOWER ops whose autocast result has the autocast dtype but not the bits of the op on
# inputs cast by hand: fused kernels that autocast reaches op by op inside.
LOWER_OTHER_BITS = {
    "aten::_transformer_encoder_layer_fwd":
        "TransformerEncoderLayer's inference fast path (no derivative); nn modules never take it "
        "under autocast, and the pass casts its inputs as for the other lower-precision ops",
}

# The table's lists, in the order of PrecisionTables.def.
LISTS = ("F16_NO_KERNEL", "BF16_NO_KERNEL", "AUTOCAST_LOWER", "AUTOCAST_FP32",
         "AUTOCAST_PROMOTE", "FOLLOWS_INPUT")


def read_table(path):
    lists = {}
    pattern = re.compile(r'^(' + "|".join(LISTS) + r')\("([^"]+)"\)\s*$')
    with open(path) as f:
        for line in f:
            m = pattern.match(line.strip())
            if m:
                lists.setdefault(m.group(1), []).append(m.group(2))
    return lists


def read_registry(path):
    """The base names of the operators ds.aten accepts (AtenOps.def)."""
    names = set()
    with open(path) as f:
        for line in f:
            m = re.match(r'\s*DS_ATEN_OP\("([^"]+)"', line)
            if m:
                names.add(base_name(m.group(1)))
    return names


def base_name(op):
    """aten::add.Tensor -> aten::add; in-place aten::relu_ -> aten::relu (same kernels)."""
    head, _, tail = op.partition("::")
    tail = tail.split(".")[0]
    if tail.endswith("_") and not tail.endswith("__") and tail not in ("copy_", "fill_", "zero_"):
        tail = tail[:-1]
    return head + "::" + tail


def _args(name, dtype, mixed=False, grad=False):
    build, _ = PROBES[name]
    gen = torch.Generator().manual_seed(0)
    args = build(lambda *s: torch.randn(*s, generator=gen))
    out = []
    for i, a in enumerate(args):
        if a.is_floating_point():
            d = (mixed if i == 0 else F32) if mixed else dtype
            a = a.to(d)
            if grad:
                a = a.detach().requires_grad_(True)
        out.append(a)
    return out


def _outputs(result):
    items = result if isinstance(result, (tuple, list)) else [result]
    return [t for t in items if isinstance(t, torch.Tensor)]


def run(name, dtype, autocast=None, mixed=False):
    """Runs probe `name` on inputs of `dtype` (mixed=LOW: the first float input LOW, the others
    f32), under torch.autocast("cpu", autocast) when given; returns (result or None, error)."""
    _, call = PROBES[name]
    args = _args(name, dtype, mixed)
    try:
        if autocast is not None:
            with torch.autocast("cpu", dtype=autocast):
                return call(*args), ""
        return call(*args), ""
    except (RuntimeError, NotImplementedError, TypeError) as e:
        return None, str(e).split("\n")[0]


@functools.lru_cache(maxsize=None)
def kernel(name, dtype):
    """Whether `name` runs on `dtype` CPU tensors, forward and (when its result is
    differentiable in f32) backward: (ok, what failed)."""
    _, call = PROBES[name]
    try:
        result = call(*_args(name, dtype))
    except (RuntimeError, NotImplementedError) as e:
        return False, "forward: " + str(e).split("\n")[0]
    for t in _outputs(result):
        if t.is_floating_point() and t.dtype != dtype:
            return False, f"forward returned {t.dtype}"
    if dtype != F32 and not kernel_backward(name, F32)[0]:
        return True, ""  # no backward to probe (random, integer-valued, inference only)
    return kernel_backward(name, dtype)


def kernel_backward(name, dtype):
    """The backward autograd runs for `name` on `dtype` inputs: (ok, what failed)."""
    _, call = PROBES[name]
    args = _args(name, dtype, grad=True)
    try:
        outs = _outputs(call(*args))
        leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
        diff = [t for t in outs if t.requires_grad]
        if not diff or not leaves:
            return True, ""
        grads = torch.autograd.grad(diff, leaves, [torch.ones_like(t) for t in diff],
                                    allow_unused=True)
    except (RuntimeError, NotImplementedError) as e:
        return False, "backward: " + str(e).split("\n")[0]
    for g in grads:
        if g is not None and g.dtype != dtype:
            return False, f"backward returned {g.dtype}"
    return True, ""


def same(a, b):
    a, b = _outputs(a)[0], _outputs(b)[0]
    return a.dtype == b.dtype and torch.equal(a, b)


def float_dtype(result):
    outs = [t for t in _outputs(result) if t.is_floating_point()]
    return outs[0].dtype if outs else None


def autocast_registered(name):
    """Whether the dispatcher has an AutocastCPU kernel for the overload probe `name` calls (a
    base name probes the default overload, registered under the base name)."""
    return name in torch._C._dispatch_get_registrations_for_dispatch_key("AutocastCPU")


@functools.lru_cache(maxsize=None)
def autocast_behaviour(name, low):
    """What torch.autocast("cpu", low) does with `name`: "lower", "fp32", "promote" (an
    AutocastCPU kernel that casts mixed inputs to the widest), "none" (runs in its inputs'
    dtype, or fails on `low` inputs as it does outside autocast; mixed inputs follow ordinary
    type promotion) or a description of something else."""
    f32, e1 = run(name, F32, autocast=low)
    lo, e2 = run(name, low, autocast=low)
    if f32 is not None and lo is None and float_dtype(f32) == F32 and run(name, low)[0] is None:
        return "none"  # untouched by autocast; fails in `low` as outside it (no `low` kernel)
    if f32 is None or lo is None:
        return f"fails under autocast ({e1 or e2})"
    d32, dlo = float_dtype(f32), float_dtype(lo)
    if d32 is None:
        return "none"
    if d32 == low and dlo == low:
        ref, _ = run(name, low)
        return "lower" if ref is not None and same(f32, ref) else "lower (other bits)"
    if d32 == F32 and dlo == F32:
        # the reference: inputs made in f32, rounded to `low`, then cast back
        _, call = PROBES[name]
        args = [a.to(F32) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                for a in _args(name, low)]
        return "fp32" if same(lo, call(*args)) else "fp32 (other bits)"
    if d32 == F32 and dlo == low:
        if not autocast_registered(name):
            return "none"
        mixed, err = run(name, F32, autocast=low, mixed=low)
        dmix = float_dtype(mixed) if mixed is not None else err
        return "promote" if dmix == F32 else f"an AutocastCPU kernel, mixed inputs give {dmix}"
    return f"f32 -> {NAMES.get(d32, d32)}, {NAMES[low]} -> {NAMES.get(dlo, dlo)}"


@functools.lru_cache(maxsize=None)
def follows_input(name, low):
    """The dtype of the first result for a `low` input with f32 weights (None: it failed)."""
    out, err = run(name, F32, mixed=low)
    return (float_dtype(out) if out is not None else None), err


def survey(registry):
    print(f"torch {torch.__version__}")
    print(f"{'op':44} {'f16 kernel':12} {'bf16 kernel':12} {'autocast bf16':14} "
          f"{'autocast f16':14} mixed-input result")
    for n in sorted(PROBES):
        cols = []
        for d in (F16, BF16):
            ok, err = kernel(n, d)
            cols.append("yes" if ok else "NO")
            if not ok:
                cols[-1] += " (" + err[:60] + ")"
        ac = [autocast_behaviour(n, d) for d in LOW]
        mixed = [follows_input(n, d)[0] for d in LOW]
        print(f"{n:44} {cols[0]:12} {cols[1]:12} {ac[0]:14} {ac[1]:14} "
              f"{[NAMES.get(m, m) for m in mixed]}")
    regs = sorted(torch._C._dispatch_get_registrations_for_dispatch_key("AutocastCPU"))
    print("AutocastCPU kernels of registry operators:",
          ", ".join(r for r in regs if base_name(r) in registry))
    missing = sorted(n for n in registry - {base_name(p) for p in PROBES} - NOT_PROBED.keys())
    print("registry operators without a probe:", ", ".join(missing) or "none")


def check(table, registry):
    failures = []
    listed = {n for names in table.values() for n in names}
    for n in sorted(listed - PROBES.keys()):
        failures.append(f"{n}: in the table but the probe script has no probe for it")
    probed_bases = {base_name(p) for p in PROBES}
    for n in sorted(registry - probed_bases - NOT_PROBED.keys()):
        failures.append(f"{n}: an operator of the registry without a probe (add one, or name it "
                        "in NOT_PROBED with the reason)")
    for r in sorted(torch._C._dispatch_get_registrations_for_dispatch_key("AutocastCPU")):
        if base_name(r) in registry and r not in PROBES and base_name(r) not in PROBES:
            failures.append(f"{r}: has an AutocastCPU kernel but no probe")

    for lst, dtype in (("F16_NO_KERNEL", F16), ("BF16_NO_KERNEL", BF16)):
        missing = set(table.get(lst, []))
        for n in sorted(missing & PROBES.keys()):
            ok, _ = kernel(n, dtype)
            if ok:
                failures.append(f"{lst} {n}: runs in {NAMES[dtype]}, forward and backward")
        for n in sorted(PROBES.keys() - missing):
            ok, err = kernel(n, dtype)
            if not ok:
                failures.append(f"{n}: no {NAMES[dtype]} CPU kernel ({err}) but not in {lst}")

    expected = {}
    for lst, what in (("AUTOCAST_LOWER", "lower"), ("AUTOCAST_FP32", "fp32"),
                      ("AUTOCAST_PROMOTE", "promote")):
        for n in table.get(lst, []):
            expected[n] = what
    for n in sorted(PROBES):
        want = expected.get(n, "none")
        for low in LOW:
            got = autocast_behaviour(n, low)
            if got == "lower (other bits)" and want == "lower" and n in LOWER_OTHER_BITS:
                continue
            if got != want:
                where = f"AUTOCAST_{want.upper()} {n}" if want != "none" else \
                    f"{n} (in no autocast list)"
                failures.append(f"{where}: torch.autocast(\"cpu\", {NAMES[low]}): {got}")

    for n in table.get("FOLLOWS_INPUT", []):
        if n not in PROBES:
            continue
        for low in LOW:
            got, err = follows_input(n, low)
            if got != low:
                failures.append(f"FOLLOWS_INPUT {n}: a {NAMES[low]} input with f32 weights gave "
                                f"{NAMES.get(got, err)}")
    return listed, failures


def mutations(table):
    """Wrong copies of `table`: the first line of each non-empty list moved to the next list,
    and a kernel claimed missing in each dtype. Each must fail the check."""
    out = []
    for i, lst in enumerate(LISTS):
        if table.get(lst):
            wrong = {k: list(v) for k, v in table.items()}
            name = wrong[lst].pop(0)
            other = LISTS[(i + 1) % len(LISTS)]
            wrong.setdefault(other, []).append(name)
            out.append((f"{lst} {name} moved to {other}", wrong))
    for lst in ("F16_NO_KERNEL", "BF16_NO_KERNEL"):
        wrong = {k: list(v) for k, v in table.items()}
        wrong.setdefault(lst, []).append("aten::linear")
        out.append((f"{lst} aten::linear added", wrong))
    return out


def main(argv=None):
    p = argparse.ArgumentParser(prog="probe_tables.py", description=__doc__.splitlines()[0])
    p.add_argument("table", nargs="?", help="PrecisionTables.def")
    p.add_argument("--registry", default=DEFAULT_REGISTRY, help="AtenOps.def")
    p.add_argument("--survey", action="store_true", help="print what torch does, check nothing")
    args = p.parse_args(argv)
    registry = read_registry(args.registry)
    if args.survey:
        survey(registry)
        return 0
    if not args.table:
        p.error("give PrecisionTables.def (or --survey)")
    table = read_table(args.table)
    listed, failures = check(table, registry)
    for f in failures:
        print("FAIL", f)
    print(f"torch {torch.__version__}: {len(listed)} table entries, {len(PROBES)} probes, "
          f"{len(registry)} registry operators, {len(failures)} disagreements")
    # The check must be able to fail: wrong copies of the table must disagree.
    undetected = [what for what, wrong in mutations(table) if not check(wrong, registry)[1]]
    for what in undetected:
        print(f"FAIL a wrong table passes the check ({what})")
    if not undetected:
        print(f"every wrong copy of the table fails ({len(mutations(table))} tried)")
    return 1 if failures or undetected else 0


if __name__ == "__main__":
    sys.exit(main())
