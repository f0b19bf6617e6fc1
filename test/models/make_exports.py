"""torch.export programs (.pt2) for the lit tests of the second front door (test/Import/
export*.test); make_models.py calls write_exports(OUTDIR).

  export_mlp.pt2        an MLP with BatchNorm1d and dropout returning cross entropy, exported
                        with torch.export.export (the training IR) for 8 rows; export_mlp_twin.pt
                        its scripted twin (the same weights), export_mlp.data.pt the data
  export_mlp_core.pt2   export_mlp.pt2 in core ATen (ExportedProgram.run_decompositions())
  export_pool_core.pt2  a conv, max pool, layer norm and casts in core ATen
  export_two_programs.pt2  two programs in one archive (package_pt2), refused
  export_tied.pt2       a tiny LM whose head is tied to its embedding
  export_cond.pt2       a program with torch.cond on data (imported as a ds.if; a Linear called
                        only in a branch, a BatchNorm1d without running statistics);
                        export_cond_twin.pt its scripted twin (a Python `if`, the same weights)
  export_while.pt2      a program with torch's while_loop (a higher-order operator, refused)
  export_dynamic.pt2    export_mlp's module exported with a dynamic batch dim (torch.export.Dim)
  export_schema99.pt2   export_mlp.pt2 with its schema version's major set to 99
  export_aoti_layout.pt2  a zip laid out as torch._inductor.aoti_compile_and_package lays out its
                        packages (archive_format "pt2", data/aotinductor/model/*.so and no
                        models/*.json): making a real package takes minutes of C++ compiling
"""

import io
import json
import os
import zipfile

import torch
import torch.nn as nn
import torch.nn.functional as F


class ExportMlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.bn = nn.BatchNorm1d(32)
        self.drop = nn.Dropout(0.1)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x, y):
        h = self.drop(F.relu(self.bn(self.fc1(x))))
        return F.cross_entropy(self.fc2(h), y)


class ExportPoolNorm(nn.Module):
    """Conv, max pool, layer norm and a float cast: core ATen writes them as convolution,
    max_pool2d_with_indices, native_layer_norm and _to_copy."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.norm = nn.LayerNorm(4)

    def forward(self, x):
        h = self.pool(self.conv(x)).permute(0, 2, 3, 1)
        return self.norm(h).double().sum().float()


class ExportTied(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(32, 16)
        self.head = nn.Linear(16, 32, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, idx, targets):
        logits = self.head(torch.tanh(self.emb(idx)))
        return F.cross_entropy(logits.reshape(-1, 32), targets.reshape(-1))


class ExportCond(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.inner = nn.Linear(8, 8)  # called only inside a branch
        self.norm = nn.BatchNorm1d(8, track_running_stats=False)

    def forward(self, x):
        h = self.fc(x)
        z = self.norm(h)
        out = torch.cond(h.sum() > 0, lambda t, u: self.inner(t) * 2.0 + u,
                         lambda t, u: t - 1.0 + u, (h, z))
        return out.mean()


class ExportWhile(nn.Module):
    """torch's while_loop, a higher-order operator the importer refuses."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        from torch._higher_order_ops.while_loop import while_loop
        _, h = while_loop(lambda i, h: i < 3, lambda i, h: (i + 1, h * 0.5),
                          (torch.tensor(0), self.fc(x)))
        return h.mean()


class ExportCondTwin(ExportCond):
    """ExportCond with a Python `if`, which TorchScript keeps: its scripted twin."""

    def forward(self, x):
        h = self.fc(x)
        z = self.norm(h)
        if bool(h.sum() > 0):
            out = self.inner(h) * 2.0 + z
        else:
            out = h - 1.0 + z
        return out.mean()


def _rewrite(src: str, dst: str, edit) -> None:
    """Copies the zip `src` to `dst`, passing models/*.json through edit(dict) -> dict."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if "/models/" in info.filename and info.filename.endswith(".json"):
                data = json.dumps(edit(json.loads(data))).encode()
            zout.writestr(info, data)


def save_core(program, path: str) -> None:
    """torch.export.save of program.run_decompositions(), deterministic: the decomposition
    records each node's provenance with Python object ids (from_node's graph_id), which would
    make every run's file different."""
    core = program.run_decompositions()
    for node in core.graph.nodes:
        node.meta.pop("from_node", None)
    torch.export.save(core, path)


