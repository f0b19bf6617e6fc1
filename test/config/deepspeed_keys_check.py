#!/usr/bin/env python3
"""Every config key DeepSpeed's reader knows has a row in docs/migrating.md's key table.

  deepspeed_keys_check.py DOCS/migrating.md

DeepSpeed (the PyPI package of requirements-dev.txt; never a dependency of the project) is asked
for its keys: the top-level ones its `runtime/config.py` reads from the config dict (by name
through its constants), the fields of its pydantic models for `zero_optimization`, `fp16` and
`bf16`, and the `activation_checkpointing` keys of its constants. A key K of section S is covered
by a row `S.K` (or, for `enabled`, a row `S`); a top-level key by a row `K`, or, for the names
config.py reads inside sections (`type`, `params`, `dtype`), by a row ending in `.K`. Exits 1
listing every key without a row, so a DeepSpeed upgrade that adds keys shows up here.
"""

import inspect
import re
import sys
import warnings


def table_keys(path):
    keys, inside = set(), False
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line == "<!-- key-table -->":
                inside = True
            elif line == "<!-- /key-table -->":
                inside = False
            elif inside and line.startswith("| `"):
                keys.add(line.split("`")[1])
    if len(keys) < 100:
        sys.exit(f"{path}: only {len(keys)} rows found in the key table")
    return keys


def pydantic_keys(model):
    return {field.alias or name for name, field in model.model_fields.items()}


def deepspeed_keys():
    """{section: set of keys}; section "" is the top level."""
    warnings.filterwarnings("ignore")
    import deepspeed.runtime.config as config
    import deepspeed.runtime.constants as constants
    from deepspeed.runtime.activation_checkpointing import config as act
    from deepspeed.runtime.precision_config import DeepSpeedBF16Config, DeepSpeedFP16Config
    from deepspeed.runtime.zero.config import DeepSpeedZeroConfig

    source = inspect.getsource(config)
    names = set()
    for pattern in (r"param_dict(?:\.get)?\(\s*([A-Z_0-9]+)",
                    r"get_(?:scalar|list|dict)_param\(\s*param_dict\s*,\s*([A-Z_0-9]+)",
                    r"([A-Z_0-9]+) in param_dict", r"param_dict\[([A-Z_0-9]+)\]"):
        names |= set(re.findall(pattern, source))
    modules = [config, constants]
    top = set()
    for name in names:
        for module in modules:
            value = getattr(module, name, None)
            if isinstance(value, str):
                top.add(value)
                break
        else:
            sys.exit(f"deepspeed_keys_check: cannot resolve {name} in DeepSpeed's config.py")
    return {
        "": top,
        "zero_optimization": pydantic_keys(DeepSpeedZeroConfig),
        "fp16": pydantic_keys(DeepSpeedFP16Config),
        "bf16": pydantic_keys(DeepSpeedBF16Config),
        "activation_checkpointing": {
            getattr(act, n) for n in dir(act)
            if n.startswith("ACT_CHKPT_") and not n.endswith(("_DEFAULT", "_FORMAT"))
            and isinstance(getattr(act, n), str)},
    }


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__)
    rows = table_keys(argv[1])
    missing = []
    sections = deepspeed_keys()
    for section, keys in sections.items():
        for key in sorted(keys):
            if section:
                covered = f"{section}.{key}" in rows or (key == "enabled" and section in rows)
            else:
                covered = key in rows or any(row.endswith("." + key) for row in rows)
            if not covered:
                missing.append(f"{section}.{key}" if section else key)
    total = sum(len(keys) for keys in sections.values())
    if missing:
        print(f"{argv[1]}: {len(missing)} of DeepSpeed's {total} config keys have no row in the "
              "key table:\n  " + "\n  ".join(missing), file=sys.stderr)
        return 1
    print(f"all {total} of DeepSpeed's config keys have a row in {argv[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
