//===- AtenRegistry.cpp - operators that ds.aten may run ------------------===//

#include "ds/Dialect/DS/IR/AtenRegistry.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir::ds;

static const llvm::StringMap<AtenOpInfo> &registry() {
  static const llvm::StringMap<AtenOpInfo> table = [] {
    llvm::StringMap<AtenOpInfo> t;
#define DS_ATEN_OP(NAME, ARGS, RESULTS, EFFECT, RETURNS_LIST)                  \
  t.try_emplace(NAME,                                                          \
                AtenOpInfo{NAME, ARGS, RESULTS, AtenEffect::EFFECT, RETURNS_LIST});
#include "ds/Dialect/DS/IR/AtenOps.def"
    return t;
  }();
  return table;
}

std::optional<AtenOpInfo> mlir::ds::lookupAtenOp(llvm::StringRef name) {
  auto it = registry().find(name);
  if (it == registry().end())
    return std::nullopt;
  return it->second;
}