def write_exports(outdir: str) -> None:
    torch.manual_seed(31)
    mlp = ExportMlp().train()
    data = {"x": torch.randn(4, 8, 16), "y": torch.randint(0, 4, (4, 8))}
    example = (data["x"][0], data["y"][0])
    torch.jit.script(mlp).save(os.path.join(outdir, "export_mlp_twin.pt"))
    program = torch.export.export(mlp, example)
    torch.export.save(program, os.path.join(outdir, "export_mlp.pt2"))
    torch.save(data, os.path.join(outdir, "export_mlp.data.pt"))
    # Data of another shape (12 features): refused by the 16-feature program.
    torch.save({"x": torch.randn(4, 8, 12), "y": data["y"]},
               os.path.join(outdir, "export_mlp_wide.data.pt"))
    # The same program in core ATen: addmm, _native_batch_norm_legit_functional whose new
    # statistics are BUFFER_MUTATION outputs, native_dropout.
    save_core(program, os.path.join(outdir, "export_mlp_core.pt2"))

    # Two programs in one archive (torch.export's package_pt2 names them): refused.
    from torch.export.pt2_archive._package import package_pt2
    package_pt2(os.path.join(outdir, "export_two_programs.pt2"),
                exported_programs={"a": program, "b": program})

    pool = ExportPoolNorm().train()
    pool_data = {"x": torch.randn(2, 2, 2, 6, 6)}
    save_core(torch.export.export(pool, (pool_data["x"][0],)),
              os.path.join(outdir, "export_pool_core.pt2"))
    torch.save(pool_data, os.path.join(outdir, "export_pool.data.pt"))

    batch = torch.export.Dim("batch", min=2, max=64)
    dynamic = torch.export.export(mlp, example, dynamic_shapes={"x": {0: batch}, "y": {0: batch}})
    torch.export.save(dynamic, os.path.join(outdir, "export_dynamic.pt2"))

    def bump(doc):
        doc["schema_version"]["major"] = 99
        return doc
    _rewrite(os.path.join(outdir, "export_mlp.pt2"), os.path.join(outdir, "export_schema99.pt2"),
             bump)

    torch.manual_seed(32)
    tied = ExportTied().train()
    tied_data = {"idx": torch.randint(0, 32, (4, 4, 6)), "targets": torch.randint(0, 32, (4, 4, 6))}
    program = torch.export.export(tied, (tied_data["idx"][0], tied_data["targets"][0]))
    torch.export.save(program, os.path.join(outdir, "export_tied.pt2"))
    torch.save(tied_data, os.path.join(outdir, "export_tied.data.pt"))

    torch.manual_seed(33)
    cond = ExportCond().train()
    # Micro-steps of alternating sign: the data takes both branches.
    sign = torch.tensor([5.0, -5.0, 5.0, -5.0]).view(4, 1, 1)
    cond_data = {"x": 0.1 * torch.randn(4, 4, 8) + sign}
    program = torch.export.export(cond, (cond_data["x"][0],))
    torch.export.save(program, os.path.join(outdir, "export_cond.pt2"))
    twin = ExportCondTwin()
    twin.load_state_dict(cond.state_dict())
    torch.jit.script(twin.train()).save(os.path.join(outdir, "export_cond_twin.pt"))
    torch.save(cond_data, os.path.join(outdir, "export_cond.data.pt"))

    program = torch.export.export(ExportWhile().train(), (cond_data["x"][0],))
    torch.export.save(program, os.path.join(outdir, "export_while.pt2"))

    with zipfile.ZipFile(os.path.join(outdir, "export_aoti_layout.pt2"), "w") as z:
        for name, data in (("archive_format", "pt2"), ("archive_version", "0"),
                           (".data/version", "1"), ("byteorder", "little"),
                           ("data/aotinductor/model/c0.wrapper.cpp", "// compiled wrapper\n"),
                           ("data/aotinductor/model/c0.wrapper.so", b"\x7fELF")):
            # A fixed time: the test files are the same on every run (test_deterministic).
            z.writestr(zipfile.ZipInfo("model/" + name, date_time=(1980, 1, 1, 0, 0, 0)), data)
