#!/usr/bin/env python3
"""Writes the model zoo: small models written the way public code writes them.

Usage: .venv/bin/python test/zoo/make_zoo.py OUTDIR

Each model is built small (a few thousand to a few hundred thousand parameters; torchvision's
resnet18 is the one large one) under its own seed and written as
  OUTDIR/NAME.pt          torch.jit.script archive (not for transformers' models, which do not
                          script)
  OUTDIR/NAME_traced.pt   torch.jit.trace archive of the same module (the same weights), for the
                          models whose forward has no data-dependent branch (not the MoE blocks:
                          tracing bakes in the branch the example took; docs/import.md)
  OUTDIR/NAME.pt2         torch.export.save of torch.export.export(module, example) (the same
                          weights), for the models that export to static shapes (not the MoE
                          blocks: their expert selection is data-dependent; docs/import.md);
                          NAME.w2.pt2 the same exported for one of 2 ranks' rows;
  OUTDIR/NAME.core.pt2    (and NAME.w2.core.pt2) for two of them (zoo.json "core"): the same
                          programs in core ATen (ExportedProgram.run_decompositions())
  OUTDIR/NAME.data.pt     torch.save'd dict, one tensor per forward argument, shaped [S, B, ...]
and OUTDIR/zoo.json: {"NAME": {"inputs": [...], "scripted": bool, "traced": bool, "exported": bool,
                               "core": bool,
                               "leaf": CLASS or null, "optimizer": "adamw" | "sgd", "params": N,
                               "notes": "..."}}.
Every forward returns the scalar training loss. The models are the zoo's (test/zoo/
CMakeLists.txt, zoo_check.py).
"""

import json
import math
import os
import sys
from typing import List, Optional, Tuple

if __name__ == "__main__" and os.environ.get("PYTHONHASHSEED") != "0":
    # TorchScript serialises constants in set order: fix the hash seed for reproducible archives.
    os.environ["PYTHONHASHSEED"] = "0"
    os.execv(sys.executable, [sys.executable] + sys.argv)

import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
from make_exports import save_core  # noqa: E402
from make_models import forward_arg_names, own  # noqa: E402

S = 4  # micro-steps in every data file
B = 4  # global micro-batch: divisible by world sizes 1 and 2
T = 8  # sequence length
V = 64  # vocabulary


