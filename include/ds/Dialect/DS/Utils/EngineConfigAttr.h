//===- EngineConfigAttr.h - DeepSpeed config as attributes ------*- C++ -*-===//
//
// Builds an engine's #ds.engine_config from the config library's parse, and
// gives the passes the DeepSpeed defaults that the attributes leave out.
//
//===----------------------------------------------------------------------===//

#ifndef DS_DIALECT_DS_UTILS_ENGINECONFIGATTR_H
#define DS_DIALECT_DS_UTILS_ENGINECONFIGATTR_H

#include "ds/Config/Config.h"
#include "ds/Dialect/DS/IR/DSAttrs.h"

#include <string>
#include <vector>

namespace mlir::ds {

/// The MLIR element type of a config dtype (f32, f16, bf16).
Type dtypeType(MLIRContext *context, ::ds::config::DType dtype);

/// `config` as typed attributes; sections at their defaults are left out.
EngineConfigAttr
buildEngineConfigAttr(MLIRContext *context,
                      const ::ds::config::EngineConfig &config);

/// torch_autocast.lower_precision_safe_modules: as given, else DeepSpeed's
/// default (torch.nn.Linear, Conv1d, Conv2d, Conv3d).
std::vector<std::string> lowerPrecisionSafeModules(PrecisionAttr precision);

/// zero_optimization.leaf_module as the config library holds it (DeepSpeed's
/// default classes when `leaf` gives none).
::ds::config::LeafModuleConfig leafModuleConfig(LeafModulesAttr leaf);

} // namespace mlir::ds

#endif // DS_DIALECT_DS_UTILS_ENGINECONFIGATTR_H
