"""What the examples share: their command line, this rank's rows, and --check.

Not part of the examples' lesson: each example trains as a DeepSpeed user
would, then, with ``--check ORACLE_DIR`` (test/oracle, as the examples'
ctests pass it), hands its model, data, config and final parameters here.
The oracle (test/oracle/oracle.py, docs/oracle.md) trains the same model on
the same global batches with LibTorch autograd and torch.optim, reproducing
W ranks in one process; parameters must agree within the design tolerance
(1e-4 + 1e-4 * |oracle|), the mean loss of every optimizer step within 1e-5.
"""

import argparse
import os
import sys
import tempfile

import torch

import dsopt


def example_args(doc, steps):
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--steps", type=int, default=steps, help="steps (default %d)" % steps)
    p.add_argument("--check", metavar="ORACLE_DIR", help="compare with the oracle")
    return p.parse_args()


def rank_rows(tensor, rank, world_size):
    """This rank's rows of a global micro-batch, as ds-run slices them."""
    rows = tensor.shape[0] // world_size
    return tensor[rank * rows:(rank + 1) * rows]


def rank_batch(data, step):
    """Micro-step `step` of this rank: its rows of each tensor of `data`
    ({argument: [S, W*b, ...]}, in forward's order)."""
    rank, world = dsopt.get_rank(), dsopt.get_world_size()
    return tuple(rank_rows(tensor[step], rank, world) for tensor in data.values())


class Recorder:
    """The losses of the micro-steps of each optimizer step, over the ranks."""

    def __init__(self, gas):
        self.gas = gas
        self.micro = []
        self.steps = []

    def add(self, loss):
        self.micro.append(float(loss.detach()))
        if len(self.micro) == self.gas:
            total = torch.tensor([sum(self.micro)], dtype=torch.float64)
            dsopt.all_reduce(total)
            self.steps.append(float(total) / (self.gas * dsopt.get_world_size()))
            self.micro = []


def check(oracle_dir, what, module, data, config, steps, ours, losses=None, rtol=1e-4,
          atol=1e-4, loss_rtol=1e-5):
    """Trains `module` (an nn.Module, saved as TorchScript in its current mode) on
    `data` ({argument: [S, W*b, ...]}) with the oracle and compares. `ours`: the
    engine's final state_dict; `losses`: our mean loss per optimizer step. Rank 0
    compares; exits 1 on a mismatch."""
    if dsopt.get_rank() != 0:
        return
    sys.path.insert(0, oracle_dir)
    import oracle

    with tempfile.TemporaryDirectory(prefix="dsopt-example-") as folder:
        model_pt = os.path.join(folder, "model.pt")
        data_pt = os.path.join(folder, "data.pt")
        torch.jit.script(module).save(model_pt)
        torch.save({k: v.contiguous() for k, v in data.items()}, data_pt)
        lines, expected = oracle.train(model_pt, data_pt, config, steps,
                                       world_size=dsopt.get_world_size())
    ok, message = oracle.compare_params(dict(ours), expected, rtol, atol, "dsopt", "oracle")
    if ok and losses is not None:
        for line, loss in zip(lines, losses):
            if abs(loss - line["loss"]) > loss_rtol * abs(line["loss"]):
                ok, message = False, "step %d: loss %r, oracle %r" % (
                    line["step"], loss, line["loss"])
                break
        if ok and len(losses) != len(lines):
            ok, message = False, "%d loss steps, oracle %d" % (len(losses), len(lines))
    print("%s: %s" % (what, message))
    if not ok:
        sys.exit(1)
