//===- ViewBoundRules.cpp - views, joins and pieces -----------------------===//
//
// Reshapes, squeezes, permutations, expansion, cat / stack and split: the
// result holds the input's entries rearranged.
//
//===----------------------------------------------------------------------===//

#include "ShapeBoundRules.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::bounds;

namespace {

/// An entry of reshape's size list known exactly: a non-negative constant.
std::optional<int64_t> exactEntry(const BoundQuery &q, int64_t d) {
  std::optional<SmallVector<Value>> entries = q.listElements(1);
  if (!entries || d >= int64_t(entries->size()))
    return std::nullopt;
  auto constant = (*entries)[d].getDefiningOp<ConstantOp>();
  auto attr = constant ? dyn_cast<IntegerAttr>(constant.getValue()) : nullptr;
  if (!attr || attr.getInt() < 0)
    return std::nullopt;
  return attr.getInt();
}

/// reshape / view: a dim the result type leaves dynamic is its list entry's
/// bound; the inferred one (-1), or the only one not known exactly, is
/// numel(x) over the exact ones (static dims, constant entries; the others
/// hold at least one element each, or ATen rejects the -1).
MaybeBounds reshape(const BoundQuery &q) {
  auto type = dyn_cast<RankedTensorType>(q.op->getResult(0).getType());
  if (!type)
    return std::nullopt;
  std::optional<Bounds> sizes = q.intList(1);
  if (sizes && int64_t(sizes->size()) != type.getRank())
    sizes.reset();
  int64_t exactProduct = 1, inexactDims = 0;
  for (auto [d, size] : llvm::enumerate(type.getShape())) {
    std::optional<int64_t> exact =
        ShapedType::isDynamic(size) ? exactEntry(q, d) : size;
    if (exact)
      exactProduct = mulBounds(exactProduct, *exact);
    else
      ++inexactDims;
  }
  int64_t rest = kUnbounded;
  std::optional<int64_t> numel = q.numel(0);
  if (numel && exactProduct > 0 && exactProduct != kUnbounded)
    rest = *numel / exactProduct;
  Bounds out;
  for (auto [d, size] : llvm::enumerate(type.getShape())) {
    int64_t entry = sizes ? (*sizes)[d] : kUnbounded;
    if (!ShapedType::isDynamic(size))
      out.push_back(size);
    else if (entry >= 0)
      out.push_back(entry);
    else if (entry == -1 || inexactDims == 1)
      out.push_back(rest);
    else
      out.push_back(kUnbounded);
  }
  return out;
}

/// cat / stack: the pieces' dims agree except along `dim` (cat sums it,
/// stack inserts their count).
MaybeBounds joinPieces(const BoundQuery &q, bool stack) {
  std::optional<SmallVector<Value>> pieces = q.listElements(0);
  std::optional<int64_t> dim = q.constInt(1);
  if (!pieces || pieces->empty() || !dim)
    return std::nullopt;
  Bounds out;
  int64_t d = -1;
  for (Value piece : *pieces) {
    Bounds shape = q.analysis.getBounds(piece);
    if (shape.empty() && !stack) // ATen's cat skips empty 1-d legacy pieces.
      continue;
    if (out.empty()) {
      out = shape;
      d = normalizeDim(*dim, shape.size() + (stack ? 1 : 0));
      if (d < 0)
        return std::nullopt;
      if (stack)
        out.insert(out.begin() + d, 0);
      else
        out[d] = 0;
    }
    if (shape.size() + (stack ? 1 : 0) != out.size())
      return std::nullopt;
    for (size_t i = 0, j = 0; i < out.size(); ++i) {
      if (int64_t(i) == d) {
        out[i] = addBounds(out[i], stack ? 1 : shape[j++]);
        continue;
      }
      out[i] = minBounds(out[i], shape[j++]);
    }
  }
  if (out.empty())
    return std::nullopt;
  return out;
}

} // namespace

