"""ZeRO-3 leaf modules marked from Python, as DeepSpeed's deepspeed.utils.

    dsopt.set_z3_leaf_modules(model, [MoEBlock])          # by class or class name
    dsopt.set_z3_leaf_modules_by_name(model, ["blocks.0.moe"])
    dsopt.set_z3_leaf_modules_by_suffix(model, ["moe"])

A mark is DeepSpeed's attribute (``module._z3_leaf = True``) on the module
object. The compiler does not read module attributes, so ``dsopt.compile``
reads the marks from the module it is given (an nn.Module, or a ScriptModule:
scripting keeps the attribute) and adds the marked paths to the config's
``zero_optimization.leaf_module.names`` (docs/leaf-modules.md), per engine.
``torch.jit.trace`` and ``torch.export`` drop the attribute but keep the
parameters themselves (the same tensor objects), so the marks of a captured
model are found through them: a marked module's parameters name its path in
the capture. A marked module whose parameters the capture holds only in part
is an error. A model given as an archive path is not searched for marks.
"""

import copy
import json
import os
import weakref
from collections.abc import Mapping

import torch

_MARK = "_z3_leaf"
# Every module marked in this process, so that a captured copy (traced,
# exported), which loses the attribute, can be matched through parameters.
_marked = weakref.WeakSet()


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
            (_marked.add if flag else _marked.discard)(module)
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
    """``named_modules()`` paths of the marked submodules of ``model`` (an
    nn.Module, a ScriptModule or an ExportedProgram; none for a path): its own
    marks, and those of marked modules whose parameters it holds."""
    if isinstance(model, torch.nn.Module):
        own = [name for name, module in model.named_modules() if z3_leaf_module(module)]
        named = dict(model.named_parameters(remove_duplicate=False))
    elif isinstance(model, torch.export.ExportedProgram):
        own, named = [], dict(model.state_dict)
    else:
        return []
    return own + [p for p in _captured_marks(named) if p not in own]


def _captured_marks(named):
    """Paths, in a captured model whose parameters are ``named`` (qualified
    name -> tensor), of the marked modules whose parameters these are."""
    where = {}
    for name, tensor in named.items():
        where.setdefault(id(tensor), []).append(name)
    paths = []
    for module in list(_marked):
        if not z3_leaf_module(module):
            continue
        relative = dict(module.named_parameters(remove_duplicate=False))
        if not relative:
            continue
        found = {rel: where.get(id(t), []) for rel, t in relative.items()}
        if not any(found.values()):
            continue  # Another model's module.
        prefixes = None
        for rel, names in found.items():
            here = {n[:-len(rel)].rstrip(".") for n in names
                    if n == rel or n.endswith("." + rel)}
            prefixes = here if prefixes is None else prefixes & here
        if not prefixes:
            missing = sorted(rel for rel, names in found.items() if not names)
            raise ValueError(
                "a module marked as a ZeRO-3 leaf (%s) is only partly in the captured "
                "model: its parameters %s are not; mark the captured model's module, or "
                "name it in zero_optimization.leaf_module" % (
                    type(module).__name__, ", ".join(missing) or "sit elsewhere"))
        paths.extend(sorted(prefixes))
    return paths


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
