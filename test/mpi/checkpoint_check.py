#!/usr/bin/env python3
"""Checkpoints under real MPI ranks: exact resume, crash safety, zero_to_fp32, errors.

  checkpoint_check.py --bin BUILD/bin --models DIR --case CASE [--stages 0 1 2 3]
                      [--world-sizes 2] [--launcher 'mpirun -n {W}'] [--keep DIR]

Every case compiles DIR/mlp.pt (AdamW with weight decay, WarmupLR, GAS 2, buckets of 500
elements; stage 3 keeps the biases persistent and shards the weights) or the named model, and
drives `ds-run --save-checkpoint/--save-every/--resume` and `ds-zero-to-fp32`:

  resume        per stage and W: 4 steps straight (saving at steps 3 and 4), and 2 steps + save,
                then --resume to step 4: the loss lines of steps 3-4, the final parameters and
                every file of the two global_step4 checkpoints (optimizer shards, loss scaler,
                LR schedule, counters) are bitwise equal; every file loads with torch.load; no
                staging folder is left. Also the `dropout` model at stage 1 with --seed 5 saved,
                then resumed without --seed (the seed comes from the checkpoint), and a
                checkpoint whose files Python re-saved with torch.save resumes the same.
  integrity     stage 2, W = 2: every checkpoint folder holds ds_manifest.json listing each file's
                size and XXH64; a bit flipped in the middle of the largest tensor record of an
                optimizer shard (the zip intact), a shard cut to half, a missing model states file
                and a malformed manifest are each refused by ds-run --resume (before any step)
                and by ds-zero-to-fp32, naming the file; without a manifest (DeepSpeed's
                checkpoints) the checkpoint resumes bitwise with a remark; a save failing with
                ENOSPC (DS_TEST_CHECKPOINT_ENOSPC, and a size-limited tmpfs where mounting one is
                allowed, else reported as skipped) says so naming the file, leaves `latest` on
                the previous checkpoint, which resumes bitwise; in a two-engine save (two_losses)
                rank 0's first file failing ends every rank with the file named, within a
                timeout (no rank left alone in the next engine's gather).
  reshard       per stage: 2 steps on W = 2, step 3 on W = 4, step 4 on W = 2 again (each
                --resume re-shards the optimizer state): loss lines and final parameters equal
                4 steps on W = 2 up to the order of the averaging sums (1e-6 abs + 1e-5 rel).
  kill          stage 2, W = 2: rank 0 kills itself (SIGKILL, DS_TEST_CHECKPOINT_KILL) after the
                first file of the save at step 4, then rank 1 after its last file of that save:
                the job dies, `latest` still names global_step2, and resuming from it gives the
                uninterrupted run's parameters bitwise; the next save cleans the staging folder.
  zero-to-fp32  per stage and W: ds-zero-to-fp32 output equals ds-run --save-params bitwise
                (pytorch_model.bin); for the last cell also --safetensors and sharded outputs
                with their index json, and a missing shard named in the error.
  errors        a missing optimizer shard is named; another stage names
                ds_zero_stage; another gradient_accumulation_steps names ds_micro_steps; a checkpoint edited by Python to another shape names the key and
                both shapes; ds-zero-to-fp32 on a folder without a checkpoint says so; a
                `latest` naming ../other is refused by ds-zero-to-fp32 and --resume.
  precision     bf16 (transformer, stages 0-3) and fp16 with overflows (fp16_scale, stages 0, 2,
                3): bitwise resume, bf16_ shard names, 16-bit module, ds-zero-to-fp32 gives the
                float32 masters (which round to the saved 16-bit parameters); a bf16 checkpoint
                resumed by an fp32 plan names ds_precision and both modes.
  save-16bit    ds-run --save-16bit on W = 2: mlp at stages 0, 2 and 3 (with
                stage3_gather_16bit_weights_on_model_save), pytorch_model.bin (and a
                --save-16bit-file name) bitwise equal to --save-params of the same run; stage 3
                without the gather: a warning on stderr, exit 0, nothing written; bf16 at stage
                3: the bf16 parameters. two_models (student ZeRO-2, frozen teacher ZeRO-3
                gathering): DIR/<engine>/pytorch_model.bin with names relative to the engine,
                the teacher's too; --save-16bit-exclude-frozen leaves the teacher's parameters
                out; a teacher that does not gather is skipped with a warning, the student saved.
                Then save16bit_python.py under the launcher: dsopt's save_16bit_model on 2 ranks.
  multi         two_models (student trains at stage 2, teacher frozen) and two_losses (two
                trainable engines, stages 2 and 1), W = 2: DIR/<engine>/<tag>/ per engine, DIR/latest; the
                frozen teacher only with --save-frozen; bitwise resume; ds-zero-to-fp32 on an
                engine folder gives that engine's parameters (names relative to it).
  offload       per stage 1-3 (mlp, W = 2): ZeRO-Offload (offload_optimizer "cpu") does not
                change a checkpoint: 2 steps saved with offload and without give bitwise equal
                files (the ds_config each records aside), and each resumes under the other
                setting to the 4-step run's loss lines, parameters and global_step4 files
                bitwise.
Prints a summary line (passed, skipped, failed); exits 1 naming every failure.
"""

import argparse
import copy
import json
import os
import shutil
import signal
import subprocess
import sys
import struct
import tempfile
import zipfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "oracle"))
import oracle  # noqa: E402
import train_check  # noqa: E402

BUCKET = 500
STEPS = 4  # mlp's data holds 8 micro-steps: 4 steps of GAS 2.


def warnings_in(stderr):
    """stderr without ds-run's progress lines (steps_per_print): what a clean run must not print."""
    return "\n".join(line for line in stderr.strip().splitlines()
                     if not line.startswith("ds-run: step="))


def config_for(stage, bucket=BUCKET):
    zero = {"stage": stage, "reduce_bucket_size": bucket, "allgather_bucket_size": bucket}
    if stage == 3:
        zero["stage3_param_persistence_threshold"] = 100  # Biases whole, weights sharded.
    return {
        "train_micro_batch_size_per_gpu": "auto",
        "gradient_accumulation_steps": 2,
        "zero_optimization": zero,
        "optimizer": {"type": "AdamW", "params": {"lr": 0.001, "weight_decay": 0.01}},
        "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0.0001,
                                                     "warmup_max_lr": 0.001,
                                                     "warmup_num_steps": 3}},
    }


class Failure(Exception):
    pass


class Skipped(Exception):
    """A check that cannot run here (the reason); reported as skipped, not as passed."""