void bounds::addViewRules(RuleTable &t) {
  t["aten::reshape"] = reshape;
  t["aten::view"] = reshape;
  t["aten::_reshape_alias"] = reshape;
  t["aten::squeeze.dim"] = [](const BoundQuery &q) -> MaybeBounds {
    Bounds x = q.tensor(0);
    int64_t d = q.dim(1, x.size());
    if (d < 0)
      return std::nullopt;
    if (q.resultRank() == int64_t(x.size()) - 1)
      x.erase(x.begin() + d);
    return x;
  };
  // The result type says which dims went: those of static size 1.
  t["aten::squeeze"] = [](const BoundQuery &q) -> MaybeBounds {
    auto type = cast<RankedTensorType>(q.arg(0).getType());
    Bounds x = q.tensor(0), out;
    for (auto [d, size] : llvm::enumerate(type.getShape()))
      if (size != 1)
        out.push_back(x[d]);
    if (int64_t(out.size()) != q.resultRank())
      return std::nullopt;
    return out;
  };
  t["aten::unsqueeze"] = [](const BoundQuery &q) -> MaybeBounds {
    Bounds x = q.tensor(0);
    int64_t d = q.dim(1, x.size() + 1);
    if (d < 0)
      return std::nullopt;
    x.insert(x.begin() + d, 1);
    return x;
  };
  t["aten::transpose.int"] = [](const BoundQuery &q) -> MaybeBounds {
    Bounds x = q.tensor(0);
    int64_t da = q.dim(1, x.size());
    int64_t db = q.dim(2, x.size());
    if (da < 0 || db < 0)
      return std::nullopt;
    std::swap(x[da], x[db]);
    return x;
  };
  t["aten::t"] = [](const BoundQuery &q) -> MaybeBounds {
    Bounds x = q.tensor(0);
    std::reverse(x.begin(), x.end());
    return x;
  };
  t["aten::permute"] = [](const BoundQuery &q) -> MaybeBounds {
    Bounds x = q.tensor(0), out;
    std::optional<Bounds> dims = q.intList(1);
    if (!dims || dims->size() != x.size())
      return std::nullopt;
    for (int64_t dim : *dims) {
      int64_t d = dim == kUnbounded ? -1 : normalizeDim(dim, x.size());
      if (d < 0)
        return std::nullopt;
      out.push_back(x[d]);
    }
    return out;
  };
  t["aten::flatten.using_ints"] = [](const BoundQuery &q) -> MaybeBounds {
    Bounds x = q.tensor(0);
    if (x.empty())
      return Bounds{1};
    int64_t s = q.dim(1, x.size());
    int64_t e = q.dim(2, x.size());
    if (s < 0 || e < s)
      return std::nullopt;
    Bounds out(x.begin(), x.begin() + s);
    out.push_back(
        product(ArrayRef(x).slice(s, e - s + 1)).value_or(kUnbounded));
    out.append(x.begin() + e + 1, x.end());
    return out;
  };
  // -1 among the sizes is at most the whole dim (the others are >= 1).
  t["aten::unflatten.int"] = [](const BoundQuery &q) -> MaybeBounds {
    Bounds x = q.tensor(0);
    std::optional<Bounds> sizes = q.intList(2);
    int64_t d = q.dim(1, x.size());
    if (d < 0 || !sizes)
      return std::nullopt;
    Bounds out(x.begin(), x.begin() + d);
    for (int64_t size : *sizes)
      out.push_back(size == -1 ? x[d] : size);
    out.append(x.begin() + d + 1, x.end());
    return out;
  };
  // -1 keeps the aligned dim of x.
  auto expand = [](const BoundQuery &q) -> MaybeBounds {
    Bounds x = q.tensor(0);
    std::optional<Bounds> sizes = q.intList(1);
    if (!sizes || sizes->size() < x.size())
      return std::nullopt;
    size_t lead = sizes->size() - x.size();
    Bounds out = *sizes;
    for (size_t i = lead; i < out.size(); ++i)
      if (out[i] == -1)
        out[i] = x[i - lead];
    return out;
  };
  t["aten::expand"] = expand;
  t["aten::broadcast_to"] = expand;
  t["aten::expand_as"] = [](const BoundQuery &q) -> MaybeBounds {
    return q.tensor(1);
  };
  // Sums down to the sizes: never more than x's aligned dim.
  t["aten::sum_to_size"] = [](const BoundQuery &q) -> MaybeBounds {
    Bounds x = q.tensor(0);
    int64_t rank = q.resultRank();
    if (rank < 0 || rank > int64_t(x.size()))
      return std::nullopt;
    std::optional<Bounds> sizes = q.intList(1);
    Bounds out(x.end() - rank, x.end());
    if (sizes && int64_t(sizes->size()) == rank)
      for (auto [o, size] : llvm::zip(out, *sizes))
        o = minBounds(o, size < 0 ? kUnbounded : size);
    return out;
  };
  t["aten::repeat"] = [](const BoundQuery &q) -> MaybeBounds {
    Bounds x = q.tensor(0);
    std::optional<Bounds> reps = q.intList(1);
    if (!reps || reps->size() < x.size())
      return std::nullopt;
    Bounds out = *reps;
    size_t lead = out.size() - x.size();
    for (size_t i = lead; i < out.size(); ++i)
      out[i] = mulBounds(out[i], x[i - lead]);
    return out;
  };
  t["aten::cat"] = [](const BoundQuery &q) { return joinPieces(q, false); };
  t["aten::stack"] = [](const BoundQuery &q) { return joinPieces(q, true); };
  // Each piece is at most the whole.
  for (StringRef name :
       {"aten::split", "aten::split.Tensor", "aten::split.sizes",
        "aten::split_with_sizes", "aten::chunk"})
    t[name] = likeOperand0;
}