# ---------------------------------------------------------------------------------------------
# Llama-style decoder: RMSNorm, rotary embeddings from buffers, grouped-query SDPA with
# is_causal, SwiGLU, no biases (as in Hugging Face's modeling_llama.py and Meta's llama).
# ---------------------------------------------------------------------------------------------
class LlamaRMSNorm(nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states


class LlamaRotaryEmbedding(nn.Module):
    def __init__(self, dim: int, max_position_embeddings: int, base: float = 10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        t = torch.arange(max_position_embeddings).float()
        freqs = torch.outer(t, inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos_cached", emb.cos(), persistent=False)
        self.register_buffer("sin_cached", emb.sin(), persistent=False)

    def forward(self, seq_len: int) -> Tuple[torch.Tensor, torch.Tensor]:
        return self.cos_cached[:seq_len], self.sin_cached[:seq_len]


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin):
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


class LlamaAttention(nn.Module):
    def __init__(self, hidden_size: int, num_heads: int, num_key_value_heads: int, max_pos: int):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = hidden_size // num_heads
        self.num_key_value_heads = num_key_value_heads
        self.num_key_value_groups = num_heads // num_key_value_heads
        self.q_proj = nn.Linear(hidden_size, num_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden_size, num_key_value_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden_size, num_key_value_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(num_heads * self.head_dim, hidden_size, bias=False)
        self.rotary_emb = LlamaRotaryEmbedding(self.head_dim, max_pos)

    def forward(self, hidden_states):
        bsz, q_len, _ = hidden_states.size()
        q = self.q_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(hidden_states).view(
            bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(hidden_states).view(
            bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        cos, sin = self.rotary_emb(q_len)
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        k = k.repeat_interleave(self.num_key_value_groups, dim=1)
        v = v.repeat_interleave(self.num_key_value_groups, dim=1)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out = out.transpose(1, 2).contiguous().reshape(bsz, q_len, -1)
        return self.o_proj(out)


class LlamaMLP(nn.Module):
    def __init__(self, hidden_size: int, intermediate_size: int):
        super().__init__()
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, hidden_size: int, heads: int, kv_heads: int, inter: int, max_pos: int):
        super().__init__()
        self.input_layernorm = LlamaRMSNorm(hidden_size)
        self.self_attn = LlamaAttention(hidden_size, heads, kv_heads, max_pos)
        self.post_attention_layernorm = LlamaRMSNorm(hidden_size)
        self.mlp = LlamaMLP(hidden_size, inter)

    def forward(self, hidden_states):
        hidden_states = hidden_states + self.self_attn(self.input_layernorm(hidden_states))
        return hidden_states + self.mlp(self.post_attention_layernorm(hidden_states))


class LlamaForCausalLM(nn.Module):
    def __init__(self, vocab: int = V, hidden: int = 32, layers: int = 2, heads: int = 4,
                 kv_heads: int = 2, inter: int = 64, max_pos: int = 16):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(
            [LlamaDecoderLayer(hidden, heads, kv_heads, inter, max_pos) for _ in range(layers)])
        self.norm = LlamaRMSNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        self.vocab_size = vocab

    def forward(self, input_ids, labels):
        h = self.embed_tokens(input_ids)
        for layer in self.layers:
            h = layer(h)
        logits = self.lm_head(self.norm(h))
        return F.cross_entropy(logits.view(-1, self.vocab_size), labels.view(-1))


# ---------------------------------------------------------------------------------------------
# GPT-2-style decoder: fused qkv, learned positions, causal mask buffer, GELU (tanh), weight-tied
# head (as in nanoGPT and Hugging Face's modeling_gpt2.py).
# ---------------------------------------------------------------------------------------------
class GPT2Attention(nn.Module):
    def __init__(self, n_embd: int, n_head: int, n_positions: int):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head = n_head
        self.n_embd = n_embd
        self.register_buffer("bias", torch.tril(torch.ones(n_positions, n_positions))
                             .view(1, 1, n_positions, n_positions))

    def forward(self, x):
        B_, T_, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B_, T_, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B_, T_, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B_, T_, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T_, :T_] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B_, T_, C)
        return self.c_proj(y)


class GPT2MLP(nn.Module):
    def __init__(self, n_embd: int):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class GPT2Block(nn.Module):
    def __init__(self, n_embd: int, n_head: int, n_positions: int):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = GPT2Attention(n_embd, n_head, n_positions)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = GPT2MLP(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2LMHeadModel(nn.Module):
    def __init__(self, vocab: int = V, n_positions: int = 16, n_embd: int = 32, n_layer: int = 2,
                 n_head: int = 4):
        super().__init__()
        self.wte = nn.Embedding(vocab, n_embd)
        self.wpe = nn.Embedding(n_positions, n_embd)
        self.h = nn.ModuleList([GPT2Block(n_embd, n_head, n_positions) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied
        self.vocab_size = vocab

    def forward(self, idx, targets):
        t = idx.size(1)
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


# ---------------------------------------------------------------------------------------------
# BERT-style encoder: token + position embeddings, nn.TransformerEncoder with a padding mask,
# tanh pooler on the first token, classifier.
# ---------------------------------------------------------------------------------------------
class BertForSequenceClassification(nn.Module):
    def __init__(self, vocab: int = V, hidden: int = 32, layers: int = 2, heads: int = 4,
                 inter: int = 64, max_pos: int = 16, num_labels: int = 3):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, hidden, padding_idx=0)
        self.position_embeddings = nn.Embedding(max_pos, hidden)
        self.embeddings_norm = nn.LayerNorm(hidden, eps=1e-12)
        layer = nn.TransformerEncoderLayer(hidden, heads, inter, dropout=0.0, activation="gelu",
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.pooler = nn.Linear(hidden, hidden)
        self.classifier = nn.Linear(hidden, num_labels)

    def forward(self, input_ids, attention_mask, labels):
        positions = torch.arange(input_ids.size(1), device=input_ids.device)
        h = self.embeddings_norm(self.word_embeddings(input_ids) + self.position_embeddings(positions))
        h = self.encoder(h, src_key_padding_mask=attention_mask == 0)
        pooled = torch.tanh(self.pooler(h[:, 0]))
        return F.cross_entropy(self.classifier(pooled), labels)


# ---------------------------------------------------------------------------------------------
# Mixtral-style sparse MoE block (Hugging Face's MixtralSparseMoeBlock): float32 softmax router,
# top-2, renormalised weights, one_hot expert mask, torch.where per expert, advanced indexing,
# in-place index_add_.
# ---------------------------------------------------------------------------------------------
class MixtralBlockSparseTop2MLP(nn.Module):
    def __init__(self, hidden_dim: int, ffn_dim: int):
        super().__init__()
        self.w1 = nn.Linear(hidden_dim, ffn_dim, bias=False)
        self.w2 = nn.Linear(ffn_dim, hidden_dim, bias=False)
        self.w3 = nn.Linear(hidden_dim, ffn_dim, bias=False)

    def forward(self, hidden_states):
        return self.w2(F.silu(self.w1(hidden_states)) * self.w3(hidden_states))


class MixtralSparseMoeBlock(nn.Module):
    def __init__(self, hidden_dim: int, ffn_dim: int, num_experts: int = 4, top_k: int = 2):
        super().__init__()
        self.num_experts = num_experts
        self.top_k = top_k
        self.gate = nn.Linear(hidden_dim, num_experts, bias=False)
        self.experts = nn.ModuleList(
            [MixtralBlockSparseTop2MLP(hidden_dim, ffn_dim) for _ in range(num_experts)])

    def forward(self, hidden_states):
        batch_size, sequence_length, hidden_dim = hidden_states.shape
        hidden_states = hidden_states.view(-1, hidden_dim)
        router_logits = self.gate(hidden_states)
        routing_weights = F.softmax(router_logits, dim=1, dtype=torch.float)
        routing_weights, selected_experts = torch.topk(routing_weights, self.top_k, dim=-1)
        routing_weights = routing_weights / routing_weights.sum(dim=-1, keepdim=True)
        routing_weights = routing_weights.to(hidden_states.dtype)
        final_hidden_states = torch.zeros((batch_size * sequence_length, hidden_dim),
                                          dtype=hidden_states.dtype, device=hidden_states.device)
        expert_mask = F.one_hot(selected_experts, num_classes=self.num_experts).permute(2, 1, 0)
        for expert_idx, expert_layer in enumerate(self.experts):
            idx, top_x = torch.where(expert_mask[expert_idx])
            current_state = hidden_states[None, top_x].reshape(-1, hidden_dim)
            current_hidden_states = expert_layer(current_state) * routing_weights[top_x, idx, None]
            final_hidden_states.index_add_(0, top_x, current_hidden_states.to(hidden_states.dtype))
        return final_hidden_states.reshape(batch_size, sequence_length, hidden_dim)


class MixtralLM(nn.Module):
    def __init__(self, vocab: int = V, hidden: int = 16, ffn: int = 32):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, hidden)
        self.norm = LlamaRMSNorm(hidden)
        self.block_sparse_moe = MixtralSparseMoeBlock(hidden, ffn)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        self.vocab_size = vocab

    def forward(self, input_ids, labels):
        h = self.embed_tokens(input_ids)
        h = h + self.block_sparse_moe(self.norm(h))
        logits = self.lm_head(h)
        return F.cross_entropy(logits.view(-1, self.vocab_size), labels.view(-1))


# ---------------------------------------------------------------------------------------------
# Switch-style top-1 MoE: max routing, per-expert nonzero, a data-dependent branch, index_add.
# ---------------------------------------------------------------------------------------------
class SwitchExpert(nn.Module):
    def __init__(self, d: int, hidden: int):
        super().__init__()
        self.wi = nn.Linear(d, hidden)
        self.wo = nn.Linear(hidden, d)

    def forward(self, x):
        return self.wo(F.relu(self.wi(x)))


class SwitchSparseMLP(nn.Module):
    def __init__(self, d: int, hidden: int, num_experts: int = 4):
        super().__init__()
        self.router = nn.Linear(d, num_experts, bias=False)
        self.experts = nn.ModuleList([SwitchExpert(d, hidden) for _ in range(num_experts)])

    def route(self, x) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(tokens, each token's top probability, its expert)."""
        tokens = x.reshape(-1, x.size(-1))
        top, idx = F.softmax(self.router(tokens), dim=-1).max(-1)
        return tokens, top, idx

    def forward(self, x):
        tokens, top, idx = self.route(x)
        out = torch.zeros_like(tokens)
        for i, expert in enumerate(self.experts):
            sel = (idx == i).nonzero().squeeze(-1)
            if sel.numel() > 0:
                out = out.index_add(0, sel, expert(tokens.index_select(0, sel))
                                    * top.index_select(0, sel).unsqueeze(-1))
        return out.view(x.shape)


class SwitchCondMLP(SwitchSparseMLP):
    """The Switch block written to export (docs/import.md): each expert runs on every token
    with its gate (the router probability where it is chosen, else 0), under torch.cond so
    that an expert no token chose is skipped; shapes never depend on the data. Scripted, the
    same `if` is a Python one (TorchScript does not compile torch.cond)."""

    def forward(self, x):
        tokens, top, idx = self.route(x)
        out = torch.zeros_like(tokens)
        for i, expert in enumerate(self.experts):
            gate = ((idx == i).to(tokens.dtype) * top).unsqueeze(-1)
            if torch.jit.is_scripting():
                if bool(gate.any()):
                    out = out + expert(tokens) * gate
            else:
                out = out + self.expert_cond(i, tokens, gate)
        return out.view(x.shape)

    @torch.jit.unused
    def expert_cond(self, i: int, tokens, gate):
        expert = self.experts[i]
        return torch.cond(gate.any(), lambda t, g: expert(t) * g,
                          lambda t, g: torch.zeros_like(t), (tokens, gate))


class SwitchLM(nn.Module):
    def __init__(self, vocab: int = V, d: int = 16, hidden: int = 32, cond: bool = False):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.ln = nn.LayerNorm(d)
        self.mlp = (SwitchCondMLP if cond else SwitchSparseMLP)(d, hidden)
        self.head = nn.Linear(d, vocab)

    def forward(self, input_ids, labels):
        h = self.embed(input_ids)
        h = h + self.mlp(self.ln(h))
        logits = self.head(h)
        return F.cross_entropy(logits.flatten(0, 1), labels.flatten())


# ---------------------------------------------------------------------------------------------
# ResNet-style CNN (torchvision's BasicBlock layout): BatchNorm, residuals with a projection
# shortcut, adaptive average pooling.
# ---------------------------------------------------------------------------------------------
class BasicBlock(nn.Module):
    def __init__(self, inplanes: int, planes: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample: Optional[nn.Module] = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False),
                                            nn.BatchNorm2d(planes))

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class SmallResNet(nn.Module):
    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = BasicBlock(8, 8)
        self.layer2 = BasicBlock(8, 16, stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(16, num_classes)

    def forward(self, x, target):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer2(self.layer1(x))
        x = torch.flatten(self.avgpool(x), 1)
        return F.cross_entropy(self.fc(x), target)


class TorchvisionResNet18(nn.Module):
    """torchvision.models.resnet18 as shipped, with a cross-entropy loss."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        import torchvision
        self.model = torchvision.models.resnet18(num_classes=num_classes)

    def forward(self, x, target):
        return F.cross_entropy(self.model(x), target)


# ---------------------------------------------------------------------------------------------
# Hugging Face transformers' own GPT-2 and Llama, built from tiny configs (no download), through a
# loss wrapper; transformers' models do not script, so these are traced only.
# ---------------------------------------------------------------------------------------------
class CausalLMLoss(nn.Module):
    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids, labels):
        return self.model(input_ids=input_ids, labels=labels, use_cache=False).loss


def hf_gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel as HFGPT2LMHeadModel
    config = GPT2Config(vocab_size=V, n_positions=16, n_embd=32, n_layer=2, n_head=4,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                        bos_token_id=0, eos_token_id=0)
    return CausalLMLoss(HFGPT2LMHeadModel(config))


def hf_llama():
    from transformers import LlamaConfig, LlamaForCausalLM as HFLlamaForCausalLM
    config = LlamaConfig(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=16,
                         bos_token_id=0, eos_token_id=0)
    return CausalLMLoss(HFLlamaForCausalLM(config))


# ---------------------------------------------------------------------------------------------
# data and builders
# ---------------------------------------------------------------------------------------------
def tokens(seed: int, shape) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(1, V, shape, generator=g)


def lm_data(seed: int) -> dict:
    ids = tokens(seed, (S, B, T + 1))
    return {"input_ids": ids[..., :-1].contiguous(), "labels": ids[..., 1:].contiguous()}


def build_llama():
    torch.manual_seed(101)
    return LlamaForCausalLM(), lm_data(1), {"leaf": None, "core": True,
                                            "notes": "Llama-style decoder"}


def build_gpt2():
    torch.manual_seed(102)
    ids = tokens(2, (S, B, T + 1))
    data = {"idx": ids[..., :-1].contiguous(), "targets": ids[..., 1:].contiguous()}
    return GPT2LMHeadModel(), data, {
        "leaf": None, "optimizer": "sgd",
        "notes": "GPT-2-style decoder, tied head; SGD: c_attn's key bias has a zero gradient"}


def build_bert():
    torch.manual_seed(103)
    ids = tokens(3, (S, B, T))
    g = torch.Generator().manual_seed(30)
    lengths = torch.randint(3, T + 1, (S, B), generator=g)
    mask = (torch.arange(T).view(1, 1, T) < lengths.unsqueeze(-1)).long()
    ids = ids * mask  # padding id 0 after each sequence
    labels = torch.randint(0, 3, (S, B), generator=g)
    data = {"input_ids": ids, "attention_mask": mask, "labels": labels}
    return BertForSequenceClassification(), data, {
        "leaf": None, "optimizer": "sgd",
        "notes": "BERT-style encoder (nn.TransformerEncoder, padding mask); SGD: in_proj_bias's "
                 "key part has a zero gradient"}


def build_switch_cond():
    torch.manual_seed(105)
    return SwitchLM(cond=True), lm_data(5), {
        "leaf": "SwitchCondMLP", "script_only": True, "exports": True,
        "notes": "Switch-style top-1 MoE written with torch.cond (exports)"}


def build_mixtral():
    torch.manual_seed(104)
    return MixtralLM(), lm_data(4), {
        "leaf": "MixtralSparseMoeBlock", "script_only": True, "notes": "Mixtral-style top-2 MoE"}


def build_switch():
    torch.manual_seed(105)
    return SwitchLM(), lm_data(5), {
        "leaf": "SwitchSparseMLP", "script_only": True, "notes": "Switch-style top-1 MoE"}


def image_data(seed: int, size: int) -> dict:
    g = torch.Generator().manual_seed(seed)
    return {"x": torch.randn(S, B, 3, size, size, generator=g),
            "target": torch.randint(0, 10, (S, B), generator=g)}


def build_resnet_cnn():
    torch.manual_seed(106)
    return SmallResNet(), image_data(6, 8), {"leaf": None, "core": True,
                                             "notes": "ResNet-style CNN"}


def build_resnet18():
    torch.manual_seed(107)
    # 64x64 images: layer4's BatchNorm sees 2x2 positions per image, not one.
    return TorchvisionResNet18(), image_data(7, 64), {
        "leaf": None, "notes": "torchvision resnet18"}


def build_hf_gpt2():
    torch.manual_seed(108)
    return hf_gpt2(), lm_data(8), {
        "leaf": None, "optimizer": "sgd", "trace_only": True,
        "notes": "transformers GPT2LMHeadModel (tiny config), traced; SGD: c_attn's key bias"}


def build_hf_llama():
    torch.manual_seed(109)
    return hf_llama(), lm_data(9), {
        "leaf": None, "trace_only": True,
        "notes": "transformers LlamaForCausalLM (tiny config), traced"}


BUILDERS = [
    ("llama", build_llama),
    ("gpt2", build_gpt2),
    ("bert", build_bert),
    ("mixtral", build_mixtral),
    ("switch", build_switch),
    ("switch_cond", build_switch_cond),
    ("resnet_cnn", build_resnet_cnn),
    ("resnet18", build_resnet18),
    ("hf_gpt2", build_hf_gpt2),
    ("hf_llama", build_hf_llama),
]


def main(argv: List[str]) -> int:
    warnings.filterwarnings("ignore", message=r".*is deprecated\. Please switch to",
                            category=FutureWarning)
    warnings.filterwarnings("ignore", message="'batch_first' was found in ScriptModule constants")
    warnings.filterwarnings("ignore", message="'norm' was found in ScriptModule constants")
    # GPT-2's 1 / sqrt(head size) is a constant of the trace, as it should be.
    warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
    warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    outdir = argv[1]
    os.makedirs(outdir, exist_ok=True)
    # DS_ZOO_ONLY=a,b remakes only those models (while working on them).
    only = os.environ.get("DS_ZOO_ONLY")
    zoo = {}
    if only and os.path.exists(os.path.join(outdir, "zoo.json")):
        with open(os.path.join(outdir, "zoo.json")) as f:
            zoo = json.load(f)
    for name, build in BUILDERS:
        if only and name not in only.split(","):
            continue
        module, data, entry = build()
        module.train()
        scripted = not entry.get("trace_only", False)
        traced = not entry.get("script_only", False)
        inputs = list(data)
        if scripted:
            archive = torch.jit.script(module)
            assert forward_arg_names(archive) == inputs, f"{name}: data keys != forward args"
            archive.save(os.path.join(outdir, name + ".pt"))
        # Before tracing, which runs the forward (BatchNorm's statistics move): the program
        # holds the state the scripted archive holds.
        # A program is specialised on its example's shapes: one for 1 rank (the whole
        # micro-batch), one for 2 ranks (half of it), NAME.w2.pt2.
        exported = entry.get("exports", not entry.get("script_only", False))
        if exported:
            for suffix, rows in ((".pt2", None), (".w2.pt2", 2)):
                example = tuple(data[k][0] if rows is None
                                else data[k][0][: data[k][0].shape[0] // rows] for k in inputs)
                program = torch.export.export(module, example)
                torch.export.save(program, os.path.join(outdir, name + suffix))
                if entry.get("core"):
                    save_core(program, os.path.join(
                        outdir, name + suffix.replace(".pt2", ".core.pt2")))
        if traced:
            example = tuple(data[k][0] for k in inputs)
            archive = torch.jit.trace(module, example, check_trace=False)
            assert forward_arg_names(archive) == inputs, f"{name}: data keys != forward args"
            archive.save(os.path.join(outdir, name + "_traced.pt"))
        torch.save({k: own(v) for k, v in data.items()}, os.path.join(outdir, name + ".data.pt"))
        zoo[name] = {"inputs": inputs, "scripted": scripted, "traced": traced,
                     "exported": exported, "core": bool(entry.get("core")),
                     "leaf": entry["leaf"],
                     "optimizer": entry.get("optimizer", "adamw"),
                     "params": sum(p.numel() for p in module.parameters()),
                     "notes": entry["notes"]}
    with open(os.path.join(outdir, "zoo.json"), "w") as f:
        json.dump(zoo, f, indent=2)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
