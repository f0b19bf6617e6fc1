#!/usr/bin/env python3
"""Writes the TorchScript test models, their data files and a manifest.

Usage: .venv/bin/python test/models/make_models.py OUTDIR

For every model NAME this writes
  OUTDIR/NAME.pt        TorchScript archive (torch.jit.script(...).save; traced_mlp uses torch.jit.trace)
  OUTDIR/NAME.data.pt   torch.save'd dict, one tensor per forward argument, keyed by argument name,
                        shaped [S, B, ...] (S micro-steps, B global micro-batch); unbatched
                        arguments are shaped [S, ...]; integer targets are int64
and OUTDIR/manifest.json:
  {"NAME": {"inputs": [...], "unbatched": [...], "returns": "scalar"|"tuple", "notes": "..."}}

Also written (not in manifest.json, which lists only models that must import and run):
  mlp.data.safetensors, cnn.data.safetensors  the same data as the .data.pt files (format written by hand)
  error-case files for the importer's negative tests, described in OUTDIR/error_cases.json.
  fp16_scale.pt, fp16_scale.data.pt  the fp16 loss-scaling model (16 micro-steps; see
                                      build_fp16_scale), for test/mpi/precision_check.py.
  cancel_probe.pt, cancel_probe.data.pt  Embedding-LayerNorm-Linear fitted to its own fp32
                                      output: bf16 rounding dominates the loss (see
                                      build_cancel_probe), for test/mpi/precision_check.py.
  gpt_varlen.pt, gpt_varlen.data.pt  a GPT whose data file is a list of per-micro-step dicts of
                                      different shapes (see build_gpt_varlen), for the oracle
                                      test of plans with several shapes.

Every forward returns a scalar loss (two_losses returns a tuple of two scalar losses).
The script is deterministic: every model and data set is made under its own fixed seed.
"""

import json
import math
import os
import pickle
import pickletools
import struct
import sys
import zipfile
from typing import List, Tuple

if __name__ == "__main__" and os.environ.get("PYTHONHASHSEED") != "0":
    # TorchScript serialises a module's constants in set order, which follows Python's string
    # hash; fix the hash seed so that the archives are byte-for-byte reproducible.
    os.environ["PYTHONHASHSEED"] = "0"
    os.execv(sys.executable, [sys.executable] + sys.argv)

import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

S = 8  # micro-steps in every data file
B = 8  # global micro-batch: divisible by world sizes 1, 2 and 4


# ---------------------------------------------------------------------------------------------
# mlp: Linear-GELU-Linear-ReLU-Linear regression
# ---------------------------------------------------------------------------------------------
class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 32)
        self.act1 = nn.GELU()
        self.fc2 = nn.Linear(32, 32)
        self.act2 = nn.ReLU()
        self.fc3 = nn.Linear(32, 4)

    def forward(self, x, y):
        h = self.act1(self.fc1(x))
        h = self.act2(self.fc2(h))
        return F.mse_loss(self.fc3(h), y)


