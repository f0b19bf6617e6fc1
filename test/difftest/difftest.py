#!/usr/bin/env python3
"""Differential testing of the compiler: random small PyTorch modules, compiled and eager.

    .venv/bin/python test/difftest/difftest.py --seeds 0:100            # CI's fixed 100
    .venv/bin/python test/difftest/difftest.py --seeds 100:5000 --keep /tmp/found
    .venv/bin/python test/difftest/difftest.py --show 17                # one module's source

Each seed generates one module (as NNSmith does for other compilers, ASPLOS 2023): a random
program of 3 to 9 steps over a pool of tensors, drawn from op families with valid shapes
(elementwise ops with broadcasting, matmuls with a weight, normalisations, reductions, views,
in-place ops on a copy, a `torch.no_grad()` region, a data-dependent branch, concatenation,
indexing, rows chosen by the data: a dim of data-dependent size), ending in a scalar loss that mixes the values with fixed random weights. The module
is scripted (TorchScript) and, for every third seed, traced; every fourth trains as two engines
(its parameters split between submodules e0 and e1, e1 frozen in half of them: no optimizer,
no gradients, activations flow through); dsopt.compile builds its training step; one forward and backward runs in process through dsopt.Engine. The loss and every
parameter's gradient must equal eager autograd's within 1e-4 relative (+ 1e-5 absolute); a
compile error is a failure as well, unless the generator marked the module as expected to be
refused. A failing module is reduced (steps removed one at a time while it still fails) and,
with --keep DIR, written as a regression test file DIR/seed_N.py holding the reduced source.
Seeded and reproducible: the same seed is the same module.
"""

import argparse
import importlib.util
import json
import os
import random
import re
import sys
import tempfile
import traceback
import warnings

import torch

ROWS = 4


