"""dsopt.zero_to_fp32 (DeepSpeed's three functions) on ds-run's checkpoints, one rank.

Against ds-zero-to-fp32 and the trained parameters, at ZeRO stages 0 (which DeepSpeed's own
script cannot read), 2 (several buckets) and 3; DeepSpeed itself reads the same files in
test/interop/zero_to_fp32_check.py.
"""

import json
import os
import subprocess

import pytest
import torch
from safetensors.torch import load_file

from dsopt.zero_to_fp32 import (convert_zero_checkpoint_to_fp32_state_dict,
                                get_fp32_state_dict_from_zero_checkpoint,
                                load_state_dict_from_zero_checkpoint)


def train(bin_dir, models, folder, stage):
    zero = {"stage": stage, "reduce_bucket_size": 500, "allgather_bucket_size": 500}
    if stage == 3:
        zero["stage3_param_persistence_threshold"] = 100
    config = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": 2,
              "zero_optimization": zero,
              "optimizer": {"type": "AdamW", "params": {"lr": 0.001}}}
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f)
    plan, data = os.path.join(folder, "mlp.plan"), os.path.join(models, "mlp.data.pt")
    subprocess.run([os.path.join(bin_dir, "ds-compile"), os.path.join(models, "mlp.pt"),
                    "--config", os.path.join(folder, "config.json"), "--example-inputs", data,
                    "-o", plan], check=True, capture_output=True)
    ckpt, params = os.path.join(folder, "ckpt"), os.path.join(folder, "params.safetensors")
    subprocess.run([os.path.join(bin_dir, "ds-run"), plan, "--data", data, "--steps", "2",
                    "--save-checkpoint", ckpt, "--save-params", params],
                   check=True, capture_output=True)
    return ckpt, load_file(params)


def same(a, b):
    assert a.keys() == b.keys()
    for name in a:
        assert a[name].dtype == torch.float32 and torch.equal(a[name], b[name]), name


@pytest.mark.parametrize("stage", [0, 2, 3])
def test_functions_rebuild_the_trained_weights(bin_dir, models, tmp_path, stage):
    ckpt, trained = train(bin_dir, models, str(tmp_path), stage)
    same(get_fp32_state_dict_from_zero_checkpoint(ckpt), trained)
    same(get_fp32_state_dict_from_zero_checkpoint(ckpt, tag="global_step2"), trained)

    out = tmp_path / "out"
    subprocess.run([os.path.join(bin_dir, "ds-zero-to-fp32"), ckpt, str(out)], check=True,
                   capture_output=True)
    same(torch.load(out / "pytorch_model.bin"), trained)

    convert_zero_checkpoint_to_fp32_state_dict(ckpt, tmp_path / "py", safe_serialization=True,
                                               max_shard_size="2KB")
    index = json.loads((tmp_path / "py" / "model.safetensors.index.json").read_text())
    shards = {}
    for name in sorted(set(index["weight_map"].values())):
        shards.update(load_file(tmp_path / "py" / name))
    same(shards, trained)

    model = torch.nn.Sequential()
    for layer in ("fc1", "fc2", "fc3"):
        weight = trained[layer + ".weight"]
        model.add_module(layer, torch.nn.Linear(weight.shape[1], weight.shape[0]))
    loaded = load_state_dict_from_zero_checkpoint(model, ckpt)
    same({k: v.detach() for k, v in loaded.state_dict().items()}, trained)


def test_missing_latest_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="Unable to find 'latest' file"):
        get_fp32_state_dict_from_zero_checkpoint(str(tmp_path))


def test_manifest_is_checked_before_loading(bin_dir, models, tmp_path):
    """A flipped byte, a cut file, a missing file: refused naming it, before torch.load; no
    manifest (DeepSpeed's checkpoints): read with a warning."""
    import shutil

    import dsopt

    ckpt, trained = train(bin_dir, models, str(tmp_path), 2)
    folder = os.path.join(ckpt, "global_step2")
    optim = os.path.join(folder, "zero_pp_rank_0_mp_rank_00_optim_states.pt")
    pristine = tmp_path / "pristine"
    shutil.copytree(folder, pristine)

    data = bytearray(open(optim, "rb").read())
    data[len(data) // 2] ^= 0x10
    open(optim, "wb").write(bytes(data))
    with pytest.raises(dsopt.EngineError, match="zero_pp_rank_0_mp_rank_00_optim_states.pt"):
        get_fp32_state_dict_from_zero_checkpoint(ckpt)

    open(optim, "wb").write(bytes(data[: len(data) // 2]))
    with pytest.raises(dsopt.EngineError, match="zero_pp_rank_0_mp_rank_00_optim_states.pt"):
        get_fp32_state_dict_from_zero_checkpoint(ckpt)

    os.remove(optim)
    with pytest.raises(dsopt.EngineError, match="zero_pp_rank_0_mp_rank_00_optim_states.pt"):
        get_fp32_state_dict_from_zero_checkpoint(ckpt)

    shutil.copy(pristine / os.path.basename(optim), optim)
    same(get_fp32_state_dict_from_zero_checkpoint(ckpt), trained)

    os.remove(os.path.join(folder, "ds_manifest.json"))
    with pytest.warns(UserWarning, match="manifest"):
        same(get_fp32_state_dict_from_zero_checkpoint(ckpt), trained)
