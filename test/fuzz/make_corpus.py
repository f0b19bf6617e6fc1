#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (test/fuzz/corpus/<reader>/) from real files: the
test models and data files the build makes, plans and checkpoints made with the build's
ds-compile and ds-run, the repository's configs and `.mlir` tests. Run once by hand when a
reader's format changes, then minimise with `scripts/fuzz.sh --merge` (libFuzzer -merge=1);
the corpora are committed, so CI's replay needs neither this script nor a fuzzer.

usage: make_corpus.py BUILD_DIR OUT_DIR

Multi-file inputs (checkpoints, a model with its example inputs) are packed as the records
test/fuzz/FuzzInput.h reads: [u8 name length][name][u32 little-endian size][bytes]."""

import glob
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "test", "oracle"))
import train_check  # noqa: E402  (the launcher the tests use)

# Small models of each kind the importers meet: scripted, traced, control flow, several
# engines, in-place writes, and the torch.export programs (training IR and core ATen).
TORCHSCRIPT = ["mlp", "traced_mlp", "two_models", "moe", "cnn", "dropout", "shift_right",
               "export_cond_twin", "fp16_scale", "bad_unsupported_op", "bad_view_write",
               "bad_dynamic_loop", "not_torchscript", "truncated"]
PT2 = ["export_mlp", "export_mlp_core", "export_cond", "export_tied", "export_pool_core",
       "export_while", "export_dynamic", "export_schema99", "export_aoti_layout"]
MAX_BYTES = 64 * 1024

CONFIGS = {
    "s0": {"train_micro_batch_size_per_gpu": "auto",
           "optimizer": {"type": "SGD", "params": {"lr": 0.1, "momentum": 0.9}}},
    "s2": {"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 2},
           "optimizer": {"type": "Adam", "params": {"lr": 0.01}}},
    "s3": {"train_micro_batch_size_per_gpu": "auto",
           "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0},
           "optimizer": {"type": "AdamW", "params": {"lr": 0.01}}},
    "s1-bf16": {"train_micro_batch_size_per_gpu": "auto", "bf16": {"enabled": True},
                "zero_optimization": {"stage": 1},
                "optimizer": {"type": "Adam", "params": {"lr": 0.01}}},
}


def pack(files):
    """files: [(name, bytes)] -> the record sequence."""
    out = bytearray()
    for name, data in files:
        encoded = name.encode()
        out += bytes([len(encoded)]) + encoded + struct.pack("<I", len(data)) + data
    return bytes(out)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def write(out, reader, name, data):
    folder = os.path.join(out, reader)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def models(build, out):
    folder = os.path.join(build, "test", "models")
    for reader, names, ext in (("torchscript", TORCHSCRIPT, ".pt"), ("pt2", PT2, ".pt2")):
        for name in names:
            model = os.path.join(folder, name + ext)
            if not os.path.exists(model) or os.path.getsize(model) > MAX_BYTES:
                continue
            files = [("model" + ext, read(model))]
            data = os.path.join(folder, name + ".data.pt")
            if os.path.exists(data):
                files.append(("data.pt", read(data)))
            write(out, reader, name, pack(files))


def data_files(build, out):
    folder = os.path.join(build, "test", "models")
    for path in sorted(glob.glob(os.path.join(folder, "*.data.*"))):
        if os.path.getsize(path) > MAX_BYTES // 4:
            continue
        safetensors = path.endswith(".safetensors")
        write(out, "datafile", os.path.basename(path),
              bytes([1 if safetensors else 0]) + read(path))


def configs(out):
    paths = glob.glob(os.path.join(ROOT, "test", "config", "*.json"))
    paths += glob.glob(os.path.join(ROOT, "examples", "**", "*.json"), recursive=True)
    for path in sorted(paths):
        write(out, "config", os.path.basename(path), read(path))
    for name, config in CONFIGS.items():
        write(out, "config", name + ".json", json.dumps(config).encode())
    # A first byte >= 0x80 picks the parse context (ConfigTarget.cpp): 2 ranks, micro-batch
    # 4 known, bf16 given, so that "auto" resolves.
    write(out, "config", "s2-context",
          bytes([0x80 | 1 | 4 | 8 | 32 | 64]) + json.dumps(CONFIGS["s2"]).encode())


def run(cmd):
    subprocess.run(cmd, check=True, capture_output=True, env=dict(os.environ,
                                                                  OMP_NUM_THREADS="1"))


def plans_and_checkpoints(build, out, work):
    bin_dir = os.path.join(build, "bin")
    models_dir = os.path.join(build, "test", "models")
    model = os.path.join(models_dir, "mlp.pt")
    data = os.path.join(models_dir, "mlp.data.pt")
    for name, config in CONFIGS.items():
        world = 1 if name == "s0" else 2
        config_path = os.path.join(work, name + ".json")
        with open(config_path, "w") as f:
            json.dump(config, f)
        plan = os.path.join(work, name + ".plan")
        run([os.path.join(bin_dir, "ds-compile"), model, "--config", config_path,
             "--example-inputs", data, "--world-size", str(world), "-o", plan])
        write(out, "plan", "mlp-" + name, read(plan))
        checkpoint = os.path.join(work, name + "-ckpt")
        launcher = train_check.default_launcher(world).replace("{W}", str(world)).split()
        run(launcher + [os.path.join(bin_dir, "ds-run"), plan, "--data", data, "--steps", "1",
                        "--save-checkpoint", checkpoint])
        files = []
        for path in sorted(glob.glob(os.path.join(checkpoint, "**"), recursive=True)):
            if os.path.isfile(path):
                files.append((os.path.relpath(path, checkpoint), read(path)))
        write(out, "checkpoint", "mlp-" + name, pack(files))
        # DeepSpeed's own checkpoints have no manifest: the readers go past the hash check.
        bare = [(n, d) for n, d in files if not n.endswith("ds_manifest.json")]
        write(out, "checkpoint", "mlp-" + name + "-no-manifest", pack(bare))


def mlir_inputs(build, out, work):
    bin_dir = os.path.join(build, "bin")
    models_dir = os.path.join(build, "test", "models")
    for name, config in (("mlp", "s0"), ("mlp", "s3"), ("two_models", "s2"),
                         ("transformer", "s1-bf16"), ("moe", "s0"), ("cnn", "s2")):
        ir = os.path.join(work, name + ".mlir")
        run([os.path.join(bin_dir, "ds-import"), os.path.join(models_dir, name + ".pt"),
             "--example-inputs", os.path.join(models_dir, name + ".data.pt"),
             "--train-and-eval", "-o", ir])
        header = "// CONFIG: " + json.dumps(CONFIGS[config]) + "\n"
        write(out, "mlir", f"{name}-{config}.mlir", header.encode() + read(ir))
    # The dialect's lit tests, one seed per `// -----` case, RUN lines dropped.
    for path in sorted(glob.glob(os.path.join(ROOT, "test", "Dialect", "**", "*.mlir"),
                                 recursive=True)):
        with open(path) as f:
            cases = f.read().split("// -----")
        for i, case in enumerate(cases):
            text = "\n".join(line for line in case.splitlines()
                             if not line.lstrip().startswith("// RUN"))
            if text.strip() and len(text) <= MAX_BYTES // 4:
                stem = os.path.splitext(os.path.basename(path))[0]
                write(out, "mlir", f"{stem}-{i}.mlir", text.encode())


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    build, out = (os.path.abspath(a) for a in sys.argv[1:])
    work = tempfile.mkdtemp(prefix="ds-corpus-")
    try:
        configs(out)
        data_files(build, out)
        models(build, out)
        plans_and_checkpoints(build, out, work)
        mlir_inputs(build, out, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for reader in sorted(os.listdir(out)):
        folder = os.path.join(out, reader)
        sizes = [os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder)]
        print(f"{reader}: {len(sizes)} files, {sum(sizes)} bytes")


if __name__ == "__main__":
    main()
