"""Whole fp32 weights from a ZeRO checkpoint, as `deepspeed.utils.zero_to_fp32` gives them.

    from dsopt.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint
    state_dict = get_fp32_state_dict_from_zero_checkpoint("ckpt")      # ckpt/latest's tag
    model = load_state_dict_from_zero_checkpoint(model, "ckpt")
    convert_zero_checkpoint_to_fp32_state_dict("ckpt", "out/", safe_serialization=True)

The same functions, signatures and defaults as DeepSpeed 0.19's, reading checkpoints of
`ds-run` / `dsopt.Engine.save_checkpoint` and of DeepSpeed itself (docs/checkpoint.md): stages
1-3 from every rank's fp32 partition in DeepSpeed's layout, stage 0 (which DeepSpeed's script
cannot read: it has no optimizer shards) from the module, or from our float32 master of a
bf16 / fp16 engine. Python over torch.load: DeepSpeed is not needed. Before anything is loaded,
every file of the folder is checked against its `ds_manifest.json` (sizes and XXH64, by dsopt's
runtime, as `ds-zero-to-fp32` checks it): a changed, cut or missing file raises
`dsopt.EngineError` naming it; a folder without a manifest (DeepSpeed's) is read with a
warning. `lazy_mode=True` is accepted and returns ordinary tensors.
"""

import glob
import json
import math
import os
import re
from collections import OrderedDict

import warnings

import torch

from ._dsopt import verify_checkpoint_folder

__all__ = ["get_fp32_state_dict_from_zero_checkpoint", "load_state_dict_from_zero_checkpoint",
           "convert_zero_checkpoint_to_fp32_state_dict"]


def _natural(text):
    return [int(c) if c.isdigit() else c for c in re.split(r"(\d+)", text)]


def _files(folder, pattern):
    return sorted(glob.glob(os.path.join(folder, pattern)), key=_natural)


def _load(path):
    return torch.load(path, map_location="cpu", weights_only=False)


def _numel(shape):
    return math.prod(shape)


def _partitioned(optim, model_states, world):
    """Trainable parameters (OrderedDict name -> 1-D fp32) from the ranks' fp32 partitions."""
    stage = optim[0]["zero_stage"]
    params = OrderedDict()
    shape_groups = model_states[0]["param_shapes"]
    if stage == 3:
        shapes = OrderedDict((k, v) for group in shape_groups for k, v in group.items())
        ranks = [torch.cat([t.reshape(-1) for t in o["fp32_flat_groups"]]) for o in optim]
        offset = 0
        for name, shape in shapes.items():
            chunk = math.ceil(_numel(shape) / world)
            whole = torch.cat([rank.narrow(0, offset, chunk) for rank in ranks])
            params[name] = whole.narrow(0, 0, _numel(shape))
            offset += chunk
        if offset != ranks[0].numel():
            raise ValueError(f"consumed {offset} of {ranks[0].numel()} elements per rank")
        return params
    paddings = optim[0].get("param_alignment_paddings")
    for g, shapes in enumerate(shape_groups):
        flat = torch.cat([o["single_partition_of_fp32_groups"][g] for o in optim])
        group_paddings = paddings[g] if paddings is not None else [0] * len(shapes)
        offset = 0
        for (name, shape), padding in zip(shapes.items(), group_paddings):
            params[name] = flat.narrow(0, offset, _numel(shape))
            offset += _numel(shape) + padding
        align = 2 * world
        if math.ceil(offset / align) != math.ceil(flat.numel() / align):
            raise ValueError(f"consumed {offset} numels out of {flat.numel()} - "
                             "the partitions do not fit param_shapes")
    return params


def _frozen(model_states, stage, world):
    shapes = model_states[0].get("frozen_param_shapes") or {}
    fragments = [m.get("frozen_param_fragments") for m in model_states]
    module = model_states[0]["module"]
    frozen = OrderedDict()
    for name, shape in shapes.items():
        if stage == 3 and fragments[0] is not None and name in fragments[0]:
            whole = torch.cat([f[name].reshape(-1) for f in fragments])
            frozen[name] = whole.narrow(0, 0, _numel(shape))
        elif fragments[0] is not None and name in fragments[0]:
            frozen[name] = fragments[0][name]
        elif name in module:
            frozen[name] = module[name]
        else:
            raise ValueError(f"frozen parameter {name} is neither in frozen_param_fragments "
                             "nor in the module")
    return frozen


def _flat_layout_params(model_states, flat):
    """Our own flat buffers (ds_flat_layout): a stage 0 master, a frozen ZeRO-3 engine."""
    offsets = model_states[0]["ds_flat_layout"]["offsets"]
    return OrderedDict((name, flat.narrow(0, offsets[name], _numel(shape)))
                       for group in model_states[0]["param_shapes"]
                       for name, shape in group.items())


def _frozen_zero3_flat(model_states, world):
    layout = model_states[0]["ds_flat_layout"]
    blocks, position = [], [0] * world
    for _, numel, _ in layout["buckets"]:
        block = numel // world
        for r, m in enumerate(model_states):
            blocks.append(m["ds_frozen_partition"].narrow(0, position[r], block))
            position[r] += block
    return torch.cat(blocks) if blocks else torch.empty(0)