class Runner:
    def __init__(self, args, root):
        self.args = args
        self.root = root
        self.failures = []
        self.passed = []
        self.skipped = []

    def path(self, *parts):
        return os.path.join(self.root, *parts)

    def finish(self):
        """Removes the work folder (unless --keep), prints the failures; the exit code."""
        if not self.args.keep:
            shutil.rmtree(self.root, ignore_errors=True)
        print(f"summary: {len(self.passed)} passed, {len(self.skipped)} skipped, "
              f"{len(self.failures)} failed")
        for skip in self.skipped:
            print(f"  skipped: {skip}")
        if self.failures:
            print(f"{len(self.failures)} failure(s):\n  " + "\n  ".join(self.failures),
                  file=sys.stderr)
            return 1
        return 0

    def compile(self, name, model, config, world_size):
        os.makedirs(self.path(name), exist_ok=True)
        config_path = self.path(name, "ds_config.json")
        with open(config_path, "w") as f:
            json.dump(config, f)
        plan = self.path(name, model + ".plan")
        train_check.run([os.path.join(self.args.bin, "ds-compile"),
                         os.path.join(self.args.models, model + ".pt"), "--config", config_path,
                         "--example-inputs", self.data(model), "--world-size", str(world_size),
                         "-o", plan], "ds-compile")
        return plan

    def data(self, model):
        return os.path.join(self.args.models, model + ".data.pt")

    def model(self, model):
        return os.path.join(self.args.models, model + ".pt")

    def launch(self, plan, model, world_size, flags, env=None, expect_ok=True, wrap=None,
               timeout=300):
        """`wrap`: a function of the command returning the one to run (case integrity). A run
        past `timeout` seconds (ranks hanging in a collective) is ended, launcher and ranks, and
        is a Failure."""
        launcher = self.args.launcher
        if launcher is None:
            launcher = train_check.default_launcher(world_size)
        prefix = launcher.replace("{W}", str(world_size)).split() if world_size > 1 else []
        cmd = prefix + [os.path.join(self.args.bin, "ds-run"), plan, "--data", self.data(model)]
        cmd += [str(f) for f in flags]
        if wrap:
            cmd = wrap(cmd)
        full_env = dict(os.environ, OMP_NUM_THREADS="1")
        full_env.update(env or {})
        proc = run_ended_by(cmd, full_env, timeout)
        if expect_ok and proc.returncode != 0:
            raise Failure("ds-run failed (exit %d): %s\n%s%s" % (
                proc.returncode, " ".join(cmd), proc.stdout, proc.stderr[-3000:]))
        if not expect_ok and proc.returncode == 0:
            raise Failure("ds-run succeeded but should have failed: " + " ".join(cmd))
        return proc

    def zero_to_fp32(self, checkpoint, out, *flags, expect_ok=True):
        cmd = [os.path.join(self.args.bin, "ds-zero-to-fp32"), checkpoint, out] + list(flags)
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if expect_ok and proc.returncode != 0:
            raise Failure("ds-zero-to-fp32 failed: %s\n%s" % (" ".join(cmd), proc.stderr))
        if not expect_ok and proc.returncode == 0:
            raise Failure("ds-zero-to-fp32 succeeded but should have failed: " + " ".join(cmd))
        return proc

    def check(self, cell, fn):
        try:
            fn()
            print(f"{cell}: OK")
            self.passed.append(cell)
        except Skipped as e:
            print(f"{cell}: SKIPPED: {e}")
            self.skipped.append(f"{cell}: {e}")
        except (Failure, train_check.CheckFailed, oracle.OracleError, AssertionError) as e:
            print(f"{cell}: FAILED: {e}", file=sys.stderr)
            self.failures.append(f"{cell}: {e}")


