#!/usr/bin/env python3
"""gpu-check.sh end to end without a GPU (CUDA_VISIBLE_DEVICES is emptied, so this holds on a
GPU machine too): the bundle's runtime-only build configures against this Python's torch and
builds the given targets (with the wheel's NCCL: --expect-nccl); every GPU tier is SKIPPED with the reason, none PASSED; the exit code
is 0 and the table is written. Then a build that fails (a target that does not exist) must make
gpu-check.sh exit 1, with the GPU tiers skipped for that reason.

  no_gpu_check.py --bundle B --results DIR [--targets "T1 T2"] [--skip-failing-build]
                  [--expect-nccl]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

GPU_TIERS = ("a", "b", "c")
NO_GPU = "no CUDA device visible"
NCCL_HOST = "host logic (cpu)"  # check.py's CPU row of the nccl tier
NCCL_FOUND = "CUDA backend: NCCL"  # DSCuda.cmake's line when it found the wheel's NCCL


def run_check(bundle, results, targets):
    env = dict(os.environ, PYTHON=sys.executable, DS_GPU_CHECK_TARGETS=targets,
               CUDA_VISIBLE_DEVICES="")
    start = time.time()
    proc = subprocess.run(["bash", os.path.join(bundle, "gpu-check.sh"), results],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    return proc.returncode, proc.stdout, time.time() - start


def rows_of(results):
    with open(os.path.join(results, "results.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def is_gpu_row(r):
    return (r["tier"] in GPU_TIERS
            or (r["tier"] == "conformance" and r["name"] == "cuda")
            or (r["tier"] == "nccl" and r["name"] != NCCL_HOST)
            or (r["tier"] == "dsopt" and r["name"] != "pip install + import")
            or (r["tier"] == "archives" and "cuda" in r["name"]))


def check_rows(rows, cases, reason):
    problems = []
    names = {(r["tier"], r["name"]) for r in rows}
    for c in cases:
        if (c["tier"], c["name"]) not in names:
            problems.append("no result row for case %s (tier %s)" % (c["name"], c["tier"]))
    gpu_rows = [r for r in rows if is_gpu_row(r)]
    if not gpu_rows:
        problems.append("no GPU rows at all")
    for r in gpu_rows:
        if r["status"] != "SKIPPED" or reason not in r["detail"]:
            problems.append("%s / %s: %s (%s): expected SKIPPED with '%s'" % (
                r["tier"], r["name"], r["status"], r["detail"], reason))
    return problems


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--bundle", required=True)
    p.add_argument("--results", required=True)
    p.add_argument("--targets", default="DSSupport")
    p.add_argument("--skip-failing-build", action="store_true")
    p.add_argument("--expect-nccl", action="store_true",
                   help="the build must find the wheel's NCCL (as the full build did)")
    args = p.parse_args(argv)
    with open(os.path.join(args.bundle, "cases", "cases.json")) as f:
        cases = json.load(f)["cases"]
    problems = []

    shutil.rmtree(args.results, ignore_errors=True)
    rc, out, took = run_check(args.bundle, args.results, args.targets)
    print(out)
    print("gpu-check.sh (targets %s): exit %d after %.1f s" % (args.targets, rc, took))
    if rc != 0:
        problems.append("gpu-check.sh exited %d without a GPU after a good build" % rc)
    rows = rows_of(args.results)
    build = [r for r in rows if r["tier"] == "build"]
    if len(build) != 1 or build[0]["status"] != "PASSED":
        problems.append("build row: %s" % build)
    for target in args.targets.split():
        built = [os.path.join(args.results, "build", "lib", "lib%s.%s" % (target, ext))
                 for ext in ("a", "so")]
        if not any(os.path.exists(b) for b in built):
            problems.append("target %s was not built (%s)" % (target, " or ".join(built)))
    problems += check_rows(rows, cases, NO_GPU)
    if args.expect_nccl:
        with open(os.path.join(args.results, "build.log")) as f:
            if NCCL_FOUND not in f.read():
                problems.append("the runtime-only build did not find the wheel's NCCL "
                                "(no '%s' line in build.log)" % NCCL_FOUND)
    with open(os.path.join(args.results, "results.md")) as f:
        md = f.read()
    if "| tier | check | result | s | detail |" not in md or "whole run:" not in md:
        problems.append("results.md lacks the final table or the run time")

    if not args.skip_failing_build:
        failing = args.results + "-failing-build"
        shutil.rmtree(failing, ignore_errors=True)
        rc2, out2, took2 = run_check(args.bundle, failing, "no-such-target")
        print("gpu-check.sh (a target that does not exist): exit %d after %.1f s" % (rc2, took2))
        if rc2 != 1:
            problems.append("gpu-check.sh exited %d after a failed build; expected 1" % rc2)
        rows2 = rows_of(failing)
        if not any(r["tier"] == "build" and r["status"] == "FAILED" for r in rows2):
            problems.append("the failed build has no FAILED build row")
        problems += ["failed build: " + x for x in check_rows(rows2, cases,
                                                               "the runtime build failed")]
    if problems:
        print("no_gpu_check.py: FAILED:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    print("no_gpu_check.py: build done, %d GPU rows SKIPPED with the reason, none PASSED" %
          sum(is_gpu_row(r) for r in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
