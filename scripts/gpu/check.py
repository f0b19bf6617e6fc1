#!/usr/bin/env python3
"""The GPU check's tiers (gpu-check.sh runs this after building the runtime).

  check.py --bundle DIR --build BUILD --results RESULTS [--device cuda] [--build-failed]
           [--deadline EPOCH_S] [--only NAME ...]

Runs with the node's python3 and torch; appends every result to RESULTS/results.md (and
RESULTS/results.jsonl) as it goes, then one markdown table of them all. Tiers, in order:

  archives      the node's torch loads every TorchScript archive of the bundle and runs a
                forward (CPU; on the GPU too when there is one)
  conformance   build/bin/DSDeviceConformance on cpu, and on cuda (skips itself, code 77,
                without a GPU)
  nccl          build/bin/DSNcclHostTest (the NCCL channel's host logic, CPU) and
                DSNcclChannelTest (a channel of one rank per visible GPU: the collectives in
                fp32/bf16/fp16, abort; skips itself, code 77, without a GPU)
  a             W = 1, ZeRO stages 0 and 3, fp32 and bf16: ds-run --device cuda against
                oracle.py --device cuda (the same archive under this torch's autograd and
                torch.optim on the same GPU, TF32 off), oracle.PRECISION_TOLERANCES
  b             GAS 2; fp16 with overflow skips (loss scale and skipped steps exactly equal);
                the distillation pair (ZeRO-2 student, frozen ZeRO-3 teacher bitwise unchanged);
                checkpoint save and resume (4 steps straight = 2 + save + resume, bitwise)
  o             ZeRO-Offload on one GPU (stages 2 and 3, fp32 and bf16): master shard and
                optimizer state in pinned host memory, against the oracle
  m             two ranks, one GPU each, NCCL, under torchrun: stages 0-3 against the oracle of
                2 ranks; ms/step of ds-run (stage 0 and ZeRO-3) vs PyTorch DDP with NCCL
                (ddp_step.py) and DeepSpeed's ZeRO-3 where it is installed. SKIPPED with the
                reason where fewer than 2 GPUs are visible
  dsopt         the runtime-only dsopt wheel installs with pip (--target, this environment
                untouched) and trains a plan on the GPU like ds-run
  c             ms/step of ds-run vs eager PyTorch (nn.Module, torch.optim.AdamW) on the same
                GPU: bench/step_time.py's GPT (fp32) and a ~100M-parameter GPT (bf16, made here
                by make_gpt.py), with MFU
  no-gpu        without a GPU: ds-run --device cuda exits 1 naming the missing device

A tier that needs a GPU is SKIPPED (with the reason) when none is visible, never PASSED.
Exit status: 1 if anything FAILED, else 0.
"""

import argparse
import glob
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import time
import traceback
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
# In a bundle oracle.py sits beside this file; in the repository it is test/oracle/oracle.py.
sys.path.insert(0, os.path.join(HERE, "..", "..", "test", "oracle"))
sys.path.insert(0, HERE)

warnings.filterwarnings("ignore", message=r".*is deprecated\. Please switch to",
                        category=FutureWarning)

import torch  # noqa: E402

import oracle  # noqa: E402

PASSED, FAILED, SKIPPED = "PASSED", "FAILED", "SKIPPED"

# Dense peak TFLOP/s (no sparsity) by device name, for MFU: (bf16 tensor core, fp32 non-tensor).
# NVIDIA's data sheets: H100 SXM5 and H200 989.4 / 66.9, H100 PCIe 756.5 / 51.2, H100 NVL
# 835.5 / 60, A100 312 / 19.5. DS_GPU_PEAK_TFLOPS_BF16 / _FP32 override.
PEAKS = [("H200", 989.4, 66.9), ("H100 NVL", 835.5, 60.0), ("H100 PCIe", 756.5, 51.2),
         ("H100", 989.4, 66.9), ("A100", 312.0, 19.5)]


