//===- DSDialect.h - the ds dialect -----------------------------*- C++ -*-===//

#ifndef DS_DIALECT_DS_IR_DSDIALECT_H
#define DS_DIALECT_DS_IR_DSDIALECT_H

#include "mlir/IR/Dialect.h"

#include "ds/Dialect/DS/IR/DSOpsDialect.h.inc"

#include "mlir/Support/LLVM.h"

#include <cstdint>
#include <optional>
#include <string>

namespace mlir {
class ModuleOp;
} // namespace mlir

namespace mlir::ds {

/// The number of data-parallel ranks `module` is compiled for: its
/// `ds.world_size` (the dialect verifier checks it is an i64 >= 1), if set.
std::optional<int64_t> getWorldSize(ModuleOp module);

/// Sets `module`'s `ds.world_size` to `worldSize` (>= 1).
void setWorldSize(ModuleOp module, int64_t worldSize);

/// The submodules (paths, "" for the root) `module`'s archive holds in eval
/// mode: its `ds.eval_modules`, empty when absent.
SmallVector<StringRef> getEvalModules(ModuleOp module);

/// Sets `module`'s `ds.eval_modules` (removes it when `paths` is empty).
void setEvalModules(ModuleOp module, ArrayRef<std::string> paths);

/// The modules (paths) whose activations are recomputed in the backward:
/// `module`'s `ds.checkpoint_modules`, empty when absent.
SmallVector<StringRef> getCheckpointModules(ModuleOp module);

/// Sets `module`'s `ds.checkpoint_modules` (removes it when `paths` is empty).
void setCheckpointModules(ModuleOp module, ArrayRef<std::string> paths);

/// The device a module is compiled for (`ds.target_device`).
enum class TargetDevice { CPU, CUDA };

/// "cpu" or "cuda", as `ds.target_device` and the plan spell it.
StringRef stringifyTargetDevice(TargetDevice device);

/// The device spelled `name` ("cpu", "cuda"); nullopt for any other.
std::optional<TargetDevice> parseTargetDevice(StringRef name);

/// The device `module` is compiled for: its `ds.target_device` (the dialect
/// verifier checks the value), CPU when absent.
TargetDevice getTargetDevice(ModuleOp module);

/// The target device of the module enclosing `op` (CPU outside any module).
TargetDevice getTargetDevice(Operation *op);

/// Sets `module`'s `ds.target_device`.
void setTargetDevice(ModuleOp module, TargetDevice device);

/// How diagnostics name the module whose code an op is (its `module` and
/// `module_class`): "in module 'blocks.0.attn' (Attention)", or "in the root
/// module (GPT)" for path "".
std::string describeModule(StringRef path, StringRef moduleClass);

} // namespace mlir::ds

#endif // DS_DIALECT_DS_IR_DSDIALECT_H
