"""Writes the models of zoo-idioms.test, each with OUT/NAME.data.pt ([S=2, B=4, ...]):
OUT/traced_conv.pt (a Conv2d module traced: aten::_convolution), OUT/traced_to_device.pt
(`y.to(x.device)` and `y.to(x.device, x.dtype)` traced: aten::to.device / to.dtype_layout) and
OUT/mask_select.pt (scripted `x[m]` with a boolean mask and `torch.where(m)`), and for the
error notes OUT/no_grad_rule.pt (torch.diff, which has no gradient rule, in submodule `block`)
and OUT/bad_op_in_block.pt (torch.fft.rfft, not importable, in submodule `block.inner`)."""
import os
import sys
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

warnings.filterwarnings("ignore", category=FutureWarning)
warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)


class Conv(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        return self.conv(x).square().mean()


class ToDevice(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(8))

    def forward(self, x):
        y = (x * self.w).to(x.device)
        z = (x + self.w).to(x.device, torch.float64)
        return y.sum() + z.sum().float()


class MaskSelect(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(8))

    def forward(self, x, m):
        rows, cols = torch.where(m)
        picked = (x * self.w)[m]
        return picked.sum() + (x * self.w)[rows, cols].square().sum()


class DataRows(nn.Module):
    """Rows chosen by the data, through a linear and reduced back: only the row
    count varies."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        sel = self.fc(x[x[:, 0] > 0])
        return (torch.relu(sel).sum(0, keepdim=True).expand(4, 5) * x[:, :5]).sum()


class DiffBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return torch.diff(self.fc(x), dim=-1)


class FftBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return torch.fft.rfft(self.fc(x), dim=-1).abs()


class Upsample(nn.Module):
    """F.interpolate(scale_factor=...) builds its scale list with append in a loop."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 2, 1)

    def forward(self, x):
        return F.interpolate(self.conv(x), scale_factor=2.0, mode="nearest").square().mean()


class ScatterProd(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        index = torch.zeros(4, 3, dtype=torch.int64)
        return self.fc(x).scatter_reduce(1, index, x[:, :3], "prod").mean()


class ItemCheck(nn.Module):
    """transformers' XLM asserts on a value computed from data (`lengths.max().item()`): export
    writes an unbacked symbol and `_assert_scalar`."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        lengths = (x > 0).sum(1)
        assert lengths.max().item() <= 8
        return self.fc(x).square().mean()


class AliasOps(nn.Module):
    """transformers' ConvBERT calls `torch.multiply`: export keeps the alias (aten.multiply),
    which TorchScript would have normalised to aten.mul."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        h = self.fc(x)
        return torch.divide(torch.subtract(torch.multiply(h, x), x), 2.0).square().mean()


class ModuleBuiltInForward(nn.Module):
    """transformers' BigBird builds a new attention module inside forward (short inputs) and
    keeps only the old one's weights: the new weights' initialisation (`uniform_` on a detached
    `empty`) is traced, and dead."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        fresh = nn.Linear(8, 8)
        fresh.weight = self.fc.weight
        fresh.bias = self.fc.bias
        return fresh(x).square().mean()


class EosPool(nn.Module):
    """transformers' BART classifiers check that every row has as many <eos> tokens
    (`unique_consecutive` of the counts, a data-dependent size; exported, a torch._check that
    leaves only symbols) and pool on the last one."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(16, 8)
        self.fc = nn.Linear(8, 3)

    def forward(self, ids):
        h = self.embed(ids)
        eos = ids.eq(2)
        torch._check(torch.unique_consecutive(eos.sum(1)).numel() == 1)
        return self.fc(eos_rows(h, eos)).square().mean()


class ScriptedEosPool(EosPool):
    """The same, as a script: the check is a data-dependent branch."""

    def forward(self, ids):
        h = self.embed(ids)
        eos = ids.eq(2)
        if torch.unique_consecutive(eos.sum(1)).numel() != 1:
            raise ValueError("All examples must have the same number of <eos> tokens.")
        return self.fc(eos_rows(h, eos)).square().mean()


def eos_rows(h, eos):
    return h[eos, :].view(h.size(0), -1, h.size(-1))[:, -1, :]


class Wrap(nn.Module):
    def __init__(self, block):
        super().__init__()
        self.block = block

    def forward(self, x):
        return self.block(x).square().mean()


def main(out):
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    x4 = torch.randn(2, 4, 3, 6, 6)
    torch.jit.trace(Conv(), (x4[0],)).save(os.path.join(out, "traced_conv.pt"))
    torch.save({"x": x4}, os.path.join(out, "traced_conv.data.pt"))
    x = torch.randn(2, 4, 8)
    torch.jit.trace(ToDevice(), (x[0],)).save(os.path.join(out, "traced_to_device.pt"))
    torch.save({"x": x}, os.path.join(out, "traced_to_device.data.pt"))
    m = torch.rand(2, 4, 8) < 0.4
    torch.jit.script(MaskSelect()).save(os.path.join(out, "mask_select.pt"))
    torch.save({"x": x, "m": m}, os.path.join(out, "mask_select.data.pt"))
    torch.jit.script(Wrap(DiffBlock())).save(os.path.join(out, "no_grad_rule.pt"))
    torch.jit.script(Wrap(Wrap(FftBlock()))).save(os.path.join(out, "bad_op_in_block.pt"))
    torch.save({"x": x}, os.path.join(out, "x.data.pt"))
    torch.jit.script(DataRows()).save(os.path.join(out, "data_rows.pt"))
    torch.export.save(torch.export.export(ItemCheck(), (x[0],)),
                      os.path.join(out, "item_check.pt2"))
    torch.export.save(torch.export.export(AliasOps(), (x[0],)), os.path.join(out, "aliases.pt2"))
    torch.export.save(torch.export.export(ModuleBuiltInForward(), (x[0],)),
                      os.path.join(out, "module_in_forward.pt2"))
    ids = torch.randint(3, 16, (4, 6))
    ids[:, -1] = 2
    torch.export.save(torch.export.export(EosPool(), (ids,)), os.path.join(out, "eos_pool.pt2"))
    torch.jit.script(ScriptedEosPool()).save(os.path.join(out, "eos_pool.pt"))
    torch.save({"ids": torch.stack([ids, ids])}, os.path.join(out, "ids.data.pt"))
    torch.jit.script(Upsample()).save(os.path.join(out, "upsample.pt"))
    torch.save({"x": x4}, os.path.join(out, "upsample.data.pt"))
    torch.jit.script(ScatterProd()).save(os.path.join(out, "scatter_prod.pt"))


if __name__ == "__main__":
    main(sys.argv[1])
