//===- ShapeBoundRules.cpp - per-operator rules of ShapeBounds ------------===//
//
// Keyed as the gradient table is (lib/Dialect/DS/Transforms/Gradients): by
// qualified name with overload; elementwise and shape-preserving operators
// are keyed by their name without it, so every overload shares the rule.
// Every rule is an upper bound of what ATen computes for any data.
//
//===----------------------------------------------------------------------===//

#include "ShapeBoundRules.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::bounds;

using Bounds = SmallVector<int64_t>;
using MaybeBounds = std::optional<Bounds>;

//===----------------------------------------------------------------------===//
// Arithmetic and the query
//===----------------------------------------------------------------------===//

int64_t bounds::addBounds(int64_t a, int64_t b) {
  int64_t sum;
  if (a == kUnbounded || b == kUnbounded || llvm::AddOverflow(a, b, sum))
    return kUnbounded;
  return sum;
}

int64_t bounds::mulBounds(int64_t a, int64_t b) {
  int64_t product;
  if (a == kUnbounded || b == kUnbounded || llvm::MulOverflow(a, b, product))
    return kUnbounded;
  return product;
}

int64_t bounds::maxBounds(int64_t a, int64_t b) {
  return a == kUnbounded || b == kUnbounded ? kUnbounded : std::max(a, b);
}

int64_t bounds::minBounds(int64_t a, int64_t b) {
  if (a == kUnbounded)
    return b;
  if (b == kUnbounded)
    return a;
  return std::min(a, b);
}

std::optional<int64_t> bounds::product(ArrayRef<int64_t> dims) {
  int64_t numel = 1;
  for (int64_t dim : dims)
    numel = mulBounds(numel, dim);
  if (numel == kUnbounded)
    return std::nullopt;
  return numel;
}

std::optional<int64_t> BoundQuery::constInt(unsigned i) const {
  if (i >= numArgs())
    return std::nullopt;
  if (auto constant = arg(i).getDefiningOp<ConstantOp>())
    if (auto attr = dyn_cast<IntegerAttr>(constant.getValue()))
      return attr.getInt();
  return std::nullopt;
}

std::optional<bool> BoundQuery::constBool(unsigned i) const {
  if (i >= numArgs())
    return std::nullopt;
  if (auto constant = arg(i).getDefiningOp<ConstantOp>()) {
    if (auto attr = dyn_cast<BoolAttr>(constant.getValue()))
      return attr.getValue();
    if (auto attr = dyn_cast<IntegerAttr>(constant.getValue()))
      return attr.getInt() != 0;
  }
  return std::nullopt;
}

std::optional<SmallVector<Value>> BoundQuery::listElements(unsigned i) const {
  if (i >= numArgs())
    return std::nullopt;
  auto construct = arg(i).getDefiningOp<ListConstructOp>();
  if (!construct)
    return std::nullopt;
  return SmallVector<Value>(construct.getElements());
}

int64_t BoundQuery::resultRank() const {
  if (op->getNumResults() == 0)
    return -1;
  auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  return type ? type.getRank() : -1;
}

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

