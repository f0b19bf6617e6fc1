#!/usr/bin/env python3
"""ds-run --weights reads a Hugging Face file into a plan traced through a loss wrapper.

    .venv/bin/python examples/finetune/wrapper_check.py --out DIR [--bin build/bin]
                                                     [--model gpt2|llama]

The recipe's GPT-2 (finetune.py), or a Llama of the same size, traced as test/zoo's CausalLMLoss
holds it (self.model: plan names model.transformer...), compiled in float32 for one rank;
`ds-run --eval --weights base/model.safetensors` must give Hugging Face's own loss of those
weights on each micro-step (within 1e-5: float32 on both sides), where the wrapper's own random
weights give another. Llama's rotary `inv_freq` is a non-persistent buffer that
`save_pretrained` leaves out: it keeps the plan's value (ds-run says so in a note).
"""

import argparse
import json
import os
import subprocess
import sys
import warnings

import torch
import transformers
from transformers import GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

import finetune


class CausalLMLoss(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, labels):
        return self.model(input_ids=input_ids, labels=labels, use_cache=False).loss


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--bin", default=os.path.join(finetune.ROOT, "build", "bin"))
    p.add_argument("--model", choices=("gpt2", "llama"), default="gpt2")
    args = p.parse_args()
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    os.makedirs(args.out, exist_ok=True)
    out = lambda *name: os.path.join(args.out, *name)  # noqa: E731

    if args.model == "gpt2":
        config, model_class = finetune.tiny_config(), GPT2LMHeadModel
    else:
        config = LlamaConfig(vocab_size=len(finetune.ALPHABET), hidden_size=64,
                             intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                             num_key_value_heads=2, max_position_embeddings=finetune.T,
                             bos_token_id=0, eos_token_id=0)
        model_class = LlamaForCausalLM
    torch.manual_seed(0)
    model_class(config).save_pretrained(out("base"))
    data = finetune.make_data(finetune.corpus(4096), 2)
    torch.save(data, out("data.pt"))
    wrapper = CausalLMLoss(model_class(config)).train()  # other random weights
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        torch.jit.trace(wrapper, (data["input_ids"][0], data["labels"][0]),
                        check_trace=False).save(out("model.pt"))
    with open(out("ds_config.json"), "w") as f:
        json.dump({"train_micro_batch_size_per_gpu": "auto"}, f)
    subprocess.run([os.path.join(args.bin, "ds-compile"), out("model.pt"), "--config",
                    out("ds_config.json"), "--example-inputs", out("data.pt"), "-o",
                    out("model.plan")], check=True)

    def eval_losses(*weights):
        lines = subprocess.run([os.path.join(args.bin, "ds-run"), out("model.plan"), "--data",
                                out("data.pt"), "--eval", *weights], check=True,
                               capture_output=True, text=True).stdout.splitlines()
        return [json.loads(line)["loss"] for line in lines]

    ours = eval_losses("--weights", out("base", "model.safetensors"))
    own = eval_losses()
    hf = model_class.from_pretrained(out("base")).eval()
    with torch.no_grad():
        theirs = [hf(input_ids=i, labels=l).loss.item()
                  for i, l in zip(data["input_ids"], data["labels"])]
    print(f"ds-run --eval --weights: {ours}; Hugging Face: {theirs}; "
          f"the wrapper's own weights: {own}")
    close = lambda a, b: all(abs(x - y) <= 1e-5 for x, y in zip(a, b))  # noqa: E731
    if not close(ours, theirs) or close(own, theirs):
        print("FAIL: --weights did not give the plan Hugging Face's weights")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