def run_ended_by(cmd, env, timeout):
    """subprocess.run(cmd) in a process group of its own, ended (SIGTERM, then SIGKILL) after
    `timeout` seconds: mpirun's ranks must not outlive a hung run. Raises Failure then."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 30)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                stdout, stderr = proc.communicate(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        else:
            stdout, stderr = "", ""
        raise Failure(f"still running after {timeout} s (hung?), ended: {' '.join(cmd)}\n"
                      f"{(stdout or '')[-2000:]}{(stderr or '')[-3000:]}")
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


# -- comparisons --------------------------------------------------------------------------------
def same(a, b, where):
    """Bitwise equality of two torch.load results (dicts, lists, tensors, numbers)."""
    if isinstance(a, torch.Tensor):
        if not (isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape
                and torch.equal(a, b)):
            raise Failure(f"{where}: tensors differ")
    elif isinstance(a, dict):
        if not isinstance(b, dict) or list(a) != list(b):
            raise Failure(f"{where}: keys differ: {list(a)} vs "
                          f"{list(b) if isinstance(b, dict) else type(b)}")
        for key in a:
            same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, (list, tuple)):
        if not isinstance(b, (list, tuple)) or len(a) != len(b):
            raise Failure(f"{where}: lists differ")
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{where}[{i}]")
    elif a != b:
        raise Failure(f"{where}: {a!r} vs {b!r}")


def same_params(a, b, what):
    if a.keys() != b.keys():
        raise Failure(f"{what}: names differ: {sorted(a)} vs {sorted(b)}")
    for name in a:
        if a[name].dtype != b[name].dtype or not torch.equal(a[name], b[name]):
            raise Failure(f"{what}: {name} differs (max |diff| "
                          f"{(a[name].double() - b[name].double()).abs().max().item():.3g})")


MANIFEST = "ds_manifest.json"


def same_checkpoints(a, b):
    """Every file of two checkpoint folders loads with torch.load and is bitwise equal; so are
    their manifests (the files' sizes and hashes)."""
    files = sorted(os.listdir(a))
    if files != sorted(os.listdir(b)):
        raise Failure(f"{a} and {b} hold different files: {files} vs {sorted(os.listdir(b))}")
    if MANIFEST not in files:
        raise Failure(f"{a}: no {MANIFEST}")
    for name in files:
        if name == MANIFEST:
            if read_manifest(a) != read_manifest(b):
                raise Failure(f"{a}/{name} and {b}/{name} differ")
            continue
        same(torch.load(os.path.join(a, name)), torch.load(os.path.join(b, name)), name)


def read_manifest(folder):
    with open(os.path.join(folder, MANIFEST)) as f:
        return json.load(f)


def expect(text, needles, what):
    for needle in needles:
        if needle not in text:
            raise Failure(f"{what}: the error does not say {needle!r}: {text.strip()[-800:]}")


def load_every_file(folder):
    """torch.load (Python's) reads every file of every checkpoint under `folder`."""
    count = 0
    for dirpath, _, files in os.walk(folder):
        for name in files:
            if name.endswith(".pt"):
                torch.load(os.path.join(dirpath, name))
                count += 1
    if count == 0:
        raise Failure(f"{folder}: no checkpoint files")


def no_staging(folder):
    for dirpath, dirnames, _ in os.walk(folder):
        for d in dirnames:
            if d.endswith(".partial"):
                raise Failure(f"staging folder {os.path.join(dirpath, d)} left behind")


def read_latest(folder):
    with open(os.path.join(folder, "latest")) as f:
        return f.read().strip()


# -- cases -------------------------------------------------------------------------------------
def straight_and_resumed(r, name, model, plan, world, extra_first=(), extra_resume=(),
                         engine=""):
    """4 steps straight, and 2 + resume: returns the three checkpoint folders. `engine`: the
    folder of one saved engine of a multi-engine plan."""
    straight, half, resumed = (r.path(name, d) for d in ("straight", "half", "resumed"))
    r.launch(plan, model, world, ["--steps", STEPS, "--save-checkpoint", straight,
                                  "--save-every", 3, "--save-params", straight + ".safetensors",
                                  "--losses", straight + ".jsonl", *extra_first])
    r.launch(plan, model, world, ["--steps", 2, "--save-checkpoint", half, *extra_first])
    r.launch(plan, model, world, ["--steps", STEPS, "--resume", half, "--save-checkpoint",
                                  resumed, "--save-params", resumed + ".safetensors",
                                  "--losses", resumed + ".jsonl", *extra_resume])
    if read_latest(straight) != "global_step4" or not os.path.isdir(
            os.path.join(straight, engine, "global_step3")):
        raise Failure(f"{straight}: expected global_step3, global_step4 and latest = global_step4")
    lines_a, lines_b = oracle.read_jsonl(straight + ".jsonl"), oracle.read_jsonl(resumed + ".jsonl")
    if lines_a[2:] != lines_b:
        raise Failure(f"loss lines of steps 3-4 differ: {lines_a[2:]} vs {lines_b}")
    same_params(oracle.load_params(straight + ".safetensors"),
                oracle.load_params(resumed + ".safetensors"), "final parameters")
    for folder in (straight, half, resumed):
        no_staging(folder)
        load_every_file(folder)
    return straight, half, resumed


def case_resume(r):
    for world in r.args.world_sizes:
        for stage in r.args.stages:
            def cell(stage=stage, world=world):
                name = f"resume-s{stage}-w{world}"
                plan = r.compile(name, "mlp", config_for(stage), world)
                straight, half, resumed = straight_and_resumed(r, name, "mlp", plan, world)
                same_checkpoints(os.path.join(straight, "global_step4"),
                                 os.path.join(resumed, "global_step4"))
                states = torch.load(os.path.join(
                    straight, "global_step4",
                    "zero_pp_rank_0_mp_rank_00_model_states.pt" if stage == 3
                    else "mp_rank_00_model_states.pt"))
                assert states["global_steps"] == 4 and states["dp_world_size"] == world, states
                assert states["lr_scheduler"] == {"last_batch_iteration": 3}, states["lr_scheduler"]
                if stage >= 1:
                    optim = torch.load(os.path.join(straight, "global_step4",
                                                    "zero_pp_rank_0_mp_rank_00_optim_states.pt"))
                    inner = optim["optimizer_state_dict"]
                    assert inner["zero_stage"] == stage and inner["loss_scaler"]["cur_scale"] == 1.0
                if stage == 2:
                    # Files re-saved by Python's torch.save resume the same (without the
                    # manifest, which no longer matches them: loaded with a remark).
                    edited = r.path(name, "python-resaved")
                    shutil.copytree(half, edited)
                    os.remove(os.path.join(edited, "global_step2", MANIFEST))
                    for f in os.listdir(os.path.join(edited, "global_step2")):
                        p = os.path.join(edited, "global_step2", f)
                        torch.save(torch.load(p), p)
                    proc = r.launch(plan, "mlp", world, ["--steps", STEPS, "--resume", edited,
                                                         "--save-params",
                                                         edited + ".safetensors"])
                    expect(proc.stderr, ["remark: load_checkpoint:", "has no " + MANIFEST],
                           "resume without a manifest")
                    same_params(oracle.load_params(straight + ".safetensors"),
                                oracle.load_params(edited + ".safetensors"),
                                "parameters resumed from Python-saved files")
            r.check(f"resume mlp stage {stage} W={world}", cell)

    def seeded():
        # Dropout masks depend on (seed, step, micro-step, rank): the seed is restored.
        world = r.args.world_sizes[0]
        plan = r.compile("resume-dropout", "dropout", config_for(1), world)
        straight_and_resumed(r, "resume-dropout", "dropout", plan, world,
                             extra_first=["--seed", 5])
    r.check("resume dropout stage 1 --seed 5 (seed from the checkpoint)", seeded)


def case_kill(r):
    world = 2
    plan = r.compile("kill", "mlp", config_for(2), world)
    reference = r.path("kill", "straight.safetensors")
    r.launch(plan, "mlp", world, ["--steps", STEPS, "--save-params", reference])
    # Stage 2: rank 0 writes 2 files per save (model states, its optimizer shard), rank 1 one.
    for kill in ("0:3", "1:2"):
        def cell(kill=kill):
            folder = r.path("kill", "ckpt-" + kill.replace(":", "-"))
            proc = r.launch(plan, "mlp", world,
                            ["--steps", STEPS, "--save-checkpoint", folder, "--save-every", 2],
                            env={"DS_TEST_CHECKPOINT_KILL": kill}, expect_ok=False)
            expect(proc.stderr, [f"DS_TEST_CHECKPOINT_KILL: rank {kill.split(':')[0]} killed"],
                   "killed save")
            if read_latest(folder) != "global_step2":
                raise Failure(f"{folder}/latest is {read_latest(folder)!r}, expected global_step2")
            if os.path.exists(os.path.join(folder, "global_step4")):
                raise Failure("the interrupted checkpoint global_step4 was published")
            resumed = folder + ".safetensors"
            r.launch(plan, "mlp", world, ["--steps", STEPS, "--resume", folder,
                                          "--save-checkpoint", folder, "--save-params", resumed])
            same_params(oracle.load_params(reference), oracle.load_params(resumed),
                        "parameters resumed after the killed save")
            if read_latest(folder) != "global_step4":
                raise Failure("the save after resuming did not publish global_step4")
            no_staging(folder)
        r.check(f"save killed mid-write (DS_TEST_CHECKPOINT_KILL={kill})", cell)


def case_reshard(r):
    # 2 steps on 2 ranks, step 3 on 4 ranks, step 4 on 2 ranks again: the same losses and
    # parameters as 4 steps on 2 ranks, up to the order of the averaging sums.
    for stage in r.args.stages:
        def cell(stage=stage):
            name = f"reshard-s{stage}"
            plan2 = r.compile(name + "-w2", "mlp", config_for(stage), 2)
            plan4 = r.compile(name + "-w4", "mlp", config_for(stage), 4)
            os.makedirs(r.path(name), exist_ok=True)
            straight, half, wide = (r.path(name, d) for d in ("straight", "half", "wide"))
            r.launch(plan2, "mlp", 2, ["--steps", STEPS, "--save-params", straight + ".safetensors",
                                       "--losses", straight + ".jsonl"])
            r.launch(plan2, "mlp", 2, ["--steps", 2, "--save-checkpoint", half])
            r.launch(plan4, "mlp", 4, ["--steps", 3, "--resume", half, "--save-checkpoint", wide,
                                       "--losses", wide + ".jsonl"])
            back = r.path(name, "back")
            r.launch(plan2, "mlp", 2, ["--steps", STEPS, "--resume", wide,
                                       "--save-params", back + ".safetensors",
                                       "--losses", back + ".jsonl"])
            expected = oracle.read_jsonl(straight + ".jsonl")
            lines = oracle.read_jsonl(wide + ".jsonl") + oracle.read_jsonl(back + ".jsonl")
            ok, msg = oracle.compare_train_lines(lines, expected[2:], 1e-6, 0.0, 1e-5,
                                                 "resharded", "straight")
            if not ok:
                raise Failure(f"loss lines of steps 3-4: {msg}")
            ok, msg = oracle.compare_params(oracle.load_params(back + ".safetensors"),
                                            oracle.load_params(straight + ".safetensors"),
                                            1e-5, 1e-6, "resharded", "straight")
            if not ok:
                raise Failure(f"final parameters: {msg}")
            print(f"  {msg}")
        r.check(f"reshard mlp stage {stage}: W 2 -> 4 -> 2", cell)


def case_precision(r):
    """bf16 (transformer) at every stage and fp16 with overflows (fp16_scale) at stages 0, 2, 3:
    bitwise resume (the float32 master, its optimizer state, the loss scaler and the skip count
    come back), bf16 shards under DeepSpeed's bf16_ names, 16-bit parameters in the model
    states, and ds-zero-to-fp32 rebuilding float32 weights from the master."""
    world = r.args.world_sizes[0]
    cases = [("bf16", "transformer", stage, {"bf16": {"enabled": True}})
             for stage in r.args.stages]
    # fp16_scale's gradients overflow fp16 at large scales (make_models.py): from 2^16 with
    # hysteresis 1 the first steps skip and lower the scale, so the resumed steps 3-4 run at a
    # scale only the checkpoint's scaler state knows (and, at stages 2-3, window 1 doubles it
    # into another overflow at step 3).
    cases += [("fp16", "fp16_scale", stage,
               {"fp16": {"enabled": True, "initial_scale_power": 16, "hysteresis": 1,
                         "loss_scale_window": 1}})
              for stage in r.args.stages if stage != 1]
    for mode, model, stage, section in cases:
        def cell(mode=mode, model=model, stage=stage, section=section):
            name = f"precision-{mode}-s{stage}"
            config = config_for(stage)
            config.update(section)
            plan = r.compile(name, model, config, world)
            straight, _, resumed = straight_and_resumed(r, name, model, plan, world)
            same_checkpoints(os.path.join(straight, "global_step4"),
                             os.path.join(resumed, "global_step4"))
            folder = os.path.join(straight, "global_step4")
            files = sorted(os.listdir(folder))
            shards = [f for f in files if f.endswith("optim_states.pt")]
            if stage > 0 and not all(f.startswith("bf16_") == (mode == "bf16") for f in shards):
                raise Failure(f"{folder}: optimizer shards {shards}")
            states = torch.load(os.path.join(folder, next(
                f for f in files if f.endswith("model_states.pt"))))
            low = torch.bfloat16 if mode == "bf16" else torch.float16
            dtypes = {t.dtype for t in states["module"].values() if t.is_floating_point()}
            if dtypes != {low}:
                raise Failure(f"{folder}: module dtypes {dtypes}, expected {low}")
            lines = oracle.read_jsonl(straight + ".jsonl")
            if mode == "fp16" and (not lines[0]["skipped"] or lines[2]["loss_scale"] == 2.0 ** 16):
                raise Failure(f"fp16: the scale did not move before the resume point: {lines}")
            out = r.path(name, "out")
            r.zero_to_fp32(straight, out)
            master = torch.load(os.path.join(out, "pytorch_model.bin"))
            saved = oracle.load_params(straight + ".safetensors")
            for key, tensor in master.items():
                if tensor.dtype != torch.float32 or not torch.equal(tensor.to(low), saved[key]):
                    raise Failure(f"zero_to_fp32 {key}: {tensor.dtype}, not the float32 master "
                                  f"of the saved {low} parameter")
        r.check(f"precision {mode} {model} stage {stage} W={world}", cell)

    def other_precision():
        # A bf16 checkpoint resumed by an fp32 plan: the precision is named first.
        checkpoint = r.path(f"precision-bf16-s{r.args.stages[-1]}", "straight")
        plan = r.compile("precision-fp32", "transformer", config_for(r.args.stages[-1]), world)
        proc = r.launch(plan, "transformer", world, ["--steps", STEPS, "--resume", checkpoint],
                        expect_ok=False)
        expect(proc.stderr, ["key 'ds_precision': the checkpoint trained engine \"model\" in "
                             "bf16, this run's plan in fp32"], "another precision")
    r.check("precision: a bf16 checkpoint resumed in fp32", other_precision)


def same_but_config(a, b):
    """same_checkpoints, except the ds_config each file records (it names the offload), and so
    the manifest's hashes."""
    files = sorted(os.listdir(a))
    if files != sorted(os.listdir(b)):
        raise Failure(f"{a} and {b} hold different files: {files} vs {sorted(os.listdir(b))}")
    for name in files:
        if name == MANIFEST:
            continue
        x, y = torch.load(os.path.join(a, name)), torch.load(os.path.join(b, name))
        for d in (x, y):
            if isinstance(d, dict):
                d.pop("ds_config", None)
        same(x, y, name)


def case_offload(r):
    world = r.args.world_sizes[0]
    for stage in [s for s in r.args.stages if s >= 1]:
        def cell(stage=stage):
            name = f"offload-s{stage}"
            config = config_for(stage)
            plain = r.compile(name + "-plain", "mlp", config, world)
            config["zero_optimization"]["offload_optimizer"] = {"device": "cpu",
                                                                "pin_memory": True}
            offload = r.compile(name + "-offload", "mlp", config, world)
            straight = r.path(name, "straight")
            r.launch(plain, "mlp", world, ["--steps", STEPS, "--save-checkpoint", straight,
                                           "--save-params", straight + ".safetensors",
                                           "--losses", straight + ".jsonl"])
            halves = {}
            for saved, resumed_by in (("offload", plain), ("plain", offload)):
                half = r.path(name, "half-" + saved)
                resumed = r.path(name, "resumed-" + saved)
                r.launch(offload if saved == "offload" else plain, "mlp", world,
                         ["--steps", 2, "--save-checkpoint", half])
                r.launch(resumed_by, "mlp", world,
                         ["--steps", STEPS, "--resume", half, "--save-checkpoint", resumed,
                          "--save-params", resumed + ".safetensors",
                          "--losses", resumed + ".jsonl"])
                what = f"saved {saved}, resumed {'without' if saved == 'offload' else 'with'} offload"
                lines_a = oracle.read_jsonl(straight + ".jsonl")
                lines_b = oracle.read_jsonl(resumed + ".jsonl")
                if lines_a[2:] != lines_b:
                    raise Failure(f"{what}: loss lines of steps 3-4 differ: {lines_a[2:]} vs "
                                  f"{lines_b}")
                same_params(oracle.load_params(straight + ".safetensors"),
                            oracle.load_params(resumed + ".safetensors"), what)
                same_but_config(os.path.join(straight, "global_step4"),
                                os.path.join(resumed, "global_step4"))
                halves[saved] = os.path.join(half, "global_step2")
            same_but_config(halves["offload"], halves["plain"])
        r.check(f"offload mlp stage {stage} W={world}: checkpoints independent of the offload",
                cell)


def case_zero_to_fp32(r):
    last = None
    for world in r.args.world_sizes:
        for stage in r.args.stages:
            def cell(stage=stage, world=world):
                nonlocal last
                name = f"z2f-s{stage}-w{world}"
                plan = r.compile(name, "mlp", config_for(stage), world)
                ckpt, params = r.path(name, "ckpt"), r.path(name, "params.safetensors")
                r.launch(plan, "mlp", world, ["--steps", 2, "--save-checkpoint", ckpt,
                                              "--save-params", params])
                out = r.path(name, "out")
                r.zero_to_fp32(ckpt, out)
                same_params(oracle.load_params(params),
                            torch.load(os.path.join(out, "pytorch_model.bin")), "zero_to_fp32")
                last = (name, ckpt, params)
            r.check(f"zero_to_fp32 mlp stage {stage} W={world}", cell)
    if last is None:
        return
    name, ckpt, params = last

    def formats():
        expected = oracle.load_params(params)
        out = r.path(name, "out-st")
        r.zero_to_fp32(ckpt, out, "--safetensors", "--tag", "global_step2")
        same_params(expected, oracle.load_params(os.path.join(out, "model.safetensors")),
                    "model.safetensors")
        for flag, index_name in (("--safetensors", "model.safetensors.index.json"),
                                 (None, "pytorch_model.bin.index.json")):
            out = r.path(name, "out-sharded-" + ("st" if flag else "bin"))
            r.zero_to_fp32(ckpt, out, "--max-shard-size", "2KB", *([flag] if flag else []))
            with open(os.path.join(out, index_name)) as f:
                index = json.load(f)
            files = sorted(set(index["weight_map"].values()))
            if len(files) < 2 or sorted(index["weight_map"]) != sorted(expected):
                raise Failure(f"{index_name}: expected several shards covering every tensor: "
                              f"{index}")
            total = sum(t.numel() * t.element_size() for t in expected.values())
            if index["metadata"]["total_size"] != total:
                raise Failure(f"{index_name}: total_size {index['metadata']['total_size']} "
                              f"!= {total}")
            merged = {}
            for file in files:
                path = os.path.join(out, file)
                if os.path.getsize(path) > 2000 + 1500 and len(
                        [k for k, v in index["weight_map"].items() if v == file]) > 1:
                    raise Failure(f"{file}: larger than the shard size allows")
                merged.update(oracle.load_params(path) if flag else torch.load(path))
            same_params(expected, merged, index_name)
        # A missing shard is named.
        broken = r.path(name, "broken")
        shutil.copytree(ckpt, broken)
        tag = read_latest(broken)
        shard = "zero_pp_rank_1_mp_rank_00_optim_states.pt"
        if os.path.exists(os.path.join(broken, tag, shard)):
            os.remove(os.path.join(broken, tag, shard))
            proc = r.zero_to_fp32(broken, r.path(name, "out-broken"), expect_ok=False)
            expect(proc.stderr, [shard, "no such file", MANIFEST + " lists it"], "missing shard")
            # Without the manifest, the loader's own check names it.
            os.remove(os.path.join(broken, tag, MANIFEST))
            proc = r.zero_to_fp32(broken, r.path(name, "out-broken"), expect_ok=False)
            expect(proc.stderr, ["missing optimizer shard", shard], "missing shard")
    r.check(f"zero_to_fp32 formats and missing shard ({name})", formats)


def case_errors(r):
    def errors():
        plan2 = r.compile("err-w2", "mlp", config_for(1), 2)
        ckpt = r.path("err-w2", "ckpt")
        r.launch(plan2, "mlp", 2, ["--steps", 2, "--save-checkpoint", ckpt])
        # A missing shard is named.
        broken = r.path("err-w2", "broken")
        shutil.copytree(ckpt, broken)
        shard = "zero_pp_rank_1_mp_rank_00_optim_states.pt"
        os.remove(os.path.join(broken, "global_step2", shard))
        proc = r.launch(plan2, "mlp", 2, ["--steps", STEPS, "--resume", broken],
                        expect_ok=False)
        expect(proc.stderr, [shard, "no such file"], "missing shard")
        # The stage differs.
        plan2s2 = r.compile("err-s2", "mlp", config_for(2), 2)
        proc = r.launch(plan2s2, "mlp", 2, ["--steps", STEPS, "--resume", ckpt], expect_ok=False)
        expect(proc.stderr, ["ds_zero_stage", "ZeRO stage 1", "stage 2"], "stage")
        # Stage 3 keeps per-rank model states: a stage 1 checkpoint on a stage 3 plan (and a
        # stage 3 checkpoint on a stage 1 plan) still name both stages.
        plan2s3 = r.compile("err-s3", "mlp", config_for(3), 2)
        proc = r.launch(plan2s3, "mlp", 2, ["--steps", STEPS, "--resume", ckpt], expect_ok=False)
        expect(proc.stderr, ["ds_zero_stage", "ZeRO stage 1", "stage 3"], "stage 1 -> 3")
        ckpt3 = r.path("err-s3", "ckpt")
        r.launch(plan2s3, "mlp", 2, ["--steps", 2, "--save-checkpoint", ckpt3])
        proc = r.launch(plan2, "mlp", 2, ["--steps", STEPS, "--resume", ckpt3], expect_ok=False)
        expect(proc.stderr, ["ds_zero_stage", "ZeRO stage 3", "stage 1"], "stage 3 -> 1")
        # Another gradient_accumulation_steps (the data position is steps x GAS).
        gas1 = dict(config_for(1), gradient_accumulation_steps=1)
        plan_gas1 = r.compile("err-gas1", "mlp", gas1, 2)
        proc = r.launch(plan_gas1, "mlp", 2, ["--steps", STEPS, "--resume", ckpt],
                        expect_ok=False)
        expect(proc.stderr, ["ds_micro_steps", "gradient_accumulation_steps than this plan's 1"],
               "gradient accumulation")
        # A shape edited by Python (the files are torch.load / torch.save compatible; the
        # manifest would refuse the edited file first: case integrity).
        edited = r.path("err-w2", "edited")
        shutil.copytree(ckpt, edited)
        os.remove(os.path.join(edited, "global_step2", MANIFEST))
        path = os.path.join(edited, "global_step2", "mp_rank_00_model_states.pt")
        states = torch.load(path)
        states["param_shapes"][0]["fc1.weight"] = [32, 9]
        torch.save(states, path)
        proc = r.launch(plan2, "mlp", 2, ["--steps", STEPS, "--resume", edited], expect_ok=False)
        expect(proc.stderr, ["param_shapes.fc1.weight", "[32, 9]", "[32, 8]"], "shape")
        # Nothing to resume from.
        proc = r.launch(plan2, "mlp", 2, ["--steps", STEPS, "--resume", r.path("nowhere")],
                        expect_ok=False)
        expect(proc.stderr, ["latest", "does not exist"], "missing checkpoint")
        # A `latest` naming a folder outside DIR ("../other", a valid checkpoint there) is
        # refused by ds-zero-to-fp32 as by a resume, naming the file.
        outside = r.path("err-w2", "outside")
        os.makedirs(outside)
        shutil.copytree(os.path.join(ckpt, "global_step2"), r.path("err-w2", "other"))
        with open(os.path.join(outside, "latest"), "w") as f:
            f.write("../other")
        proc = r.zero_to_fp32(outside, r.path("err-w2", "out-outside"), expect_ok=False)
        expect(proc.stderr, [os.path.join(outside, "latest") + ": checkpoint tag '../other' "
                             "is not a folder name"], "zero_to_fp32 with latest = ../other")
        proc = r.launch(plan2, "mlp", 2, ["--steps", STEPS, "--resume", outside],
                        expect_ok=False)
        expect(proc.stderr, ["checkpoint tag '../other' is not a folder name"],
               "resume with latest = ../other")
        proc = r.zero_to_fp32(r.path("err-w2"), r.path("err-w2", "out2"), "--tag", "x",
                              expect_ok=False)
        expect(proc.stderr, ["no such checkpoint folder"], "zero_to_fp32 without a checkpoint")
    r.check("errors: missing shard, stage, GAS, shape, missing checkpoint, latest outside",
            errors)


def case_multi(r):
    world = 2
    teacher = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": 2}
    teacher3 = dict(teacher, zero_optimization={"stage": 3, "reduce_bucket_size": BUCKET,
                                                "stage3_param_persistence_threshold": 100})
    for label, model, engines, frozen in (
            ("two_models", "two_models", {"student": config_for(2), "teacher": teacher},
             ["teacher"]),
            # A frozen ZeRO-3 teacher: each rank saves its blocks in its model states.
            ("two_models-z3", "two_models", {"student": config_for(2), "teacher": teacher3},
             ["teacher"]),
            ("two_losses", "two_losses", {"a": config_for(2), "b": config_for(1)}, [])):
        def cell(label=label, model=model, engines=engines, frozen=frozen):
            name = f"multi-{label}"
            plan = r.compile(name, model, {"engines": engines}, world)
            with open(plan) as f:
                names = [e["name"] for e in json.load(f)["engines"]]
            trainable = [e for e in engines if e not in frozen]
            straight, half, resumed = straight_and_resumed(r, name, model, plan, world,
                                                           engine=trainable[0])
            if read_latest(straight) != "global_step4":
                raise Failure(f"{straight}/latest is not global_step4")
            for engine in names:
                folder = os.path.join(straight, engine)
                if engine in frozen:
                    if os.path.exists(folder):
                        raise Failure(f"frozen engine {engine} saved without --save-frozen")
                    continue
                if read_latest(folder) != "global_step4":
                    raise Failure(f"{folder}/latest is not global_step4")
                same_checkpoints(os.path.join(folder, "global_step4"),
                                 os.path.join(resumed, engine, "global_step4"))
                # zero_to_fp32 on the engine's folder: its parameters, relative names.
                out = r.path(name, "out-" + engine)
                r.zero_to_fp32(folder, out)
                rebuilt = torch.load(os.path.join(out, "pytorch_model.bin"))
                trained = oracle.load_params(straight + ".safetensors")
                mine = {k: v for k, v in trained.items() if k.startswith(engine + ".")}
                same_params({k[len(engine) + 1:]: v for k, v in mine.items()}, rebuilt,
                            f"zero_to_fp32 of engine {engine}")
            # Without a tag, the top-level `latest` belongs to no engine: the error names them.
            proc = r.zero_to_fp32(straight, r.path(name, "out-top"), expect_ok=False)
            expect(proc.stderr, ["multi-engine checkpoint"], "zero_to_fp32 on the top folder")
            if frozen:
                with_frozen = r.path(name, "with-frozen")
                r.launch(plan, model, world, ["--steps", 2, "--save-checkpoint", with_frozen,
                                              "--save-frozen"])
                initial = dict(torch.jit.load(r.model(model)).named_parameters())
                for engine in frozen:
                    folder = os.path.join(with_frozen, engine)
                    files = sorted(os.listdir(os.path.join(folder, "global_step2")))
                    stage3 = engines[engine].get("zero_optimization", {}).get("stage") == 3
                    expected = sorted([MANIFEST] + (
                        [f"zero_pp_rank_{k}_mp_rank_00_model_states.pt" for k in range(world)]
                        if stage3 else ["mp_rank_00_model_states.pt"]))
                    if files != expected:
                        raise Failure(f"frozen engine {engine}: expected only the model "
                                      f"states {expected}, found {files}")
                    out = r.path(name, "out-frozen-" + engine)
                    r.zero_to_fp32(folder, out)
                    same_params({k[len(engine) + 1:]: v.detach() for k, v in initial.items()
                                 if k.startswith(engine + ".")},
                                torch.load(os.path.join(out, "pytorch_model.bin")),
                                f"zero_to_fp32 of frozen engine {engine}")
                # Resume from other initial weights: every parameter comes from the
                # checkpoint (the frozen engine's blocks included).
                other = r.path(name, "other.safetensors")
                oracle.write_safetensors(other, {k: v.detach() + 1.0
                                                 for k, v in initial.items()})
                resumed_params = r.path(name, "with-frozen-resumed.safetensors")
                r.launch(plan, model, world, ["--steps", STEPS, "--resume", with_frozen,
                                              "--weights", other,
                                              "--save-params", resumed_params])
                got = oracle.load_params(resumed_params)
                for engine in frozen:
                    same_params({k: v.detach() for k, v in initial.items()
                                 if k.startswith(engine + ".")},
                                {k: v for k, v in got.items() if k.startswith(engine + ".")},
                                f"frozen engine {engine} after --resume over other weights")
        r.check(f"multi-engine {label} W={world}", cell)


def case_save_16bit(r):
    world = 2

    def saved_16bit(folder, name="pytorch_model.bin"):
        path = os.path.join(folder, name)
        if not os.path.exists(path):
            raise Failure(f"{path} was not written")
        return torch.load(path)

    def same_dict(got, want, what):
        if list(got) != list(want):
            raise Failure(f"{what}: keys {list(got)} vs {list(want)}")
        same_params(got, want, what)

    for stage, gather, precision in ((0, False, None), (2, False, None), (3, True, None),
                                     (3, False, None), (3, True, "bf16")):
        def cell(stage=stage, gather=gather, precision=precision):
            name = f"s16-s{stage}{'g' if gather else ''}{precision or ''}"
            config = config_for(stage)
            if gather:
                config["zero_optimization"]["stage3_gather_16bit_weights_on_model_save"] = True
            if precision:
                config[precision] = {"enabled": True}
            plan = r.compile(name, "mlp", config, world)
            out, params = r.path(name, "out"), r.path(name, "params.safetensors")
            flags = ["--steps", 2, "--save-16bit", out, "--save-params", params]
            if stage == 2:
                flags += ["--save-16bit-file", "model.bin"]
            proc = r.launch(plan, "mlp", world, flags)
            want = oracle.load_params(params)
            if stage == 3 and not gather:
                expect(proc.stderr, ["warning", "stage3_gather_16bit_weights_on_model_save",
                                     "nothing saved"], "stage 3 without the gather")
                if os.path.exists(out):
                    raise Failure(f"{out} written without the gather")
                return
            if warnings_in(proc.stderr):
                raise Failure(f"unexpected stderr: {warnings_in(proc.stderr)}")
            got = saved_16bit(out, "model.bin" if stage == 2 else "pytorch_model.bin")
            if precision:
                want = {k: v.to(torch.bfloat16) if v.is_floating_point() else v
                        for k, v in want.items()}
                if {t.dtype for t in got.values()} != {torch.bfloat16}:
                    raise Failure(f"bf16: dtypes {sorted({str(t.dtype) for t in got.values()})}")
            same_dict(got, want, "16-bit model vs --save-params")
        r.check(f"save-16bit mlp stage {stage}{' gather' if gather else ''} "
                f"{precision or 'fp32'} W={world}", cell)

    student = config_for(2)
    teacher = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": 2,
               "zero_optimization": {"stage": 3, "reduce_bucket_size": BUCKET,
                                     "stage3_param_persistence_threshold": 100,
                                     "stage3_gather_16bit_weights_on_model_save": True}}
    for gather, exclude in ((True, False), (True, True), (False, False)):
        def cell(gather=gather, exclude=exclude):
            name = f"s16-two_models-{'g' if gather else 'n'}{'x' if exclude else ''}"
            engine_teacher = copy.deepcopy(teacher)
            engine_teacher["zero_optimization"][
                "stage3_gather_16bit_weights_on_model_save"] = gather
            plan = r.compile(name, "two_models",
                             {"engines": {"student": student, "teacher": engine_teacher}}, world)
            out, params = r.path(name, "out"), r.path(name, "params.safetensors")
            flags = ["--steps", 2, "--save-16bit", out, "--save-params", params]
            if exclude:
                flags.append("--save-16bit-exclude-frozen")
            proc = r.launch(plan, "two_models", world, flags)
            want = oracle.load_params(params)
            for engine in ("student", "teacher"):
                local = {k[len(engine) + 1:]: v for k, v in want.items()
                         if k.startswith(engine + ".")}
                if engine == "teacher" and not gather:
                    expect(proc.stderr, ['"teacher"', "stage3_gather_16bit_weights_on_model_save",
                                         "the other engines are"], "teacher without the gather")
                    if os.path.exists(os.path.join(out, engine)):
                        raise Failure("the teacher was saved without the gather")
                    continue
                if engine == "teacher" and exclude:
                    local = {}  # Every teacher parameter is frozen; it has no buffers.
                same_dict(saved_16bit(os.path.join(out, engine)), local, f"{engine}'s 16-bit model")
            if gather and warnings_in(proc.stderr):
                raise Failure(f"unexpected stderr: {warnings_in(proc.stderr)}")
        r.check(f"save-16bit two_models (frozen ZeRO-3 teacher, "
                f"{'gathers' if gather else 'does not gather'}"
                f"{', exclude frozen' if exclude else ''}) W={world}", cell)

    def python():
        for plan, model, config in (
                ("mlp-z3g", "mlp", dict(config_for(3), zero_optimization=dict(
                    config_for(3)["zero_optimization"],
                    stage3_gather_16bit_weights_on_model_save=True))),
                ("mlp-z3n", "mlp", config_for(3)),
                ("two", "two_models", {"engines": {"student": student, "teacher": teacher}})):
            compiled = r.compile("python", model, config, world)
            os.replace(compiled, r.path("python", plan + ".plan"))
        launcher = r.args.launcher or train_check.default_launcher(world)
        cmd = launcher.replace("{W}", str(world)).split() + [
            sys.executable, os.path.join(HERE, "save16bit_python.py"), "--bin", r.args.bin,
            "--models", r.args.models, "--dir", r.path("python")]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                              env=dict(os.environ, OMP_NUM_THREADS="1"))
        if proc.returncode != 0:
            raise Failure("save16bit_python.py failed (exit %d): %s\n%s%s" % (
                proc.returncode, " ".join(cmd), proc.stdout, proc.stderr[-3000:]))
    r.check(f"save_16bit_model from Python (dsopt) W={world}", python)


