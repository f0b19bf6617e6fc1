#!/usr/bin/env python3
"""Fine-tunes a Hugging Face GPT-2 on a character-level corpus at ZeRO-3, bf16, on 2 ranks.

    .venv/bin/python examples/finetune/finetune.py [--out DIR] [--steps N] [--bin build/bin]
                                                   [--mpirun mpirun]

The path a user walks, on a tiny model so that it runs in seconds (README.md here):
  1. "existing weights": a GPT-2 built from a config and saved with save_pretrained;
  2. a character-level corpus, tokenised by characters, as a [S, B, T] data file;
  3. the model traced with its loss; ds-compile for ZeRO-3, bf16, 2 ranks;
  4. mpirun -n 2 ds-run --weights base/model.safetensors (Hugging Face's file and names)
     --save-16bit final/ (DeepSpeed's save_16bit_model) --save-checkpoint checkpoint/;
  5. from_pretrained(final/) holds our final parameters: its bf16 weights are the checkpoint's
     fp32 master weights (ds-zero-to-fp32) rounded, its logits theirs within bf16's rounding.
Exits non-zero when the loss does not fall by 0.1 or the loaded model is not ours.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import warnings

import torch
import transformers
from safetensors.torch import load_file
from transformers import GPT2Config, GPT2LMHeadModel

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

ALPHABET = "\n .,abcdefghijklmnopqrstuvwxyz"  # token id = index; the config's vocabulary
T = 32  # characters per sequence
B = 8  # sequences per micro-step, over both ranks (4 each)


class GPT2ForTraining(GPT2LMHeadModel):
    """GPT-2 whose forward returns the loss, as the plan's forward must. A subclass, not a wrapper
    module: its parameter names are Hugging Face's, in the plan and in the files we save."""

    def forward(self, input_ids, labels):
        return super().forward(input_ids=input_ids, labels=labels, use_cache=False).loss


def tiny_config() -> GPT2Config:
    return GPT2Config(vocab_size=len(ALPHABET), n_positions=T, n_embd=64, n_layer=2, n_head=4,
                      resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                      bos_token_id=0, eos_token_id=0)


def corpus(chars: int) -> str:
    """A few KB of generated sentences (seeded): enough structure for the loss to fall."""
    rng = random.Random(0)
    subjects = ["the cat", "a dog", "my friend", "the old man", "a bird", "the teacher"]
    verbs = ["sees", "likes", "finds", "follows", "draws", "hears"]
    objects = ["the river", "a small house", "the red ball", "a quiet town", "the moon"]
    text = ""
    while len(text) < chars:
        text += f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)}.\n"
    return text[:chars]


def make_data(text: str, steps: int) -> dict:
    """steps micro-steps of B sequences of T characters; HF shifts the labels itself."""
    ids = torch.tensor([ALPHABET.index(c) for c in text])
    g = torch.Generator().manual_seed(0)
    starts = torch.randint(0, len(ids) - T, (steps, B), generator=g)
    input_ids = torch.stack([torch.stack([ids[s:s + T] for s in row]) for row in starts])
    return {"input_ids": input_ids, "labels": input_ids.clone()}


