#!/usr/bin/env python3
"""Weights read in place from a .pt2 (torch.export.save): bitwise, and the refusals.

  weights_load.py --ds-compile BIN --ds-run BIN --work DIR

A module with a Linear, a BatchNorm1d (num_batches_tracked is int64), a tied weight (the head is
the embedding), a non-persistent buffer (torch.export keeps it among the constants), a buffer that
is a strided view of a parameter's storage, and a bf16 parameter. Its TorchScript archive is
compiled (the plan's own weights); then every tensor is changed and the module is exported. ds-run
--eval --save-params must give back the exported values, bit for bit, whether the .pt2 comes as
--weights (found by content) or as the plan's weights kind "pt2". Broken archives must be refused
with the intended message (and never crash).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import zipfile

import torch
import torch.nn as nn
from safetensors.torch import load_file

S, B = 2, 4


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 5)
        self.bn = nn.BatchNorm1d(5)
        self.emb = nn.Embedding(7, 6)
        self.head = nn.Linear(6, 7, bias=False)
        self.head.weight = self.emb.weight
        self.register_buffer("scale", torch.linspace(0.5, 1.5, 5), persistent=False)
        # Rows 1-4 of fc.weight, transposed: one storage, offset 6, strides [1, 6].
        self.register_buffer("window", self.fc.weight.detach()[1:].t())
        self.h = nn.Parameter(torch.randn(5).to(torch.bfloat16))

    def forward(self, x, idx):
        e = self.emb(idx).mean(1)
        y = self.bn(self.fc(x + e)) * self.scale + self.h.float()
        return y.square().mean() + self.head(x).square().mean() + self.window.sum()


def run(cmd, expect_ok=True):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if expect_ok and proc.returncode != 0:
        sys.exit("FAIL: %s\n%s%s" % (" ".join(cmd), proc.stdout, proc.stderr))
    return proc


def state_of(module):
    """What the plan holds: named_parameters (tied names once) and named_buffers."""
    out = dict(module.named_parameters())
    out.update(dict(module.named_buffers()))
    return out


def bits(t):
    return t.reshape(-1).contiguous().view(torch.uint8) if t.dtype != torch.bool else t


def check_equal(saved_path, expected, what):
    saved = load_file(saved_path)
    if set(saved) != set(expected):
        sys.exit("FAIL %s: names %s, expected %s" % (what, sorted(saved), sorted(expected)))
    for name, want in expected.items():
        got = saved[name]
        if got.dtype != want.dtype or got.shape != want.shape or \
                not torch.equal(bits(got), bits(want.detach())):
            sys.exit("FAIL %s: %s differs: %s %s vs %s %s" % (
                what, name, got.dtype, list(got.shape), want.dtype, list(want.shape)))
    print("ok: %s (%d tensors bitwise equal)" % (what, len(expected)))


def rewrite(src, dst, change):
    """Copies the zip src to dst; change(name, bytes) returns new bytes or None to drop."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = change(info.filename, zin.read(info.filename))
            if data is not None:
                zout.writestr(info.filename, data)


