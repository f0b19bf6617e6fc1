#!/usr/bin/env python3
"""Knowledge distillation, Accelerate style: a trained student, a frozen teacher.

    .venv/bin/python examples/distillation/train.py [--steps N]
    mpirun -n 2 .venv/bin/python examples/distillation/train.py

Accelerate's multiple-model guide gives the student a ZeRO-2 config with an
optimizer and a scheduler and the teacher a ZeRO-3 config without one
(zero2_config.json and zero3_config.json here, as the guide prints them),
then trains with `optimizer.step(); scheduler.step(); optimizer.zero_grad()`.
Here each model gets its engine from dsopt.initialize with its own config (a
config without "optimizer" makes a frozen engine that only runs forwards);
the "auto" values are filled in as the HF Trainer fills them (its
TrainingArguments as `overrides`, `mixed_precision`); the teacher's outputs
are an input of the student's loss. The optimizer and
scheduler are the student engine's: optimizer.step() ends the micro-step as
engine.step() would, scheduler.step() has nothing to do (the engine advances
the schedule when it updates).
"""

import json
import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

import dsopt

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from oracle_check import Recorder, check, example_args, rank_batch  # noqa: E402

MICRO_BATCH = 4

HERE = os.path.dirname(os.path.abspath(__file__))
# The guide's two files, verbatim ("auto" values, trailing commas and all).
STUDENT_CONFIG = os.path.join(HERE, "zero2_config.json")
TEACHER_CONFIG = os.path.join(HERE, "zero3_config.json")
# What the HF Trainer would fill into the student's "auto" values from its
# TrainingArguments (ds-compile --set); the batch sizes come from the data.
TRAINING_ARGUMENTS = {"optimizer.params.lr": 0.01, "optimizer.params.weight_decay": 0.0,
                      "scheduler.params.warmup_min_lr": 0.0,
                      "scheduler.params.warmup_num_steps": 2, "gradient_clipping": 1.0}


class Teacher(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(10, 32)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class Student(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(10, 4)

    def forward(self, x, labels, teacher_logits):
        logits = self.fc(x)
        task = F.cross_entropy(logits, labels)
        distill = F.kl_div(F.log_softmax(logits, dim=-1),
                           F.softmax(teacher_logits, dim=-1), reduction="batchmean")
        return task + distill


def main():
    args = example_args(__doc__, 6)

    torch.manual_seed(3)
    teacher, student = Teacher(), Student()
    rank, world = dsopt.get_rank(), dsopt.get_world_size()
    data = {"x": torch.randn(args.steps, world * MICRO_BATCH, 10),
            "labels": torch.randint(0, 4, (args.steps, world * MICRO_BATCH))}

    teacher.eval()
    x0, labels0 = rank_batch(data, 0)
    # DeepSpeed ignores a frozen engine's micro-batch (the guide's 1 is a placeholder);
    # a plan of its own is compiled for its config's, so it is set to the data's.
    teacher_model, _, _, _ = dsopt.initialize(
        model=teacher, config=TEACHER_CONFIG, example_inputs=(x0,), mixed_precision="no",
        overrides={"train_micro_batch_size_per_gpu": "auto"})
    student_model, optimizer, _, scheduler = dsopt.initialize(
        model=student, config=STUDENT_CONFIG,
        example_inputs=(x0, labels0, teacher_model(x0)),
        mixed_precision="no", overrides=TRAINING_ARGUMENTS)

    record = Recorder(1)
    teacher_logits = []
    for s in range(args.steps):
        x, labels = rank_batch(data, s)
        with torch.no_grad():
            output_teacher = teacher_model(x)
        loss = student_model(x, labels, output_teacher)
        loss.backward()
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        record.add(loss.detach())
        teacher_logits.append(output_teacher.clone())
        if rank == 0:
            print("step %d  loss %.5f  next lr %.5f" % (
                s + 1, record.steps[-1], scheduler.get_last_lr()[0]))

    if args.check:
        # The teacher's outputs as torch computes them; the oracle trains the
        # student on them.
        with torch.no_grad():
            expected = teacher(data["x"])
        ours = torch.stack(teacher_logits)
        mine = torch.stack([rank_batch({"t": expected}, s)[0] for s in range(args.steps)])
        if not torch.allclose(ours, mine, rtol=1e-5, atol=1e-6):
            sys.exit("teacher: outputs differ from torch's by %g"
                     % float((ours - mine).abs().max()))
        data["teacher_logits"] = expected
        # The config as the plan resolved it ("auto" filled in).
        resolved = json.loads(student_model.plan.to_json())["engines"][0]["ds_config"]
        check(args.check, "distillation student", student, data, resolved,
              args.steps, student_model.state_dict(), record.steps)


if __name__ == "__main__":
    main()
