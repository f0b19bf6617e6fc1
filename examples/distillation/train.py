#!/usr/bin/env python3
"""Knowledge distillation on logits, Accelerate style: a trained student, a frozen teacher.

    .venv/bin/python examples/distillation/train.py [--steps N]
    mpirun -n 2 .venv/bin/python examples/distillation/train.py

Accelerate's multiple-model guide gives the student a ZeRO-2 config with an
optimizer and a scheduler and the teacher a ZeRO-3 config without one
(zero2_config.json and zero3_config.json here, verbatim as the guide prints
them), then trains with the loop it prints:

    with torch.no_grad():
        output_teacher = teacher_model(**batch)
    output_student = student_model(**batch)
    loss = ...  # combine the losses or modify them in some way
    accelerator.backward(loss)
    optimizer.step(); scheduler.step(); optimizer.zero_grad()

Here each model gets its engine from dsopt.initialize with its own config
file, unchanged: no overrides. The configs' "auto" values take the HF
Trainer's defaults (a CompileWarning lists them), and the teacher's
placeholder micro-batch of 1 is ignored, as DeepSpeed ignores it for an
engine that never steps. The student returns what a transformers model
returns, its loss and its logits; the loss that trains it is combined in
Python from the student's and the teacher's logits (a KL term at a
temperature, Hinton's distillation), and loss.backward() runs the student's
compiled backward with the gradient PyTorch computed for its outputs.
The optimizer and scheduler are the student engine's: optimizer.step() ends
the micro-step as engine.step() would, scheduler.step() has nothing to do
(the engine advances the schedule when it updates).
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
class Teacher(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(10, 32)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class Student(nn.Module):
    """Returns (loss, logits), as a transformers model's output does."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(10, 4)

    def forward(self, x, labels):
        logits = self.fc(x)
        return F.cross_entropy(logits, labels), logits


def distillation_loss(task_loss, logits, teacher_logits, temperature: float = 2.0):
    """The task loss plus the KL divergence of the softened distributions,
    scaled by temperature^2 (Hinton et al., 2015)."""
    kl = F.kl_div(F.log_softmax(logits / temperature, dim=-1),
                  F.softmax(teacher_logits / temperature, dim=-1), reduction="batchmean")
    return task_loss + temperature * temperature * kl


class StudentObjective(Student):
    """For the oracle only: the loop's objective as one module (the student's
    parameters, the teacher's logits an input), trained with autograd."""

    def forward(self, x, labels, teacher_logits):  # type: ignore[override]
        logits = self.fc(x)
        return distillation_loss(F.cross_entropy(logits, labels), logits, teacher_logits)


def main():
    args = example_args(__doc__, 6)

    torch.manual_seed(3)
    teacher, student = Teacher(), Student()
    rank, world = dsopt.get_rank(), dsopt.get_world_size()
    data = {"x": torch.randn(args.steps, world * MICRO_BATCH, 10),
            "labels": torch.randint(0, 4, (args.steps, world * MICRO_BATCH))}

    x0, labels0 = rank_batch(data, 0)
    teacher_model, _, _, _ = dsopt.initialize(
        model=teacher, config=TEACHER_CONFIG, example_inputs=(x0,))
    student_model, optimizer, _, scheduler = dsopt.initialize(
        model=student, config=STUDENT_CONFIG, example_inputs=(x0, labels0))

    record = Recorder(1)
    teacher_logits = []
    teacher_model.eval()
    student_model.train()
    for s in range(args.steps):
        x, labels = rank_batch(data, s)
        with torch.no_grad():
            output_teacher = teacher_model(x)
        output_student = student_model(x, labels)
        loss = distillation_loss(*output_student, output_teacher)
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
        # student's objective on them.
        with torch.no_grad():
            expected = teacher(data["x"])
        ours = torch.stack(teacher_logits)
        mine = torch.stack([rank_batch({"t": expected}, s)[0] for s in range(args.steps)])
        if not torch.allclose(ours, mine, rtol=1e-5, atol=1e-6):
            sys.exit("teacher: outputs differ from torch's by %g"
                     % float((ours - mine).abs().max()))
        data["teacher_logits"] = expected
        objective = StudentObjective()
        objective.load_state_dict(student.state_dict())
        # The config as the plan resolved it ("auto" filled in).
        resolved = json.loads(student_model.plan.to_json())["engines"][0]["ds_config"]
        # The guide's "auto" learning rate (5e-5) moves AdamW's parameters by
        # about 5e-5 per step: compare far below that, so that a wrong
        # gradient direction anywhere shows.
        check(args.check, "distillation student", objective, data, resolved,
              args.steps, student_model.state_dict(), record.steps, rtol=1e-6,
              atol=2e-7, loss_rtol=1e-6)


if __name__ == "__main__":
    main()
