"""ZeRO-3 leaf modules marked from Python, as DeepSpeed's deepspeed.utils.

    dsopt.set_z3_leaf_modules(model, [MoEBlock])          # by class or class name
    dsopt.set_z3_leaf_modules_by_name(model, ["blocks.0.moe"])
    dsopt.set_z3_leaf_modules_by_suffix(model, ["moe"])

A mark is DeepSpeed's attribute (``module._z3_leaf = True``) on the module
object. The compiler does not read module attributes, so ``dsopt.compile``
reads the marks from the module it is given (an nn.Module, or a ScriptModule:
scripting keeps the attribute) and adds the marked paths to the config's
``zero_optimization.leaf_module.names`` (docs/leaf-modules.md), per engine.
A model given as an archive path is not searched for marks.
"""

import copy
import json
import os
from collections.abc import Mapping

import torch

_MARK = "_z3_leaf"


def _class_matches(module, spec):
    if isinstance(spec, type):
        return isinstance(module, spec)
    cls = type(module)
    return spec in (cls.__name__, cls.__module__ + "." + cls.__qualname__)


def _set_by(model, wanted, matches, what, flag, raise_if_not_found):
    if isinstance(wanted, (str, type)):
        wanted = [wanted]
    marked = []
    found = set()
    for name, module in model.named_modules():
        hits = [i for i, spec in enumerate(wanted) if matches(name, module, spec)]
        if hits:
            setattr(module, _MARK, flag)
            marked.append(module)
            found.update(hits)
    missing = [spec for i, spec in enumerate(wanted) if i not in found]
    if missing and raise_if_not_found:
        raise ValueError("%s: no module of %s matches %s" % (
            what, type(model).__name__,
            ", ".join(getattr(s, "__name__", None) or repr(s) for s in missing)))
    return marked


def set_z3_leaf_modules(model, leaf_module_classes, raise_if_not_found=True):
    """Marks every submodule that is an instance of one of the classes (a
    class, or its bare or fully qualified name); returns the marked modules."""
    return _set_by(model, leaf_module_classes,
                   lambda _, module, spec: _class_matches(module, spec),
                   "set_z3_leaf_modules", True, raise_if_not_found)


def unset_z3_leaf_modules(model, leaf_module_classes, raise_if_not_found=True):
    return _set_by(model, leaf_module_classes,
                   lambda _, module, spec: _class_matches(module, spec),
                   "unset_z3_leaf_modules", False, raise_if_not_found)


def set_z3_leaf_modules_by_name(model, module_names, flag=True, raise_if_not_found=True):
    """Marks the submodules whose ``named_modules()`` path is one of
    module_names."""
    return _set_by(model, module_names, lambda name, _, spec: name == spec,
                   "set_z3_leaf_modules_by_name", flag, raise_if_not_found)


def set_z3_leaf_modules_by_suffix(model, module_name_suffixes, flag=True,
                                  raise_if_not_found=True):
    """Marks the submodules whose path ends with one of the suffixes."""
    return _set_by(model, module_name_suffixes,
                   lambda name, _, spec: name.endswith(spec),
                   "set_z3_leaf_modules_by_suffix", flag, raise_if_not_found)


def z3_leaf_module(module):
    """Whether the module itself is marked."""
    return bool(getattr(module, _MARK, False))


def get_z3_leaf_modules(model):
    """The marked submodules."""
    return [module for _, module in model.named_modules() if z3_leaf_module(module)]


def marked_paths(model):
    """``named_modules()`` paths of the marked submodules (none for a path)."""
    if not isinstance(model, torch.nn.Module):
        return []
    return [name for name, module in model.named_modules() if z3_leaf_module(module)]


def with_leaf_names(config, paths, config_dir):
    """The config with each marked path added to its engine's
    zero_optimization.leaf_module.names (a new dict; config: a dict, already
    in the engines form or not). Engine files are read here, their relative
    paths resolved against config_dir."""
    if not paths:
        return config
    config = copy.deepcopy(dict(config))
    if "engines" not in config:
        _add_names(config, paths)
        return config
    engines = {key: _engine_dict(value, config_dir)
               for key, value in config["engines"].items()}
    for path in paths:
        key = _owner(path, list(engines))
        if key is None:
            continue  # No engine owns it: the compiler has nothing to gather.
        relative = path if key == "" else path[len(key) + 1:]
        if not relative:
            raise ValueError("leaf module %r is the module of engine %r itself; mark "
                             "one of its submodules" % (path, key))
        _add_names(engines[key], [relative])
    config["engines"] = engines
    return config


def _engine_dict(value, folder):
    if isinstance(value, Mapping):
        return copy.deepcopy(dict(value))
    path = os.fsdecode(os.fspath(value))
    with open(os.path.join(folder, path)) as f:
        return json.load(f)


def _owner(path, keys):
    named = [k for k in keys if k and (path == k or path.startswith(k + "."))]
    if named:
        return max(named, key=len)
    return "" if "" in keys else None


def _add_names(engine_config, paths):
    zero = engine_config.setdefault("zero_optimization", {})
    leaf = zero.setdefault("leaf_module", {})
    names = leaf.get("names", [])
    names = [names] if isinstance(names, str) else list(names)
    leaf["names"] = names + [p for p in paths if p not in names]
