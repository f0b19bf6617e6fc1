#!/usr/bin/env python3
"""One cell of the model zoo: a zoo model trained 4 steps by ds-compile + ds-run against the oracle.

  zoo_check.py --bin BUILD/bin --zoo DIR --model NAME --cell CELL [--keep DIR]

DIR is make_zoo.py's output (NAME.pt, NAME_traced.pt, NAME.data.pt, zoo.json). Cells:
  script-s0-w1   the scripted archive, ZeRO stage 0, one rank
  traced-s0-w1   the traced archive (same weights and data), ZeRO stage 0, one rank
  script-z3-w2   the scripted archive, ZeRO stage 3 on 2 MPI ranks (small buckets: several per
                 model, persistent small parameters)
  traced-z3-w2   the traced archive so (the models that only trace: transformers')
  leaf-z3-w2     as script-z3-w2 with the model's MoE block a ZeRO-3 leaf module (zoo.json "leaf")
  export-s0-w1   the torch.export program (NAME.pt2, same weights), ZeRO stage 0, one rank; the
                 oracle trains its TorchScript twin (NAME.pt, else NAME_traced.pt)
  export-z3-w2   the program exported for one of 2 ranks' rows (NAME.w2.pt2), at ZeRO stage 3
                 on 2 MPI ranks
  export-leaf-z3-w2  so, with the MoE block a ZeRO-3 leaf module (matched by its class, which
                 the program's nn_module_stack names)
  core-s0-w1     the core-ATen program (NAME.core.pt2: run_decompositions()), stage 0, one rank
  core-z3-w2     so for one of 2 ranks' rows (NAME.w2.core.pt2), ZeRO stage 3 on 2 ranks
The optimizer is AdamW unless zoo.json says otherwise for the model (docs/oracle.md: a parameter
whose true gradient is exactly zero, as an attention key bias, is trained with SGD). Runs
test/oracle/train_check.py, which prints the compile time and the comparison; exit status is
its own.
"""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "oracle"))
import train_check  # noqa: E402

OPTIMIZERS = {
    "adamw": {"type": "AdamW", "params": {"lr": 0.001, "weight_decay": 0.01}},
    "sgd": {"type": "SGD", "params": {"lr": 0.05, "momentum": 0.9}},
}
STAGE3 = {"stage": 3, "reduce_bucket_size": 4000, "stage3_prefetch_bucket_size": 4000,
          "stage3_param_persistence_threshold": 64}
CELLS = ("script-s0-w1", "traced-s0-w1", "script-z3-w2", "traced-z3-w2", "leaf-z3-w2",
         "export-s0-w1", "export-z3-w2", "export-leaf-z3-w2", "core-s0-w1", "core-z3-w2")


def config_for(entry: dict, cell: str) -> dict:
    config = {"train_micro_batch_size_per_gpu": "auto",
              "optimizer": OPTIMIZERS[entry.get("optimizer", "adamw")]}
    if "-z3-" in cell:
        config["zero_optimization"] = dict(STAGE3)
    if "leaf-" in cell:
        config["zero_optimization"]["leaf_module"] = {"classes": [entry["leaf"]]}
    return config


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="zoo_check.py", description=__doc__.splitlines()[0])
    p.add_argument("--bin", required=True)
    p.add_argument("--zoo", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--cell", required=True, choices=CELLS)
    p.add_argument("--keep", default=None)
    args = p.parse_args(argv)
    with open(os.path.join(args.zoo, "zoo.json")) as f:
        zoo = json.load(f)
    if args.model not in zoo:
        p.error(f"{args.model} is not in {args.zoo}/zoo.json (models: {', '.join(zoo)})")
    entry = zoo[args.model]
    if args.cell.startswith("export") and not entry.get("exported"):
        p.error(f"{args.model} has no torch.export program: {entry['notes']}")
    if args.cell.startswith("core") and not entry.get("core"):
        p.error(f"{args.model} has no core-ATen program (zoo.json \"core\")")
    if args.cell.startswith("traced") and not entry["traced"]:
        p.error(f"{args.model} has no traced archive: {entry['notes']}")
    if args.cell.startswith(("script", "leaf")) and not entry["scripted"]:
        p.error(f"{args.model} has no scripted archive: {entry['notes']}")
    if args.cell.endswith("leaf-z3-w2") and not entry["leaf"]:
        p.error(f"{args.model} names no leaf module")
    exported = args.cell.startswith(("export", "core"))
    traced = args.cell.startswith("traced") or (exported and not entry["scripted"])
    model = args.model + ("_traced" if traced else "")
    world = 2 if args.cell.endswith("-w2") else 1
    check = ["--bin", args.bin, "--models", args.zoo, "--model", model,
             "--data", os.path.join(args.zoo, args.model + ".data.pt"),
             "--config-json", json.dumps(config_for(entry, args.cell)),
             "--steps", "4", "--world-size", str(world)]
    if exported:
        program = args.model + (".w2" if world == 2 else "") + (
            ".core.pt2" if args.cell.startswith("core") else ".pt2")
        check += ["--compile-model", os.path.join(args.zoo, program)]
    if args.keep:
        check += ["--keep", args.keep]
    return train_check.main(check)


if __name__ == "__main__":
    sys.exit(main())
