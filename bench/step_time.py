#!/usr/bin/env python3
"""Step time of a compiled plan (ds-compile + ds-run) vs LibTorch eager autograd + torch.optim.

  bench/step_time.py --bin build/bin [--model transformer] [--steps 20] [--threads 1]

Both sides train the same TorchScript module on the same data with the same AdamW config and
thread count, in this one script. ds-run's time per step is taken from two runs of different
lengths (the difference cancels process start-up and plan loading); the eager side times its
loop directly after one warm-up step. Prints a markdown table row with the ratio and the BLAS that
LibTorch loaded.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "oracle"))


class Block(torch.nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        self.ln2 = torch.nn.LayerNorm(d)
        self.fc = torch.nn.Linear(d, 4 * d)
        self.out = torch.nn.Linear(4 * d, d)
        self.heads = heads

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q = q.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / (d // self.heads) ** 0.5)
        mask = torch.ones(t, t, device=x.device).tril() == 0
        att = torch.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, d)
        x = x + self.proj(y)
        return x + self.out(torch.nn.functional.gelu(self.fc(self.ln2(x))))


class GPT(torch.nn.Module):
    """A few-million-parameter GPT for the benchmark (d=256, 4 blocks, T=64). Its positions and
    mask are made on the input's device, so the same module runs on a GPU (the GPU check,
    scripts/gpu/, also builds a ~100M-parameter one from it: d=768, 12 blocks, 12 heads)."""

    def __init__(self, vocab: int = 512, d: int = 256, layers: int = 4, t: int = 64,
                 heads: int = 4):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, d)
        self.pos = torch.nn.Embedding(t, d)
        self.blocks = torch.nn.ModuleList([Block(d, heads) for _ in range(layers)])
        self.ln = torch.nn.LayerNorm(d)
        self.head = torch.nn.Linear(d, vocab, bias=False)

    def forward(self, idx, targets):
        b, t = idx.shape
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        logits = self.head(self.ln(x))
        return torch.nn.functional.cross_entropy(logits.view(b * t, -1), targets.view(b * t))


def make_gpt(tmp, steps_needed, batch):
    torch.manual_seed(0)
    model = os.path.join(tmp, "gpt.pt")
    torch.jit.script(GPT()).save(model)
    data = {"idx": torch.randint(0, 512, (steps_needed, batch, 64)),
            "targets": torch.randint(0, 512, (steps_needed, batch, 64))}
    path = os.path.join(tmp, "gpt.data.pt")
    torch.save(data, path)
    return model, path


def blas_in_use():
    """The BLAS the torch wheel's ATen was built with (ds-run links the same LibTorch), from
    torch.__config__.show(): e.g. "mkl (oneDNN v3.13.3)"."""
    config = torch.__config__.show()
    blas = re.search(r"BLAS_INFO=(\w+)", config)
    onednn = re.search(r"MKL-DNN (v[\d.]+)", config)
    return "%s%s" % (blas.group(1) if blas else "unknown",
                     " (oneDNN %s)" % onednn.group(1) if onednn else "")


def time_ds_run(bin_dir, plan, data, steps, env):
    cmd = [os.path.join(bin_dir, "ds-run"), plan, "--data", data, "--steps", str(steps)]
    start = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--model", default="gpt",
                   help="gpt (defined here, ~3.4M parameters) or a test model name")
    p.add_argument("--batch", type=int, default=8, help="micro-batch of the gpt model")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()

    torch.set_num_threads(args.threads)
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    with tempfile.TemporaryDirectory() as tmp:
        if args.model == "gpt":
            model, data_path = make_gpt(tmp, args.steps * 2 + 2, args.batch)
        else:
            subprocess.run([sys.executable, os.path.join(HERE, "..", "test", "models",
                                                         "make_models.py"), tmp],
                           check=True, stdout=subprocess.DEVNULL)
            model = os.path.join(tmp, args.model + ".pt")
            data_path = os.path.join(tmp, args.model + ".data.pt")
        data = torch.load(data_path)
        s_avail = next(iter(data.values())).shape[0]
        # Repeat the data so that both runs have enough micro-steps.
        reps = (args.steps * 2 + s_avail - 1) // s_avail
        data = {k: v.repeat((reps,) + (1,) * (v.dim() - 1)) for k, v in data.items()}
        big = os.path.join(tmp, "bench.data.pt")
        torch.save(data, big)
        config = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": 1,
                  "gradient_clipping": 1.0,
                  "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.01}}}
        cfg = os.path.join(tmp, "cfg.json")
        with open(cfg, "w") as f:
            json.dump(config, f)
        plan = os.path.join(tmp, "model.plan")
        subprocess.run([os.path.join(args.bin, "ds-compile"), model, "--config", cfg,
                        "--example-inputs", big, "-o", plan], check=True, env=env)
        short = time_ds_run(args.bin, plan, big, args.steps // 2, env)
        long = time_ds_run(args.bin, plan, big, args.steps, env)
        ours = (long - short) / (args.steps - args.steps // 2)

        module = torch.jit.load(model)
        module.train()
        opt = torch.optim.AdamW(module.parameters(), lr=1e-3, weight_decay=0.01)
        names = list(data.keys())

        def eager_step(s):
            loss = module(*[data[n][s] for n in names])
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(module.parameters(), 1.0)
            opt.step()

        eager_step(0)
        start = time.perf_counter()
        for s in range(1, args.steps + 1):
            eager_step(s)
        eager = (time.perf_counter() - start) / args.steps

    batch = next(iter(data.values())).shape[1]
    params = sum(p.numel() for p in module.parameters())
    print("| model | params | batch | threads | ds-run ms/step | eager ms/step | ratio (ds/eager) | BLAS |")
    print("|---|---|---|---|---|---|---|---|")
    print("| %s | %d | %d | %d | %.2f | %.2f | %.2f | %s |" % (
        args.model, params, batch, args.threads, ours * 1e3, eager * 1e3, ours / eager,
        blas_in_use()))


if __name__ == "__main__":
    main()
