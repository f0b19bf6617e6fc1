//===- AtenRegistry.h - operators that ds.aten may run ----------*- C++ -*-===//
//
// The set of ATen / TorchScript operators the compiler supports, with the
// arity LibTorch's schema gives them (generated into AtenOps.def). The
// verifier of `ds.aten` and the importer both consult it, so "supported" means
// one thing everywhere.
//
//===----------------------------------------------------------------------===//

#ifndef DS_DIALECT_DS_IR_ATENREGISTRY_H
#define DS_DIALECT_DS_IR_ATENREGISTRY_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include <optional>

namespace mlir::ds {

enum class AtenEffect { Pure, Random, InPlace };

struct AtenOpInfo {
  llvm::StringRef name; // schema name with overload: "aten::add.Tensor"
  unsigned numArgs;
  unsigned numResults;
  AtenEffect effect;
  bool returnsList; // one list result, which an op may unpack
};

/// Looks up an operator by its qualified name with overload.
std::optional<AtenOpInfo> lookupAtenOp(llvm::StringRef qualifiedName);

/// Every operator of the registry, in AtenOps.def's (sorted) order.
llvm::ArrayRef<AtenOpInfo> allAtenOps();

} // namespace mlir::ds

#endif // DS_DIALECT_DS_IR_ATENREGISTRY_H
