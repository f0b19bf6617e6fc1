#!/usr/bin/env python3
"""Mixed precision on W ranks: state bytes, peak and step time of fp32, bf16, fp16, autocast.

  bench/precision.py --bin build/bin [--world-size 2] [--stage 2] [--steps 12]
                     [--launcher 'mpirun -n {W}']

One script, one model (bench/step_time.py's GPT, d=256, 4 blocks, about 3.4M parameters), one
data set, one AdamW config; only the precision section changes: fp32 (the baseline every ratio is
against), bf16, fp16 (dynamic loss scaling), torch_autocast(bf16) and torch_autocast(fp16)
(autocast_fp16). For each: ms/step (the difference of two `ds-run` runs of N/2 and N steps
divided by N/2, so start-up cancels), and from the measured report (`ds-run --report`) the
parameter, gradient and optimizer bytes per rank (optimizer bytes include the fp32 master copy
of mixed precision), the peak, and the elements the collectives moved per step. On CPU, bf16 and
fp16 run LibTorch's BFloat16 / Half kernels (docs/precision.md), whose speed against fp32
depends on the CPU's instructions (AVX512-BF16 / AVX512-FP16, AMX): the time column shows it;
the memory columns are what mixed precision buys. Prints a markdown table.
"""

import argparse
import os
import shlex
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import step_time  # noqa: E402
from zero_overlap import ADAMW, compile_and_time, default_launcher, zero_section  # noqa: E402

MODES = {
    "fp32": {},
    "bf16": {"bf16": {"enabled": True}},
    "fp16": {"fp16": {"enabled": True, "initial_scale_power": 12}},
    "autocast": {"torch_autocast": {"enabled": True}},
    "autocast_fp16": {"torch_autocast": {"enabled": True, "dtype": "float16"}},
}


def config(stage, batch, mode):
    cfg = {"train_micro_batch_size_per_gpu": batch, "gradient_accumulation_steps": 1,
           "zero_optimization": zero_section(stage, 500000, overlap=stage >= 2),
           "optimizer": ADAMW}
    cfg.update(MODES[mode])
    return cfg


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bin", required=True)
    p.add_argument("--world-size", type=int, default=2)
    p.add_argument("--stage", type=int, default=2)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--batch", type=int, default=4, help="micro-batch per rank")
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--launcher", default=default_launcher())
    args = p.parse_args()
    w = args.world_size
    prefix = shlex.split(args.launcher.replace("{W}", str(w)))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        model, data = step_time.make_gpt(tmp, args.steps + 2, args.batch * w)
        for mode in args.modes.split(","):
            ms, r0 = compile_and_time(args.bin, prefix, tmp, model, data,
                                      config(args.stage, args.batch, mode), w, args.steps, env)
            rows.append((mode, ms, r0["param_bytes"], r0["grad_bytes"],
                         r0["optimizer_state_bytes"], r0["peak_bytes"],
                         r0["comm_volume_elements"]["total"]))
    base = rows[0]
    print(f"GPT d=256 x 4 blocks, ZeRO stage {args.stage}, W = {w}, micro-batch {args.batch} "
          f"per rank, {args.steps} steps, OMP_NUM_THREADS=1")
    print("| precision | ms/step | vs first | param B/rank | grad B/rank | optimizer B/rank "
          "| state vs first | peak B/rank | comm elements/step |")
    print("|---|---|---|---|---|---|---|---|---|")
    for mode, ms, params, grads, opt, peak, comm in rows:
        state = params + grads + opt
        print("| %s | %.1f | %.2f | %d | %d | %d | %.2f | %d | %d |" % (
            mode, ms, ms / base[1], params, grads, opt,
            state / (base[2] + base[3] + base[4]), peak, comm))


if __name__ == "__main__":
    main()
