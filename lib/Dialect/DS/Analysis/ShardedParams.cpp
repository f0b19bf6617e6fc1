//===- ShardedParams.cpp - ZeRO-3 parameters and their buckets ------------===//

#include "ds/Dialect/DS/Analysis/ShardedParams.h"

#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace mlir::ds;

ShardedParams::ShardedParams(ModuleOp module) {
  llvm::StringMap<SmallVector<BucketOp>> buckets = bucketsByEngine(module);
  for (EngineOp engine : module.getOps<EngineOp>())
    if (engine.isPartitioned())
      for (BucketOp bucket : buckets.lookup(engine.getSymName()))
        if (bucket.isShardedAt(*engine.getZeroStage()))
          shardedBuckets.insert(bucket);
  for (ParamOp param : module.getOps<ParamOp>()) {
    std::optional<int64_t> offset = param.getFlatOffset();
    if (!offset || !param.getEngine())
      continue;
    for (BucketOp bucket : buckets.lookup(*param.getEngine()))
      if (*offset >= bucket.getOffset() &&
          *offset < bucket.getOffset() + bucket.getNumel()) {
        bucketOfParam[param.getSymName()] = {param, bucket};
        break;
      }
  }
}

bool ShardedParams::isSharded(BucketOp bucket) const {
  return shardedBuckets.contains(bucket);
}

std::optional<ParamRead> ShardedParams::readBy(Operation *op) const {
  auto readOf = [&](GetParamOp get) -> std::optional<ParamRead> {
    auto it = bucketOfParam.find(get.getName());
    if (it == bucketOfParam.end() || !isSharded(it->second.second))
      return std::nullopt;
    return ParamRead{op, it->second.first, it->second.second};
  };
  if (auto get = dyn_cast<GetParamOp>(op))
    return readOf(get);
  for (Value operand : op->getOperands())
    if (auto get = operand.getDefiningOp<GetParamOp>())
      if (auto read = readOf(get))
        return read;
  return std::nullopt;
}

void ShardedParams::collectReads(Operation *op,
                                 SmallVectorImpl<ParamRead> &reads) const {
  if (empty())
    return;
  op->walk<WalkOrder::PreOrder>([&](Operation *inner) {
    if (isa<GetParamOp>(inner)) {
      if (auto read = readBy(inner))
        reads.push_back(*read);
      return;
    }
    // An op may use several sharded parameters: one read each.
    llvm::SmallPtrSet<Operation *, 4> seen;
    for (Value operand : inner->getOperands())
      if (auto get = operand.getDefiningOp<GetParamOp>())
        if (seen.insert(get).second)
          if (auto read = readBy(get))
            reads.push_back({inner, read->param, read->bucket});
  });
}

std::string mlir::ds::commonModulePrefix(ArrayRef<StringRef> modules) {
  if (modules.empty())
    return "";
  SmallVector<StringRef> common;
  llvm::SplitString(modules.front(), common, ".");
  for (StringRef module : modules.drop_front()) {
    SmallVector<StringRef> parts;
    llvm::SplitString(module, parts, ".");
    size_t n = 0;
    while (n < common.size() && n < parts.size() && common[n] == parts[n])
      ++n;
    common.resize(n);
  }
  return llvm::join(common, ".");
}

bool mlir::ds::isUnderModule(StringRef name, StringRef prefix) {
  if (prefix.empty())
    return true;
  return name.starts_with(prefix) && name.size() > prefix.size() &&
         name[prefix.size()] == '.';
}