class Results:
    """Appends each result to results.md and results.jsonl at once; writes the final table."""

    def __init__(self, folder):
        self.md = os.path.join(folder, "results.md")
        self.jsonl = os.path.join(folder, "results.jsonl")
        self.failed = False

    def text(self, text):
        with open(self.md, "a") as f:
            f.write(text.rstrip("\n") + "\n")
        print(text, flush=True)

    def record(self, tier, name, status, detail, seconds=None):
        assert status in (PASSED, FAILED, SKIPPED)
        detail = " ".join(str(detail).split())
        if len(detail) > 600:
            detail = detail[:600] + " ..."
        entry = {"tier": tier, "name": name, "status": status, "detail": detail,
                 "seconds": None if seconds is None else round(seconds, 1)}
        with open(self.jsonl, "a") as f:
            f.write(json.dumps(entry) + "\n")
        took = "" if seconds is None else " (%.1f s)" % seconds
        self.text("- %s / %s: **%s**%s: %s" % (tier, name, status, took, detail))
        self.failed |= status == FAILED

    def table(self):
        rows = []
        with open(self.jsonl) as f:
            for line in f:
                if line.strip():
                    rows.append(json.loads(line))
        out = ["", "## Summary", "", "| tier | check | result | s | detail |", "|---|---|---|---|---|"]
        for r in rows:
            cell = r["detail"].replace("|", "\\|")
            out.append("| %s | %s | %s | %s | %s |" % (
                r["tier"], r["name"], r["status"],
                "" if r["seconds"] is None else r["seconds"], cell))
        counts = {s: sum(r["status"] == s for r in rows) for s in (PASSED, FAILED, SKIPPED)}
        out.append("")
        out.append("%d passed, %d failed, %d skipped" % (counts[PASSED], counts[FAILED],
                                                        counts[SKIPPED]))
        self.text("\n".join(out))


class Failure(Exception):
    pass