# ---------------------------------------------------------------------------------------------
# transformer: a GPT-style model written by hand
# ---------------------------------------------------------------------------------------------
class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd: int, n_head: int):
        super().__init__()
        self.n_head = n_head
        self.n_embd = n_embd
        # No bias on qkv: the key part of a qkv bias has an exactly-zero true gradient (softmax
        # is invariant to it), which the numerical oracle must avoid (docs/oracle.md).
        self.qkv = nn.Linear(n_embd, 3 * n_embd, bias=False)
        self.proj = nn.Linear(n_embd, n_embd)
        self.attn_drop = nn.Dropout(0.0)
        self.resid_drop = nn.Dropout(0.0)

    def forward(self, x):
        Bb, T, C = x.size()
        q, k, v = self.qkv(x).split(self.n_embd, dim=2)
        hd = C // self.n_head
        q = q.view(Bb, T, self.n_head, hd).transpose(1, 2)
        k = k.view(Bb, T, self.n_head, hd).transpose(1, 2)
        v = v.view(Bb, T, self.n_head, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        mask = torch.ones(T, T, device=x.device).tril()
        att = att.masked_fill(mask.view(1, 1, T, T) == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_drop(att)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(Bb, T, C)
        return self.resid_drop(self.proj(y))


class FeedForward(nn.Module):
    def __init__(self, n_embd: int):
        super().__init__()
        self.fc = nn.Linear(n_embd, 2 * n_embd)
        self.act = nn.GELU()
        self.proj = nn.Linear(2 * n_embd, n_embd)
        self.drop = nn.Dropout(0.0)

    def forward(self, x):
        return self.drop(self.proj(self.act(self.fc(x))))


class Block(nn.Module):
    def __init__(self, n_embd: int, n_head: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.ln2 = nn.LayerNorm(n_embd)
        self.mlp = FeedForward(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        x = x + self.mlp(self.ln2(x))
        return x


class GPT(nn.Module):
    def __init__(self, vocab: int = 32, block_size: int = 8, n_embd: int = 32, n_head: int = 2,
                 n_layer: int = 2):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab, n_embd)
        self.pos_emb = nn.Embedding(block_size, n_embd)
        self.drop = nn.Dropout(0.0)
        self.blocks = nn.ModuleList([Block(n_embd, n_head) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.head = nn.Linear(n_embd, vocab, bias=False)

    def forward(self, idx, targets):
        T = idx.size(1)
        pos = torch.arange(0, T, dtype=torch.long, device=idx.device)
        x = self.drop(self.tok_emb(idx) + self.pos_emb(pos))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


# ---------------------------------------------------------------------------------------------
# encoder: torch's own TransformerEncoderLayer
# ---------------------------------------------------------------------------------------------
class EncoderModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32,
                                                dropout=0.0, batch_first=True)
        self.head = nn.Linear(16, 4)

    def forward(self, x, y):
        return F.mse_loss(self.head(self.layer(x)), y)


# ---------------------------------------------------------------------------------------------
# cnn
# ---------------------------------------------------------------------------------------------
class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu1 = nn.ReLU()
        self.pool1 = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(16)
        self.relu2 = nn.ReLU()
        self.pool2 = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x, y):
        h = self.pool1(self.relu1(self.bn1(self.conv1(x))))
        h = self.pool2(self.relu2(self.bn2(self.conv2(h))))
        return F.cross_entropy(self.fc(torch.flatten(h, 1)), y)


# ---------------------------------------------------------------------------------------------
# moe: data-dependent routing
# ---------------------------------------------------------------------------------------------
class Expert(nn.Module):
    def __init__(self, d: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(d, hidden)
        self.act = nn.SiLU()
        self.fc2 = nn.Linear(hidden, d)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class SparseMoeBlock(nn.Module):
    def __init__(self, d: int, hidden: int, num_experts: int):
        super().__init__()
        self.num_experts = num_experts
        self.gate = nn.Linear(d, num_experts, bias=False)
        self.experts = nn.ModuleList([Expert(d, hidden) for _ in range(num_experts)])

    def forward(self, x):
        # x: [tokens, d]
        logits = self.gate(x)
        probs = F.softmax(logits, dim=-1)
        _, top = torch.topk(logits, 1, dim=-1)          # [tokens, 1]
        weight = torch.gather(probs, 1, top)              # [tokens, 1]: the gate gets gradients
        route = top.squeeze(1)
        out = torch.zeros_like(x)
        e = 0
        for expert in self.experts:
            idx = torch.nonzero(route == e).squeeze(1)
            if idx.numel() > 0:                            # data-dependent branch
                h = expert(x.index_select(0, idx)) * weight.index_select(0, idx)
                out = out.index_add(0, idx, h)
            e += 1
        return out


class MoeModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj_in = nn.Linear(16, 16)
        self.moe = SparseMoeBlock(16, 32, 4)
        self.head = nn.Linear(16, 16)

    def forward(self, x, y):
        h = self.proj_in(x)
        h = h + self.moe(h)
        return F.mse_loss(self.head(h), y)


# ---------------------------------------------------------------------------------------------
# two_models: student + frozen-style teacher (distillation)
# ---------------------------------------------------------------------------------------------
class Student(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 32)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(32, 8)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Teacher(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.act1 = nn.Tanh()
        self.fc2 = nn.Linear(16, 16)
        self.act2 = nn.Tanh()
        self.fc3 = nn.Linear(16, 8)

    def forward(self, x):
        return self.fc3(self.act2(self.fc2(self.act1(self.fc1(x)))))


class Distill(nn.Module):
    def __init__(self):
        super().__init__()
        self.student = Student()
        self.teacher = Teacher()

    def forward(self, x, y):
        s = self.student(x)
        t = self.teacher(x).detach()
        kl = F.kl_div(F.log_softmax(s, dim=-1), F.softmax(t, dim=-1), reduction="batchmean")
        return F.mse_loss(s, y) + 0.5 * kl


# ---------------------------------------------------------------------------------------------
# nograd_distill: the teacher call under `with torch.no_grad():` (as Accelerate's distillation
# example writes it), scripted: prim::CreateObject of torch.autograd.grad_mode.no_grad,
# prim::Enter / prim::Exit around the teacher's forward
# ---------------------------------------------------------------------------------------------
class NoGradDistill(nn.Module):
    def __init__(self):
        super().__init__()
        self.student = Student()
        self.teacher = Teacher()

    def forward(self, x, y):
        s = self.student(x)
        with torch.no_grad():
            t = self.teacher(x)
            t = F.softmax(t / 2.0, dim=-1)
        kl = F.kl_div(F.log_softmax(s / 2.0, dim=-1), t, reduction="batchmean")
        return F.mse_loss(s, y) + 0.5 * kl


# ---------------------------------------------------------------------------------------------
# eval_teacher: a teacher with BatchNorm and Dropout saved after teacher.eval() (as Accelerate's
# distillation guide does): it runs dropout-free on its running statistics in the training step
# ---------------------------------------------------------------------------------------------
class EvalModeTeacher(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.bn = nn.BatchNorm1d(16)
        self.drop = nn.Dropout(0.5)
        self.fc2 = nn.Linear(16, 8)

    def forward(self, x):
        return self.fc2(self.drop(F.relu(self.bn(self.fc1(x)))))


class EvalTeacherDistill(Distill):
    def __init__(self):
        super().__init__()
        self.teacher = EvalModeTeacher()


# ---------------------------------------------------------------------------------------------
# two_losses: root returns a tuple of two scalar losses
# ---------------------------------------------------------------------------------------------
class BranchA(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class BranchB(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 24)
        self.act = nn.SiLU()
        self.fc2 = nn.Linear(24, 4)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class TwoLosses(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = BranchA()
        self.b = BranchB()

    def forward(self, x, y) -> Tuple[torch.Tensor, torch.Tensor]:
        loss_a = F.mse_loss(self.a(x), y)
        loss_b = F.mse_loss(self.b(x), y)
        return loss_a, loss_b


# ---------------------------------------------------------------------------------------------
# loss_and_logits: what a transformers model returns, (loss, logits), plus an integer output
# ---------------------------------------------------------------------------------------------
class LossAndLogits(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 5)

    def forward(self, x, labels) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        logits = self.fc2(torch.tanh(self.fc1(x)))
        return F.cross_entropy(logits, labels), logits, logits.argmax(-1)


# ---------------------------------------------------------------------------------------------
# three_engines: three submodules trained on one shared loss l0 / 1 + l1 / 2 + l2 / 3
# ---------------------------------------------------------------------------------------------
class SmallNet(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(8, hidden)
        self.act = nn.Tanh()
        self.fc2 = nn.Linear(hidden, 4)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class ThreeEngines(nn.Module):
    def __init__(self):
        super().__init__()
        self.e0 = SmallNet(16)
        self.e1 = SmallNet(24)
        self.e2 = SmallNet(12)

    def forward(self, x, y):
        l0 = F.mse_loss(self.e0(x), y)
        l1 = F.mse_loss(self.e1(x), y)
        l2 = F.mse_loss(self.e2(x), y)
        return l0 / 1 + l1 / 2 + l2 / 3


# ---------------------------------------------------------------------------------------------
# through_frozen: the student's output flows through a frozen critic into the loss
# ---------------------------------------------------------------------------------------------
class ThroughFrozen(nn.Module):
    def __init__(self):
        super().__init__()
        self.student = Student()
        self.critic = Teacher()

    def forward(self, x, y):
        s = self.student(x)
        return F.mse_loss(self.critic(s), y) + 0.1 * F.mse_loss(s, x)


# ---------------------------------------------------------------------------------------------
# two_paths: the encoder's output reaches the loss directly and through the head, and the
# encoder runs twice (DeepSpeed's engine(x) vs engine.module(x) bug class: the GAS division must
# apply once to every path)
# ---------------------------------------------------------------------------------------------
class TwoPaths(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = SmallNet(16)
        self.head = nn.Linear(4, 4)

    def forward(self, x, y):
        h = self.enc(x)
        again = self.enc(x * 0.5)
        return F.mse_loss(self.head(h), y) + F.mse_loss(h, y) + 0.5 * F.mse_loss(again, y)


# ---------------------------------------------------------------------------------------------
# traced_mlp: made with torch.jit.trace
# ---------------------------------------------------------------------------------------------
class TracedMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 32)
        self.fc2 = nn.Linear(32, 32)
        self.fc3 = nn.Linear(32, 16)
        self.fc4 = nn.Linear(16, 4)

    def forward(self, x, y):
        h = torch.tanh(self.fc1(x))
        h = torch.sigmoid(self.fc2(h))
        h = F.silu(self.fc3(h))
        return F.mse_loss(self.fc4(h), y)


# ---------------------------------------------------------------------------------------------
# ops_zoo: tensor math, shapes, comparisons, casts, nll_loss; one unbatched input
# ---------------------------------------------------------------------------------------------
class OpsZoo(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.w = nn.Parameter(torch.randn(8, 8) * 0.3)
        self.ln = nn.LayerNorm(8)
        self.drop = nn.Dropout(0.0)
        self.head = nn.Linear(24, 4)

    def forward(self, x, y, table):
        # x: [b, 4, 8] float; y: [b] int64 in [0, 4); table: [8, 8] (unbatched, same on every rank)
        b = x.size(0)
        h = self.fc(x)                                        # linear
        h = torch.matmul(h, table)                            # matmul (3-D @ 2-D)
        m = torch.mm(h.reshape(b * 4, 8), self.w).view(b, 4, 8)  # reshape, mm, view
        att = torch.bmm(m, m.transpose(1, 2)) / 8.0           # bmm, transpose, div
        att = F.softmax(att, dim=-1)
        z = torch.baddbmm(m, att, m, beta=0.5, alpha=1.0)     # baddbmm  [b, 4, 8]
        z = self.drop(self.ln(z))                             # layer_norm, dropout
        pos = z * z + 1.0                                     # mul, add; strictly positive
        e = torch.sqrt(pos) + torch.rsqrt(pos) - torch.log(pos) + torch.exp(-pos)  # sqrt rsqrt log exp neg sub
        e = e + torch.pow(z, 2) * 0.1 - z.pow(3) * 0.01       # pow (tensor ** scalar)
        a = F.relu(e) + F.gelu(z) + F.silu(z) + torch.tanh(z) + torch.sigmoid(z)
        # dtype casts: a round trip through float64
        a = (a.to(torch.float64) * 0.5).to(torch.float32)
        # comparisons, bitwise_not, masked_fill, where, zeros_like, zeros
        pos_mask = z > 0.0                                    # gt
        a = a.masked_fill(~pos_mask, 0.0) + torch.where(z < -0.5, z, torch.zeros_like(z))  # lt, ~, where
        zero_col = torch.zeros(b, 4, 1, dtype=a.dtype, device=a.device)
        # split, chunk, slice, select, cat, stack, squeeze, unsqueeze, expand, permute, contiguous
        p1, p2 = a.split([3, 5], dim=2)
        c1, c2 = a.chunk(2, dim=2)
        sl = a[:, 1:3, :]                                     # slice  [b, 2, 8]
        sel = a.select(1, 0)                                  # select [b, 8]
        row = torch.cat([p2, p1], dim=2) + torch.cat([c2, c1], dim=2)  # [b, 4, 8]
        st = torch.stack([sl.sum(1), sel], dim=1)             # stack  [b, 2, 8]
        mean_row = row.mean(dim=1, keepdim=True)              # mean   [b, 1, 8]
        ex = mean_row.squeeze(1).unsqueeze(1).expand(b, 4, 8) # squeeze, unsqueeze, expand
        per = (row - ex).permute(0, 2, 1).contiguous()        # permute, contiguous [b, 8, 4]
        rep = zero_col.repeat(1, 1, 2).sum() + per.sum(dim=2) # repeat, sum [b, 8]
        mx, _ = st.max(dim=1)                                 # max(dim) [b, 8]
        feat = torch.cat([rep, mx, row.max(dim=1)[0]], dim=1) # [b, 24]
        logits = self.head(feat)
        logp = F.log_softmax(logits, dim=-1)
        nll = F.nll_loss(logp, y)
        # eq on an integer tensor: a small extra term on class-0 rows (per row, then a mean, so
        # rows stay independent and the loss does not depend on the world size)
        w0 = (y == 0).to(torch.float32)
        return nll + 0.01 * (w0 * logits.max(dim=1)[0]).mean()


# ---------------------------------------------------------------------------------------------
# ops_zoo_conv: pad, conv1d, batch_norm in training mode, conv2d, avg/max/adaptive pooling
# ---------------------------------------------------------------------------------------------
class OpsZooConv(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1d = nn.Conv1d(4, 8, 3, bias=False)  # a bias before batch_norm: zero gradient
        self.bn_weight = nn.Parameter(torch.ones(8) + 0.1 * torch.randn(8))
        self.bn_bias = nn.Parameter(0.1 * torch.randn(8))
        self.conv2d = nn.Conv2d(1, 4, 3, padding=1)
        self.head = nn.Linear(32, 5)

    def forward(self, x, y):
        # x: [b, 4, 16]; y: [b] int64 in [0, 5)
        h = F.pad(x, (1, 1))                                   # pad -> [b, 4, 18]
        h = self.conv1d(h)                                     # conv1d -> [b, 8, 16]
        # batch_norm with batch statistics regardless of self.training (no running stats):
        # rows of a rank interact, so the loss depends on the world size.
        h = F.batch_norm(h, None, None, self.bn_weight, self.bn_bias, training=True)
        h = F.relu(h)
        img = self.conv2d(h.unsqueeze(1))                      # conv2d -> [b, 4, 8, 16]
        p = torch.cat([F.avg_pool2d(img, 2), F.max_pool2d(img, 2)], dim=1)  # [b, 8, 4, 8]
        g = F.adaptive_avg_pool2d(p, (2, 2)).flatten(1)        # [b, 32]
        return F.cross_entropy(self.head(g), y)


# ---------------------------------------------------------------------------------------------
# error cases
# ---------------------------------------------------------------------------------------------
class BadUnsupportedOp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x, y):
        spec = torch.fft.rfft(self.fc(x), dim=-1).abs()        # complex intermediate: unsupported
        return F.mse_loss(spec, y)


class BadDynamicLoop(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x, y):
        h = self.fc(x)
        while h.sum() > 0:                                     # loop on tensor data
            h = h - 1.0
        return F.mse_loss(h, y)


# ---------------------------------------------------------------------------------------------
# torch 2.x models (scripted by torch 2.15; LibTorch 1.13 could not load them)
# gpt_sdpa:       pre-norm GPT: nn.RMSNorm, F.scaled_dot_product_attention(is_causal=True)
# mha_lm:         nn.MultiheadAttention(batch_first) on both of torch 2.x's paths (SDPA with
#                 is_causal; bmm/softmax under a key padding mask, need_weights=True)
# encoder_causal: nn.TransformerEncoder of norm-first GELU TransformerEncoderLayers, causal
# ---------------------------------------------------------------------------------------------
class SdpaAttention(nn.Module):
    def __init__(self, n_embd: int, n_head: int, dropout_p: float = 0.0):
        super().__init__()
        self.n_head = n_head
        self.n_embd = n_embd
        # Attention dropout as transformers' models pass it: only in training.
        self.dropout_p = dropout_p
        # No qkv bias (a key bias has an exactly-zero true gradient).
        self.qkv = nn.Linear(n_embd, 3 * n_embd, bias=False)
        # QK-norm without a weight: rms_norm with weight None.
        self.qk_norm = nn.RMSNorm(n_embd // n_head, elementwise_affine=False)
        self.proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        Bb, T, C = x.size()
        q, k, v = self.qkv(x).split(self.n_embd, dim=2)
        hd = C // self.n_head
        q = self.qk_norm(q.view(Bb, T, self.n_head, hd).transpose(1, 2))
        k = self.qk_norm(k.view(Bb, T, self.n_head, hd).transpose(1, 2))
        v = v.view(Bb, T, self.n_head, hd).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.dropout_p if self.training else 0.0)
        return self.proj(y.transpose(1, 2).contiguous().view(Bb, T, C))


class RMSBlock(nn.Module):
    def __init__(self, n_embd: int, n_head: int, attn_dropout: float = 0.0):
        super().__init__()
        self.norm1 = nn.RMSNorm(n_embd)
        self.attn = SdpaAttention(n_embd, n_head, attn_dropout)
        self.norm2 = nn.RMSNorm(n_embd, eps=1e-6)
        self.fc = nn.Linear(n_embd, 2 * n_embd)
        self.act = nn.SiLU()
        self.proj = nn.Linear(2 * n_embd, n_embd)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.proj(self.act(self.fc(self.norm2(x))))


class GPTSdpa(nn.Module):
    def __init__(self, vocab: int = 32, block_size: int = 8, n_embd: int = 32, n_head: int = 4,
                 n_layer: int = 2, attn_dropout: float = 0.0):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab, n_embd)
        self.pos_emb = nn.Embedding(block_size, n_embd)
        self.blocks = nn.ModuleList([RMSBlock(n_embd, n_head, attn_dropout)
                                     for _ in range(n_layer)])
        self.norm_f = nn.RMSNorm(n_embd)
        self.head = nn.Linear(n_embd, vocab, bias=False)

    def forward(self, idx, targets):
        T = idx.size(1)
        pos = torch.arange(0, T, dtype=torch.long, device=idx.device)
        x = self.tok_emb(idx) + self.pos_emb(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.norm_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


class MhaLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 16)
        self.pos = nn.Parameter(torch.randn(6, 16) * 0.1)
        # bias=True: torch 2.15 cannot script nn.MultiheadAttention(bias=False).
        self.causal_attn = nn.MultiheadAttention(16, 4, batch_first=True)
        self.norm1 = nn.LayerNorm(16)
        self.pad_attn = nn.MultiheadAttention(16, 2, batch_first=True)
        self.norm2 = nn.RMSNorm(16)
        self.head = nn.Linear(16, 20)

    def forward(self, idx, tgt):
        t = idx.size(1)
        x = self.emb(idx) + self.pos[:t]
        causal = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        a, _ = self.causal_attn(x, x, x, attn_mask=causal, need_weights=False, is_causal=True)
        x = self.norm1(x + a)
        pad = idx == 0  # token 0 is padding (never at position 0: no row is fully masked)
        a, w = self.pad_attn(x, x, x, key_padding_mask=pad)
        x = self.norm2(x + a)
        loss = F.cross_entropy(self.head(x).reshape(-1, 20), tgt.reshape(-1))
        if w is not None:
            loss = loss + (w * w).mean()
        return loss


class EncoderCausal(nn.Module):
    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, dropout=0.0,
                                           activation="gelu", batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, norm=nn.RMSNorm(16),
                                             enable_nested_tensor=False)
        self.head = nn.Linear(16, 4)

    def forward(self, x, y):
        t = x.size(1)
        mask = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        return F.mse_loss(self.head(self.encoder(x, mask=mask, is_causal=True)), y)


class BadTensorDict(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x, y):
        outs = {"h": self.fc(x)}                               # a dict of tensors: unsupported
        return F.mse_loss(outs["h"], y)


class BadViewWrite(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x, y):
        h = self.fc(x)
        h.diagonal().mul_(2.0)        # no step writes a diagonal back: refused
        return F.mse_loss(h, y)


# ---------------------------------------------------------------------------------------------
# writers
# ---------------------------------------------------------------------------------------------
def own(t: torch.Tensor) -> torch.Tensor:
    """A contiguous tensor with its own storage (torch.save writes whole storages)."""
    return t.contiguous().clone()


def save_data(path: str, data: dict) -> None:
    torch.save({k: own(v) for k, v in data.items()}, path)


_ST_DTYPES = {torch.float32: "F32", torch.int64: "I64", torch.float64: "F64", torch.int32: "I32",
              torch.float16: "F16", torch.bfloat16: "BF16", torch.bool: "BOOL", torch.uint8: "U8"}


def write_safetensors(path: str, data: dict) -> None:
    """The safetensors format, by hand: u64 LE header size, JSON header, raw LE tensor bytes."""
    header = {}
    blobs = []
    offset = 0
    for name, t in data.items():
        t = own(t)
        if t.dtype == torch.bfloat16:
            raw = t.view(torch.int16).numpy().astype("<i2").tobytes()
        else:
            arr = t.numpy()
            raw = arr.astype(arr.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": _ST_DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    hdr = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hdr += b" " * ((8 - len(hdr) % 8) % 8)  # pad with spaces so tensor data is 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hdr)))
        f.write(hdr)
        for raw in blobs:
            f.write(raw)


def forward_arg_names(module) -> List[str]:
    """Argument names of a scripted/traced module's forward, without self."""
    return [a.name for a in module.forward.schema.arguments[1:]]


def check_runs(name: str, module, data: dict) -> None:
    """Micro-step 0, every row: forward must return a finite scalar loss (or a tuple with one)."""
    args = [data[n][0] for n in forward_arg_names(module)]
    modes = [(m, m.training) for m in module.modules()]
    module.eval()  # must not touch BatchNorm running statistics
    with torch.no_grad():
        out = module(*args)
    for m, training in modes:  # each submodule's own mode (eval_teacher's teacher)
        m.train(training)
    outs = out if isinstance(out, tuple) else (out,)
    # Scalars are the losses; other outputs (loss_and_logits' logits) need only be finite.
    assert any(o.dim() == 0 for o in outs), f"{name}: no scalar loss in {outs}"
    for o in outs:
        assert bool(torch.isfinite(o).all()), f"{name}: bad output {o}"


# ---------------------------------------------------------------------------------------------
# model builders: each returns (module, data, manifest entry)
# ---------------------------------------------------------------------------------------------
def build_mlp():
    torch.manual_seed(1)
    m = MLP()
    x = torch.randn(S, B, 8)
    y = torch.randn(S, B, 4)
    return torch.jit.script(m), {"x": x, "y": y}, {
        "unbatched": [], "returns": "scalar",
        "notes": "x [S,B,8] f32, y [S,B,4] f32. Linear-GELU-Linear-ReLU-Linear, mse_loss. "
                 "Rows independent: the loss is the same for every world size."}


def lm_batch():
    """idx, targets [S, B, 8] in [0, 32): targets the next token of a shifted sequence (random
    where there is no next token)."""
    idx = torch.randint(0, 32, (S, B, 8), dtype=torch.int64)
    targets = torch.cat([idx[:, :, 1:], torch.randint(0, 32, (S, B, 1), dtype=torch.int64)], dim=2)
    return idx, targets


def build_transformer():
    torch.manual_seed(2)
    m = GPT()
    idx, targets = lm_batch()
    return torch.jit.script(m), {"idx": idx, "targets": targets}, {
        "unbatched": [], "returns": "scalar",
        "notes": "idx, targets [S,B,8] int64 in [0,32). GPT: tok_emb + pos_emb(arange), 2 blocks in "
                 "nn.ModuleList (paths blocks.N.attn.qkv, blocks.N.mlp.fc, ...), causal mask from "
                 "torch.ones(T,T).tril() built in forward, masked_fill -inf, softmax, Dropout(p=0), "
                 "GELU MLP, ln_f, head, cross_entropy. qkv and head have no bias (a qkv key bias "
                 "has an exactly-zero gradient)."}


def build_encoder():
    torch.manual_seed(3)
    m = EncoderModel()
    x = torch.randn(S, B, 4, 16)
    y = torch.randn(S, B, 4, 4)
    return torch.jit.script(m), {"x": x, "y": y}, {
        "unbatched": [], "returns": "scalar",
        "notes": "x [S,B,4,16] f32, y [S,B,4,4] f32. nn.TransformerEncoderLayer(d_model=16, nhead=2, "
                 "dim_feedforward=32, dropout=0, batch_first=True) + Linear head, mse_loss. The "
                 "scripted layer holds both paths: the fast path (aten::_transformer_encoder_layer_fwd, "
                 "aten::_native_multi_head_attention; taken only in eval mode with grad disabled, so "
                 "the eval oracle runs it) and the slow path (F.multi_head_attention_forward: "
                 "linear, bmm/baddbmm, softmax, pad, repeat, to, ...) behind is_grad_enabled / "
                 "is_autocast_enabled / training checks; the two differ by ~1e-7 relative in the "
                 "loss. The MHA in_proj_bias includes a key bias whose true gradient is exactly zero."}


def build_cnn():
    torch.manual_seed(4)
    m = CNN()
    x = torch.randn(S, B, 3, 8, 8)
    y = torch.randint(0, 10, (S, B), dtype=torch.int64)
    # Give BatchNorm non-trivial running statistics (eval mode uses them).
    m.train()
    with torch.no_grad():
        for _ in range(3):
            m(torch.randn(16, 3, 8, 8) * 1.5 + 0.3, torch.randint(0, 10, (16,)))
    # Saved in training mode like every other model (the oracle's eval calls .eval() itself).
    return torch.jit.script(m), {"x": x, "y": y}, {
        "unbatched": [], "returns": "scalar",
        "notes": "x [S,B,3,8,8] f32, y [S,B] int64 in [0,10). Conv2d-BatchNorm2d-ReLU-MaxPool2d-"
                 "Conv2d(bias=False)-BatchNorm2d-ReLU-AdaptiveAvgPool2d-flatten-Linear, "
                 "cross_entropy. BatchNorm running stats are non-trivial (num_batches_tracked=3); "
                 "in training mode batch statistics couple the rows of a rank, so the loss depends "
                 "on the world size. conv1.bias precedes BatchNorm: its true gradient is exactly "
                 "zero in training mode."}


def build_moe():
    torch.manual_seed(5)
    m = MoeModel()
    # Each micro-step's tokens cluster around their own random centre so routing differs by step.
    centres = torch.randn(S, 1, 16) * 1.5
    x = torch.randn(S, B, 16) + centres
    y = torch.randn(S, B, 16)
    sm = torch.jit.script(m)
    counts = moe_expert_counts(sm, x)
    distinct = {tuple(c) for c in counts}
    assert len(distinct) >= 2, f"moe: every micro-step routes the same way: {counts}"
    assert any(0 in c for c in counts), f"moe: no micro-step leaves an expert idle: {counts}"
    return sm, {"x": x, "y": y}, {
        "unbatched": [], "returns": "scalar",
        "notes": "x, y [S,B,16] f32. proj_in -> SparseMoeBlock (gate Linear, topk(1) routing, "
                 "gather of softmax gate probabilities, 4 experts in nn.ModuleList, per expert "
                 "nonzero(route == e) and a data-dependent `if idx.numel() > 0:` branch running "
                 "index_select/expert/index_add) -> head, mse_loss. Micro-steps route differently; "
                 "expert token counts per micro-step (whole B): " + json.dumps(counts) + "."}


def moe_expert_counts(module, x: torch.Tensor) -> List[List[int]]:
    """Tokens per expert for every micro-step over the whole batch."""
    out = []
    with torch.no_grad():
        for s in range(x.shape[0]):
            h = module.proj_in(x[s])
            route = module.moe.gate(h).argmax(dim=-1)
            out.append([int((route == e).sum()) for e in range(4)])
    return out


def build_moe_traced():
    """The moe model traced (torch.jit.trace) on a micro-step that leaves experts idle: the
    trace keeps only the experts that micro-step chose, so the others' parameters are never
    read (-ds-check-parameter-use refuses it; test/Plan/compile-traced-moe.test)."""
    torch.manual_seed(5)
    m = MoeModel()
    sm, moe_data, _ = build_moe()
    m.load_state_dict(sm.state_dict())
    counts = moe_expert_counts(sm, moe_data["x"])
    step = next(i for i, c in enumerate(counts) if 0 in c)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TracerWarning: the branch on idx.numel()
        traced = torch.jit.trace(m, (moe_data["x"][step], moe_data["y"][step]),
                                 check_trace=False)
    return traced, [e for e, n in enumerate(counts[step]) if n == 0]


def build_eval_teacher():
    torch.manual_seed(21)
    m = EvalTeacherDistill()
    with torch.no_grad():  # running statistics of the teacher's "pre-training"
        for _ in range(3):
            m.teacher(torch.randn(16, 8) * 2.0 + 0.5)
    m.teacher.eval()
    x = torch.randn(S, B, 8)
    y = torch.randn(S, B, 8)
    return torch.jit.script(m), {"x": x, "y": y}, {
        "unbatched": [], "returns": "scalar",
        "notes": "x, y [S,B,8] f32. As two_models, with a teacher of Linear-BatchNorm1d-ReLU-"
                 "Dropout(0.5)-Linear saved after teacher.eval() (non-trivial running statistics): "
                 "in the training step it runs without dropout on its running statistics, which "
                 "stay unchanged."}


def build_two_models():
    torch.manual_seed(6)
    m = Distill()
    x = torch.randn(S, B, 8)
    y = torch.randn(S, B, 8)
    return torch.jit.script(m), {"x": x, "y": y}, {
        "unbatched": [], "returns": "scalar",
        "notes": "x, y [S,B,8] f32. Root with submodules student (class Student) and teacher "
                 "(class Teacher). loss = mse(student(x), y) + 0.5 * kl_div(log_softmax(student(x)), "
                 "softmax(teacher(x).detach()), batchmean). Engines: student trains, teacher frozen. "
                 "kl_div batchmean divides by the rank's batch, so per-rank means stay equal-weight."}


def build_two_losses():
    torch.manual_seed(7)
    m = TwoLosses()
    x = torch.randn(S, B, 8)
    y = torch.randn(S, B, 4)
    return torch.jit.script(m), {"x": x, "y": y}, {
        "unbatched": [], "returns": "tuple",
        "notes": "x [S,B,8] f32, y [S,B,4] f32. Root with submodules a (class BranchA) and b "
                 "(class BranchB); forward returns (mse(a(x), y), mse(b(x), y)). The oracle's "
                 "'loss' is the sum of the tuple, 'losses' the per-element means."}


def build_loss_and_logits():
    torch.manual_seed(21)
    m = LossAndLogits()
    return torch.jit.script(m), {"x": torch.randn(S, B, 8),
                                 "labels": torch.randint(0, 5, (S, B))}, {
        "unbatched": [], "returns": "tuple",
        "notes": "x [S,B,8] f32, labels [S,B] i64. Returns (cross_entropy(logits, labels), "
                 "logits [B,5], argmax(logits) [B] i64), as a transformers model returns its "
                 "loss and logits: the plan's outputs are a loss and two tensors; ds-run seeds "
                 "the loss with 1 and the logits with zeros, the oracle trains on the loss."}


def build_three_engines():
    torch.manual_seed(14)
    m = ThreeEngines()
    return torch.jit.script(m), {"x": torch.randn(S, B, 8), "y": torch.randn(S, B, 4)}, {
        "unbatched": [], "returns": "scalar",
        "notes": "x [S,B,8], y [S,B,4] f32. Submodules e0, e1, e2 (class SmallNet, hidden 16, "
                 "24, 12); loss = mse(e0(x), y) / 1 + mse(e1(x), y) / 2 + mse(e2(x), y) / 3, "
                 "the seeds' shared loss over three engines."}


def build_through_frozen():
    torch.manual_seed(15)
    m = ThroughFrozen()
    return torch.jit.script(m), {"x": torch.randn(S, B, 8), "y": torch.randn(S, B, 8)}, {
        "unbatched": [], "returns": "scalar",
        "notes": "x, y [S,B,8] f32. Submodules student (Student) and critic (Teacher); loss = "
                 "mse(critic(student(x)), y) + 0.1 * mse(student(x), x): with critic frozen, "
                 "activation gradients flow through it to the student."}


def build_two_paths():
    torch.manual_seed(16)
    m = TwoPaths()
    return torch.jit.script(m), {"x": torch.randn(S, B, 8), "y": torch.randn(S, B, 4)}, {
        "unbatched": [], "returns": "scalar",
        "notes": "x [S,B,8], y [S,B,4] f32. Submodules enc (SmallNet 16) and head (Linear 4->4); "
                 "h = enc(x); loss = mse(head(h), y) + mse(h, y) + 0.5 * mse(enc(0.5 x), y): "
                 "enc's gradient arrives by three paths."}


def build_traced_mlp():
    torch.manual_seed(8)
    m = TracedMLP()
    x = torch.randn(S, B, 8)
    y = torch.randn(S, B, 4)
    tm = torch.jit.trace(m, (x[0], y[0]))  # example of shape [B, ...]; shape-generic ops only
    # A traced graph must not have baked in the batch size: check a per-rank shape.
    with torch.no_grad():
        a = tm(x[0, :2], y[0, :2])
        b = m(x[0, :2], y[0, :2])
    assert torch.equal(a, b), "traced_mlp: trace is not batch-size generic"
    return tm, {"x": x, "y": y}, {
        "unbatched": [], "returns": "scalar",
        "notes": "x [S,B,8] f32, y [S,B,4] f32. torch.jit.trace'd (example [B,...]) MLP: "
                 "Linear-tanh-Linear-sigmoid-Linear-silu-Linear, mse_loss."}


def build_ops_zoo():
    torch.manual_seed(9)
    m = OpsZoo()
    x = torch.randn(S, B, 4, 8)
    y = torch.randint(0, 4, (S, B), dtype=torch.int64)
    table = torch.randn(S, 8, 8) * 0.4
    return torch.jit.script(m), {"x": x, "y": y, "table": table}, {
        "unbatched": ["table"], "returns": "scalar",
        "notes": "x [S,B,4,8] f32, y [S,B] int64 in [0,4), table [S,8,8] f32 UNBATCHED (every rank "
                 "gets table[s] whole). Elementwise math, shapes, comparisons, float64 round trip, "
                 "baddbmm, nll_loss. Rows independent."}


def build_ops_zoo_conv():
    torch.manual_seed(10)
    m = OpsZooConv()
    x = torch.randn(S, B, 4, 16)
    y = torch.randint(0, 5, (S, B), dtype=torch.int64)
    return torch.jit.script(m), {"x": x, "y": y}, {
        "unbatched": [], "returns": "scalar",
        "notes": "x [S,B,4,16] f32, y [S,B] int64 in [0,5). pad, conv1d (no bias), F.batch_norm(training=True, "
                 "no running stats: batch statistics even in eval, so the loss depends on the world "
                 "size), conv2d, avg_pool2d, max_pool2d, adaptive_avg_pool2d, flatten, cross_entropy."}


# ---------------------------------------------------------------------------------------------
# resnet: in-place ReLU and residual `out += identity` inside submodules (nn.Sequential)
# tied_lm: a language model whose head shares the embedding's weight, with nn.MultiheadAttention
#          under a boolean causal attn_mask
# ---------------------------------------------------------------------------------------------
class ResBlock(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += identity
        return self.relu(out)


class ResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8),
                                  nn.ReLU(inplace=True))
        self.layers = nn.Sequential(ResBlock(8), ResBlock(8))
        self.pool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(8, 5)

    def forward(self, x, y):
        h = self.pool(self.layers(self.stem(x)))
        return F.cross_entropy(self.fc(torch.flatten(h, 1)), y)


class TiedLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 16)
        self.pos = nn.Parameter(torch.randn(6, 16) * 0.1)
        self.attn = nn.MultiheadAttention(16, 2, batch_first=True)
        self.ln = nn.LayerNorm(16)
        self.ff = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 16))
        self.head = nn.Linear(16, 20, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, idx, tgt):
        t = idx.size(1)
        x = self.emb(idx) + self.pos[:t]
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        a, _ = self.attn(x, x, x, attn_mask=mask, need_weights=False)
        x = self.ln(x + a)
        x = x + self.ff(x)
        return F.cross_entropy(self.head(x).reshape(-1, 20), tgt.reshape(-1))


def build_resnet():
    torch.manual_seed(11)
    m = ResNet()
    x = torch.randn(S, B, 3, 8, 8)
    y = torch.randint(0, 5, (S, B), dtype=torch.int64)
    return torch.jit.script(m), {"x": x, "y": y}, {
        "unbatched": [], "returns": "scalar",
        "notes": "x [S,B,3,8,8] f32, y [S,B] int64. ResNet blocks in nn.Sequential with "
                 "ReLU(inplace=True) and `out += identity`; BatchNorm couples a rank's rows."}


def build_tied_lm():
    torch.manual_seed(12)
    m = TiedLM()
    idx = torch.randint(0, 20, (S, B, 6), dtype=torch.int64)
    tgt = torch.randint(0, 20, (S, B, 6), dtype=torch.int64)
    return torch.jit.script(m), {"idx": idx, "tgt": tgt}, {
        "unbatched": [], "returns": "scalar",
        "notes": "idx, tgt [S,B,6] int64. head.weight is emb.weight (tied: one parameter); "
                 "nn.MultiheadAttention with a boolean causal attn_mask."}


class Dropper(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 16)
        self.drop = nn.Dropout(0.3)
        self.out = nn.Linear(16, 4)

    def forward(self, x, y):
        return F.mse_loss(self.out(self.drop(torch.relu(self.fc(x)))), y)


def build_dropout():
    torch.manual_seed(13)
    m = Dropper()
    return torch.jit.script(m), {"x": torch.randn(S, B, 8), "y": torch.randn(S, B, 4)}, {
        "unbatched": [], "returns": "scalar",
        "notes": "x [S,B,8], y [S,B,4] f32. Dropout(p=0.3) in training: masks drawn per "
                 "(seed, step, micro-step, rank) on both sides (runtime and oracle)."}


class DropoutBlock(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.fc = nn.Linear(d, 4 * d)
        self.drop = nn.Dropout(0.2)
        self.out = nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.out(self.drop(F.gelu(self.fc(x))))


class DropoutBlocks(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([DropoutBlock(8) for _ in range(3)])
        self.head = nn.Linear(8, 4)

    def forward(self, x, y):
        for block in self.blocks:
            x = block(x)
        return F.mse_loss(self.head(x), y)


def build_dropout_blocks():
    torch.manual_seed(23)
    m = DropoutBlocks()
    return torch.jit.script(m), {"x": torch.randn(S, B, 8), "y": torch.randn(S, B, 4)}, {
        "unbatched": [], "returns": "scalar",
        "notes": "x [S,B,8], y [S,B,4] f32. Three residual blocks Linear(8,32)-GELU-"
                 "Dropout(0.2)-Linear(32,8) and a Linear head, mse_loss: activation "
                 "checkpointing of blocks whose dropout masks the recomputation must reuse."}


def build_gpt_sdpa():
    torch.manual_seed(19)
    m = GPTSdpa()
    idx, targets = lm_batch()
    return torch.jit.script(m), {"idx": idx, "targets": targets}, {
        "unbatched": [], "returns": "scalar",
        "notes": "idx, targets [S,B,8] int64 in [0,32). Pre-norm GPT on torch 2.x operators: "
                 "tok_emb + pos_emb(arange), 2 blocks in nn.ModuleList, each x + attn(RMSNorm(x)) "
                 "and x + mlp(RMSNorm(x, eps=1e-6)) (aten::rms_norm with a weight); attention "
                 "splits a bias-free qkv into 4 heads of 8, normalises q and k with a weightless "
                 "nn.RMSNorm (aten::rms_norm, weight None) and runs "
                 "F.scaled_dot_product_attention(q, k, v, is_causal=True); SiLU MLP, final "
                 "RMSNorm, bias-free head, cross_entropy."}


def build_gpt_sdpa_dropout():
    torch.manual_seed(19)
    m = GPTSdpa(attn_dropout=0.2)
    idx, targets = lm_batch()
    return torch.jit.script(m), {"idx": idx, "targets": targets}, {
        "unbatched": [], "returns": "scalar",
        "notes": "gpt_sdpa with attention dropout 0.2 in training (dropout_p=p if "
                 "self.training else 0.0, as transformers' models pass it): LibTorch runs "
                 "attention with dropout on its math path, the dropout a bernoulli draw of "
                 "the probabilities, which the training oracle reproduces per micro-step."}


def build_mha_lm():
    torch.manual_seed(20)
    m = MhaLM()
    idx = torch.randint(0, 20, (S, B, 6), dtype=torch.int64)
    idx[:, :, 0] = torch.randint(1, 20, (S, B), dtype=torch.int64)
    tgt = torch.randint(0, 20, (S, B, 6), dtype=torch.int64)
    assert bool((idx == 0).any()), "mha_lm: no padding token in the data"
    return torch.jit.script(m), {"idx": idx, "tgt": tgt}, {
        "unbatched": [], "returns": "scalar",
        "notes": "idx, tgt [S,B,6] int64 in [0,20); token 0 is padding, never at position 0. "
                 "Two nn.MultiheadAttention(batch_first=True) as torch 2.15 scripts them: "
                 "causal_attn (4 heads; attn_mask from triu(full(-inf)), is_causal=True, "
                 "need_weights=False: the in-projection unflatten and "
                 "aten::scaled_dot_product_attention with is_causal and no mask) and pad_attn "
                 "(2 heads; key_padding_mask = idx == 0, need_weights=True: baddbmm, softmax, "
                 "bmm, the averaged weights added to the loss as mean(w * w)); LayerNorm after "
                 "the first, RMSNorm after the second, Linear head, cross_entropy. In eval "
                 "pad_attn takes the fused aten::_native_multi_head_attention (its mask is "
                 "boolean), causal_attn stays on scaled_dot_product_attention (a float "
                 "attn_mask rules the fast path out). The in_proj_bias "
                 "of both includes a key bias whose true gradient is exactly zero (bias=False "
                 "does not script in torch 2.15)."}


def build_encoder_causal():
    torch.manual_seed(21)
    m = EncoderCausal()
    x = torch.randn(S, B, 4, 16)
    y = torch.randn(S, B, 4, 4)
    return torch.jit.script(m), {"x": x, "y": y}, {
        "unbatched": [], "returns": "scalar",
        "notes": "x [S,B,4,16] f32, y [S,B,4,4] f32. nn.TransformerEncoder(enable_nested_tensor="
                 "False, norm=nn.RMSNorm(16)) of 2 nn.TransformerEncoderLayer(d_model=16, nhead=2, "
                 "dim_feedforward=32, dropout=0, activation='gelu', batch_first=True, "
                 "norm_first=True), mask from triu(full(-inf)) with is_causal=True (SDPA with "
                 "is_causal), Linear head, mse_loss. In eval each layer takes the fused "
                 "aten::_transformer_encoder_layer_fwd with the causal mask. The in_proj_bias "
                 "includes a key bias whose true gradient is exactly zero."}


def build_traced_transformer():
    """transformer's torch.jit.trace twin: the same weights and data (seed 2), traced on micro-step
    0's [B, ...] rows. Its shapes come from aten::size / prim::NumToTensor / aten::Int /
    aten::floor_divide chains that the importer evaluates on the example shapes."""
    scripted, data, entry = build_transformer()
    torch.manual_seed(2)
    m = GPT()
    with warnings.catch_warnings():
        # `1.0 / math.sqrt(hd)` converts a traced size to a Python float: a constant, as intended.
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        tm = torch.jit.trace(m, (data["idx"][0], data["targets"][0]))
    with torch.no_grad():
        a = tm(data["idx"][0, :2], data["targets"][0, :2])
        b = m(data["idx"][0, :2], data["targets"][0, :2])
    assert torch.equal(a, b), "traced_transformer: trace is not batch-size generic"
    return tm, data, {
        "unbatched": [], "returns": "scalar",
        "notes": "transformer (same weights and data) made with torch.jit.trace: B, T, C = "
                 "x.size(), q.view(B, T, h, C // h) become aten::size, prim::NumToTensor, "
                 "aten::floor_divide, aten::Int chains on 0-dim tensors."}


def build_traced_gpt_sdpa():
    """gpt_sdpa's torch.jit.trace twin (same weights and data, seed 19)."""
    scripted, data, entry = build_gpt_sdpa()
    torch.manual_seed(19)
    m = GPTSdpa()
    tm = torch.jit.trace(m, (data["idx"][0], data["targets"][0]))
    with torch.no_grad():
        a = tm(data["idx"][0, :2], data["targets"][0, :2])
        b = m(data["idx"][0, :2], data["targets"][0, :2])
    assert torch.equal(a, b), "traced_gpt_sdpa: trace is not batch-size generic"
    return tm, data, {
        "unbatched": [], "returns": "scalar",
        "notes": "gpt_sdpa (same weights and data) made with torch.jit.trace; its view shapes "
                 "are traced shape arithmetic on 0-dim tensors."}


def build_nograd_distill():
    torch.manual_seed(6)
    m = NoGradDistill()
    x = torch.randn(S, B, 8)
    y = torch.randn(S, B, 8)
    return torch.jit.script(m), {"x": x, "y": y}, {
        "unbatched": [], "returns": "scalar",
        "notes": "x, y [S,B,8] f32. Student/teacher distillation with the teacher call and its "
                 "softmax(t / 2) under `with torch.no_grad():` (prim::CreateObject, prim::Enter, "
                 "prim::Exit; imported as a detach of what the block produces). loss = "
                 "mse(student(x), y) + 0.5 * kl_div(log_softmax(student(x) / 2), t, batchmean). "
                 "The teacher's parameters get no gradient."}


BUILDERS = [
    ("mlp", build_mlp),
    ("transformer", build_transformer),
    ("encoder", build_encoder),
    ("cnn", build_cnn),
    ("moe", build_moe),
    ("two_models", build_two_models),
    ("two_losses", build_two_losses),
    ("loss_and_logits", build_loss_and_logits),
    ("traced_mlp", build_traced_mlp),
    ("ops_zoo", build_ops_zoo),
    ("ops_zoo_conv", build_ops_zoo_conv),
    ("resnet", build_resnet),
    ("tied_lm", build_tied_lm),
    ("dropout", build_dropout),
    ("dropout_blocks", build_dropout_blocks),
    ("three_engines", build_three_engines),
    ("through_frozen", build_through_frozen),
    ("two_paths", build_two_paths),
    ("gpt_sdpa", build_gpt_sdpa),
    ("gpt_sdpa_dropout", build_gpt_sdpa_dropout),
    ("mha_lm", build_mha_lm),
    ("encoder_causal", build_encoder_causal),
    ("traced_transformer", build_traced_transformer),
    ("traced_gpt_sdpa", build_traced_gpt_sdpa),
    ("nograd_distill", build_nograd_distill),
    ("eval_teacher", build_eval_teacher),
]


class Fp16Scale(nn.Module):
    """loss = mean(fc(x) * t): the gradients do not depend on the parameters."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x, t):
        return (self.fc(x) * t).mean()


def build_fp16_scale():
    """The fp16 overflow model: its gradients are fixed by the data, so whether a loss scale
    overflows fp16 does not depend on how an implementation rounds (test/mpi/precision_check.py).

    16 micro-steps of 8 rows, t = 1. On W = 2 ranks, rank 0's rows (0-3) have x[:, 0] = 10 and
    rank 1's (4-7) x[:, 0] = 1.25; the other columns are uniform in [-2, 2] (rank 1: [-0.25,
    0.25]). Per rank, dL/dfc.weight[j, k] = sum_rows x[:, k] / 16 (4 rows x 4 outputs): column 0
    is 2.5 on rank 0 and 0.3125 on rank 1, every other gradient is below 0.5; dL/dfc.bias = 0.25.
    Scaled by 2^14: rank 0's largest gradient is 40960, the sum over both ranks 46080, both below
    fp16's 65504 (no overflow); by 2^15: 81920 on rank 0 (inf in fp16: overflow). The loss's own
    gradient (the scale) and the activations' gradients (scale / 16) overflow later, at 2^16
    and 2^20. So at W = 2 every scale >= 2^15 overflows and every scale <= 2^14 does not, with a
    margin of more than 1.25x either way. (At W = 1 the per-rank column-0 gradient is 1.40625:
    2^15 does not overflow there.)"""
    torch.manual_seed(17)
    S16 = 16
    m = Fp16Scale()
    x = torch.empty(S16, B, 4)
    x[:, :4, 1:] = torch.rand(S16, 4, 3) * 4 - 2
    x[:, 4:, 1:] = torch.rand(S16, 4, 3) * 0.5 - 0.25
    x[:, :4, 0] = 10.0
    x[:, 4:, 0] = 1.25
    x = x.half().float()  # fp16 values: rounding the inputs changes nothing
    t = torch.ones(S16, B, 4)
    return torch.jit.script(m), {"x": x, "t": t}


def build_gpt_varlen():
    """gpt_sdpa's pre-norm GPT with 32 positions, on micro-steps of different shapes, as
    dynamic padding and a short last batch give them: a data file in the list form (one dict
    per micro-step, [B, T] each): B = 8 rows at T = 16, 32, 24, then a short last batch of
    4 rows at T = 24. Micro-steps 4-7 repeat the shapes (new tokens) so that a plan compiled
    from micro-steps 0-3 trains on every one."""
    torch.manual_seed(23)
    m = GPTSdpa(block_size=32)
    steps = []
    for rows, T in ((B, 16), (B, 32), (B, 24), (B // 2, 24)) * 2:
        idx = torch.randint(0, 32, (rows, T), dtype=torch.int64)
        targets = torch.cat([idx[:, 1:], torch.randint(0, 32, (rows, 1), dtype=torch.int64)], 1)
        steps.append({"idx": idx, "targets": targets})
    return torch.jit.script(m), steps


class CancelProbe(nn.Module):
    """emb -> LayerNorm -> Linear, loss = mse(fc(ln(emb(idx))), y)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(16, 16)
        self.ln = nn.LayerNorm(16)
        self.fc = nn.Linear(16, 16)

    def forward(self, idx, y):
        return F.mse_loss(self.fc(self.ln(self.emb(idx))), y)


def build_cancel_probe():
    """A model whose loss measures the precision of its forward: y is the model's own fp32
    output plus noise of std 1e-3, and fc's outputs are ~8 in size, so in fp32 the loss is the
    noise (~1e-6), while rounding fc's output (and y) to bf16, as bf16 training and
    torch_autocast do, adds errors of ~8 * 2^-9 per element (a loss ~100x larger). The
    LayerNorm reads the (fp32) embedding, not the Linear: LibTorch 1.13's CPU layer_norm
    rejects a bf16 input with fp32 weights under autocast. Parameters: Linear (reduced in bf16
    under torch_autocast) and Embedding, LayerNorm (reduced in fp32)."""
    torch.manual_seed(18)
    m = CancelProbe()
    with torch.no_grad():
        m.fc.weight.mul_(16.0)
        m.fc.bias.mul_(16.0)
        m.ln.weight.add_(torch.rand(16) * 0.5)
        m.ln.bias.add_(torch.randn(16) * 0.1)
    idx = torch.randint(0, 16, (S, B, 4), dtype=torch.int64)
    with torch.no_grad():
        out = m.fc(m.ln(m.emb(idx)))
        y = out + torch.randn(out.shape) * 1e-3
    return torch.jit.script(m), {"idx": idx, "y": y}


class UpcastRouter(nn.Module):
    """A Mixtral-style router and an upcast loss, as their authors write them for bf16:
    softmax(router(x), dtype=torch.float), topk, the weights cast back with .to(x.dtype), and
    cross_entropy(head(h).float(), y)."""

    def __init__(self):
        super().__init__()
        self.router = nn.Linear(8, 4, bias=False)
        self.expert = nn.Linear(8, 8)
        self.head = nn.Linear(8, 6)

    def forward(self, x, y):
        probs = F.softmax(self.router(x), dim=1, dtype=torch.float)
        weights, _ = torch.topk(probs, 1, dim=1)
        h = self.expert(x) * weights.to(x.dtype)
        return F.cross_entropy(self.head(h).float(), y)


def build_upcast_router():
    """UpcastRouter (docs/precision.md, "Explicit upcasts"): under bf16 the router's softmax
    and the loss run in f32 as the code asks, and the routing weights return to bf16."""
    torch.manual_seed(19)
    m = UpcastRouter()
    x = torch.randn(S, B, 8)
    y = torch.randint(0, 6, (S, B), dtype=torch.int64)
    return torch.jit.script(m), {"x": x, "y": y}


class MixtralSparseBlock(nn.Module):
    """transformers' MixtralSparseMoeBlock as written: softmax in f32, top-2, one_hot expert
    mask, `torch.where(mask[e])`, and `final.index_add_(0, top_x, ...)` into a zeros((B*T, D))."""

    def __init__(self, d: int = 16, hidden: int = 32, num_experts: int = 4, top_k: int = 2):
        super().__init__()
        self.num_experts = num_experts
        self.top_k = top_k
        self.gate = nn.Linear(d, num_experts, bias=False)
        self.experts = nn.ModuleList([Expert(d, hidden) for _ in range(num_experts)])

    def forward(self, hidden_states):
        batch, seq, d = hidden_states.shape
        hs = hidden_states.view(-1, d)
        routing_weights = F.softmax(self.gate(hs), dim=1, dtype=torch.float)
        routing_weights, selected = torch.topk(routing_weights, self.top_k, dim=-1)
        routing_weights = routing_weights / routing_weights.sum(dim=-1, keepdim=True)
        routing_weights = routing_weights.to(hs.dtype)
        final = torch.zeros((batch * seq, d), dtype=hs.dtype, device=hs.device)
        expert_mask = F.one_hot(selected, num_classes=self.num_experts).permute(2, 1, 0)
        for expert_idx, expert in enumerate(self.experts):
            found = torch.where(expert_mask[expert_idx])
            idx, top_x = found[0], found[1]
            current = hs[top_x]
            current = expert(current) * routing_weights[top_x, idx].unsqueeze(-1)
            final.index_add_(0, top_x, current.to(hs.dtype))
        return final.reshape(batch, seq, d)


class MaxRouteMoe(nn.Module):
    """A scripted MoE that picks experts with max, loops over them with enumerate and skips the
    idle ones with a data-dependent branch (issue 30: the backward's ds.if was mistyped)."""

    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(16, 4)
        self.experts = nn.ModuleList([nn.Linear(16, 16) for _ in range(4)])

    def forward(self, x, y):
        w, idx = self.gate(x).softmax(-1).max(dim=-1)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            sel = (idx == e).nonzero().squeeze(-1)
            if sel.numel() > 0:
                out = out.index_add(0, sel, expert(x[sel]) * w[sel].unsqueeze(-1))
        return F.mse_loss(out, y)


def build_max_route_moe():
    torch.manual_seed(37)
    m = MaxRouteMoe()
    # Each micro-step's tokens cluster around their own centre: some experts stay idle.
    x = torch.randn(S, B, 16) + torch.randn(S, 1, 16) * 2
    return torch.jit.script(m), {"x": x, "y": torch.randn(S, B, 16)}


class MoeRmsNorm(nn.Module):
    """An HF-Mixtral-style sparse block followed by nn.RMSNorm (issue 30: the block's output
    was typed with every dim dynamic, and rms_norm's gradient refused it)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(32, 16)
        self.moe = MixtralSparseBlock()
        self.norm = nn.RMSNorm(16)
        self.head = nn.Linear(16, 32)

    def forward(self, idx, targets):
        h = self.emb(idx)
        h = self.norm(h + self.moe(h))
        return F.cross_entropy(self.head(h).view(-1, 32), targets.view(-1))


def build_moe_rmsnorm():
    torch.manual_seed(29)
    m = MoeRmsNorm()
    idx = torch.randint(0, 32, (S, B, 6), dtype=torch.int64)
    targets = torch.randint(0, 32, (S, B, 6), dtype=torch.int64)
    return torch.jit.script(m), {"idx": idx, "targets": targets}


class ShiftRight(nn.Module):
    """transformers' T5 `_shift_right` as written: token ids shifted into a new_zeros by writing
    into a slice and a select of it (in place on views of an integer tensor)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(16, 8)
        self.head = nn.Linear(8, 16)

    def forward(self, labels):
        shifted = labels.new_zeros(labels.shape)
        shifted[..., 1:] = labels[..., :-1].clone()
        shifted[..., 0] = 3
        tail = shifted[..., 2:]        # two writes into one view: both reach the base
        tail.add_(1)
        tail.remainder_(16)
        shifted.masked_fill_(shifted == -100, 0)
        return F.cross_entropy(self.head(self.emb(shifted)).view(-1, 16), labels.view(-1))


def build_shift_right():
    torch.manual_seed(31)
    m = ShiftRight()
    labels = torch.randint(0, 16, (S, B, 6), dtype=torch.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(m, (labels[0],), check_trace=False)
    return torch.jit.script(m), traced, {"labels": labels}


class ViewWrites(nn.Module):
    """In-place writes through views of tensors that carry a gradient, as transformers' models
    write them (issue 30): into a select of a view, a slice of a slice of a view, a select of a
    transpose of a view and a narrow; views read after their base was written directly or
    through a sibling view see the write."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 12)
        self.gate = nn.Linear(8, 4)
        self.head = nn.Linear(12, 4)

    def forward(self, x, y):
        h = self.fc(x)                                   # [B, 12]
        g = self.gate(x)                                 # [B, 4]
        v = h.view(-1, 3, 4)
        v[:, 0] = g                                      # select of a view
        v[:, 1:, :2].mul_(torch.sigmoid(g[:, None, :2]))  # slice of a slice of a view
        early = h[:, 8:]                                 # taken before h is written again
        sibling = v[:, 2]                                # row 2: its column 3 is written below
        h.add_(0.5)                                      # early and sibling see this
        t = v.transpose(1, 2)                            # [B, 4, 3]
        t[:, 3].copy_(t[:, 2] * 2.0)                     # select of a transpose of a view
        h.narrow(1, 0, 6).add_(h[:, 6:].tanh())          # narrow
        out = self.head(h) + early.sum(1, keepdim=True) + sibling
        return F.mse_loss(out, y)


def build_view_writes():
    torch.manual_seed(37)
    m = ViewWrites()
    data = {"x": torch.randn(S, B, 8), "y": torch.randn(S, B, 4)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(m, (data["x"][0], data["y"][0]), check_trace=False)
    program = torch.export.export(m, (data["x"][0], data["y"][0]))
    return torch.jit.script(m), traced, program, data


def write_error_cases(outdir: str) -> dict:
    cases = {}

    def scripted_case(name, seed, module_class, target_width, expect):
        """A scripted model the importer must refuse, with its data and expectation."""
        torch.manual_seed(seed)
        m = torch.jit.script(module_class())
        data = {"x": torch.randn(S, B, 8), "y": torch.randn(S, B, target_width)}
        check_runs(name, m, data)
        m.save(os.path.join(outdir, name + ".pt"))
        save_data(os.path.join(outdir, name + ".data.pt"), data)
        cases[name + ".pt"] = {"data": name + ".data.pt", "expect": expect}

    scripted_case("bad_unsupported_op", 100, BadUnsupportedOp, 5,
                  "import error naming aten::fft_rfft (complex intermediate) and its source line")
    scripted_case("bad_dynamic_loop", 101, BadDynamicLoop, 4,
                  "import error: prim::Loop whose condition depends on tensor data "
                  "(`while h.sum() > 0:`), with its source line")
    scripted_case("bad_tensor_dict", 105, BadTensorDict, 4,
                  "import error naming prim::DictConstruct (a dict of tensors; torch 2.x's "
                  "fast-path checks build only empty dicts, which import) and its source line")
    scripted_case("bad_view_write", 106, BadViewWrite, 4,
                  "import error: an in-place write into a view no step writes back "
                  "(a diagonal), with its source line")

    torch.manual_seed(102)
    torch.save({"fc.weight": torch.randn(4, 8), "fc.bias": torch.randn(4)},
               os.path.join(outdir, "not_torchscript.pt"))
    cases["not_torchscript.pt"] = {
        "expect": "error: a torch.save'd dict of tensors, not a TorchScript archive"}

    with open(os.path.join(outdir, "mlp.pt"), "rb") as f:
        blob = f.read()
    with open(os.path.join(outdir, "truncated.pt"), "wb") as f:
        f.write(blob[: len(blob) // 2])
    cases["truncated.pt"] = {"expect": "error: the first half of the bytes of mlp.pt"}

    # mlp.pt with its debug info (source lines) pointing past its string table, which
    # LibTorch would index unchecked (found by the torchscript fuzz target), and with a
    # string in data.pkl declaring 4 GB, which LibTorch's unpickler would reserve first.
    def rewrite_mlp(name, record, edit):
        with zipfile.ZipFile(os.path.join(outdir, "mlp.pt")) as src, zipfile.ZipFile(
                os.path.join(outdir, name), "w", zipfile.ZIP_STORED) as dst:
            for info in src.infolist():
                data = src.read(info.filename)
                dst.writestr(info, edit(data) if info.filename.endswith(record) else data)

    rewrite_mlp("bad_debug_info.pt", "code/__torch__.py.debug_pkl",
                lambda data: pickle.dumps(("FORMAT_WITH_STRING_TABLE", ("", "model.py"),
                                           ((0, (([0, 7], 1, 1), 0, 1), 0),)), protocol=2))

    def huge_string(data):
        at = next(pos for op, _, pos in pickletools.genops(data) if op.name == "BINUNICODE")
        return data[:at + 1] + struct.pack("<I", 0xFFFFFFF0) + data[at + 5:]

    rewrite_mlp("bad_pickle_length.pt", "/data.pkl", huge_string)
    cases["bad_pickle_length.pt"] = {
        "expect": "error: a string in data.pkl longer than the record"}
    cases["bad_debug_info.pt"] = {
        "expect": "error: a text piece index outside the debug info's string table"}

    torch.manual_seed(103)
    save_data(os.path.join(outdir, "mismatched.data.pt"),
              {"inp": torch.randn(S, B, 8), "y": torch.randn(S, B, 4)})
    cases["mismatched.data.pt"] = {
        "model": "mlp.pt",
        "expect": "error naming the missing argument 'x' (file has keys 'inp', 'y')"}

    torch.manual_seed(104)
    save_data(os.path.join(outdir, "mlp_odd_batch.data.pt"),
              {"x": torch.randn(S, 6, 8), "y": torch.randn(S, 6, 4)})
    cases["mlp_odd_batch.data.pt"] = {
        "model": "mlp.pt",
        "expect": "error with world size 4: global micro-batch 6 is not divisible by 4 "
                  "(runs with world size 1 or 2)"}
    return cases


def main(argv: List[str]) -> int:
    # Scripting TransformerEncoderLayer warns about its unused 'batch_first' constant.
    warnings.filterwarnings("ignore", message="'batch_first' was found in ScriptModule constants")
    # ... and TransformerEncoder about its final norm (encoder_causal).
    warnings.filterwarnings("ignore", message="'norm' was found in ScriptModule constants")
    # torch 2.x marks TorchScript deprecated ("switch to torch.compile or torch.export"); the
    # archives it writes are still what ds-import reads.
    warnings.filterwarnings("ignore", message=r".*is deprecated\. Please switch to", category=FutureWarning)
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    outdir = argv[1]
    os.makedirs(outdir, exist_ok=True)
    manifest = {}
    for name, build in BUILDERS:
        module, data, entry = build()
        inputs = forward_arg_names(module)
        assert list(data.keys()) == inputs, f"{name}: data keys {list(data)} != forward args {inputs}"
        check_runs(name, module, data)
        module.save(os.path.join(outdir, name + ".pt"))
        save_data(os.path.join(outdir, name + ".data.pt"), data)
        manifest[name] = {"inputs": inputs, "unbatched": entry["unbatched"],
                          "returns": entry["returns"], "notes": entry["notes"]}
        if name in ("mlp", "cnn"):
            write_safetensors(os.path.join(outdir, name + ".data.safetensors"), data)
    module, data = build_fp16_scale()
    check_runs("fp16_scale", module, data)
    module.save(os.path.join(outdir, "fp16_scale.pt"))
    save_data(os.path.join(outdir, "fp16_scale.data.pt"), data)
    module, data = build_cancel_probe()
    check_runs("cancel_probe", module, data)
    module.save(os.path.join(outdir, "cancel_probe.pt"))
    save_data(os.path.join(outdir, "cancel_probe.data.pt"), data)
    scripted, traced, data = build_shift_right()
    check_runs("shift_right", scripted, data)
    scripted.save(os.path.join(outdir, "shift_right.pt"))
    traced.save(os.path.join(outdir, "shift_right_traced.pt"))
    save_data(os.path.join(outdir, "shift_right.data.pt"), data)
    scripted, traced, program, data = build_view_writes()
    check_runs("view_writes", scripted, data)
    scripted.save(os.path.join(outdir, "view_writes.pt"))
    traced.save(os.path.join(outdir, "view_writes_traced.pt"))
    torch.export.save(program, os.path.join(outdir, "view_writes.pt2"))
    save_data(os.path.join(outdir, "view_writes.data.pt"), data)
    module, data = build_max_route_moe()
    check_runs("max_route_moe", module, data)
    module.save(os.path.join(outdir, "max_route_moe.pt"))
    save_data(os.path.join(outdir, "max_route_moe.data.pt"), data)
    module, data = build_moe_rmsnorm()
    check_runs("moe_rmsnorm", module, data)
    module.save(os.path.join(outdir, "moe_rmsnorm.pt"))
    save_data(os.path.join(outdir, "moe_rmsnorm.data.pt"), data)
    module, idle = build_moe_traced()
    module.save(os.path.join(outdir, "moe_traced.pt"))
    assert idle, "moe_traced: the traced micro-step uses every expert"
    module, data = build_upcast_router()
    check_runs("upcast_router", module, data)
    module.save(os.path.join(outdir, "upcast_router.pt"))
    save_data(os.path.join(outdir, "upcast_router.data.pt"), data)
    module, steps = build_gpt_varlen()
    for step in steps:
        check_runs("gpt_varlen", module, {k: v[None] for k, v in step.items()})
    module.save(os.path.join(outdir, "gpt_varlen.pt"))
    torch.save([{k: own(v) for k, v in step.items()} for step in steps],
               os.path.join(outdir, "gpt_varlen.data.pt"))
    cases = write_error_cases(outdir)
    from make_exports import write_exports  # noqa: E402 (beside this file)
    write_exports(outdir)
    with open(os.path.join(outdir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    with open(os.path.join(outdir, "error_cases.json"), "w") as f:
        json.dump(cases, f, indent=2)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