def run(cmd):
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.path.join(ROOT, "build", "examples", "finetune"))
    p.add_argument("--steps", type=int, default=8, help="optimizer steps (default 8)")
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    p.add_argument("--mpirun", default="mpirun")
    args = p.parse_args()
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # for the ranks: one thread each
    os.makedirs(args.out, exist_ok=True)
    out = lambda *name: os.path.join(args.out, *name)  # noqa: E731

    # 1. The existing weights: any Hugging Face checkpoint folder does (config.json +
    #    model.safetensors); here a tiny GPT-2 from a config, so that nothing is downloaded.
    config = tiny_config()
    torch.manual_seed(0)
    GPT2LMHeadModel(config).save_pretrained(out("base"))

    # 2. The corpus and the data file: a dict of [S, B, T] tensors, one per forward argument.
    data = make_data(corpus(4096), args.steps)
    torch.save(data, out("data.pt"))

    # 3. Trace the model with its loss on one micro-step. Its own weights (random here) are
    #    replaced at run time by --weights; compile for 2 ranks.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        model = GPT2ForTraining(config).train()
        traced = torch.jit.trace(model, (data["input_ids"][0], data["labels"][0]),
                                 check_trace=False)
    traced.save(out("model.pt"))
    ds_config = {
        "train_micro_batch_size_per_gpu": "auto",
        "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "weight_decay": 0.0}},
        "bf16": {"enabled": True},
        "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0,  # shard all
                              "stage3_gather_16bit_weights_on_model_save": True},
    }
    with open(out("ds_config.json"), "w") as f:
        json.dump(ds_config, f, indent=2)
    run([os.path.join(args.bin, "ds-compile"), out("model.pt"), "--config",
         out("ds_config.json"), "--example-inputs", out("data.pt"), "--world-size", "2",
         "-o", out("model.plan")])

    # 4. Train on 2 ranks from the Hugging Face weights; save the 16-bit model (DeepSpeed's
    #    save_16bit_model) and a checkpoint, whose fp32 master weights are our final parameters.
    mpirun = [args.mpirun, "--oversubscribe", "-n", "2"]
    if os.geteuid() == 0:
        mpirun.insert(1, "--allow-run-as-root")
    run(mpirun + [os.path.join(args.bin, "ds-run"), out("model.plan"), "--data", out("data.pt"),
                  "--weights", out("base", "model.safetensors"), "--losses", out("losses.jsonl"),
                  "--save-16bit", out("final"), "--save-checkpoint", out("checkpoint")])
    run([os.path.join(args.bin, "ds-zero-to-fp32"), out("checkpoint"), out("fp32"),
         "--safetensors"])
    with open(out("losses.jsonl")) as f:
        losses = [json.loads(line)["loss"] for line in f]
    print("losses:", " ".join(f"{loss:.4f}" for loss in losses))
    if not losses[-1] < losses[0] - 0.1:
        print(f"FAIL: the loss did not fall ({losses[0]:.4f} -> {losses[-1]:.4f})")
        return 1

    # 5. Back into Hugging Face: from_pretrained needs the config next to the weights.
    config.save_pretrained(out("final"))
    tuned = GPT2LMHeadModel.from_pretrained(out("final"), dtype=torch.bfloat16)
    masters = load_file(out("fp32", "model.safetensors"))
    return check(tuned, masters, config, out("base"), data["input_ids"][-1])


def check(tuned, masters, config, base_dir, ids) -> int:
    """The loaded model against our final parameters: its bf16 weights are our fp32 master
    weights rounded to bf16, exactly; its logits (float32 forward) are theirs within bf16's
    rounding, a much smaller change than training made."""
    loaded = tuned.state_dict()
    for name, master in masters.items():
        if not torch.equal(loaded[name], master.bfloat16()):
            print(f"FAIL: {name} is not our final {name} in bf16")
            return 1
    ours = GPT2LMHeadModel(config).eval()
    missing = ours.load_state_dict(masters, strict=False).missing_keys
    assert missing == ["lm_head.weight"], missing  # tied to transformer.wte.weight
    base = GPT2LMHeadModel.from_pretrained(base_dir).eval()
    with torch.no_grad():
        logits = ours(ids).logits
        diff = (tuned.float()(ids).logits - logits).abs().max().item()
        moved = (base(ids).logits - logits).abs().max().item()
    tol = 2 ** -6 * logits.abs().max().item()  # twice bf16's epsilon, at the largest logit
    print(f"max |logits(from_pretrained) - logits(ours, fp32)| = {diff:.3g} "
          f"(tolerance {tol:.3g}); training moved the logits by {moved:.3g}")
    if not diff <= tol < moved:
        print("FAIL: the saved model's logits are not ours")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
