#!/usr/bin/env python3
"""Checks a bundle of scripts/gpu-bundle.sh: size, the files gpu-check.sh needs, licences, and
every case's plan compiled for cuda with its archive, data and config beside it.

  bundle_contents.py BUNDLE [--limit-mb 40]

Exit 1 naming the first problem.
"""

import argparse
import json
import os
import sys

REQUIRED = [
    "gpu-check.sh", "BUNDLE.md",
    "src/runtime/CMakeLists.txt", "src/cmake/DSTorch.cmake", "src/cmake/DSCuda.cmake",
    "src/cmake/DSRuntimeDeps.cmake", "src/cmake/DSSingleTorch.cmake",
    "src/lib/Runtime/CMakeLists.txt", "src/lib/Runtime/CUDA/CudaDevice.cpp",
    "src/tools/ds-run/CMakeLists.txt", "src/python-bindings/CMakeLists.txt",
    "src/python-bindings/make_wheel.py", "src/python-bindings/dsopt/__init__.py",
    "src/unittests/Runtime/DeviceConformanceTest.cpp",
    "src/unittests/Runtime/DeviceConformance.cmake",
    "src/lib/Runtime/CUDA/NcclChannel.cpp", "src/lib/Runtime/CUDA/NcclTypes.h",
    "src/unittests/Runtime/NcclChannel.cmake", "src/unittests/Runtime/NcclChannelTest.cpp",
    "src/unittests/Runtime/NcclHostTest.cpp", "src/unittests/Runtime/TestRendezvous.h",
    "src/third_party/nlohmann_json/include/nlohmann/json.hpp",
    "src/third_party/nlohmann_json/LICENSE",
    "src/third_party/googletest/src/gtest-all.cc",
    "src/third_party/googletest/include/gtest/gtest.h",
    "src/third_party/googletest/LICENSE",
    "check/check.py", "check/oracle.py", "check/make_gpt.py", "check/step_time.py",
    "cases/cases.json",
]
# The compiler stays home: the runtime-only build must not need it.
ABSENT = ["src/lib/Dialect", "src/lib/Import", "src/lib/Compiler", "src/lib/Target",
          "src/include/ds/Dialect", "src/python-bindings/src/CompileBindings.cpp"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("bundle")
    p.add_argument("--limit-mb", type=float, default=40)
    args = p.parse_args(argv)
    b = args.bundle
    problems = []
    total = 0
    for folder, _, files in os.walk(b):
        for name in files:
            total += os.path.getsize(os.path.join(folder, name))
    if total > args.limit_mb * 2**20:
        problems.append("the bundle holds %d bytes, over %g MB" % (total, args.limit_mb))
    for rel in REQUIRED:
        if not os.path.isfile(os.path.join(b, rel)):
            problems.append("missing %s" % rel)
    for rel in ABSENT:
        if os.path.exists(os.path.join(b, rel)):
            problems.append("%s is in the bundle (the compiler's)" % rel)
    with open(os.path.join(b, "BUNDLE.md")) as f:
        if "incomplete" in f.read():
            problems.append("BUNDLE.md says the bundle is incomplete")
    cases_dir = os.path.join(b, "cases")
    with open(os.path.join(cases_dir, "cases.json")) as f:
        manifest = json.load(f)
    cases = manifest["cases"]
    names = {c["name"] for c in cases}
    for want in ("s0-fp32", "s3-fp32", "s0-bf16", "s3-bf16", "gas2-s2-fp32", "fp16-overflow",
                 "distill", "checkpoint-s3", "dsopt-engine", "speed-gpt-bench",
                 "speed-gpt-100m"):
        if want not in names:
            problems.append("no case %s" % want)
    for case in cases:
        for key in ("plan", "data", "config", "model", "program"):
            if key not in case:
                continue
            if key == "config" and case["kind"] == "dsopt":
                continue
            if case.get("made_on_node") and key in ("model", "data"):
                if os.path.exists(os.path.join(cases_dir, case[key])):
                    problems.append("%s: %s is shipped; it is made on the node" % (
                        case["name"], case[key]))
                continue
            if not os.path.isfile(os.path.join(cases_dir, case[key])):
                problems.append("%s: no %s %s" % (case["name"], key, case[key]))
        plan_path = os.path.join(cases_dir, case["plan"])
        if os.path.isfile(plan_path):
            with open(plan_path) as f:
                plan = json.load(f)
            if plan.get("device") != "cuda":
                problems.append("%s: plan device %r, not cuda" % (case["plan"],
                                                                   plan.get("device")))
            weights = (plan.get("weights") or {}).get("path", "")
            # A plan compiled from a torch.export program reads its weights from it.
            source = case.get("program", case["model"])
            kind = "pt2" if "program" in case else "torchscript"
            if weights != source:
                problems.append("%s: weights path %r, expected %r beside the plan" % (
                    case["plan"], weights, source))
            if (plan.get("weights") or {}).get("kind") != kind:
                problems.append("%s: weights kind %r, expected %r" % (
                    case["plan"], (plan.get("weights") or {}).get("kind"), kind))
    if problems:
        print("bundle_contents.py: " + "\n  ".join(problems), file=sys.stderr)
        return 1
    print("bundle_contents.py: %s: %d bytes (<= %g MB), %d cases, plans for cuda" % (
        b, total, args.limit_mb, len(cases)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