def edit_config(entry, key, value):
    def change(name, data):
        if name.endswith("data/weights/model_weights_config.json"):
            config = json.loads(data)
            config["config"][entry][key] = value
            return json.dumps(config).encode()
        return data
    return change


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ds-compile", required=True)
    parser.add_argument("--ds-run", required=True)
    parser.add_argument("--work", required=True)
    args = parser.parse_args()
    work = args.work
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    p = lambda name: os.path.join(work, name)

    torch.manual_seed(0)
    net = Net()
    torch.jit.script(net).save(p("net.pt"))
    data = {"x": torch.randn(S, B, 6), "idx": torch.randint(0, 7, (S, B, 3))}
    torch.save(data, p("net.data.pt"))
    with open(p("frozen.json"), "w") as f:
        json.dump({"train_micro_batch_size_per_gpu": "auto"}, f)
    run([args.ds_compile, p("net.pt"), "--config", p("frozen.json"),
         "--example-inputs", p("net.data.pt"), "-o", p("net.plan")])

    # Other values than the TorchScript archive's, so that nothing passes by keeping them.
    with torch.no_grad():
        for name, t in state_of(net).items():
            if t.dtype == torch.int64:
                t.fill_(42)
            elif name == "bn.running_var":
                t.copy_(torch.rand_like(t) + 0.5)
            elif name != "window":  # a view of fc.weight: changes with it
                t.copy_(torch.randn_like(t.float()).to(t.dtype))
    net.eval()
    ep = torch.export.export(net, (data["x"][0], data["idx"][0]))
    torch.export.save(ep, p("net.pt2"))
    expected = state_of(net)
    assert "head.weight" not in expected and "scale" in expected

    base = [args.ds_run, p("net.plan"), "--data", p("net.data.pt"), "--eval", "--steps", "1"]
    # 1. --weights NET.pt2: found by content (the name says nothing).
    shutil.copy(p("net.pt2"), p("net.weights"))
    proc = run(base + ["--weights", p("net.weights"), "--save-params", p("a.safetensors")])
    if "kept" in proc.stderr:
        sys.exit("FAIL: a buffer was kept from the plan's archive:\n" + proc.stderr)
    check_equal(p("a.safetensors"), expected, "--weights net.pt2")

    # 2. The plan's own weights, kind "pt2", relative to the plan (since version 8).
    with open(p("net.plan")) as f:
        plan = json.load(f)
    plan["weights"] = {"kind": "pt2", "path": "net.pt2"}
    assert plan["version"] >= 8, plan["version"]
    with open(p("pt2.plan"), "w") as f:
        json.dump(plan, f)
    run([args.ds_run, p("pt2.plan"), "--data", p("net.data.pt"), "--eval", "--steps", "1",
         "--save-params", p("b.safetensors")])
    check_equal(p("b.safetensors"), expected, "plan weights kind pt2")

    # 2b. A program packaged under another name (models/net.json, net_weights_config.json),
    # as torch.export's package_pt2 names programs; two programs in one archive are refused.
    from torch.export.pt2_archive._package import package_pt2
    package_pt2(p("named.pt2"), exported_programs={"net": ep})
    package_pt2(p("two.pt2"), exported_programs={"a": ep, "b": ep})
    run(base + ["--weights", p("named.pt2"), "--save-params", p("c.safetensors")])
    check_equal(p("c.safetensors"), expected, "a program named net")

    # 3. Refusals: (file, expected message, via --weights?).
    def pt2_plan(name, path, version=8):
        plan["version"] = version
        plan["weights"] = {"kind": "pt2", "path": path}
        with open(p(name), "w") as f:
            json.dump(plan, f)
        return p(name)

    top = zipfile.ZipFile(p("net.pt2")).namelist()[0].split("/")[0]
    config = json.loads(zipfile.ZipFile(p("net.pt2")).read(
        top + "/data/weights/model_weights_config.json"))["config"]
    fc_record = top + "/data/weights/" + config["fc.weight"]["path_name"]
    with open(p("text.pt2"), "w") as f:
        f.write("not a zip\n")
    rewrite(p("net.pt2"), p("aoti.pt2"),
            lambda name, data: None if name.endswith("models/model.json") else data)
    with zipfile.ZipFile(p("aoti.pt2"), "a") as z:
        z.writestr(top + "/data/aotinductor/model/model.wrapper.so", b"\0" * 16)
    rewrite(p("net.pt2"), p("nomodel.pt2"),
            lambda name, data: None if name.endswith("models/model.json") else data)
    rewrite(p("net.pt2"), p("badjson.pt2"), lambda name, data: b"{\"config\": {" if
            name.endswith("data/weights/model_weights_config.json") else data)
    for name, dtype in [("dtype99.pt2", 99), ("dtype0.pt2", 0)]:
        def change(n, data, dtype=dtype):
            if n.endswith("data/weights/model_weights_config.json"):
                c = json.loads(data)
                c["config"]["fc.weight"]["tensor_meta"]["dtype"] = dtype
                return json.dumps(c).encode()
            return data
        rewrite(p("net.pt2"), p(name), change)
    rewrite(p("net.pt2"), p("short.pt2"),
            lambda name, data: data[:-4] if name == fc_record else data)
    rewrite(p("net.pt2"), p("pickle.pt2"), edit_config("fc.weight", "use_pickle", True))
    rewrite(p("net.pt2"), p("nometa.pt2"), edit_config("bn.bias", "tensor_meta", None))

    cases = [
        ("missing.pt2", "missing.pt2: cannot open the .pt2 archive"),
        ("text.pt2", "text.pt2: not a .pt2 archive (torch.export.save): not a zip file"),
        ("net.pt", "net.pt: a TorchScript archive (torch.jit.save), not a .pt2"),
        ("net.data.pt", "net.data.pt: a torch.save file, not a .pt2"),
        ("aoti.pt2", "aoti.pt2: an AOTInductor package (aoti_compile_and_package), not a "
                     "torch.export program"),
        ("nomodel.pt2", "nomodel.pt2: not a torch.export program: the archive has no "
                        "models/<name>.json"),
        ("two.pt2", "two.pt2: the archive holds several programs (models/a.json, "
                    "models/b.json): one is supported"),
        ("badjson.pt2", "badjson.pt2: data/weights/model_weights_config.json: not valid JSON"),
        ("dtype99.pt2", "dtype99.pt2: data/weights/model_weights_config.json: entry "
                        "\"fc.weight\": unsupported dtype code 99"),
        ("dtype0.pt2", "entry \"fc.weight\": unsupported dtype UNKNOWN"),
        ("short.pt2", "short.pt2: \"fc.weight\" (data/weights/%s): 116 bytes, fewer than the "
                      "120 that its Float [5, 6] view (strides [6, 1], storage_offset 0) needs"
                      % config["fc.weight"]["path_name"]),
        ("pickle.pt2", "pickle.pt2: data/weights/model_weights_config.json: entry "
                       "\"fc.weight\" is a pickled tensor (a tensor subclass, use_pickle)"),
        ("nometa.pt2", "entry \"bn.bias\" has no tensor_meta"),
    ]
    failed = []
    for name, message in cases:
        proc = run([args.ds_run, pt2_plan("bad.plan", name), "--data", p("net.data.pt"),
                    "--eval", "--steps", "1"], expect_ok=False)
        if proc.returncode != 1 or message not in proc.stderr:
            failed.append("%s: rc %d, expected %r in:\n%s" % (name, proc.returncode, message,
                                                             proc.stderr))
        else:
            print("ok: %s refused: %s" % (name, proc.stderr.strip().splitlines()[-1][:160]))
    # --weights goes by content: the AOTInductor package is a "pt2" and refused as such.
    proc = run(base + ["--weights", p("aoti.pt2")], expect_ok=False)
    if proc.returncode != 1 or "an AOTInductor package" not in proc.stderr:
        failed.append("--weights aoti.pt2: rc %d:\n%s" % (proc.returncode, proc.stderr))
    # A version 7 plan has no kind "pt2".
    proc = run([args.ds_run, pt2_plan("v7.plan", "net.pt2", version=7), "--data",
                p("net.data.pt"), "--eval", "--steps", "1"], expect_ok=False)
    if proc.returncode != 1 or "the weights kind \"pt2\" needs plan version 8, this plan " \
            "is version 7" not in proc.stderr:
        failed.append("v7.plan: rc %d:\n%s" % (proc.returncode, proc.stderr))
    if failed:
        sys.exit("FAIL:\n" + "\n".join(failed))
    print("PASS")


if __name__ == "__main__":
    main()