def flip_in_largest_record(path):
    """Flips one bit in the middle of the largest record of a torch.save zip (a tensor's bytes),
    leaving the zip's structure intact, as a bad sector or a faulty copy would. Returns the
    record's name."""
    with zipfile.ZipFile(path) as archive:
        record = max(archive.infolist(), key=lambda info: info.file_size)
    with open(path, "r+b") as f:
        f.seek(record.header_offset + 26)  # The local header's name and extra lengths.
        name_length, extra_length = struct.unpack("<HH", f.read(4))
        at = record.header_offset + 30 + name_length + extra_length + record.compress_size // 2
        f.seek(at)
        byte = f.read(1)[0]
        f.seek(at)
        f.write(bytes([byte ^ 0x01]))
    with zipfile.ZipFile(path) as archive:
        if record.filename not in archive.namelist():
            raise Failure(f"{path}: the flip broke the zip")
    return record.filename


def tmpfs_refusal(mountpoint):
    """Why a size-limited tmpfs cannot be mounted here ("" when it can): a private mount
    namespace (unshare --mount), so that no mount outlives the test."""
    if not shutil.which("unshare"):
        return "no unshare"
    os.makedirs(mountpoint, exist_ok=True)
    proc = subprocess.run(["unshare", "--mount", "sh", "-c",
                           'mount -t tmpfs -o size=64k tmpfs "$0"', mountpoint],
                          capture_output=True, text=True)
    return "" if proc.returncode == 0 else (proc.stderr.strip() or f"exit {proc.returncode}")


