#!/usr/bin/env python3
"""Training from a .pt2's weights equals training from the TorchScript archive's, bitwise.

  weights_train.py --ds-compile BIN --ds-run BIN --models DIR --work DIR [MODEL ...]

For each test model (test/models/make_models.py: mlp, tied_lm, resnet by default): its module is
rebuilt from the TorchScript archive's state dict and saved with torch.export.save; the plan
compiled from the archive then trains 3 steps (a) as it is, (b) with ds-run --weights M.pt2, (c)
with its weights edited to {"kind": "pt2", "path": "M.pt2"}. The loss lines of (b) and (c) must be
those of (a), byte for byte; a .pt2 of other weights must change them (so the check can fail).
"""

import argparse
import inspect
import json
import os
import shutil
import subprocess
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "test", "models"))
import make_models  # noqa: E402  (its classes; nothing runs on import)

CLASSES = {"mlp": make_models.MLP, "tied_lm": make_models.TiedLM, "resnet": make_models.ResNet,
           "transformer": make_models.GPT}
CONFIG = {"train_micro_batch_size_per_gpu": "auto",
          "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}


def run(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit("FAIL: %s\n%s%s" % (" ".join(cmd), proc.stdout, proc.stderr))
    return proc.stdout.splitlines()


def export(name, models, state, out):
    module = CLASSES[name]()
    module.load_state_dict(state)
    data = torch.load(os.path.join(models, name + ".data.pt"))
    names = inspect.signature(module.forward).parameters
    args = tuple(data[key][0] for key in names)
    torch.export.save(torch.export.export(module, args), out)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ds-compile", required=True)
    parser.add_argument("--ds-run", required=True)
    parser.add_argument("--models", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("names", nargs="*", default=["mlp", "tied_lm", "resnet"])
    args = parser.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    with open(os.path.join(args.work, "config.json"), "w") as f:
        json.dump(CONFIG, f)

    for name in args.names:
        p = lambda suffix: os.path.join(args.work, name + suffix)
        archive = os.path.join(args.models, name + ".pt")
        data = os.path.join(args.models, name + ".data.pt")
        state = torch.jit.load(archive).state_dict()
        export(name, args.models, state, p(".pt2"))
        run([args.ds_compile, archive, "--config", os.path.join(args.work, "config.json"),
             "--example-inputs", data, "-o", p(".plan")])
        train = lambda plan, *extra: run(
            [args.ds_run, plan, "--data", data, "--steps", "3"] + list(extra))

        reference = train(p(".plan"))
        assert len(reference) == 3, reference
        from_weights = train(p(".plan"), "--weights", p(".pt2"))
        with open(p(".plan")) as f:
            plan = json.load(f)
        assert plan["version"] >= 8 and plan["weights"]["kind"] == "torchscript", plan["weights"]
        plan["weights"] = {"kind": "pt2", "path": name + ".pt2"}
        with open(p(".pt2.plan"), "w") as f:
            json.dump(plan, f)
        from_plan = train(p(".pt2.plan"))
        # Other weights must show: the comparison can fail.
        torch.manual_seed(1234)
        export(name, args.models, CLASSES[name]().state_dict(), p(".other.pt2"))
        other = train(p(".plan"), "--weights", p(".other.pt2"))

        for label, lines in [("--weights", from_weights), ("plan kind pt2", from_plan)]:
            if lines != reference:
                sys.exit("FAIL %s %s:\n%s\nexpected\n%s" % (name, label, "\n".join(lines),
                                                          "\n".join(reference)))
        if other == reference:
            sys.exit("FAIL %s: other weights gave the same losses" % name)
        print("ok: %s: 3 loss lines bitwise equal (--weights and plan kind pt2): %s"
              % (name, reference[-1]))
    print("PASS")


if __name__ == "__main__":
    main()
