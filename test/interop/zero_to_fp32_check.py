#!/usr/bin/env python3
"""DeepSpeed's own zero_to_fp32 on our checkpoints (docs/checkpoint.md, "DeepSpeed interop").

  zero_to_fp32_check.py --bin BUILD/bin --models DIR [--launcher 'mpirun -n {W}'] [--keep DIR]

On 2 ranks, `ds-run --steps 2 --save-checkpoint --save-params` for mlp in fp32 and transformer
in bf16, each at ZeRO stages 1, 2 and 3 with buckets of 500 elements (several per engine; stage 3
keeps the parameters under 100 elements whole), then in one Python process (DeepSpeed's import
is slow) DeepSpeed 0.19's `get_fp32_state_dict_from_zero_checkpoint` on each checkpoint:

  fp32   every parameter bitwise equal to the trained one (--save-params);
  bf16   float32, bitwise equal to ds-zero-to-fp32's master, which rounds to the trained bf16.

and `dsopt.zero_to_fp32`'s three functions give the same tensors. A stage 0 checkpoint (no
optimizer shards) makes DeepSpeed's script raise its FileNotFoundError. Exits 1 naming every
failure.
"""

import argparse
import os
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "mpi"))
import checkpoint_check as cc  # noqa: E402
import oracle  # noqa: E402

WORLD = 2
CASES = [("fp32", "mlp", stage, {}) for stage in (1, 2, 3)] + \
        [("bf16", "transformer", stage, {"bf16": {"enabled": True}}) for stage in (1, 2, 3)]


def train(r, mode, model, stage, section):
    name = f"{mode}-s{stage}"
    config = cc.config_for(stage)
    config.update(section)
    plan = r.compile(name, model, config, WORLD)
    ckpt, params = r.path(name, "ckpt"), r.path(name, "params.safetensors")
    r.launch(plan, model, WORLD, ["--steps", 2, "--save-checkpoint", ckpt, "--save-params", params])
    return ckpt, oracle.load_params(params)


def check_rebuilt(r, mode, stage, ckpt, trained, rebuilt, what):
    if mode == "fp32":
        cc.same_params(rebuilt, trained, what)
        return
    out = r.path(f"{mode}-s{stage}", "ours")
    if not os.path.isdir(out):
        r.zero_to_fp32(ckpt, out)
    master = torch.load(os.path.join(out, "pytorch_model.bin"))
    cc.same_params(rebuilt, master, what + " vs ds-zero-to-fp32")
    for name, tensor in rebuilt.items():
        if not torch.equal(tensor.to(torch.bfloat16), trained[name]):
            raise cc.Failure(f"{what}: {name} does not round to the trained bf16 parameter")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", required=True)
    parser.add_argument("--models", required=True)
    parser.add_argument("--launcher", default=None)
    parser.add_argument("--keep", default=None)
    args = parser.parse_args(argv)
    root = args.keep or tempfile.mkdtemp(prefix="zero_to_fp32_check.")
    os.makedirs(root, exist_ok=True)
    r = cc.Runner(args, root)

    trained = {}
    for mode, model, stage, section in CASES:
        def run(mode=mode, model=model, stage=stage, section=section):
            trained[(mode, stage)] = train(r, mode, model, stage, section)
        r.check(f"train {mode} {model} stage {stage} W={WORLD}", run)

    from deepspeed.utils import zero_to_fp32 as deepspeed_z2f
    from dsopt import zero_to_fp32 as dsopt_z2f

    for (mode, stage), (ckpt, params) in trained.items():
        def deepspeed_reads(mode=mode, stage=stage, ckpt=ckpt, params=params):
            rebuilt = deepspeed_z2f.get_fp32_state_dict_from_zero_checkpoint(ckpt)
            check_rebuilt(r, mode, stage, ckpt, params, rebuilt, "DeepSpeed's zero_to_fp32")
        r.check(f"DeepSpeed zero_to_fp32 {mode} stage {stage}", deepspeed_reads)

        def dsopt_reads(mode=mode, stage=stage, ckpt=ckpt, params=params):
            rebuilt = dsopt_z2f.get_fp32_state_dict_from_zero_checkpoint(ckpt)
            check_rebuilt(r, mode, stage, ckpt, params, rebuilt, "dsopt get_fp32_state_dict")
            out = r.path(f"{mode}-s{stage}", "dsopt-out")
            dsopt_z2f.convert_zero_checkpoint_to_fp32_state_dict(ckpt, out)
            check_rebuilt(r, mode, stage, ckpt, params,
                          torch.load(os.path.join(out, "pytorch_model.bin")),
                          "dsopt convert_zero_checkpoint_to_fp32_state_dict")
            module = torch.nn.Module()
            for name, tensor in params.items():
                owner = module
                *path, leaf = name.split(".")
                for part in path:
                    if not hasattr(owner, part):
                        owner.add_module(part, torch.nn.Module())
                    owner = getattr(owner, part)
                owner.register_parameter(leaf, torch.nn.Parameter(torch.zeros_like(
                    tensor, dtype=torch.float32)))
            loaded = dsopt_z2f.load_state_dict_from_zero_checkpoint(module, ckpt)
            check_rebuilt(r, mode, stage, ckpt, params,
                          {k: v.detach() for k, v in loaded.state_dict().items()},
                          "dsopt load_state_dict_from_zero_checkpoint")
        r.check(f"dsopt zero_to_fp32 {mode} stage {stage}", dsopt_reads)

    def stage0_is_loud():
        ckpt, _ = train(r, "fp32", "mlp", 0, {})
        try:
            deepspeed_z2f.get_fp32_state_dict_from_zero_checkpoint(ckpt)
        except FileNotFoundError as error:
            cc.expect(str(error), ["can't find *_optim_states.pt files"], "stage 0")
            return
        raise cc.Failure("DeepSpeed's zero_to_fp32 read a stage 0 checkpoint without an error")
    r.check("stage 0: DeepSpeed's zero_to_fp32 fails loudly", stage0_is_loud)

    return r.finish()


if __name__ == "__main__":
    sys.exit(main())