def case_integrity(r):
    """The manifest (ds_manifest.json): written with every checkpoint, checked before any file is
    read by ds-run --resume and ds-zero-to-fp32; a save that runs out of disk space."""
    world = 2
    name = "integrity"
    plan = r.compile(name, "mlp", config_for(2), world)
    reference = r.path(name, "straight.safetensors")
    r.launch(plan, "mlp", world, ["--steps", STEPS, "--save-params", reference])
    ckpt = r.path(name, "ckpt")
    r.launch(plan, "mlp", world, ["--steps", 2, "--save-checkpoint", ckpt])

    def resumes_bitwise(folder, label, remark=False):
        out = r.path(name, label + ".safetensors")
        proc = r.launch(plan, "mlp", world, ["--steps", STEPS, "--resume", folder,
                                             "--save-params", out])
        same_params(oracle.load_params(reference), oracle.load_params(out),
                    f"{label}: parameters resumed")
        if remark != ("remark: load_checkpoint:" in proc.stderr):
            raise Failure(f"{label}: expected {'a' if remark else 'no'} remark: {proc.stderr}")

    def manifest():
        folder = os.path.join(ckpt, "global_step2")
        listed = read_manifest(folder)
        if (listed.get("format"), listed.get("version"), listed.get("hash")) != (
                "ds-checkpoint-manifest", 1, "xxh64"):
            raise Failure(f"{folder}/{MANIFEST}: header {listed}")
        files = sorted(f for f in os.listdir(folder) if f != MANIFEST)
        if sorted(listed["files"]) != files or len(files) != 3:
            raise Failure(f"{MANIFEST} lists {sorted(listed['files'])}, the folder holds {files}")
        for f in files:
            entry = listed["files"][f]
            if entry["size"] != os.path.getsize(os.path.join(folder, f)) or len(
                    entry["xxh64"]) != 16:
                raise Failure(f"{MANIFEST}: {f}: {entry}")
        resumes_bitwise(ckpt, "verified")
    r.check("integrity: every file in the manifest, resume verified", manifest)

    def refused(label, damage):
        """Damages a copy of the checkpoint; ds-run --resume and ds-zero-to-fp32 must refuse it
        before any step, naming the file (and what damage() says they must)."""
        broken = r.path(name, label)
        shutil.copytree(ckpt, broken)
        needles = damage(os.path.join(broken, "global_step2"))
        proc = r.launch(plan, "mlp", world, ["--steps", STEPS, "--resume", broken],
                        expect_ok=False)
        expect(proc.stderr, needles, f"{label}: ds-run --resume")
        if '"step"' in proc.stdout:
            raise Failure(f"{label}: ds-run trained on the damaged checkpoint: {proc.stdout}")
        proc = r.zero_to_fp32(broken, r.path(name, label + "-out"), expect_ok=False)
        expect(proc.stderr, needles, f"{label}: ds-zero-to-fp32")

    def flipped(folder):
        path = os.path.join(folder, "zero_pp_rank_1_mp_rank_00_optim_states.pt")
        flip_in_largest_record(path)
        return [path + ": xxh64 ", "but " + MANIFEST + " says", "refusing to load"]

    def truncated(folder):
        path = os.path.join(folder, "zero_pp_rank_0_mp_rank_00_optim_states.pt")
        size = os.path.getsize(path)
        os.truncate(path, size // 2)
        return [f"{path}: {size // 2} bytes, but {MANIFEST} says {size} bytes", "cut short"]

    def missing(folder):
        path = os.path.join(folder, "mp_rank_00_model_states.pt")
        os.remove(path)
        return [f"{path}: no such file, but {MANIFEST} lists it"]

    def malformed(folder):
        with open(os.path.join(folder, MANIFEST), "w") as f:
            f.write('{"format": "ds-checkpoint-manifest", "version": 1, "hash": "xxh64", '
                    '"files": {"mp_rank_00_model_states.pt": '
                    '{"size": -1, "xxh64": "0123456789abcdef"}}}')
        return [os.path.join(folder, MANIFEST) + ": not a checkpoint manifest: "
                "file 'mp_rank_00_model_states.pt': size -1 is not a non-negative integer"]

    for label, damage in (("flipped", flipped), ("truncated", truncated),
                          ("missing", missing), ("malformed", malformed)):
        r.check(f"integrity: a {label} file is refused, named",
                lambda label=label, damage=damage: refused(label, damage))

    def unverified():
        # DeepSpeed's checkpoints have no manifest: loaded, with one remark.
        bare = r.path(name, "bare")
        shutil.copytree(ckpt, bare)
        os.remove(os.path.join(bare, "global_step2", MANIFEST))
        resumes_bitwise(bare, "bare", remark=True)
        proc = r.zero_to_fp32(bare, r.path(name, "bare-out"))
        expect(proc.stderr, ["ds-zero-to-fp32: remark: ", "has no " + MANIFEST], "zero_to_fp32")
    r.check("integrity: a checkpoint without a manifest loads with a remark", unverified)

    def full_disk():
        # The write layer fails rank 1's shard of the step 4 save half-way with ENOSPC.
        full = r.path(name, "full")
        proc = r.launch(plan, "mlp", world, ["--steps", STEPS, "--save-checkpoint", full,
                                             "--save-every", 2],
                        env={"DS_TEST_CHECKPOINT_ENOSPC": "1:2"}, expect_ok=False)
        expect(proc.stderr, [f"cannot write {full}/.global_step4.partial/"
                             "zero_pp_rank_1_mp_rank_00_optim_states.pt: write failed: No space "
                             "left on device", "nothing was published"], "ENOSPC")
        if read_latest(full) != "global_step2" or os.path.exists(
                os.path.join(full, "global_step4")):
            raise Failure(f"{full}: latest {read_latest(full)!r}, {sorted(os.listdir(full))}")
        no_staging(full)
        resumes_bitwise(full, "full-resumed")
    r.check("integrity: ENOSPC in a save (DS_TEST_CHECKPOINT_ENOSPC) keeps the previous latest",
            full_disk)

    def multi_engine_full_disk():
        # Two trainable engines (two_losses: stages 2 and 1). Building an engine's optim states
        # is a collective (the ranks gather DeepSpeed's partitions): rank 0's write of the
        # first engine's first file failing must not leave rank 1 alone in the second engine's
        # gather (a hang, or garbage). Every rank fails naming the file; `latest` stays.
        multi = "integrity-multi"
        plan2 = r.compile(multi, "two_losses",
                          {"engines": {"a": config_for(2), "b": config_for(1)}}, world)
        with open(plan2) as f:
            first = json.load(f)["engines"][0]["name"]
        straight = r.path(multi, "straight.safetensors")
        r.launch(plan2, "two_losses", world, ["--steps", STEPS, "--save-params", straight])
        full = r.path(multi, "full")
        r.launch(plan2, "two_losses", world, ["--steps", 2, "--save-checkpoint", full])
        proc = r.launch(plan2, "two_losses", world,
                        ["--steps", STEPS, "--resume", full, "--save-checkpoint", full],
                        env={"DS_TEST_CHECKPOINT_ENOSPC": "0:1"}, expect_ok=False, timeout=120)
        failed = (f"cannot write {full}/{first}/.global_step4.partial/"
                  "mp_rank_00_model_states.pt: write failed: No space left on device")
        expect(proc.stderr, [f"rank 0: save_checkpoint {full}/global_step4: {failed}",
                             f"rank 1: save_checkpoint {full}/global_step4: on rank 0: {failed}",
                             "nothing was published"], "ENOSPC in a multi-engine save")
        for folder in [full] + [os.path.join(full, e) for e in ("a", "b")]:
            if read_latest(folder) != "global_step2" or os.path.exists(
                    os.path.join(folder, "global_step4")):
                raise Failure(f"{folder}: latest {read_latest(folder)!r}, "
                              f"{sorted(os.listdir(folder))}")
        no_staging(full)
        resumed = r.path(multi, "resumed.safetensors")
        r.launch(plan2, "two_losses", world, ["--steps", STEPS, "--resume", full,
                                              "--save-params", resumed])
        same_params(oracle.load_params(straight), oracle.load_params(resumed),
                    "two_losses resumed after the failed save")
    r.check("integrity: ENOSPC in a multi-engine save fails on every rank (no hang), keeps "
            "latest", multi_engine_full_disk)

    def tmpfs():
        mountpoint = r.path(name, "tmpfs")
        why = tmpfs_refusal(mountpoint)
        if why:
            # Not a pass: the summary counts it as skipped. (The hook-based ENOSPC check
            # above runs everywhere.)
            raise Skipped(f"cannot mount a size-limited tmpfs here ({why})")
        # Room for one checkpoint and half of the next (tmpfs counts 4 KiB pages).
        folder = os.path.join(ckpt, "global_step2")
        pages = 1 + sum(-(-os.path.getsize(os.path.join(folder, f)) // 4096)
                        for f in os.listdir(folder))
        copy = r.path(name, "tmpfs-copy")
        # In a private mount namespace: the run, then a copy of what it left (the mount goes
        # with the namespace).
        script = ('mount -t tmpfs -o size="$1" tmpfs "$2" || exit 97; mnt=$2; copy=$3; shift 3; '
                  '"$@"; code=$?; cp -r "$mnt/ckpt" "$copy"; exit $code')

        def wrap(cmd):
            return ["unshare", "--mount", "sh", "-c", script, "sh",
                    str((pages + pages // 2) * 4096), mountpoint, copy] + cmd
        proc = r.launch(plan, "mlp", world, ["--steps", STEPS, "--save-checkpoint",
                                             os.path.join(mountpoint, "ckpt"),
                                             "--save-every", 1], expect_ok=False, wrap=wrap)
        if proc.returncode == 97:
            raise Failure(f"mounting the tmpfs failed: {proc.stderr}")
        expect(proc.stderr, ["save_checkpoint", "No space left on device"], "full tmpfs")
        if read_latest(copy) != "global_step1" or os.path.exists(
                os.path.join(copy, "global_step2")):
            raise Failure(f"full tmpfs: latest {read_latest(copy)!r}, {sorted(os.listdir(copy))}")
        no_staging(copy)
        resumes_bitwise(copy, "tmpfs-resumed")
    r.check("integrity: a save on a full tmpfs keeps the previous latest", tmpfs)


CASES = {"resume": case_resume, "integrity": case_integrity, "precision": case_precision, "reshard": case_reshard, "kill": case_kill, "zero-to-fp32": case_zero_to_fp32,
         "errors": case_errors, "multi": case_multi, "save-16bit": case_save_16bit,
         "offload": case_offload}


def main(argv=None):
    p = argparse.ArgumentParser(prog="checkpoint_check.py", description=__doc__.splitlines()[0])
    p.add_argument("--bin", required=True)
    p.add_argument("--models", required=True)
    p.add_argument("--case", required=True, choices=sorted(CASES))
    p.add_argument("--stages", type=int, nargs="+", default=[0, 1, 2, 3])
    p.add_argument("--world-sizes", type=int, nargs="+", default=[2])
    p.add_argument("--launcher", default=None)
    p.add_argument("--keep", default=None, metavar="DIR")
    args = p.parse_args(argv)
    root = args.keep or tempfile.mkdtemp(prefix="checkpoint_check.")
    runner = Runner(args, root)
    try:
        CASES[args.case](runner)
    finally:
        code = runner.finish()
    return code


if __name__ == "__main__":
    sys.exit(main())
