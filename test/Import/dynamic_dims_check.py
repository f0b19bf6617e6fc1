#!/usr/bin/env python3
"""Which result dims vary, for every operator of the registry: the importer against eager.

  PYTHONPATH=build/python .venv/bin/python test/Import/dynamic_dims_check.py [--op NAME ...]
                                                                            [--verbose]

For every probe of test/precision/probe_tables.py (one per registry operator that takes a
tensor: arguments valid for it), the first tensor argument of rank >= 1 goes through a boolean
mask of its rows (`x[mask]`), so that its dim 0 has a size the data decides, and the operator
is traced on it and imported twice through dsopt (`import_ir`): with the importer's mechanism
(the operator run again on grown and refilled examples, OperatorImport.cpp) and with the
per-operator rules alone (`grow_examples=False`, what the importer did before). The truth is
the traced program run by PyTorch with that argument's rows and with 3 more (the first row
repeated, the mask longer): a result dim varies when its size differs (the traced program's, not
eager's: a trace bakes some sizes in, `len(x)` among them).

Each answer is, per operator: `exact` (the truth's dims), `imprecise` (dynamic where the truth
is static: safe, the runtime takes sizes as they come, but rules refuse gradients over dynamic
dims and ops lose static shapes), or `unsafe` (static where the truth varies: a plan that
fails at run time). Operators whose other arguments are tied to that size (a matmul's inner
dim, a target's rows) are `coupled` in the truth and skipped, as are probes that do not trace
or import (listed). Exits non-zero when the mechanism is unsafe anywhere, or imprecise where
NOT_EXACT does not name the operator with the reason; the rules' answers are reported beside
(`--verbose` prints every operator).
"""

import argparse
import os
import re
import sys
import tempfile
import warnings

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "precision"))
import probe_tables  # noqa: E402

GROW = 3

# Operators where the mechanism is knowingly imprecise, with the reason (the importer falls back
# to the rules where the grown run fails).
NOT_EXACT = {}


def _first_tensor(args):
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor) and a.dim() >= 1 and a.size(0) >= 1:
            return i
    return None


def _first_result(out):
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
        return out[0]
    return None


def _grown(t):
    return torch.cat([t] + [t[:1]] * GROW, 0)


def truth(call, args, k, other=None):
    """Per result dim, whether it varies with args[k]'s rows (grown by GROW, or `other` as the
    grown arguments); None when coupled."""
    out = _first_result(call(*args))
    if out is None:
        return None
    if other is None:
        other = list(args)
        other[k] = _grown(args[k])
    try:
        out2 = _first_result(call(*other))
    except Exception:  # noqa: BLE001 - another argument is tied to that size
        return None
    if out2 is None or out2.dim() != out.dim():
        return None
    return [a != b for a, b in zip(out.shape, out2.shape)], list(out.shape)


def wrapper(call, nargs, k):
    names = ["a%d" % i for i in range(nargs)]
    params = ", ".join(["mask"] + names)
    body = ["    %s = %s[mask]" % (names[k], names[k]),
            "    return _first(_call(%s))" % ", ".join(names)]
    src = "def forward(self, %s):\n%s\n" % (params, "\n".join(body))
    scope = {"_call": call, "_first": _first_result}
    exec(src, scope)  # noqa: S102 - the test's own generated forward
    return type("Probe", (nn.Module,), {"forward": scope["forward"]})()


TYPE = re.compile(r"-> \(?tensor<([^>]*)>")


def imported_dims(ir, name):
    """Dims ('?' or int) of the first tensor result of the last ds.aten of `name`'s operator,
    or of the last ds.aten where the import wrote the call as another operator (a traced conv3d
    is _convolution, core ATen's native forms their composites); None where it returns a list
    or no tensor."""
    base = name.split(".")[0]
    found = last = None
    for line in ir.splitlines():
        m = re.search(r'ds\.aten "([^"]+)"', line)
        if not m or m.group(1) == "aten::index.Tensor":
            continue
        last = line
        if m.group(1) == name or m.group(1).split(".")[0] == base:
            found = line
    line = found or last
    t = TYPE.search(line) if line else None
    if t is None:
        return None
    parts = t.group(1).split("x")[:-1]  # the last part is the element type
    return [None if p == "?" else int(p) for p in parts]