namespace {

/// `dim` counted from the front of `rank` dims, or -1 if out of range.
int64_t normalizeDim(int64_t dim, int64_t rank) {
  int64_t d = dim < 0 ? dim + rank : dim;
  return d >= 0 && d < rank ? d : -1;
}

/// NumPy broadcasting of bounds: an aligned dim is at most the largest of
/// the operands' (a size 1 stretches to the other size).
Bounds broadcastBounds(ArrayRef<Bounds> shapes) {
  size_t rank = 0;
  for (const Bounds &shape : shapes)
    rank = std::max(rank, shape.size());
  // 0 is below every bound: a dim an operand lacks does not count.
  Bounds out(rank, 0);
  for (const Bounds &shape : shapes)
    for (size_t i = 0; i < shape.size(); ++i) {
      size_t d = rank - shape.size() + i;
      out[d] = maxBounds(out[d], shape[i]);
    }
  return out;
}

/// Every ranked tensor operand broadcast together (elementwise ops).
MaybeBounds broadcastOperands(const BoundQuery &q) {
  SmallVector<Bounds> shapes;
  for (unsigned i = 0; i < q.numArgs(); ++i) {
    Type type = q.arg(i).getType();
    if (isa<UnrankedTensorType>(type))
      return std::nullopt;
    if (isa<RankedTensorType>(type))
      shapes.push_back(q.tensor(i));
  }
  if (shapes.empty())
    return std::nullopt;
  return broadcastBounds(shapes);
}

MaybeBounds likeOperand0(const BoundQuery &q) { return q.tensor(0); }

/// Result of reducing `x` over `dims` (removed, or kept as 1).
MaybeBounds reduce(Bounds x, ArrayRef<int64_t> dims, bool keepDim) {
  int64_t rank = x.size();
  SmallVector<bool> reduced(rank, dims.empty());
  for (int64_t dim : dims) {
    int64_t d = normalizeDim(dim, rank);
    if (d < 0)
      return std::nullopt;
    reduced[d] = true;
  }
  Bounds out;
  for (int64_t d = 0; d < rank; ++d)
    if (!reduced[d])
      out.push_back(x[d]);
    else if (keepDim)
      out.push_back(1);
  return out;
}

/// A reduction whose dims are operand `dimArg` (an int or an int list) and
/// whose keepdim flag is operand `keepArg`.
BoundRule reduction(unsigned dimArg, unsigned keepArg) {
  return [=](const BoundQuery &q) -> MaybeBounds {
    std::optional<bool> keep = q.constBool(keepArg);
    if (!keep)
      return std::nullopt;
    if (std::optional<int64_t> dim = q.constInt(dimArg))
      return reduce(q.tensor(0), {*dim}, *keep);
    std::optional<Bounds> dims = q.intList(dimArg);
    if (!dims || llvm::is_contained(*dims, kUnbounded))
      return std::nullopt;
    return reduce(q.tensor(0), *dims, *keep);
  };
}

/// Replaces `x`'s dim `dimArg` with `size`, the smaller of the two when
/// `shrinksOnly` (slices and top-k never grow a dim).
MaybeBounds withDim(const BoundQuery &q, unsigned dimArg, int64_t size,
                    bool shrinksOnly) {
  Bounds x = q.tensor(0);
  std::optional<int64_t> dim = q.constInt(dimArg);
  int64_t d = dim ? normalizeDim(*dim, x.size()) : -1;
  if (d < 0)
    return shrinksOnly ? MaybeBounds(x) : std::nullopt;
  x[d] = shrinksOnly ? minBounds(x[d], size) : size;
  return x;
}

/// reshape / view: a dim the result type leaves dynamic is its list entry's
/// bound; the inferred one (-1), or the only dynamic one, is numel(x) over
/// the result's static dims (the others hold at least one element each, or
/// ATen rejects the -1).
MaybeBounds reshape(const BoundQuery &q) {
  auto type = dyn_cast<RankedTensorType>(q.op->getResult(0).getType());
  if (!type)
    return std::nullopt;
  std::optional<Bounds> sizes = q.intList(1);
  if (sizes && int64_t(sizes->size()) != type.getRank())
    sizes.reset();
  int64_t staticProduct = 1, dynamicDims = 0;
  for (int64_t size : type.getShape())
    if (ShapedType::isDynamic(size))
      ++dynamicDims;
    else
      staticProduct = mulBounds(staticProduct, size);
  int64_t rest = kUnbounded;
  std::optional<int64_t> numel = q.numel(0);
  if (numel && staticProduct > 0 && staticProduct != kUnbounded)
    rest = *numel / staticProduct;
  Bounds out;
  for (auto [d, size] : llvm::enumerate(type.getShape())) {
    int64_t entry = sizes ? (*sizes)[d] : kUnbounded;
    if (!ShapedType::isDynamic(size))
      out.push_back(size);
    else if (entry >= 0)
      out.push_back(entry);
    else if (entry == -1 || dynamicDims == 1)
      out.push_back(rest);
    else
      out.push_back(kUnbounded);
  }
  return out;
}

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

MaybeBounds matmul(const BoundQuery &q) {
  Bounds a = q.tensor(0), b = q.tensor(1);
  if (a.empty() || b.empty())
    return std::nullopt;
  if (a.size() == 1 && b.size() == 1)
    return Bounds{};
  if (b.size() == 1) {
    a.pop_back();
    return a;
  }
  if (a.size() == 1) {
    b.erase(b.end() - 2);
    return b;
  }
  Bounds batch = broadcastBounds(
      {Bounds(a.begin(), a.end() - 2), Bounds(b.begin(), b.end() - 2)});
  batch.push_back(a[a.size() - 2]);
  batch.push_back(b.back());
  return batch;
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

//===----------------------------------------------------------------------===//
// The tables
//===----------------------------------------------------------------------===//

void addProducerRules(llvm::StringMap<BoundRule> &t) {
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
}

void addIndexingRules(llvm::StringMap<BoundRule> &t) {
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
    std::optional<int64_t> dim = q.constInt(1);
    int64_t d = dim ? normalizeDim(*dim, x.size()) : -1;
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

void addViewRules(llvm::StringMap<BoundRule> &t) {
  t["aten::reshape"] = reshape;
  t["aten::view"] = reshape;
  t["aten::_reshape_alias"] = reshape;
  t["aten::squeeze.dim"] = [](const BoundQuery &q) -> MaybeBounds {
    Bounds x = q.tensor(0);
    std::optional<int64_t> dim = q.constInt(1);
    int64_t d = dim ? normalizeDim(*dim, x.size()) : -1;
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
    std::optional<int64_t> dim = q.constInt(1);
    int64_t d = dim ? normalizeDim(*dim, x.size() + 1) : -1;
    if (d < 0)
      return std::nullopt;
    x.insert(x.begin() + d, 1);
    return x;
  };
  t["aten::transpose.int"] = [](const BoundQuery &q) -> MaybeBounds {
    Bounds x = q.tensor(0);
    std::optional<int64_t> a = q.constInt(1), b = q.constInt(2);
    int64_t da = a ? normalizeDim(*a, x.size()) : -1;
    int64_t db = b ? normalizeDim(*b, x.size()) : -1;
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
    std::optional<int64_t> start = q.constInt(1), end = q.constInt(2);
    int64_t s = start ? normalizeDim(*start, x.size()) : -1;
    int64_t e = end ? normalizeDim(*end, x.size()) : -1;
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
    std::optional<int64_t> dim = q.constInt(1);
    std::optional<Bounds> sizes = q.intList(2);
    int64_t d = dim ? normalizeDim(*dim, x.size()) : -1;
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

void addMatmulRules(llvm::StringMap<BoundRule> &t) {
  t["aten::linear"] = [](const BoundQuery &q) -> MaybeBounds {
    Bounds x = q.tensor(0), weight = q.tensor(1);
    if (x.empty())
      return std::nullopt;
    x.back() = weight.size() == 2 ? weight[0] : kUnbounded;
    return x;
  };
  t["aten::matmul"] = matmul;
  // Rows of operand `a`, columns of operand `a + 1`.
  auto mm = [](unsigned a) -> BoundRule {
    return [a](const BoundQuery &q) -> MaybeBounds {
      Bounds lhs = q.tensor(a), rhs = q.tensor(a + 1);
      if (lhs.size() != 2 || rhs.size() != 2)
        return std::nullopt;
      return Bounds{lhs[0], rhs[1]};
    };
  };
  t["aten::mm"] = mm(0);
  t["aten::mm.dtype"] = mm(0);
  t["aten::bmm"] = [](const BoundQuery &q) -> MaybeBounds {
    Bounds a = q.tensor(0), b = q.tensor(1);
    if (a.size() != 3 || b.size() != 3)
      return std::nullopt;
    return Bounds{maxBounds(a[0], b[0]), a[1], b[2]};
  };
  t["aten::addmm"] = mm(1);
}

void addReductionRules(llvm::StringMap<BoundRule> &t) {
  t["aten::sum.dim_IntList"] = reduction(1, 2);
  t["aten::mean.dim"] = reduction(1, 2);
  t["aten::amax"] = reduction(1, 2);
  t["aten::amin"] = reduction(1, 2);
  t["aten::logsumexp"] = reduction(1, 2);
  t["aten::max.dim"] = reduction(1, 2);
  t["aten::min.dim"] = reduction(1, 2);
  t["aten::argmax"] = reduction(1, 2);
  t["aten::argmin"] = reduction(1, 2);
}

/// Operators whose result has the broadcast shape of their tensor operands
/// (unary ones: the operand's), by name without overload (`base`), and
/// overloads of others that broadcast (`t`).
void addElementwiseRules(llvm::StringMap<BoundRule> &t,
                         llvm::StringMap<BoundRule> &base) {
  for (StringRef name :
       {// Arithmetic, comparison, logic.
        "add", "sub", "rsub", "mul", "div", "true_divide", "floor_divide",
        "remainder", "fmod", "pow", "maximum", "minimum", "eq", "ne", "lt",
        "le", "gt", "ge", "logical_and", "logical_or", "logical_xor",
        "logical_not", "bitwise_and", "bitwise_or", "bitwise_not", "__and__",
        "__or__", "masked_fill", "clamp", "clamp_min", "clamp_max", "lerp",
        "addcmul", "addcdiv",
        // Unary math and activations.
        "neg", "abs", "exp", "log", "log1p", "log2", "sqrt", "rsqrt", "sin",
        "cos", "tanh", "sigmoid", "relu", "relu6", "gelu", "silu", "mish",
        "softplus", "leaky_relu", "elu", "hardtanh", "hardsigmoid", "hardswish",
        "erf", "reciprocal", "sign", "square", "softmax", "log_softmax",
        "_softmax", "_log_softmax", "dropout", "native_dropout", "bernoulli",
        // Backward ops autodiff emits.
        "_softmax_backward_data", "_log_softmax_backward_data", "silu_backward",
        "gelu_backward", "sigmoid_backward", "tanh_backward",
        "threshold_backward", "leaky_relu_backward", "hardtanh_backward",
        "elu_backward", "mse_loss_backward",
        // Same shape, new values.
        "zeros_like", "ones_like", "empty_like", "full_like", "rand_like",
        "randn_like", "fill", "clone", "contiguous", "detach", "alias"})
    base[("aten::" + name).str()] = broadcastOperands;
  // torch.where(c, a, b) broadcasts; torch.where(c) is a producer.
  for (StringRef name :
       {"aten::where.self", "aten::where.Scalar", "aten::where.ScalarOther",
        "aten::where.ScalarSelf", "aten::max.other", "aten::min.other"})
    t[name] = broadcastOperands;
  // The shape of operand 0 whatever the others are.
  for (StringRef name :
       {"aten::to", "aten::type_as", "aten::scatter", "aten::cumsum",
        "aten::cumprod", "aten::sort", "aten::argsort", "aten::flip",
        "aten::roll", "aten::layer_norm", "aten::rms_norm", "aten::group_norm",
        "aten::batch_norm", "aten::instance_norm"})
    base[name] = likeOperand0;
}

struct RuleTables {
  /// By qualified name with overload.
  llvm::StringMap<BoundRule> exact;
  /// By name without overload: every overload.
  llvm::StringMap<BoundRule> base;
};

const RuleTables &ruleTables() {
  static const RuleTables tables = [] {
    RuleTables t;
    addProducerRules(t.exact);
    addIndexingRules(t.exact);
    addViewRules(t.exact);
    addMatmulRules(t.exact);
    addReductionRules(t.exact);
    addElementwiseRules(t.exact, t.base);
    return t;
  }();
  return tables;
}

} // namespace

const BoundRule *bounds::lookupBoundRule(StringRef name) {
  const RuleTables &tables = ruleTables();
  if (auto it = tables.exact.find(name); it != tables.exact.end())
    return &it->second;
  StringRef base = name.take_front(name.find('.', name.find("::")));
  if (auto it = tables.base.find(base); it != tables.base.end())
    return &it->second;
  return nullptr;
}