def _rebuild(folder, exclude_frozen_parameters):
    remark = verify_checkpoint_folder(folder)
    if remark:
        warnings.warn(remark, stacklevel=3)
    model_files = _files(folder, "*_model_states.pt")
    if not model_files:
        raise FileNotFoundError(f"can't find *_model_states.pt files in directory '{folder}'")
    model_states = [_load(f) for f in model_files]
    first = model_states[0]
    if "buffer_names" not in first:
        raise ValueError(f"{model_files[0]} is not a model state checkpoint")
    world = first.get("dp_world_size", len(model_files))
    state = OrderedDict((k, v.float() if v.is_floating_point() else v)
                        for k, v in first["module"].items() if k in first["buffer_names"])
    optim_files = _files(folder, "*_optim_states.pt")
    stage = first.get("ds_zero_stage")
    if optim_files:
        optim = [_load(f)["optimizer_state_dict"] for f in optim_files]
        stage = optim[0]["zero_stage"]
        count = optim[0]["partition_count"]
        count = max(count) if isinstance(count, list) else count
        if count != len(optim_files):
            raise ValueError(f"Expected {count} of '*_optim_states.pt' under '{folder}' but "
                             f"found {len(optim_files)} files")
        trainable = _partitioned(optim, model_states, count)
    elif first.get("ds_flat_layout") is not None and "ds_frozen_partition" in first:
        trainable = _flat_layout_params(model_states, _frozen_zero3_flat(model_states, world))
    elif isinstance(first.get("optimizer"), dict) and "ds_fp32_master" in first["optimizer"]:
        trainable = _flat_layout_params(model_states, first["optimizer"]["ds_fp32_master"])
    else:
        trainable = OrderedDict((name, first["module"][name])
                                for group in first["param_shapes"] or [] for name in group)
    if not exclude_frozen_parameters:
        state.update((k, v.float()) for k, v in _frozen(model_states, stage, world).items())
    shapes = OrderedDict((k, v) for group in first["param_shapes"] or [] for k, v in group.items())
    for name, tensor in trainable.items():
        state[name] = tensor.reshape(tuple(shapes[name])).float().clone()
    for alias, source in (first.get("shared_params") or {}).items():
        if source in state:
            state[alias] = state[source]
    return state


def _folder(checkpoint_dir, tag):
    if tag is None:
        latest = os.path.join(checkpoint_dir, "latest")
        if not os.path.isfile(latest):
            raise ValueError(f"Unable to find 'latest' file at {latest}")
        with open(latest) as f:
            tag = f.read().strip()
    folder = os.path.join(checkpoint_dir, tag)
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"Directory '{folder}' doesn't exist")
    return folder


def get_fp32_state_dict_from_zero_checkpoint(checkpoint_dir, tag=None,
                                             exclude_frozen_parameters=False, lazy_mode=False):
    """The whole fp32 state dict (buffers, frozen, then trainable parameters) of
    `checkpoint_dir/<tag>` (tag None: the one `latest` names)."""
    return _rebuild(_folder(checkpoint_dir, tag), exclude_frozen_parameters)


def load_state_dict_from_zero_checkpoint(model, checkpoint_dir, tag=None):
    """Moves `model` to the CPU, loads the checkpoint's fp32 weights into it (strict=False)
    and returns it."""
    state_dict = get_fp32_state_dict_from_zero_checkpoint(checkpoint_dir, tag)
    model = model.cpu()
    model.load_state_dict(state_dict, strict=False)
    return model


def _parse_size(size):
    if isinstance(size, int):
        return size
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?\s*", str(size), re.IGNORECASE)
    if not match:
        raise ValueError(f"max_shard_size {size!r} is not a size like '5GB'")
    unit = (match.group(2) or "B").upper()
    scale = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
             "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}[unit]
    return int(float(match.group(1)) * scale)


def convert_zero_checkpoint_to_fp32_state_dict(checkpoint_dir, output_dir, max_shard_size="5GB",
                                               safe_serialization=False, tag=None,
                                               exclude_frozen_parameters=False):
    """Writes the fp32 state dict into `output_dir` as pytorch_model.bin (or model.safetensors),
    split into shards of at most `max_shard_size` with an index json as Hugging Face names
    them."""
    state_dict = get_fp32_state_dict_from_zero_checkpoint(checkpoint_dir, tag,
                                                          exclude_frozen_parameters)
    weights = "model.safetensors" if safe_serialization else "pytorch_model.bin"
    limit = _parse_size(max_shard_size) if max_shard_size is not None else None
    shards, size = [OrderedDict()], 0
    for name, tensor in state_dict.items():
        nbytes = tensor.numel() * tensor.element_size()
        if limit is not None and shards[-1] and size + nbytes > limit:
            shards.append(OrderedDict())
            size = 0
        shards[-1][name] = tensor.contiguous()
        size += nbytes
    os.makedirs(output_dir, exist_ok=True)
    stem, ext = os.path.splitext(weights)
    names = [weights] if len(shards) == 1 else [
        f"{stem}-{i + 1:05d}-of-{len(shards):05d}{ext}" for i in range(len(shards))]
    for name, shard in zip(names, shards):
        path = os.path.join(output_dir, name)
        if safe_serialization:
            from safetensors.torch import save_file
            save_file(dict(shard), path, metadata={"format": "pt"})
        else:
            torch.save(shard, path)
    if len(shards) > 1:
        index = {"metadata": {"total_size": sum(t.numel() * t.element_size()
                                                for t in state_dict.values())},
                 "weight_map": {k: name for name, shard in zip(names, shards) for k in shard}}
        with open(os.path.join(output_dir, weights + ".index.json"), "w") as f:
            f.write(json.dumps(index, indent=2, sort_keys=True) + "\n")
