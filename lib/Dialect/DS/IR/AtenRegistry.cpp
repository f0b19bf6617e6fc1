//===- AtenRegistry.cpp - operators that ds.aten may run ------------------===//

#include "ds/Dialect/DS/IR/AtenRegistry.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir::ds;

static const AtenOpInfo kAtenOps[] = {
#define DS_ATEN_OP(NAME, ARGS, RESULTS, EFFECT, RETURNS_LIST)                  \
  AtenOpInfo{NAME, ARGS, RESULTS, AtenEffect::EFFECT, RETURNS_LIST},
#include "ds/Dialect/DS/IR/AtenOps.def"
};

static const llvm::StringMap<AtenOpInfo> &registry() {
  static const llvm::StringMap<AtenOpInfo> table = [] {
    llvm::StringMap<AtenOpInfo> t;
    for (const AtenOpInfo &info : kAtenOps)
      t.try_emplace(info.name, info);
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

llvm::ArrayRef<AtenOpInfo> mlir::ds::allAtenOps() { return kAtenOps; }