class Program:
    """The generated steps: Python statements over named tensors, each [ROWS, width]."""

    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.seed = seed
        self.params = []      # (name, shape)
        self.steps = []       # (source lines, defines name, width)
        self.pool = [("x", 6)]
        self.counter = 0
        self.traced = seed % 3 == 2
        # Every fourth module trains as two engines (its parameters split between the
        # submodules e0 and e1), half of those with e1 frozen; drawn apart from the program.
        pick = random.Random(seed * 7919 + 1)
        self.engines = seed % 4 == 1
        self.frozen = self.engines and pick.random() < 0.5
        self.engine_pick = pick

    def fresh(self):
        self.counter += 1
        return "v%d" % self.counter

    def param(self, *shape):
        name = "p%d" % len(self.params)
        self.params.append((name, shape))
        return "self." + name

    def pick(self):
        # Later values are likelier: the program grows deep rather than wide.
        weights = [i + 1 for i in range(len(self.pool))]
        return self.rng.choices(self.pool, weights)[0]

    def add(self, lines, width, name=None):
        name = name or lines[0].split(" = ")[0].strip()
        self.steps.append((lines, name, width))
        self.pool.append((name, width))

    # -- op families -------------------------------------------------------------------------
    def unary(self):
        a, w = self.pick()
        op = self.rng.choice(["torch.relu({a})", "torch.tanh({a})", "torch.sigmoid({a})",
                              "F.gelu({a})", "F.silu({a})", "-{a}", "torch.abs({a}) + 1.0",
                              "torch.sqrt(torch.abs({a}) + 1.0)", "torch.exp(torch.tanh({a}))",
                              "torch.clamp({a}, -1.0, 1.0)", "F.leaky_relu({a}, 0.1)",
                              "{a} * {a}"])
        v = self.fresh()
        self.add(["%s = %s" % (v, op.format(a=a))], w)

    def binary(self):
        a, w = self.pick()
        v = self.fresh()
        kind = self.rng.choice(["param_row", "param_col", "value"])
        if kind == "param_row":
            b = self.param(w)                       # [w] broadcast over rows
        elif kind == "param_col":
            b = self.param(ROWS, 1)                 # [ROWS, 1] broadcast over columns
        else:
            same = [(n, pw) for n, pw in self.pool if pw == w]
            b = self.rng.choice(same)[0]
        op = self.rng.choice(["+", "-", "*", "/"])
        if op == "/":
            self.add(["%s = %s / (torch.abs(%s) + 1.0)" % (v, a, b)], w)
        else:
            self.add(["%s = %s %s %s" % (v, a, op, b)], w)

    def linear(self):
        a, w = self.pick()
        out = self.rng.choice([3, 5, 8])
        weight = self.param(out, w)
        v = self.fresh()
        if self.rng.random() < 0.5:
            self.add(["%s = F.linear(%s, %s, %s)" % (v, a, weight, self.param(out))], out)
        else:
            self.add(["%s = torch.matmul(%s, %s.t())" % (v, a, weight)], out)

    def norm(self):
        a, w = self.pick()
        v = self.fresh()
        kind = self.rng.choice(["layer_norm", "softmax", "log_softmax", "rms"])
        if kind == "layer_norm":
            self.add(["%s = F.layer_norm(%s, [%d], %s, %s)" % (
                v, a, w, self.param(w), self.param(w))], w)
        elif kind == "rms":
            self.add(["%s = %s * torch.rsqrt((%s * %s).mean(-1, keepdim=True) + 1e-5)"
                      % (v, a, a, a)], w)
        else:
            self.add(["%s = F.%s(%s, dim=%d)" % (v, kind, a, self.rng.choice([0, 1]))], w)

    def reduce(self):
        a, w = self.pick()
        v = self.fresh()
        op = self.rng.choice(["sum", "mean", "amax"])
        self.add(["%s = %s + %s.%s(1, keepdim=True)" % (v, a, a, op)], w)

    def view(self):
        a, w = self.pick()
        v = self.fresh()
        kind = self.rng.choice(["transpose", "reshape", "unsqueeze", "flip"])
        if kind == "transpose":
            self.add(["%s = %s.t().contiguous().t()" % (v, a)], w)
        elif kind == "reshape" and w % 2 == 0:
            self.add(["%s = %s.reshape(%d, 2, %d).sum(1)" % (v, a, ROWS, w // 2)], w // 2)
        elif kind == "unsqueeze":
            self.add(["%s = (%s.unsqueeze(1) * %s.unsqueeze(2)).sum(2)" % (v, a, a)], w)
        else:
            self.add(["%s = torch.flip(%s, [1])" % (v, a)], w)

    def inplace(self):
        a, w = self.pick()
        v = self.fresh()
        op = self.rng.choice(["add_", "mul_", "sub_"])
        self.add(["%s = %s.clone()" % (v, a), "%s.%s(%s)" % (v, op, self.param(w))], w)

    def no_grad(self):
        a, w = self.pick()
        v, s = self.fresh(), self.fresh()
        self.add(["with torch.no_grad():",
                  "    %s = %s.detach() * 2.0" % (s, a),
                  "%s = %s + %s" % (v, a, s)], w, v)

    def branch(self):
        if self.traced:  # A trace would freeze the branch the example takes.
            return self.unary()
        a, w = self.pick()
        v = self.fresh()
        self.add(["if bool(%s.sum() > 0):" % a,
                  "    %s = torch.tanh(%s) * %s" % (v, a, self.param(w)),
                  "else:",
                  "    %s = torch.sigmoid(%s) + %s" % (v, a, self.param(w))], w, v)

    def concat(self):
        a, w = self.pick()
        b, wb = self.pick()
        v = self.fresh()
        if self.rng.random() < 0.5:
            self.add(["%s = torch.cat([%s, %s], 1)" % (v, a, b)], w + wb)
        else:
            self.add(["%s = torch.stack([%s, %s], 0).sum(0)" % (v, a, a)], w)

    def index(self):
        a, w = self.pick()
        v = self.fresh()
        cols = sorted(self.rng.sample(range(w), max(1, w // 2)))
        if self.rng.random() < 0.5:
            self.add(["%s = %s[:, %d:%d] * 2.0" % (v, a, cols[0], cols[-1] + 1)],
                     cols[-1] + 1 - cols[0])
        else:
            self.add(["%s = torch.index_select(%s, 1, torch.tensor(%s))" % (v, a, cols)],
                     len(cols))

    def view_write(self):
        """An in-place write through a chain of views of a tensor that carries a gradient,
        with a view taken before the write and read after it (it sees the write)."""
        a, w = self.pick()
        v, early, out = self.fresh(), self.fresh(), self.fresh()
        lines = ["%s = %s * 1.0" % (v, a), "%s = %s[:, %d:]" % (early, v, w - 1)]
        j = self.rng.randrange(w)
        s = self.rng.randrange(w)
        e = self.rng.randint(s + 1, w)
        kind = self.rng.choice(["select", "slice", "slice_of_slice", "transpose", "view",
                                "narrow", "permute"])
        if kind == "select":
            lines.append("%s[:, %d] = %s[:, %d] * 2.0" % (v, j, a, w - 1 - j))
        elif kind == "slice":
            lines.append("%s[:, %d:%d].mul_(torch.sigmoid(%s[:, %d:%d]))" % (v, s, e, a, s, e))
        elif kind == "slice_of_slice":
            lines.append("%s[1:][:, %d:%d].add_(%s)" % (v, s, e, self.param(e - s)))
        elif kind == "transpose":
            lines.append("%s.t()[%d].add_(%s)" % (v, j, self.param(ROWS)))
        elif kind == "view" and w % 2 == 0:
            lines.append("%s.view(%d, 2, %d)[:, 1].mul_(%s)" % (v, ROWS, w // 2,
                                                               self.param(w // 2)))
        elif kind == "permute":
            lines.append("%s.unsqueeze(0).permute(2, 1, 0)[%d].copy_(%s[:, %d:%d] + 1.0)"
                         % (v, j, a, j, j + 1))
        else:
            lines.append("%s.narrow(1, %d, %d).copy_(torch.tanh(%s.narrow(1, %d, %d)))"
                         % (v, s, e - s, a, w - (e - s), e - s))
        lines.append("%s = %s + %s" % (out, v, early))
        self.add(lines, w, out)

    def data_size(self):
        """Rows chosen by the data (a mask, nonzero, where): a dim of data-dependent size,
        carried through ops and reduced back to [ROWS, w] (empty selections included)."""
        a, w = self.pick()
        v, sel = self.fresh(), self.fresh()
        col = self.rng.randrange(w)
        kind = self.rng.choice(["mask_rows", "nonzero", "where", "masked_select",
                                "linear", "layer_norm", "cat_rows"])
        if kind == "mask_rows":
            lines = ["%s = %s[%s[:, %d] > 0]" % (sel, a, a, col),
                     "%s = %s + torch.tanh(%s).sum(0, keepdim=True) * %s"
                     % (v, a, sel, self.param(w))]
        elif kind == "nonzero":
            lines = ["%s = %s.index_select(0, torch.nonzero(%s[:, %d] > 0.2).squeeze(1))"
                     % (sel, a, a, col),
                     "%s = %s * torch.sigmoid(%s.sum(0, keepdim=True))" % (v, a, sel)]
        elif kind == "where":
            lines = ["%s = %s[torch.where(%s[:, %d] < 0)[0]]" % (sel, a, a, col),
                     "%s = %s + (%s * %s).sum(0, keepdim=True)" % (v, a, sel, self.param(w))]
        elif kind == "cat_rows":   # a cat along the dim the data decides
            lines = ["%s = torch.cat([%s[%s[:, %d] > 0], %s[1:2] * 2.0], 0)" % (sel, a, a, col, a),
                     "%s = %s + torch.tanh(%s).mean(0, keepdim=True) * %s"
                     % (v, a, sel, self.param(w))]
        elif kind == "masked_select":
            lines = ["%s = torch.masked_select(%s, %s > 0.1)" % (sel, a, a),
                     "%s = %s * torch.tanh((%s * %s).sum())" % (v, a, sel, sel)]
        elif kind == "linear":
            out = self.rng.choice([3, 5])
            lines = ["%s = F.linear(%s[%s[:, %d] > 0], %s)" % (sel, a, a, col,
                                                               self.param(out, w)),
                     "%s = torch.relu(%s).sum(0, keepdim=True).expand(%d, %d) + 0.0"
                     % (v, sel, ROWS, out)]
            self.add(lines, out, v)
            return
        else:
            lines = ["%s = F.layer_norm(%s[%s[:, %d] > 0], [%d], %s, %s)"
                     % (sel, a, a, col, w, self.param(w), self.param(w)),
                     "%s = %s + %s.sum(0, keepdim=True)" % (v, a, sel)]
        self.add(lines, w, v)

    FAMILIES = ["unary", "binary", "linear", "linear", "norm", "reduce", "view", "inplace",
                "no_grad", "branch", "concat", "index", "view_write", "data_size"]

    def generate(self):
        self.linear()  # Every module has a trainable path from the input.
        for _ in range(self.rng.randint(2, 8)):
            getattr(self, self.rng.choice(self.FAMILIES))()
        return self

    # -- source ------------------------------------------------------------------------------
    def source(self, steps=None):
        steps = self.steps if steps is None else steps
        used = set()
        for lines, _, _ in steps:
            for line in lines:
                used.update(re.findall(r"self\.(p\d+)", line))
        owner = self.owners(used)
        out = ["class M(nn.Module):", "    def __init__(self):", "        super().__init__()",
               "        g = torch.Generator().manual_seed(%d)" % self.seed]
        for engine in sorted(set(owner.values())):
            out.append("        self.%s = nn.Module()" % engine)
        for name, shape in self.params:
            if name in used:
                holder = owner[name] + "." if name in owner else ""
                out.append("        self.%s%s = nn.Parameter(torch.randn(%s, generator=g) * 0.5)"
                           % (holder, name, ", ".join(map(str, shape))))
        out.append("")
        out.append("    def forward(self, x, t):")
        for lines, _, _ in steps:
            for line in lines:
                line = re.sub(r"self\.(p\d+)",
                              lambda m: "self.%s%s" % (owner[m.group(1)] + "."
                                                      if m.group(1) in owner else "",
                                                      m.group(1)), line)
                out.append("        " + line)
        last = steps[-1][1] if steps else "x"
        # Every value reaches the loss: no parameter is dead code (which a trace refuses).
        others = "".join(" + %s.mean()" % name for _, name, _ in steps[:-1])
        out.append("        return (%s * t[:, :%s.shape[1]]).sum() + (%s * %s).mean()%s"
                   % (last, last, last, last, others))
        return "\n".join(out) + "\n"


    def owners(self, used):
        """{parameter: engine submodule} for a module trained as two engines: the first used
        parameter in e0, the second in e1, the rest drawn; {} for one engine (or fewer than
        two parameters)."""
        names = [n for n, _ in self.params if n in used]
        if not self.engines or len(names) < 2:
            return {}
        rng = random.Random(self.engine_pick.random())
        return {n: "e0" if i == 0 else "e1" if i == 1 else rng.choice(["e0", "e1"])
                for i, n in enumerate(names)}

    def config(self, source):
        """dsopt's config: one engine, or {"engines": {"e0": ..., "e1": ...}} (e1 frozen: no
        optimizer) when the source has the engine submodules."""
        train = {"train_micro_batch_size_per_gpu": ROWS,
                 "optimizer": {"type": "SGD", "params": {"lr": 0.1}}}
        if "self.e1 = nn.Module()" not in source:
            return train
        frozen = {"train_micro_batch_size_per_gpu": ROWS}
        return {"engines": {"e0": train, "e1": frozen if self.frozen else train}}


_MODULES = {}


def instantiate(source):
    """An instance of the source's class M, from a file (TorchScript reads the source)."""
    if source not in _MODULES:
        folder = tempfile.mkdtemp(prefix="difftest-")
        path = os.path.join(folder, "difftest_m%d.py" % len(_MODULES))
        with open(path, "w") as f:
            f.write("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n")
            f.write(source)
        spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        _MODULES[source] = module.M
    return _MODULES[source]()


def check(source, seed, traced, config):
    """None when dsopt agrees with eager autograd, else the first difference. A frozen
    engine's parameters take no gradient on either side."""
    import dsopt
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(ROWS, 6, generator=g)
    t = torch.randn(ROWS, 64, generator=g)
    frozen = [name for name, cfg in config.get("engines", {}).items() if "optimizer" not in cfg]
    eager = instantiate(source)
    for name, param in eager.named_parameters():
        if name.split(".")[0] in frozen:
            param.requires_grad_(False)
    loss = eager(x, t)
    loss.backward()
    module = instantiate(source)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if traced:
            module = torch.jit.trace(module, (x, t), check_trace=False)
        try:
            plan = dsopt.compile(module, config, (x, t), unbatched=(), keep_ir=False)
        except Exception as error:  # noqa: BLE001
            return "compile: " + str(error).strip().splitlines()[0][:300]
    engine = dsopt.Engine(plan)
    ours = engine(x, t)
    engine.backward(ours)
    if not torch.allclose(ours.detach(), loss.detach(), rtol=1e-4, atol=1e-5):
        return "loss %.7g, eager %.7g" % (float(ours), float(loss))
    for name, param in eager.named_parameters():
        if name.split(".")[0] in frozen:
            if engine.gradient(name) is not None:
                return "gradient of %s, a frozen engine's parameter" % name
            continue
        grad = engine.gradient(name)
        expected = param.grad if param.grad is not None else torch.zeros_like(param)
        if grad is None:
            grad = torch.zeros_like(param)
        if not torch.allclose(grad, expected, rtol=1e-4, atol=1e-5):
            return "gradient of %s: max difference %.3g" % (
                name, float((grad - expected).abs().max()))
    return None


def reduce(program, failure):
    """Steps removed one at a time while the module still fails the same way."""
    steps = list(program.steps)
    kind = failure.split(":")[0]
    i = len(steps) - 1
    while i >= 1:
        trial = steps[:i] + steps[i + 1:]
        try:
            defined = {"x"}
            ok = True
            for lines, name, _ in trial:
                refs = {r for line in lines for r in re.findall(r"\b(v\d+)\b", line)}
                own = {m for line in lines for m in re.findall(r"^\s*(v\d+) = ", line)}
                if not refs - own - {name} <= defined:
                    ok = False
                    break
                defined.add(name)
            if ok:
                source = program.source(trial)
                result = check(source, program.seed, program.traced, program.config(source))
                if result is not None and result.split(":")[0] == kind:
                    steps = trial
        except Exception:  # noqa: BLE001 - a reduction that breaks the program is skipped
            pass
        i -= 1
    return program.source(steps)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", default="0:100", help="A:B, the seeds [A, B)")
    p.add_argument("--show", type=int, help="print one seed's module and exit")
    p.add_argument("--keep", help="write each failure's reduced module here")
    args = p.parse_args()
    if args.show is not None:
        program = Program(args.show).generate()
        source = program.source()
        print("# traced" if program.traced else "# scripted")
        print("# config: " + json.dumps(program.config(source)))
        print(source)
        return 0
    start, stop = (int(v) for v in args.seeds.split(":"))
    failures = []
    for seed in range(start, stop):
        program = Program(seed).generate()
        try:
            source = program.source()
            result = check(source, seed, program.traced, program.config(source))
        except Exception as error:  # noqa: BLE001
            traceback.print_exc()
            result = "harness: %s" % error
        if result is None:
            continue
        failures.append((seed, result))
        print("seed %d (%s): %s" % (seed, "traced" if program.traced else "scripted", result),
              flush=True)
        if args.keep:
            os.makedirs(args.keep, exist_ok=True)
            with open(os.path.join(args.keep, "seed_%d.py" % seed), "w") as f:
                f.write("# difftest seed %d (%s): %s\n" % (
                    seed, "traced" if program.traced else "scripted", result))
                f.write(reduce(program, result))
    print("%d modules, %d failed" % (stop - start, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
