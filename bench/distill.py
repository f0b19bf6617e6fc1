#!/usr/bin/env python3
"""Distillation on W ranks: where the frozen teacher lives, in memory and step time.

  bench/distill.py --bin build/bin [--world-size 2] [--steps 12] [--launcher 'mpirun -n {W}']

Accelerate's multi-model guide recommends ZeRO-2 for the student and ZeRO-3 for a frozen teacher
("significantly faster than using ZeRO-3 for both"). This script measures that recipe against its
alternatives, all in one script with the same models, data and optimizer: a student GPT (d=128, 2
blocks) trained with AdamW on cross-entropy + KL against a frozen teacher GPT (d=256, 4 blocks,
about 3.4M parameters) whose logits are detached. Configurations (student / teacher ZeRO stage):
2 / 0 (the baseline every ratio is against: the teacher replicated), 2 / 3 (the recipe), 3 / 3 and
0 / 0. For each: ms/step (the difference of two `ds-run` runs of N/2 and N steps divided by N/2,
so start-up cancels) and, from the measured report (`ds-run --report`), each engine's state bytes
per rank and the traffic per step. Prints a markdown table.
"""

import argparse
import os
import shlex
import sys
import tempfile

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import step_time  # noqa: E402
from zero_overlap import ADAMW, compile_and_time, default_launcher, zero_section  # noqa: E402


class Logits(torch.nn.Module):
    """step_time's GPT without its loss: token logits."""

    def __init__(self, d: int, layers: int, vocab: int = 512, t: int = 64):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, d)
        self.pos = torch.nn.Embedding(t, d)
        self.blocks = torch.nn.ModuleList([step_time.Block(d, 4) for _ in range(layers)])
        self.ln = torch.nn.LayerNorm(d)
        self.head = torch.nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


class Distill(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.student = Logits(128, 2)
        self.teacher = Logits(256, 4)

    def forward(self, idx, targets):
        s = self.student(idx)
        t = self.teacher(idx).detach()
        b, n, v = s.shape
        ce = F.cross_entropy(s.view(b * n, v), targets.view(b * n))
        kl = F.kl_div(F.log_softmax(s, dim=-1), F.softmax(t, dim=-1), reduction="batchmean")
        return ce + 0.5 * kl


def engine_config(stage, batch, trains):
    cfg = {"train_micro_batch_size_per_gpu": batch, "gradient_accumulation_steps": 1,
           "zero_optimization": zero_section(stage, 200000, overlap=stage >= 2,
                                             prefetch=400000)}
    if trains:
        cfg["optimizer"] = ADAMW
    return cfg


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bin", required=True)
    p.add_argument("--world-size", type=int, default=2)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--batch", type=int, default=4, help="micro-batch per rank")
    p.add_argument("--launcher", default=default_launcher())
    args = p.parse_args()
    w = args.world_size
    prefix = shlex.split(args.launcher.replace("{W}", str(w)))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        torch.manual_seed(0)
        model = os.path.join(tmp, "distill.pt")
        module = torch.jit.script(Distill())
        module.save(model)
        counts = {name: sum(t.numel() for t in getattr(module, name).parameters())
                  for name in ("student", "teacher")}
        data = os.path.join(tmp, "distill.data.pt")
        torch.save({"idx": torch.randint(0, 512, (args.steps + 2, args.batch * w, 64)),
                    "targets": torch.randint(0, 512, (args.steps + 2, args.batch * w, 64))},
                   data)
        for student, teacher in ((2, 0), (2, 3), (3, 3), (0, 0)):
            config = {"engines": {"student": engine_config(student, args.batch, True),
                                  "teacher": engine_config(teacher, args.batch, False)}}
            ms, r0 = compile_and_time(args.bin, prefix, tmp, model, data, config, w,
                                      args.steps, env)
            engines = r0["engines"]

            def state(e):
                return e["param_bytes"] + e["grad_bytes"] + e["optimizer_state_bytes"]
            rows.append((student, teacher, ms, state(engines["student"]),
                         state(engines["teacher"]), r0["peak_bytes"],
                         r0["comm_volume_elements"]["total"]))
    base = rows[0]
    print(f"student {counts['student']} parameters, frozen teacher {counts['teacher']}; "
          f"W = {w}, micro-batch {args.batch} per rank, {args.steps} steps, OMP_NUM_THREADS=1")
    print("| student / teacher stage | ms/step | vs 2/0 | student state B/rank "
          "| teacher state B/rank | teacher vs 2/0 | peak B/rank | comm elements/step |")
    print("|---|---|---|---|---|---|---|---|")
    for student, teacher, ms, s_state, t_state, peak, comm in rows:
        print("| %d / %d | %.1f | %.2f | %d | %d | %.2f | %d | %d |" % (
            student, teacher, ms, ms / base[2], s_state, t_state, t_state / base[4], peak, comm))


if __name__ == "__main__":
    main()
