//===- IndexingBoundRules.cpp - producers and indexing --------------------===//
//
// The sources of dynamic sizes (nonzero, torch.where(c), masked_select,
// boolean-mask indexing) and the ops that pick entries by index.
//
//===----------------------------------------------------------------------===//

#include "ShapeBoundRules.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::bounds;

namespace {

/// x[indices] with a list of index tensors (advanced indexing): a boolean
/// mask over k dims selects at most numel(mask) entries, integer index
/// tensors broadcast together and replace the dims they index; None keeps
/// a dim. Adjacent indices stay in place, separated ones go first.
MaybeBounds advancedIndex(const BoundQuery &q) {
  std::optional<SmallVector<Value>> indices = q.listElements(1);
  if (!indices)
    return std::nullopt;
  Bounds x = q.tensor(0);
  SmallVector<Bounds> indexShapes;
  Bounds before, after;
  int64_t dim = 0, firstIndexed = -1, lastIndexed = -1;
  bool separated = false;
  for (auto [i, index] : llvm::enumerate(*indices)) {
    auto type = dyn_cast<RankedTensorType>(index.getType());
    if (!type) {
      if (!isa<mlir::NoneType, mlir::ds::NoneType>(index.getType()))
        return std::nullopt;
      if (dim >= int64_t(x.size()))
        return std::nullopt;
      (firstIndexed < 0 ? before : after).push_back(x[dim++]);
      continue;
    }
    if (firstIndexed >= 0 && lastIndexed != int64_t(i) - 1)
      separated = true;
    if (firstIndexed < 0)
      firstIndexed = i;
    lastIndexed = i;
    Type elem = type.getElementType();
    bool mask = elem.isInteger(1) || elem.isUnsignedInteger(8);
    int64_t consumed = mask ? type.getRank() : 1;
    if (dim + consumed > int64_t(x.size()))
      return std::nullopt;
    dim += consumed;
    std::optional<int64_t> count = q.analysis.getNumelBound(index);
    indexShapes.push_back(mask ? Bounds{count.value_or(kUnbounded)}
                               : q.analysis.getBounds(index));
  }
  if (indexShapes.empty())
    return x;
  for (; dim < int64_t(x.size()); ++dim)
    after.push_back(x[dim]);
  Bounds out;
  Bounds indexed = broadcastBounds(indexShapes);
  if (separated) {
    llvm::append_range(out, indexed);
    llvm::append_range(out, before);
  } else {
    llvm::append_range(out, before);
    llvm::append_range(out, indexed);
  }
  llvm::append_range(out, after);
  return out;
}

} // namespace

void bounds::addIndexingRules(RuleTable &t) {
  // One row per nonzero element of x: at most numel(x).
  t["aten::nonzero"] = [](const BoundQuery &q) -> MaybeBounds {
    return Bounds{q.numel(0).value_or(kUnbounded), int64_t(q.tensor(0).size())};
  };
  // torch.where(c): one index tensor per dim of c, each of nonzero(c)'s rows.
  t["aten::where"] = [](const BoundQuery &q) -> MaybeBounds {
    return Bounds{q.numel(0).value_or(kUnbounded)};
  };
  t["aten::masked_select"] = [](const BoundQuery &q) -> MaybeBounds {
    return Bounds{product(broadcastBounds({q.tensor(0), q.tensor(1)}))
                      .value_or(kUnbounded)};
  };
  t["aten::index_select"] = [](const BoundQuery &q) {
    return withDim(q, 1, q.numel(2).value_or(kUnbounded),
                   /*shrinksOnly=*/false);
  };
  t["aten::index.Tensor"] = advancedIndex;
  t["aten::index.Tensor_hacked_twin"] = advancedIndex;
  t["aten::gather"] = [](const BoundQuery &q) -> MaybeBounds {
    return q.tensor(2);
  };
  t["aten::embedding"] = [](const BoundQuery &q) -> MaybeBounds {
    Bounds weight = q.tensor(0), out = q.tensor(1);
    if (weight.size() != 2)
      return std::nullopt;
    out.push_back(weight[1]);
    return out;
  };
  t["aten::one_hot"] = [](const BoundQuery &q) -> MaybeBounds {
    Bounds out = q.tensor(0);
    std::optional<int64_t> classes = q.constInt(1);
    out.push_back(classes && *classes >= 0 ? *classes : kUnbounded);
    return out;
  };
  // Written into a copy of operand 0 (autodiff's gradients of indexing).
  for (StringRef name :
       {"aten::index_add", "aten::index_put", "aten::index_put.hacked_twin",
        "aten::scatter_add", "aten::masked_scatter"})
    t[name] = likeOperand0;
  t["aten::select.int"] = [](const BoundQuery &q) -> MaybeBounds {
    Bounds x = q.tensor(0);
    int64_t d = q.dim(1, x.size());
    if (d < 0)
      return std::nullopt;
    x.erase(x.begin() + d);
    return x;
  };
  t["aten::slice.Tensor"] = [](const BoundQuery &q) {
    return withDim(q, 1, kUnbounded, /*shrinksOnly=*/true);
  };
  t["aten::narrow"] = [](const BoundQuery &q) {
    return withDim(q, 1, q.constInt(3).value_or(kUnbounded),
                   /*shrinksOnly=*/true);
  };
  t["aten::topk"] = [](const BoundQuery &q) {
    return withDim(q, 2, q.constInt(1).value_or(kUnbounded),
                   /*shrinksOnly=*/true);
  };
}
