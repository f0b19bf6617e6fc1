#!/usr/bin/env python3
"""The GPU check's tiers run on the CPU, so that their logic is tested before a GPU visit.

  selftest_cpu.py --bin BUILD/bin --build BUILD --models MODELS --work DIR

Compiles the bundle's cases with --device cpu (scripts/gpu/make_cases.py, without the 100M
GPT), packs the full build's runtime module into a wheel (make_wheel.py, without
_dsopt_compile), and runs scripts/gpu/check.py --device cpu with the full build's ds-run:
tiers a and b (ds-run against the oracle, fp16 overflow skips, distillation, checkpoint
resume), dsopt (pip install, Engine vs ds-run) and the bench speed case must all pass. Then a
case whose oracle config differs from the plan's (another lr) must FAIL: the comparison can fail.
Nothing here is a GPU result.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
CHECK = os.path.join(ROOT, "scripts", "gpu", "check.py")


def rows_of(results):
    with open(os.path.join(results, "results.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def run(cmd):
    print("$ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--build", required=True)
    p.add_argument("--models", required=True)
    p.add_argument("--work", required=True)
    args = p.parse_args(argv)
    shutil.rmtree(args.work, ignore_errors=True)
    bundle = os.path.join(args.work, "bundle")
    cases_dir = os.path.join(bundle, "cases")
    proc = run([sys.executable, os.path.join(ROOT, "scripts", "gpu", "make_cases.py"),
                "--ds-compile", os.path.join(args.bin, "ds-compile"), "--models", args.models,
                "--out", cases_dir, "--device", "cpu", "--no-100m"])
    if proc.returncode != 0:
        print(proc.stdout)
        return 1
    dist = os.path.join(args.work, "dist")
    proc = run([sys.executable, os.path.join(ROOT, "python-bindings", "make_wheel.py"),
                "--package", os.path.join(args.build, "python", "dsopt"), "--out", dist,
                "--exclude", "_dsopt_compile*"])
    if proc.returncode != 0:
        print(proc.stdout)
        return 1

    problems = []
    results = os.path.join(args.work, "results")
    os.makedirs(results)
    proc = run([sys.executable, CHECK, "--bundle", bundle, "--build", args.build,
                "--results", results, "--device", "cpu", "--wheels", dist])
    print(proc.stdout)
    if proc.returncode != 0:
        problems.append("check.py --device cpu exited %d" % proc.returncode)
    rows = {(r["tier"], r["name"]): r for r in rows_of(results)}
    with open(os.path.join(cases_dir, "cases.json")) as f:
        cases = json.load(f)["cases"]
    wanted = [(c["tier"], c["name"]) for c in cases] + [
        ("dsopt", "pip install + import"), ("archives", "load+forward (cpu)"),
        ("conformance", "cpu")]
    for key in wanted:
        r = rows.get(key)
        if r is None or r["status"] != "PASSED":
            problems.append("%s / %s: %s" % (key[0], key[1], r and (r["status"], r["detail"])))

    # A case the oracle must reject: the plan trains with lr 0.002, its oracle config says 0.003.
    with open(os.path.join(cases_dir, "s0-fp32.config.json")) as f:
        cfg = json.load(f)
    cfg["optimizer"]["params"]["lr"] = 0.003
    with open(os.path.join(cases_dir, "tamper.config.json"), "w") as f:
        json.dump(cfg, f)
    tamper = dict(next(c for c in cases if c["name"] == "s0-fp32"), name="tamper",
                  config="tamper.config.json")
    with open(os.path.join(cases_dir, "cases.json"), "w") as f:
        json.dump({"cases": cases + [tamper]}, f)
    results2 = os.path.join(args.work, "results-tamper")
    os.makedirs(results2)
    proc = run([sys.executable, CHECK, "--bundle", bundle, "--build", args.build,
                "--results", results2, "--device", "cpu", "--only", "tamper"])
    row = {(r["tier"], r["name"]): r for r in rows_of(results2)}.get(("a", "tamper"))
    if proc.returncode != 1 or row is None or row["status"] != "FAILED":
        problems.append("a case whose oracle uses another lr: exit %d, row %s (expected FAILED)"
                        % (proc.returncode, row))
    else:
        print("tamper case FAILED as it must: %s" % row["detail"][:200])
    if problems:
        print("selftest_cpu.py: FAILED:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    print("selftest_cpu.py: %d cases passed on the CPU; the tampered one failed" % len(cases))
    return 0


if __name__ == "__main__":
    sys.exit(main())
