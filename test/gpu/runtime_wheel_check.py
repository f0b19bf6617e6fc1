#!/usr/bin/env python3
"""dsopt's runtime module: no MLIR in it, a wheel of it installs with pip and trains.

  runtime_wheel_check.py --package BUILD/python/dsopt --make-wheel make_wheel.py
                         --bin BUILD/bin --models MODELS --work DIR

  - _dsopt*.so's NEEDED list names no libMLIR / libLLVM (the compiler is _dsopt_compile);
  - the full build's dsopt has the compiler (HAS_COMPILER, dsopt.compile is _dsopt_compile's);
  - make_wheel.py packs the package without _dsopt_compile; `pip install --no-deps --no-index
    --target` installs it (this environment untouched); imported from there, dsopt has no
    compiler and dsopt.compile raises CompileError saying it is the runtime-only build;
  - dsopt.Engine of that install trains an mlp plan (compiled by ds-compile) for 3 steps with
    the losses ds-run prints for the same plan and data.
"""

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys


def run(cmd, env=None):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=env)
    if proc.returncode != 0:
        raise SystemExit("runtime_wheel_check.py: %s exited %d:\n%s" % (
            " ".join(cmd), proc.returncode, proc.stdout))
    return proc.stdout


ENGINE = r"""
import json, sys, torch, dsopt
assert dsopt.__file__.startswith(sys.argv[1]), dsopt.__file__
assert dsopt._dsopt.HAS_COMPILER is False
try:
    dsopt.compile(torch.nn.Linear(2, 2), {"train_micro_batch_size_per_gpu": 1}, (torch.ones(1, 2),))
    raise SystemExit("dsopt.compile did not raise in the runtime-only install")
except dsopt.CompileError as e:
    assert "runtime-only" in str(e), str(e)
plan = dsopt.load_plan(sys.argv[2])
engine = dsopt.Engine(plan, device="cpu")
data = torch.load(sys.argv[3])
names = [i["name"] for i in plan.inputs]
out = []
for s in range(int(sys.argv[4])):
    loss = engine(*[data[n][s] for n in names])
    engine.backward(loss)
    engine.step()
    out.append(float(loss.detach()))
print(json.dumps(out))
"""


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--package", required=True)
    p.add_argument("--make-wheel", required=True)
    p.add_argument("--bin", required=True)
    p.add_argument("--models", required=True)
    p.add_argument("--work", required=True)
    args = p.parse_args(argv)
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)

    modules = glob.glob(os.path.join(args.package, "_dsopt.*.so"))
    if len(modules) != 1:
        raise SystemExit("expected one _dsopt*.so in %s, found %s" % (args.package, modules))
    needed = [line for line in run(["readelf", "-d", modules[0]]).splitlines()
              if "(NEEDED)" in line]
    bad = [line.split()[-1] for line in needed if "libMLIR" in line or "libLLVM" in line]
    if bad or not needed:
        raise SystemExit("%s needs %s" % (modules[0], bad or "nothing?"))
    print("%s: NEEDED has no MLIR or LLVM (%d entries)" % (os.path.basename(modules[0]),
                                                            len(needed)))

    build_python = os.path.dirname(os.path.abspath(args.package))
    env_full = dict(os.environ, PYTHONPATH=build_python)
    out = run([sys.executable, "-c", "import dsopt; print(dsopt._dsopt.HAS_COMPILER, "
               "dsopt._dsopt.compile.__module__)"], env_full).split()
    if out[-2:] != ["True", "dsopt._dsopt_compile"]:
        raise SystemExit("the full build's dsopt: HAS_COMPILER, compile's module = %s" % out)

    dist = os.path.join(args.work, "dist")
    wheel = run([sys.executable, args.make_wheel, "--package", args.package, "--out", dist,
                 "--exclude", "_dsopt_compile*"]).split()[-1]
    site = os.path.join(args.work, "site")
    run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--no-compile",
         "--disable-pip-version-check", "--target", site, wheel])
    if glob.glob(os.path.join(site, "dsopt", "_dsopt_compile*")):
        raise SystemExit("the wheel holds _dsopt_compile")

    cfg = os.path.join(args.work, "cfg.json")
    with open(cfg, "w") as f:
        json.dump({"train_micro_batch_size_per_gpu": "auto",
                   "optimizer": {"type": "AdamW", "params": {"lr": 0.01}}}, f)
    model = os.path.join(args.models, "mlp.pt")
    data = os.path.join(args.models, "mlp.data.pt")
    plan = os.path.join(args.work, "mlp.plan")
    run([os.path.join(args.bin, "ds-compile"), model, "--config", cfg, "--example-inputs", data,
         "-o", plan])
    lines = os.path.join(args.work, "ds-run.jsonl")
    run([os.path.join(args.bin, "ds-run"), plan, "--data", data, "--steps", "3", "--losses",
         lines])
    with open(lines) as f:
        expected = [json.loads(line)["loss"] for line in f if line.strip()]
    env = dict(os.environ, PYTHONPATH=site)
    got = json.loads(run([sys.executable, "-c", ENGINE, site, plan, data, "3"],
                         env).strip().splitlines()[-1])
    if len(got) != 3 or any(abs(a - b) > 1e-6 * max(1.0, abs(b)) for a, b in zip(got, expected)):
        raise SystemExit("dsopt from the wheel: losses %s, ds-run %s" % (got, expected))
    print("runtime_wheel_check.py: %s installs with pip; no compiler there (CompileError); "
          "Engine losses %s = ds-run's" % (os.path.basename(wheel), got))
    return 0


if __name__ == "__main__":
    sys.exit(main())