def classify(dims, varies):
    if dims is None or len(dims) != len(varies):
        return "no tensor result"
    unsafe = any(v and d is not None for d, v in zip(dims, varies))
    if unsafe:
        return "unsafe"
    imprecise = any(d is None and not v for d, v in zip(dims, varies))
    return "imprecise" if imprecise else "exact"


def check_op(name, probe, work, dsopt_compile, swap=False):
    inputs, call = probe
    if "_backward" in name:
        # Backward kernels trust their callers' shapes (a grown argument makes some write out
        # of bounds); the importer never runs them grown, and autodiff emits them.
        return "skipped", "a backward kernel", None
    torch.manual_seed(0)
    args = inputs(lambda *s: torch.randn(*s))
    k = _first_tensor(args)
    if k is None:
        return "skipped", "no tensor argument of rank >= 1", None
    mask = torch.ones(args[k].size(0), dtype=torch.bool)
    module = wrapper(call, len(args), k)
    tensors = [mask] + list(args)
    if not all(isinstance(a, torch.Tensor) for a in tensors):
        return "skipped", "a non-tensor argument", None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            traced = torch.jit.trace(module, tuple(tensors), check_trace=False)
        except Exception as e:  # noqa: BLE001
            return "skipped", "does not trace: %s" % str(e).splitlines()[0][:80], None
    # The truth is the traced program's (a trace bakes some sizes in, `len(x)` among them).
    grown = list(args)
    grown[k] = _grown(args[k])
    try:
        t = truth(lambda m, *a: traced(m, *a), [mask] + list(args), 0,
                  [torch.ones(grown[k].size(0), dtype=torch.bool)] + grown)
    except Exception as e:  # noqa: BLE001
        return "skipped", "the traced program fails: %s" % str(e).splitlines()[0][:80], None
    if t is None:
        return "coupled", "", None
    varies, _ = t
    stem = os.path.join(work, re.sub(r"\W", "_", name))
    traced.save(stem + ".pt")
    names = ["mask"] + ["a%d" % i for i in range(len(args))]
    torch.save({n: v.unsqueeze(0) for n, v in zip(names, tensors)}, stem + ".data.pt")
    answers = {}
    for mode, grow in (("mechanism", not swap), ("rules", swap)):
        try:
            ir = dsopt_compile.import_ir(stem + ".pt", stem + ".data.pt", names, grow)
        except Exception as e:  # noqa: BLE001
            return "skipped", "does not import: %s" % str(e).strip().splitlines()[0][:100], None
        answers[mode] = classify(imported_dims(ir, name), varies)
    return answers["mechanism"], answers["rules"], varies


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--op", action="append", help="only these probes")
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--rules-as-mechanism", action="store_true",
                   help="judge the rules alone as the mechanism (the check must fail: ctest "
                        "import-dynamic-dims-can-fail)")
    args = p.parse_args(argv)
    from dsopt import _dsopt_compile  # the compiler half of dsopt
    probes = probe_tables._probes()
    names = sorted(n for n in probes if args.op is None or n in args.op)
    counts, problems, skipped = {}, [], []
    rules_counts = {}
    with tempfile.TemporaryDirectory(prefix="dyndims-") as work:
        for name in names:
            mech, rules, varies = check_op(name, probes[name], work, _dsopt_compile,
                                           args.rules_as_mechanism)
            if mech in ("skipped", "coupled", "no tensor result"):
                counts[mech] = counts.get(mech, 0) + 1
                if mech == "skipped":
                    skipped.append("%s: %s" % (name, rules))
                continue
            counts[mech] = counts.get(mech, 0) + 1
            rules_counts[rules] = rules_counts.get(rules, 0) + 1
            if rules == "unsafe":
                problems.append("%s: the rules are unsafe" % name)
            if args.verbose or mech != "exact":
                print("%-55s mechanism %-14s rules %-14s varies %s" % (name, mech, rules, varies))
            if mech == "unsafe" or (mech != "exact" and name not in NOT_EXACT):
                problems.append("%s: the mechanism is %s" % (name, mech))
    for line in skipped:
        print("skipped " + line)
    print("mechanism: %s" % ", ".join("%s %d" % kv for kv in sorted(counts.items())))
    print("rules:     %s" % ", ".join("%s %d" % kv for kv in sorted(rules_counts.items())))
    for line in problems:
        print("FAIL " + line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
