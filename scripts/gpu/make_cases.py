#!/usr/bin/env python3
"""The GPU check's cases, compiled on the build machine (scripts/gpu-bundle.sh runs this).

  make_cases.py --ds-compile BIN/ds-compile --models MODELS_DIR --out BUNDLE/cases

For every case: its DeepSpeed config (NAME.config.json), the plan compiled with
`ds-compile --device cuda` (NAME.plan, its weights path made relative to the plan's folder),
and the TorchScript archive and data it names, copied once per model. The 100M GPT's plan is
compiled from an archive made here in a temporary folder and deleted: gpu-check.sh makes the
same archive on the node (make_gpt.py). Writes cases.json, which check.py reads:

  {"cases": [{"name", "tier", "kind", "plan", "model", "data", "config", "steps", "mode",
              ...kind-specific keys}], "compiled_with": {"torch", "ds_compile"}}

kinds: oracle (ds-run vs oracle.py on the same GPU; "world" 2: under torchrun on 2 GPUs
against the oracle of 2 ranks), distill (oracle + the frozen teacher bitwise unchanged),
checkpoint (4 steps straight vs 2 + save + resume, bitwise), speed (ms/step and MFU against
eager PyTorch), speed-ddp (2 ranks: ms/step against PyTorch DDP with NCCL), dsopt (the
pip-installed runtime module trains the plan).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

ADAMW = {"type": "AdamW", "params": {"lr": 0.002, "weight_decay": 0.01}}
SGD = {"type": "SGD", "params": {"lr": 0.05, "momentum": 0.9}}


def zero(stage, bucket=2000):
    z = {"stage": stage, "reduce_bucket_size": bucket, "allgather_bucket_size": bucket,
         "overlap_comm": True}
    if stage == 3:
        z["stage3_param_persistence_threshold"] = 0
        z["stage3_prefetch_bucket_size"] = bucket
    return z


def config(stage, optimizer, gas=1, precision=None, extra=None):
    cfg = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": gas,
           "gradient_clipping": 1.0, "zero_optimization": zero(stage), "optimizer": optimizer}
    if precision == "bf16":
        cfg["bf16"] = {"enabled": True}
    elif precision == "fp16":
        cfg["fp16"] = {"enabled": True}
    if extra:
        for key, value in extra.items():
            cfg[key] = value
    return cfg


def offloaded(cfg):
    """cfg with ZeRO-Offload of the optimizer to pinned host memory."""
    cfg["zero_optimization"]["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    return cfg


def engine(stage, optimizer=None):
    cfg = {"train_micro_batch_size_per_gpu": "auto", "zero_optimization": zero(stage, 200)}
    if optimizer:
        cfg["optimizer"] = optimizer
    return cfg


# (name, tier, kind, model, config, steps, mode[, options]): mode picks
# oracle.PRECISION_TOLERANCES; options: {"world": W} compiles for W ranks (tier m runs them
# under torchrun, one GPU each, where W GPUs are visible).
CASES = [
    ("s0-fp32", "a", "oracle", "transformer", config(0, ADAMW), 4, "fp32"),
    ("s3-fp32", "a", "oracle", "transformer", config(3, ADAMW), 4, "fp32"),
    # Low precision with SGD: Adam turns rounding noise in near-zero gradients into full-size
    # steps (oracle.py, "Tolerances").
    ("s0-bf16", "a", "oracle", "transformer", config(0, SGD, precision="bf16"), 3, "bf16"),
    ("s3-bf16", "a", "oracle", "transformer", config(3, SGD, precision="bf16"), 3, "bf16"),
    # Attention through F.scaled_dot_product_attention(is_causal=True): the plan's forward
    # calls the op (CUDA's flash / memory-efficient kernels), its gradient takes ATen's math
    # path (docs/autodiff.md); the oracle's eager backward is the kernels' own.
    ("sdpa-s0-fp32", "a", "oracle", "gpt_sdpa", config(0, ADAMW), 4, "fp32"),
    ("sdpa-s3-bf16", "a", "oracle", "gpt_sdpa", config(3, SGD, precision="bf16"), 3, "bf16"),
    # The torch.export front door: plans compiled from a .pt2 (an MLP with BatchNorm and
    # dropout, test/models/make_exports.py), weights read in place from it; the oracle trains
    # its scripted twin (the same weights).
    ("export-s0-fp32", "a", "oracle", "export_mlp_twin", config(0, ADAMW), 4, "fp32",
     {"program": "export_mlp"}),
    ("export-s3-fp32", "a", "oracle", "export_mlp_twin", config(3, ADAMW), 4, "fp32",
     {"program": "export_mlp"}),
    ("gas2-s2-fp32", "b", "oracle", "transformer", config(2, ADAMW, gas=2), 3, "fp32"),
    # fp16_scale (make_models.py): gradients fixed by the data; at W = 1 scales >= 2^16
    # overflow fp16, 2^15 does not. From 2^17 with hysteresis 2 and window 3 the scale falls,
    # grows and overflows again: skipped steps, equal scale sequences required.
    ("fp16-overflow", "b", "oracle", "fp16_scale",
     config(0, {"type": "AdamW", "params": {"lr": 0.01}}, precision="fp16",
            extra={"fp16": {"enabled": True, "initial_scale_power": 17,
                            "loss_scale_window": 3, "hysteresis": 2},
                   "scheduler": {"type": "WarmupLR", "params": {
                       "warmup_min_lr": 0.001, "warmup_max_lr": 0.01, "warmup_num_steps": 6,
                       "warmup_type": "linear"}}}), 12, "fp16"),
    # The distillation pair of test/mpi/engines_check.py: student ZeRO-2 AdamW, frozen ZeRO-3
    # teacher.
    ("distill", "b", "distill", "two_models",
     {"engines": {"student": engine(2, ADAMW), "teacher": engine(3)}}, 4, "fp32"),
    ("checkpoint-s3", "b", "checkpoint", "transformer", config(3, ADAMW), 4, "fp32"),
    # ZeRO-Offload on one GPU: master shard and AdamW state in pinned host memory, the CPU
    # optimizer between a gradient copy down and a parameter copy up.
    ("offload-s2-fp32", "o", "oracle", "transformer", offloaded(config(2, ADAMW)), 4, "fp32"),
    ("offload-s3-bf16", "o", "oracle", "transformer",
     offloaded(config(3, SGD, precision="bf16")), 3, "bf16"),
    # Two ranks, one GPU each, NCCL (torchrun): stages 0-3 against the oracle of 2 ranks.
    ("w2-s0-fp32", "m", "oracle", "transformer", config(0, ADAMW), 4, "fp32", {"world": 2}),
    ("w2-s1-fp32", "m", "oracle", "transformer", config(1, ADAMW), 4, "fp32", {"world": 2}),
    ("w2-s2-fp32", "m", "oracle", "transformer", config(2, ADAMW, gas=2), 3, "fp32",
     {"world": 2}),
    ("w2-s3-fp32", "m", "oracle", "transformer", config(3, ADAMW), 4, "fp32", {"world": 2}),
    ("w2-s3-bf16", "m", "oracle", "transformer", config(3, SGD, precision="bf16"), 3, "bf16",
     {"world": 2}),
]


def run(cmd):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout)
        raise SystemExit("make_cases.py: failed (%d): %s" % (proc.returncode, " ".join(cmd)))
    return proc.stdout


DEVICE = "cuda"


def compile_plan(ds_compile, model, data, cfg_path, plan, world=1):
    run([ds_compile, model, "--config", cfg_path, "--example-inputs", data, "--device", DEVICE,
         "--world-size", str(world), "-o", plan])
    with open(plan) as f:
        doc = json.load(f)
    if doc.get("device") != DEVICE:
        raise SystemExit("make_cases.py: %s was compiled for device %r, not %s"
                         % (plan, doc.get("device"), DEVICE))
    # The archive travels beside the plan: a path relative to the plan's folder.
    weights = doc.get("weights") or {}
    weights["path"] = os.path.basename(weights.get("path", ""))
    doc["weights"] = weights
    with open(plan, "w") as f:
        json.dump(doc, f)
    return doc


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    p.add_argument("--ds-compile", required=True)
    p.add_argument("--models", required=True, help="test/models/make_models.py's output")
    p.add_argument("--out", required=True)
    p.add_argument("--device", default="cuda",
                   help="cuda (the bundle); cpu only for the scripts' self-test on the CPU")
    p.add_argument("--no-100m", action="store_true",
                   help="leave out the ~100M-parameter speed case (the CPU self-test)")
    args = p.parse_args(argv)
    global DEVICE
    DEVICE = args.device
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    cases = []
    torch_version = None

    def ship(*files):
        for name in files:
            dst = os.path.join(out, name)
            if not os.path.exists(dst):
                shutil.copyfile(os.path.join(args.models, name), dst)

    for name, tier, kind, model, cfg, steps, mode, *more in CASES:
        options = more[0] if more else {}
        world = options.get("world", 1)
        # "program": compiled from PROGRAM.pt2 (its data PROGRAM.data.pt); the oracle trains
        # MODEL.pt, its TorchScript twin.
        program = options.get("program")
        data = (program or model) + ".data.pt"
        source = program + ".pt2" if program else model + ".pt"
        ship(model + ".pt", data, source)
        cfg_path = os.path.join(out, name + ".config.json")
        with open(cfg_path, "w") as f:
            json.dump(cfg, f, indent=1)
        doc = compile_plan(args.ds_compile, os.path.join(out, source),
                           os.path.join(out, data), cfg_path,
                           os.path.join(out, name + ".plan"), world)
        torch_version = doc.get("torch_version")
        case = {"name": name, "tier": tier, "kind": kind, "plan": name + ".plan",
                "model": model + ".pt", "data": data,
                "config": name + ".config.json", "steps": steps, "mode": mode,
                "world": world}
        if program:
            case["program"] = source
        if kind == "distill":
            case["frozen_prefix"] = "teacher."
        cases.append(case)

    # The runtime-only dsopt module trains the first plan from Python.
    cases.append({"name": "dsopt-engine", "tier": "dsopt", "kind": "dsopt",
                  "plan": "s0-fp32.plan", "model": "transformer.pt",
                  "data": "transformer.data.pt", "steps": 2, "mode": "fp32",
                  "reference": "s0-fp32"})

    # Speed: bench/step_time.py's config (AdamW lr 1e-3, weight decay 0.01, clipping 1.0).
    speed_opt = {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.01}}
    sizes = [("bench", None, True)] + ([] if args.no_100m else [("100m", "bf16", False)])
    for size, precision, ship_archive in sizes:
        cfg = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": 1,
               "gradient_clipping": 1.0, "optimizer": speed_opt}
        if precision:
            cfg["bf16"] = {"enabled": True}
        name = "speed-gpt-%s" % size
        cfg_path = os.path.join(out, name + ".config.json")
        with open(cfg_path, "w") as f:
            json.dump(cfg, f, indent=1)
        with tempfile.TemporaryDirectory() as tmp:
            where = out if ship_archive else tmp
            params = int(run([sys.executable, os.path.join(HERE, "make_gpt.py"), "--size", size,
                              "--out", where]).split()[-1])
            compile_plan(args.ds_compile, os.path.join(where, "gpt_%s.pt" % size),
                         os.path.join(where, "gpt_%s.data.pt" % size), cfg_path,
                         os.path.join(out, name + ".plan"))
        cases.append({"name": name, "tier": "c", "kind": "speed", "plan": name + ".plan",
                      "model": "gpt_%s.pt" % size, "data": "gpt_%s.data.pt" % size,
                      "config": name + ".config.json", "size": size, "params": params,
                      "mode": precision or "fp32", "made_on_node": not ship_archive})

    # Two ranks: ds-run (NCCL, stage 0 and ZeRO-3) vs PyTorch DDP (NCCL) on the bench GPT.
    for stage in (0, 3):
        name = "speed-w2-s%d" % stage
        cfg = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": 1,
               "gradient_clipping": 1.0, "optimizer": speed_opt,
               "zero_optimization": zero(stage, 50_000_000)}
        cfg_path = os.path.join(out, name + ".config.json")
        with open(cfg_path, "w") as f:
            json.dump(cfg, f, indent=1)
        compile_plan(args.ds_compile, os.path.join(out, "gpt_bench.pt"),
                     os.path.join(out, "gpt_bench.data.pt"), cfg_path,
                     os.path.join(out, name + ".plan"), 2)
        cases.append({"name": name, "tier": "m", "kind": "speed-ddp", "plan": name + ".plan",
                      "model": "gpt_bench.pt", "data": "gpt_bench.data.pt",
                      "config": name + ".config.json", "size": "bench", "mode": "fp32",
                      "world": 2, "stage": stage})

    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump({"cases": cases, "compiled_with": {
            "torch": torch_version, "ds_compile": os.path.abspath(args.ds_compile),
            "device": DEVICE}},
            f, indent=1)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