class Check:
    def __init__(self, args):
        self.args = args
        self.bundle = os.path.abspath(args.bundle)
        self.cases_dir = os.path.join(self.bundle, "cases")
        self.build = os.path.abspath(args.build)
        self.results_dir = os.path.abspath(args.results)
        self.scratch = os.path.abspath(args.scratch or args.results)
        self.work = os.path.join(self.scratch, "work")
        os.makedirs(self.work, exist_ok=True)
        self.r = Results(self.results_dir)
        with open(os.path.join(self.cases_dir, "cases.json")) as f:
            manifest = json.load(f)
        self.cases = manifest["cases"]
        self.compiled_with = manifest.get("compiled_with", {})
        self.device = args.device
        self.gpu_reason = None  # why GPU tiers skip; None = a GPU is there
        if args.build_failed:
            self.gpu_reason = "the runtime build failed (build.log)"
        elif self.device == "cpu":
            pass  # the self-test of these scripts: cases compiled for the CPU, run there
        elif not torch.cuda.is_available():
            self.gpu_reason = ("no CUDA device visible: torch %s (CUDA %s) reports "
                               "torch.cuda.is_available() False" % (
                                   torch.__version__, torch.version.cuda))
        self.ds_run = os.path.join(self.build, "bin", "ds-run")
        self.ds_lines = {}  # case name -> ds-run loss lines (dsopt compares with them)

    # -- helpers ------------------------------------------------------------------------------
    def case_path(self, name):
        return os.path.join(self.cases_dir, name)

    def out_of_time(self):
        return self.args.deadline and time.time() > self.args.deadline

    def run(self, cmd, timeout=180, env=None, what=None):
        """Runs cmd; returns its output; raises Failure naming it on a non-zero exit."""
        start = time.time()
        try:
            proc = subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, timeout=timeout,
                                  env=env)
        except subprocess.TimeoutExpired:
            raise Failure("%s timed out after %d s" % (what or os.path.basename(cmd[0]), timeout))
        if proc.returncode != 0:
            tail = "\n".join(proc.stdout.strip().splitlines()[-6:])
            raise Failure("%s exited %d after %.1f s: %s" % (
                what or os.path.basename(str(cmd[0])), proc.returncode, time.time() - start,
                tail))
        return proc.stdout

    def step_seconds(self, cmd, steps, warm, what):
        """Runs cmd (a ds-run of `steps` steps) and returns its seconds per step, from the
        times its loss lines (one per step, flushed) arrive after the first `warm` of them:
        the process's start, CUDA's initialisation and the first steps' kernel loads are
        left out, which a difference of two whole runs of a few ms per step does not do
        reliably (the first GPU run measured a negative step time that way)."""
        start = time.time()
        proc = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, bufsize=1)
        stamps, lines = [], []
        try:
            for line in proc.stdout:
                lines.append(line)
                if line.startswith("{") and '"step"' in line:
                    stamps.append(time.perf_counter())
                if time.time() - start > 300:
                    proc.kill()
                    raise Failure("%s timed out after 300 s" % what)
        finally:
            rc = proc.wait()
        if rc != 0:
            raise Failure("%s exited %d after %.1f s: %s" % (
                what, rc, time.time() - start, "".join(lines[-6:]).strip()))
        if len(stamps) != steps or steps <= warm:
            raise Failure("%s printed %d step lines, expected %d" % (what, len(stamps), steps))
        return (stamps[-1] - stamps[warm - 1]) / (steps - warm)

    def ds_run_cmd(self, case, folder, steps, extra=()):
        return self.launcher(case) + [
            str(c) for c in (self.ds_run, self.case_path(case["plan"]), "--data",
                             self.case_path(case["data"]), "--steps", steps, "--device",
                             self.device, *extra)]

    def launcher(self, case, python=False):
        """torchrun's command prefix for a case of several ranks (one GPU each; Skip where
        fewer are visible), [] for one rank."""
        world = case.get("world", 1)
        if world == 1:
            return []
        if self.device != "cpu" and torch.cuda.device_count() < world:
            raise Skip("needs %d GPUs, %d visible" % (world, torch.cuda.device_count()))
        return [sys.executable, "-m", "torch.distributed.run", "--standalone",
                "--nproc-per-node", str(world)] + ([] if python else ["--no-python"])

    def guarded(self, tier, name, needs_gpu, needs, body):
        """Runs body() -> detail; records PASSED, FAILED (Failure, OracleError or any
        exception) or SKIPPED (no GPU, not built, out of time)."""
        if needs_gpu and self.gpu_reason:
            self.r.record(tier, name, SKIPPED, self.gpu_reason)
            return
        for path in needs:
            if not os.path.exists(path):
                self.r.record(tier, name, SKIPPED, "%s was not built" % os.path.relpath(
                    path, self.build))
                return
        if self.out_of_time():
            self.r.record(tier, name, SKIPPED, "the check's time budget is spent")
            return
        start = time.time()
        try:
            detail = body()
            self.r.record(tier, name, PASSED, detail, time.time() - start)
        except Skip as e:
            self.r.record(tier, name, SKIPPED, str(e))
        except (Failure, oracle.OracleError) as e:
            self.r.record(tier, name, FAILED, str(e), time.time() - start)
        except Exception as e:  # a bug of this script or an unexpected torch error
            self.r.record(tier, name, FAILED, "%s: %s | %s" % (
                type(e).__name__, e, traceback.format_exc().strip().splitlines()[-3:]),
                time.time() - start)

    # -- environment --------------------------------------------------------------------------
    def environment(self):
        lines = ["", "## Environment", ""]
        if self.device == "cpu":
            lines.append("- **SELF-TEST ON THE CPU** (--device cpu, plans compiled for the CPU): "
                         "it checks these scripts, not a GPU; nothing here ran on a GPU")
        lines.append("- python %s (%s), %s" % (platform.python_version(), sys.executable,
                                                platform.platform()))
        lines.append("- torch %s, CUDA %s, cuDNN %s" % (
            torch.__version__, torch.version.cuda,
            torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None))
        lines.append("- plans compiled with torch %s" % self.compiled_with.get("torch"))
        if torch.cuda.is_available():
            for i in range(torch.cuda.device_count()):
                p = torch.cuda.get_device_properties(i)
                lines.append("- cuda:%d %s, capability %d.%d, %.1f GiB, %d SMs" % (
                    i, p.name, p.major, p.minor, p.total_memory / 2**30,
                    p.multi_processor_count))
        elif self.gpu_reason:
            lines.append("- GPU: none (%s)" % self.gpu_reason)
        smi = shutil.which("nvidia-smi")
        if smi:
            try:
                q = subprocess.run([smi, "--query-gpu=name,driver_version,memory.total,"
                                    "clocks.max.sm,power.limit", "--format=csv"],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   timeout=30).stdout
                full = subprocess.run([smi], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True, timeout=30).stdout
                lines += ["", "nvidia-smi:", "", "```", q.strip(), "", full.strip(), "```"]
            except (OSError, subprocess.SubprocessError) as e:
                lines.append("- nvidia-smi failed: %s" % e)
        else:
            lines.append("- nvidia-smi: not on PATH")
        self.r.text("\n".join(lines) + "\n\n## Results (in the order they ran)\n")

    # -- tiers --------------------------------------------------------------------------------
    def archives(self):
        models = []
        data_of = {}
        for case in self.cases:
            if case.get("made_on_node"):
                continue
            if case["model"] not in models:
                models.append(case["model"])
                data_of[case["model"]] = case["data"]
        devices = ["cpu"] + ([] if self.gpu_reason or self.device == "cpu" else [self.device])
        for device in devices:
            def body(device=device):
                done = []
                for model in models:
                    path = self.case_path(model)
                    try:
                        module = torch.jit.load(path, map_location=device)
                    except Exception as e:
                        raise Failure("torch %s cannot load %s: %s" % (torch.__version__,
                                                                       model, e))
                    data = oracle.data_to(oracle.load_data(self.case_path(
                        data_of[model])), device)
                    inputs = oracle.bind_inputs(module, data)
                    with torch.no_grad():
                        losses, _ = oracle.forward_losses(module, [i.tensor[0] for i in inputs])
                    values = [float(l) for l in losses]
                    if not all(math.isfinite(v) for v in values):
                        raise Failure("%s: forward gave %s" % (model, values))
                    done.append(model)
                return "torch %s loads %s and runs micro-step 0 on %s" % (
                    torch.__version__, ", ".join(done), device)
            self.guarded("archives", "load+forward (%s)" % device, device != "cpu", [], body)

    def conformance(self):
        binary = os.path.join(self.build, "bin", "DSDeviceConformance")
        for backend in ("cpu", "cuda"):
            def body(backend=backend):
                env = dict(os.environ, DS_CONFORMANCE_BACKENDS=backend)
                proc = subprocess.run([binary], stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True, timeout=180, env=env)
                tail = " ".join(proc.stdout.strip().splitlines()[-3:])
                if proc.returncode == 77:
                    raise Skip("the suite skipped itself (exit 77): " + tail)
                if proc.returncode != 0:
                    raise Failure("exit %d: %s" % (proc.returncode, tail))
                return tail
            self.guarded("conformance", backend, backend != "cpu", [binary], body)

    def statistics_dtypes(self):
        """What the compiler assumes of the device's normalisation kernels (NNRules.cpp,
        statisticsElementType): on CUDA native_layer_norm and native_batch_norm return
        their statistics in the input's accumulate type (f32 for f16 and bf16), on the
        CPU in the input's dtype."""
        def body():
            device = torch.device(self.device)
            seen = []
            for dtype in (torch.float16, torch.bfloat16, torch.float32):
                x = torch.randn(4, 8, device=device, dtype=dtype)
                # The CPU's kernels keep the input's dtype (the selftest runs this on cpu).
                expected = torch.float32 if device.type == "cuda" else dtype
                ln = torch.native_layer_norm(x, [8], None, None, 1e-5)
                bn = torch.native_batch_norm(x, None, None, None, None, True, 0.1, 1e-5)
                for op, out in (("native_layer_norm", ln), ("native_batch_norm", bn)):
                    got = (out[1].dtype, out[2].dtype)
                    if got != (expected, expected):
                        raise Failure("%s(%s) returned statistics %s, the compiler declares %s"
                                      % (op, dtype, got, expected))
                seen.append(str(dtype).replace("torch.", ""))
            return ("native_layer_norm and native_batch_norm on %s return their statistics "
                    "for %s inputs in the dtype ds-compile --device %s declares" % (
                        device, ", ".join(seen), device.type))
        self.guarded("conformance", "statistics dtypes", True, [], body)

    def nccl(self):
        """The CUDA backend's NCCL channel: its host logic (CPU) and a channel of one rank per
        visible GPU (all-reduce, reduce-scatter, all-gather, broadcast; fp32/bf16/fp16)."""
        for name, binary, needs_gpu in (
                ("host logic (cpu)", "DSNcclHostTest", False),
                ("channel (cuda)", "DSNcclChannelTest", True)):
            path = os.path.join(self.build, "bin", binary)

            def body(path=path):
                proc = subprocess.run([path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True, timeout=240)
                lines = proc.stdout.strip().splitlines()
                told = [l for l in lines if l.startswith(("NCCL channel test:", "nccl "))]
                tail = " ".join(told + lines[-3:])
                if proc.returncode == 77:
                    raise Skip("the test skipped itself (exit 77): " + tail)
                if proc.returncode != 0:
                    raise Failure("exit %d: %s" % (proc.returncode, tail))
                return tail
            self.guarded("nccl", name, needs_gpu, [path], body)

    def oracle_case(self, case):
        folder = os.path.join(self.work, case["name"])
        os.makedirs(folder, exist_ok=True)
        lines_path = os.path.join(folder, "ours.jsonl")
        params_path = os.path.join(folder, "ours.safetensors")
        self.run(self.ds_run_cmd(case, folder, case["steps"],
                                 ["--losses", lines_path, "--save-params", params_path]),
                 what="ds-run")
        ours = oracle.read_jsonl(lines_path)
        self.ds_lines[case["name"]] = ours
        state = oracle.load_params(params_path)
        with open(self.case_path(case["config"])) as f:
            config = json.load(f)
        masters = {}
        expected_lines, expected_state = oracle.train(
            self.case_path(case["model"]), self.case_path(case["data"]), config, case["steps"],
            case.get("world", 1), masters=masters, device=self.device)
        mode = case["mode"]
        tol = oracle.PRECISION_TOLERANCES[mode]
        # ds-run may write a parameter as its fp32 master where the oracle stores bf16 / fp16.
        expected = oracle.expected_for(state, expected_state, masters)
        ok, msg_l = oracle.compare_train_lines(ours, expected_lines, tol["loss_rtol"],
                                               1e-12 if mode == "fp32" else 0.0,
                                               tol["norm_rtol"], "ds-run", "oracle")
        if not ok:
            raise Failure("loss lines: " + msg_l)
        ok, msg_p = oracle.compare_params(state, expected, tol["param_rtol"], tol["param_atol"],
                                          "ds-run", "oracle")
        if not ok:
            raise Failure("parameters: " + msg_p)
        extra = ""
        if mode == "fp16":
            skipped = sum(bool(l.get("skipped")) for l in expected_lines)
            if skipped == 0:
                raise Failure("the oracle skipped no step: the case does not test an overflow")
            extra = "; %d of %d steps skipped on overflow" % (skipped, len(expected_lines))
        if case["kind"] == "distill":
            initial = dict(torch.jit.load(self.case_path(case["model"]),
                                          map_location="cpu").named_parameters())
            names = [n for n in initial if n.startswith(case["frozen_prefix"])]
            changed = [n for n in names if not torch.equal(state[n], initial[n].detach())]
            if not names or changed:
                raise Failure("frozen teacher: %s" % (
                    "no parameter named %s*" % case["frozen_prefix"] if not names
                    else "changed: %s" % ", ".join(changed)))
            extra += "; %d frozen teacher parameters bitwise unchanged" % len(names)
        return "%s (%s); %s%s" % (msg_l, mode, msg_p, extra)

    def checkpoint_case(self, case):
        folder = os.path.join(self.work, case["name"])
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        steps = case["steps"]
        half = steps // 2
        straight = os.path.join(folder, "straight")
        first = os.path.join(folder, "first")
        resumed = os.path.join(folder, "resumed")
        self.run(self.ds_run_cmd(case, folder, steps, [
            "--losses", straight + ".jsonl", "--save-params", straight + ".safetensors"]),
            what="ds-run (straight)")
        self.run(self.ds_run_cmd(case, folder, half, ["--save-checkpoint", first]),
                 what="ds-run (first half, save)")
        self.run(self.ds_run_cmd(case, folder, steps, [
            "--resume", first, "--losses", resumed + ".jsonl",
            "--save-params", resumed + ".safetensors"]), what="ds-run (resume)")
        a = oracle.read_jsonl(straight + ".jsonl")
        b = oracle.read_jsonl(resumed + ".jsonl")
        if a[half:] != b:
            raise Failure("loss lines of steps %d-%d differ: straight %s, resumed %s" % (
                half + 1, steps, a[half:], b))
        pa = oracle.load_params(straight + ".safetensors")
        pb = oracle.load_params(resumed + ".safetensors")
        if sorted(pa) != sorted(pb):
            raise Failure("parameter names differ after resume")
        differ = [n for n in pa if not torch.equal(pa[n], pb[n])]
        if differ:
            raise Failure("parameters differ after resume: %s" % ", ".join(differ[:5]))
        return ("steps %d-%d after --resume equal the straight run's bitwise (loss lines and "
                "%d parameters)" % (half + 1, steps, len(pa)))

    def dsopt_wheel(self):
        dist = self.args.wheels or os.path.join(self.build, "python", "dist")
        wheels = sorted(glob.glob(os.path.join(dist, "dsopt-*.whl")))
        site = os.path.join(self.scratch, "site")

        def install():
            if not wheels:
                raise Failure("no wheel in %s" % dist)
            shutil.rmtree(site, ignore_errors=True)
            self.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index",
                      "--no-compile", "--disable-pip-version-check", "--target", site,
                      wheels[-1]], what="pip install")
            out = self.run([sys.executable, "-c",
                            "import dsopt, dsopt._dsopt as n; print(dsopt.__file__, "
                            "n.HAS_COMPILER)"], env=self.dsopt_env(site), what="import dsopt")
            where, has_compiler = out.split()[-2:]
            if not where.startswith(site):
                raise Failure("import dsopt found %s, not the installed wheel" % where)
            if has_compiler != "False":
                raise Failure("the runtime-only module reports a compiler")
            return "pip installed %s into %s; import dsopt OK, no compiler" % (
                os.path.basename(wheels[-1]), site)
        self.guarded("dsopt", "pip install + import", False, [dist], install)

        for case in [c for c in self.cases if c["kind"] == "dsopt" and self.wanted(c)]:
            def body(case=case):
                if not wheels:
                    raise Skip("no dsopt wheel was built")
                if not os.path.exists(os.path.join(site, "dsopt")):
                    raise Failure("the wheel is not installed (see the row above)")
                reference = self.ds_lines.get(case["reference"])
                if not reference:
                    raise Failure("no ds-run lines of %s to compare with" % case["reference"])
                script = (
                    "import json, sys, torch, dsopt\n"
                    "plan = dsopt.load_plan(sys.argv[1])\n"
                    "engine = dsopt.Engine(plan, device=sys.argv[4])\n"
                    "data = torch.load(sys.argv[2])\n"
                    "names = [i['name'] for i in plan.inputs]\n"
                    "out = []\n"
                    "for s in range(int(sys.argv[3])):\n"
                    "    loss = engine(*[data[n][s] for n in names])\n"
                    "    engine.backward(loss)\n"
                    "    engine.step()\n"
                    "    out.append(float(loss.detach()))\n"
                    "print(json.dumps(out))\n")
                out = self.run([sys.executable, "-c", script, self.case_path(case["plan"]),
                                self.case_path(case["data"]), case["steps"], self.device],
                               env=self.dsopt_env(site), what="dsopt.Engine")
                losses = json.loads(out.strip().splitlines()[-1])
                ref = [l["loss"] for l in reference[:case["steps"]]]
                bad = [(a, b) for a, b in zip(losses, ref)
                       if abs(a - b) > 1e-5 * max(1.0, abs(b))]
                if len(losses) != len(ref) or bad:
                    raise Failure("dsopt losses %s vs ds-run %s" % (losses, ref))
                return "dsopt.Engine(device=%r) losses %s = ds-run's (rtol 1e-5)" % (
                    self.device, ["%.6g" % x for x in losses])
            self.guarded("dsopt", case["name"], True, [], body)

    def dsopt_env(self, site):
        env = dict(os.environ)
        env["PYTHONPATH"] = site + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH")
                                    else "")
        return env

    def speed_case(self, case):
        folder = os.path.join(self.work, case["name"])
        os.makedirs(folder, exist_ok=True)
        model = self.case_path(case["model"])
        data_path = self.case_path(case["data"])
        if case.get("made_on_node"):
            model = os.path.join(folder, case["model"])
            data_path = os.path.join(folder, case["data"])
            out = self.run([sys.executable, os.path.join(HERE, "make_gpt.py"), "--size",
                            case["size"], "--out", folder], what="make_gpt.py")
            if int(out.split()[-1]) != case["params"]:
                raise Failure("make_gpt.py made %s parameters, the plan has %d" % (
                    out.split()[-1], case["params"]))
        import make_gpt  # noqa: E402  (bench/step_time.py's GPT)
        g = make_gpt.SIZES[case["size"]]
        steps = int(os.environ.get("DS_GPU_SPEED_STEPS", "30"))
        short = steps // 3

        cmd = [self.ds_run, self.case_path(case["plan"]), "--data", data_path, "--steps",
               steps, "--device", self.device]
        if case.get("made_on_node"):
            cmd += ["--weights", model]
        ours = self.step_seconds(cmd, steps, short, "ds-run --steps %d" % steps)

        # Eager: the Python nn.Module with the archive's weights, torch.optim.AdamW.
        device = torch.device(self.device)
        module, _ = make_gpt.build(case["size"])
        scripted = torch.jit.load(model, map_location="cpu")
        module.load_state_dict(scripted.state_dict())
        module.to(device).train()
        data = torch.load(data_path)
        idx = data["idx"].to(device)
        targets = data["targets"].to(device)
        bf16 = case["mode"] == "bf16"
        if bf16:
            # As the plan trains: bf16 weights, fp32 masters and AdamW state.
            module.to(torch.bfloat16)
            params = list(module.parameters())
            masters = [p.detach().float().clone().requires_grad_(True) for p in params]
            opt = torch.optim.AdamW(masters, lr=1e-3, weight_decay=0.01)
        else:
            params = list(module.parameters())
            opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01)

        def eager_step(s):
            loss = module(idx[s], targets[s])
            loss.backward()
            if bf16:
                for m, p in zip(masters, params):
                    m.grad = p.grad.float()
                    p.grad = None
                torch.nn.utils.clip_grad_norm_(masters, 1.0)
                opt.step()
                opt.zero_grad(set_to_none=True)
                with torch.no_grad():
                    for m, p in zip(masters, params):
                        p.copy_(m)
            else:
                torch.nn.utils.clip_grad_norm_(params, 1.0)
                opt.step()
                opt.zero_grad(set_to_none=True)
        for s in range(3):
            eager_step(s)
        sync = torch.cuda.synchronize if device.type == "cuda" else (lambda d: None)
        sync(device)
        start = time.perf_counter()
        for s in range(steps):
            eager_step(3 + s % (idx.shape[0] - 3))
        sync(device)
        eager = (time.perf_counter() - start) / steps
        del module, opt
        if device.type == "cuda":
            torch.cuda.empty_cache()

        # MFU: 6 N T + 12 L T^2 d per sequence (N: parameters of the matmuls, i.e. without
        # the two embeddings; PaLM's formula, causal attention not halved).
        n_matmul = case["params"] - g["vocab"] * g["d"] - g["t"] * g["d"]
        tokens = g["batch"] * g["t"]
        flops = 6 * n_matmul * tokens + 12 * g["layers"] * g["t"] * g["d"] * tokens
        peak = self.peak_tflops(bf16)
        mfu = lambda sec: ("%.1f%%" % (100 * flops / sec / (peak * 1e12))) if peak else "n/a"
        return ("%s GPT, %d params, %s, batch %d x T %d: ds-run %.2f ms/step, eager %.2f "
                "ms/step, ratio %.2f; MFU ds-run %s, eager %s (%.3g TFLOP/step, peak %s "
                "TFLOP/s %s)" % (
                    case["size"], case["params"], case["mode"], g["batch"], g["t"],
                    ours * 1e3, eager * 1e3, ours / eager, mfu(ours), mfu(eager), flops / 1e12,
                    peak or "unknown", "bf16" if bf16 else "fp32"))

    def speed_ddp_case(self, case):
        """ds-run on W ranks vs PyTorch DDP (and DeepSpeed where installed) on the same GPUs."""
        launch = self.launcher(case)
        steps = int(os.environ.get("DS_GPU_SPEED_STEPS", "30"))
        short = steps // 3

        cmd = launch + [self.ds_run, self.case_path(case["plan"]), "--data",
                        self.case_path(case["data"]), "--steps", steps, "--device", self.device]
        ours = self.step_seconds(cmd, steps, short,
                                 "ds-run --steps %d on %d ranks" % (steps, case["world"]))
        out = self.run(self.launcher(case, python=True) + [
            os.path.join(HERE, "ddp_step.py"), "--archive", self.case_path(case["model"]),
            "--data", self.case_path(case["data"]), "--size", case["size"], "--steps", steps,
            "--device", "cuda" if self.device != "cpu" else "cpu"], timeout=300,
            what="ddp_step.py")
        match = re.search(r"ddp ms/step ([0-9.]+)", out)
        if not match:
            raise Failure("ddp_step.py printed no step time: %s" % out[-500:])
        ddp = float(match.group(1)) / 1e3
        try:
            import deepspeed  # noqa: F401
            deepspeed_note = "DeepSpeed installed but not timed here yet"
        except ImportError:
            deepspeed_note = "DeepSpeed not installed: not compared"
        return ("%s GPT, %d ranks, ZeRO-%d: ds-run %.2f ms/step, DDP %.2f ms/step, ratio %.2f; "
                "%s" % (case["size"], case["world"], case["stage"], ours * 1e3, ddp * 1e3,
                        ours / ddp, deepspeed_note))

    def peak_tflops(self, bf16):
        env = os.environ.get("DS_GPU_PEAK_TFLOPS_BF16" if bf16 else "DS_GPU_PEAK_TFLOPS_FP32")
        if env:
            return float(env)
        if self.device == "cpu":
            return None
        name = torch.cuda.get_device_name(torch.device(self.device))
        for key, p_bf16, p_fp32 in PEAKS:
            if key in name:
                return p_bf16 if bf16 else p_fp32
        return None

    def no_gpu_error(self):
        case = self.cases[0]

        def body():
            proc = subprocess.run(self.ds_run_cmd(case, self.work, 1), stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, timeout=60)
            text = " ".join(proc.stdout.split())
            if proc.returncode != 1 or "cuda" not in text.lower():
                raise Failure("expected exit 1 naming cuda, got %d: %s" % (proc.returncode,
                                                                           text))
            return "exit 1: %s" % text
        self.guarded("no-gpu", "ds-run --device %s without a GPU" % self.device, False,
                     [self.ds_run], body)

    # -- driver -------------------------------------------------------------------------------
    def wanted(self, case):
        return not self.args.only or case["name"] in self.args.only

    def main(self):
        self.environment()
        ds_run = [self.ds_run]
        wanted = self.wanted
        self.archives()
        self.conformance()
        self.statistics_dtypes()
        self.nccl()
        for tier in ("a", "b", "o", "m"):
            for case in self.cases:
                if case["tier"] != tier or not wanted(case):
                    continue
                body = {"checkpoint": self.checkpoint_case,
                        "speed-ddp": self.speed_ddp_case}.get(case["kind"], self.oracle_case)
                self.guarded(tier, case["name"], True, ds_run, lambda c=case, b=body: b(c))
        self.dsopt_wheel()
        for case in self.cases:
            if case["tier"] == "c" and wanted(case):
                self.guarded("c", case["name"], True, ds_run,
                             lambda c=case: self.speed_case(c))
        if self.gpu_reason and not self.args.build_failed:
            self.no_gpu_error()
        self.r.table()
        return 1 if self.r.failed else 0


class Skip(Exception):
    pass


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    p.add_argument("--bundle", required=True)
    p.add_argument("--build", required=True)
    p.add_argument("--results", required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--build-failed", action="store_true")
    p.add_argument("--deadline", type=float, default=0.0,
                   help="epoch seconds after which the remaining checks are skipped")
    p.add_argument("--only", nargs="*", default=[], help="case names (tiers a, b, o, m, c)")
    p.add_argument("--scratch", default="",
                   help="folder for work files (checkpoints, the 100M archive, the installed "
                        "wheel); default RESULTS")
    p.add_argument("--wheels", default="",
                   help="folder of the dsopt wheel (default BUILD/python/dist)")
    args = p.parse_args(argv)
    return Check(args).main()


if __name__ == "__main__":
    sys.exit(main())
