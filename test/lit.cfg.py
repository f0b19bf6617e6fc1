# -*- Python -*-
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "DS"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["CMakeLists.txt", "README.md", "models", "oracle", "Inputs", "fuzz",
                   "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.ds_obj_root, "test")

config.substitutions.append(("%models", config.ds_models_dir))
config.substitutions.append(("%torch_python", config.torch_python))
config.substitutions.append(("%src", config.ds_src_root))

llvm_config.with_system_environment(["HOME", "TMPDIR"])
llvm_config.use_default_substitutions()
# Tests run with one thread per process: the machines have two cores.
config.environment["OMP_NUM_THREADS"] = "1"

tool_dirs = [config.ds_tools_dir, config.llvm_tools_dir]
tools = ["ds-opt", "ds-import", "ds-translate", "ds-compile", "ds-run", "FileCheck", "not",
         "count", "split-file"]
llvm_config.add_tool_substitutions(tools, tool_dirs)

