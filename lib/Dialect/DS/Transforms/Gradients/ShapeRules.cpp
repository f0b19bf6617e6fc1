//===- ShapeRules.cpp - gradients of views, reductions and indexing -------===//

#include "RuleHelpers.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::detail;

namespace {

/// `g` of a reduction over `dims` (keepdim false) expanded back to `x`.
Value expandReduced(GradientBuilder &gb, Value g, Value x,
                    ArrayRef<int64_t> dims, bool keepDim) {
  int64_t rank = rankOf(x);
  if (!keepDim) {
    SmallVector<int64_t> sorted;
    for (int64_t d : dims)
      sorted.push_back(d < 0 ? d + rank : d);
    llvm::sort(sorted);
    g = unsqueezeAll(gb, g, sorted);
  }
  return gb.aten("aten::expand", {g, sizesOf(gb, x), gb.constBool(false)},
                 x.getType());
}

/// Number of elements of `x` over `dims` (all dims when empty), as a value:
/// a constant, or computed at run time from the sizes of dynamic dims (rows
/// the data chose).
Value countOver(GradientBuilder &gb, Value x, ArrayRef<int64_t> dims) {
  auto type = cast<RankedTensorType>(x.getType());
  int64_t rank = type.getRank();
  int64_t count = 1;
  bool all = dims.empty();
  if (all && !type.hasStaticShape())
    return gb.aten("aten::numel", {x}, gb.b.getI64Type());
  Value dynamic;
  for (int64_t d = 0; d < rank; ++d) {
    bool in = all || llvm::is_contained(dims, d) ||
              llvm::is_contained(dims, d - rank);
    if (!in)
      continue;
    if (!type.isDynamicDim(d)) {
      count *= type.getDimSize(d);
      continue;
    }
    Value size = gb.aten("aten::size.int", {x, gb.constInt(d)},
                         gb.b.getI64Type());
    dynamic = dynamic ? gb.aten("aten::mul.int", {dynamic, size},
                                gb.b.getI64Type())
                      : size;
  }
  if (!dynamic)
    return gb.constInt(count);
  if (count == 1)
    return dynamic;
  return gb.aten("aten::mul.int", {dynamic, gb.constInt(count)},
                 gb.b.getI64Type());
}

/// `values` (1-D) added into zeros of `like`'s elements taken flat, at the
/// flat positions `index` (1-D i64), reshaped back to `like`: the gradient
/// of reading `like`'s elements at those positions (repeated ones add up).
Value addAtFlatPositions(GradientBuilder &gb, Value like, Value index,
                         Value values) {
  auto lt = cast<RankedTensorType>(like.getType());
  int64_t n = lt.getNumElements();
  auto flatType = RankedTensorType::get({n}, lt.getElementType());
  Value zeros = gb.zerosLike(
      gb.aten("aten::reshape", {like, gb.intList({n})}, flatType));
  Value summed = gb.aten("aten::index_add",
                         {zeros, gb.constInt(0), index,
                          castTo(gb, values, lt.getElementType()),
                          gb.constInt(1)},
                         flatType);
  return reshapeLike(gb, summed, like);
}

LogicalResult reshapeBack(GradientBuilder &gb) {
  gb.setGrad(0, reshapeLike(gb, gb.resultGradOrZeros(0), gb.operand(0)));
  return success();
}

/// Gradient of ops whose results are consecutive pieces of operand 0 along
/// `dim` (split, chunk): the pieces' gradients concatenated.
LogicalResult concatPieces(GradientBuilder &gb, Value dim) {
  FailureOr<SmallVector<Value>> pieces = gb.pieceGrads();
  if (failed(pieces))
    return failure();
  Type elem = UnrankedTensorType::get(elementOf(gb.operand(0)));
  Value list = ListConstructOp::create(
      gb.b, gb.op.getLoc(), ds::ListType::get(gb.b.getContext(), elem),
      *pieces);
  gb.setGrad(0, gb.aten("aten::cat", {list, dim}, gb.operand(0).getType()));
  return success();
}

/// The type of `x[indices]` (advanced indexing, aten::index) for the index
/// list `indices` (tensors and nones), or null when it cannot be told: the
/// index tensors broadcast to one shape S, which replaces the dims they index
/// where they are adjacent and leads the result where nones separate them.
RankedTensorType indexResultType(RankedTensorType x, ArrayRef<Value> indices) {
  // Each index covers dims of x: a none or an integer tensor one, a boolean
  // mask of rank k its k dims, as the integer tensors of its nonzero
  // elements would (a data-dependent count: [?]).
  SmallVector<int64_t> broadcast;
  int64_t first = -1, last = -1, count = 0;
  int64_t firstDim = 0, lastDimEnd = 0, dim = 0;
  SmallVector<int64_t> noneDims;
  for (auto [pos, index] : llvm::enumerate(indices)) {
    if (isa<ds::NoneType>(index.getType())) {
      noneDims.push_back(dim++);
      continue;
    }
    auto t = dyn_cast<RankedTensorType>(index.getType());
    if (!t)
      return nullptr;
    SmallVector<int64_t> shape(t.getShape());
    int64_t covers = 1;
    if (t.getElementType().isSignlessInteger(1)) {
      covers = t.getRank();
      shape = {ShapedType::kDynamic};
    } else if (!t.getElementType().isSignlessInteger(64)) {
      return nullptr;
    }
    if (first < 0) {
      first = pos;
      firstDim = dim;
    }
    last = pos;
    dim += covers;
    lastDimEnd = dim;
    ++count;
    if (shape.size() > broadcast.size())
      broadcast.insert(broadcast.begin(), shape.size() - broadcast.size(), 1);
    for (size_t i = 0; i < shape.size(); ++i) {
      int64_t &b = broadcast[broadcast.size() - shape.size() + i];
      if (b == 1)
        b = shape[i];
      else if (shape[i] != 1 && shape[i] != b)
        b = ShapedType::kDynamic;
    }
  }
  if (count == 0 || dim > x.getRank())
    return nullptr;
  ArrayRef<int64_t> xs = x.getShape();
  SmallVector<int64_t> shape;
  if (last - first + 1 == count) {
    shape.append(xs.begin(), xs.begin() + firstDim);
    shape.append(broadcast);
    shape.append(xs.begin() + lastDimEnd, xs.end());
  } else {
    shape.append(broadcast);
    for (int64_t d : noneDims)
      shape.push_back(xs[d]);
    shape.append(xs.begin() + dim, xs.end());
  }
  return RankedTensorType::get(shape, x.getElementType());
}

} // namespace

void mlir::ds::rules::addShapeRules(RuleTable &t) {
  t["aten::view"] = reshapeBack;
  t["aten::reshape"] = reshapeBack;
  t["aten::view_as"] = reshapeBack;
  t["aten::reshape_as"] = reshapeBack;
  t["aten::_reshape_alias"] = reshapeBack;
  t["aten::_unsafe_view"] = reshapeBack;
  t["aten::flatten.using_ints"] = reshapeBack;
  t["aten::unflatten.int"] = reshapeBack;
  t["aten::squeeze.dim"] = reshapeBack;
  t["aten::squeeze"] = reshapeBack;
  t["aten::squeeze.dims"] = reshapeBack;
  t["aten::unsqueeze"] = reshapeBack;
  t["aten::flip"] = [](GradientBuilder &gb) {
    Value g = gb.resultGradOrZeros(0);
    gb.setGrad(0, gb.aten("aten::flip", {g, gb.operand(1)}, g.getType()));
    return success();
  };
  t["aten::roll"] = [](GradientBuilder &gb) -> LogicalResult {
    // roll(self, shifts, dims): rolled back by the negated shifts.
    auto shifts = staticIntList(gb, gb.operand(1));
    if (!shifts)
      return gb.op.emitOpError()
             << "gradient of roll with shifts computed at run time is not "
                "supported";
    for (int64_t &s : *shifts)
      s = -s;
    Value g = gb.resultGradOrZeros(0);
    gb.setGrad(0, gb.aten("aten::roll", {g, gb.intList(*shifts), gb.operand(2)},
                          g.getType()));
    return success();
  };
  t["aten::transpose.int"] = [](GradientBuilder &gb) {
    gb.setGrad(0,
               gb.aten("aten::transpose.int",
                       {gb.resultGradOrZeros(0), gb.operand(1), gb.operand(2)},
                       gb.operand(0).getType()));
    return success();
  };
  t["aten::t"] = [](GradientBuilder &gb) {
    gb.setGrad(0, gb.aten("aten::t", {gb.resultGradOrZeros(0)},
                          gb.operand(0).getType()));
    return success();
  };
  // numpy_T reverses the dims: its own inverse.
  t["aten::numpy_T"] = [](GradientBuilder &gb) {
    gb.setGrad(0, gb.aten("aten::numpy_T", {gb.resultGradOrZeros(0)},
                          gb.operand(0).getType()));
    return success();
  };
  t["aten::permute"] = [](GradientBuilder &gb) -> LogicalResult {
    auto dims = staticIntList(gb, gb.operand(1));
    if (!dims)
      return gb.op.emitOpError() << "gradient of permute needs constant dims";
    int64_t rank = dims->size();
    SmallVector<int64_t> inverse(rank);
    for (int64_t i = 0; i < rank; ++i)
      inverse[((*dims)[i] + rank) % rank] = i;
    gb.setGrad(0, gb.aten("aten::permute",
                          {gb.resultGradOrZeros(0), gb.intList(inverse)},
                          gb.operand(0).getType()));
    return success();
  };
  auto expandBack = [](GradientBuilder &gb) {
    gb.setGrad(0, gb.sumToShapeOf(gb.resultGradOrZeros(0), gb.operand(0)));
    return success();
  };
  t["aten::expand"] = expandBack;
  t["aten::expand_as"] = expandBack;
  t["aten::broadcast_tensors"] = [](GradientBuilder &gb) {
    auto elements = gb.listOperand(0);
    SmallVector<Value> grads;
    for (unsigned i = 0; i < elements.size(); ++i) {
      Value g = gb.resultGrad(i);
      grads.push_back(g ? gb.sumToShapeOf(g, elements[i]) : Value());
    }
    gb.setListGrads(0, grads);
    return success();
  };
  t["aten::sum"] = [](GradientBuilder &gb) {
    gb.setGrad(
        0, expandReduced(gb, gb.resultGradOrZeros(0), gb.operand(0), {}, true));
    return success();
  };
  t["aten::sum.dim_IntList"] = [](GradientBuilder &gb) -> LogicalResult {
    auto dims = staticIntList(gb, gb.operand(1));
    auto keep = gb.staticInt(gb.operand(2));
    if (!dims || !keep)
      return gb.op.emitOpError() << "gradient of sum needs constant dims";
    gb.setGrad(0, expandReduced(gb, gb.resultGradOrZeros(0), gb.operand(0),
                                *dims, *keep));
    return success();
  };
  t["aten::mean"] = [](GradientBuilder &gb) {
    Value e =
        expandReduced(gb, gb.resultGradOrZeros(0), gb.operand(0), {}, true);
    gb.setGrad(0, gb.aten("aten::div.Scalar",
                          {e, countOver(gb, gb.operand(0), {})},
                          gb.operand(0).getType()));
    return success();
  };
  t["aten::mean.dim"] = [](GradientBuilder &gb) -> LogicalResult {
    auto dims = staticIntList(gb, gb.operand(1));
    auto keep = gb.staticInt(gb.operand(2));
    if (!dims || !keep)
      return gb.op.emitOpError() << "gradient of mean needs constant dims";
    Value count = countOver(gb, gb.operand(0), *dims);
    Value e =
        expandReduced(gb, gb.resultGradOrZeros(0), gb.operand(0), *dims, *keep);
    gb.setGrad(
        0, gb.aten("aten::div.Scalar", {e, count}, gb.operand(0).getType()));
    return success();
  };
  t["aten::split.Tensor"] = [](GradientBuilder &gb) {
    return concatPieces(gb, gb.operand(2));
  };
  t["aten::split.sizes"] = [](GradientBuilder &gb) {
    return concatPieces(gb, gb.operand(2));
  };
  t["aten::split_with_sizes"] = [](GradientBuilder &gb) {
    return concatPieces(gb, gb.operand(2));
  };
  t["aten::chunk"] = [](GradientBuilder &gb) {
    return concatPieces(gb, gb.operand(2));
  };
  // unbind(x, dim) unpacked into one result per slice: the slices'
  // gradients stacked back along dim.
  t["aten::unbind.int"] = [](GradientBuilder &gb) -> LogicalResult {
    FailureOr<SmallVector<Value>> pieces = gb.pieceGrads();
    if (failed(pieces))
      return failure();
    Type elem = UnrankedTensorType::get(elementOf(gb.operand(0)));
    Value list = ListConstructOp::create(
        gb.b, gb.op.getLoc(), ds::ListType::get(gb.b.getContext(), elem),
        *pieces);
    gb.setGrad(0, gb.aten("aten::stack", {list, gb.operand(1)},
                          gb.operand(0).getType()));
    return success();
  };
  t["aten::cat"] = [](GradientBuilder &gb) -> LogicalResult {
    auto dim = gb.staticInt(gb.operand(1));
    if (!dim)
      return gb.op.emitOpError() << "gradient of cat needs a constant dim";
    Value g = gb.resultGradOrZeros(0);
    int64_t rank = rankOf(g);
    int64_t d = *dim < 0 ? *dim + rank : *dim;
    // Each piece's gradient is g narrowed to the piece's extent along d; a
    // piece whose extent the data decides is measured at run time, and the
    // offsets after it are sums of those sizes.
    SmallVector<Value> grads;
    int64_t offset = 0;
    Value dynamicOffset; // run-time part of the offset, or null
    Type i64 = gb.b.getI64Type();
    for (Value e : gb.listOperand(0)) {
      auto type = cast<RankedTensorType>(e.getType());
      // cat skips a 1-D empty piece beside pieces of higher rank (a cache
      // that starts as torch.tensor([])): it gets no gradient.
      if (type.getRank() != rank) {
        grads.push_back(Value());
        continue;
      }
      Value len = type.isDynamicDim(d)
                      ? gb.aten("aten::size.int", {e, gb.constInt(d)}, i64)
                      : gb.constInt(type.getDimSize(d));
      Value start = gb.constInt(offset);
      if (dynamicOffset)
        start = gb.aten("aten::add.int", {dynamicOffset, start}, i64);
      grads.push_back(gb.aten("aten::narrow", {g, gb.constInt(d), start, len},
                              e.getType()));
      if (type.isDynamicDim(d))
        dynamicOffset = dynamicOffset
                            ? gb.aten("aten::add.int", {dynamicOffset, len}, i64)
                            : len;
      else
        offset += type.getDimSize(d);
    }
    gb.setListGrads(0, grads);
    return success();
  };
  t["aten::stack"] = [](GradientBuilder &gb) -> LogicalResult {
    auto dim = gb.staticInt(gb.operand(1));
    if (!dim)
      return gb.op.emitOpError() << "gradient of stack needs a constant dim";
    Value g = gb.resultGradOrZeros(0);
    int64_t d = *dim < 0 ? *dim + rankOf(g) : *dim;
    SmallVector<Value> grads;
    int64_t i = 0;
    for (Value e : gb.listOperand(0))
      grads.push_back(gb.aten("aten::select.int",
                              {g, gb.constInt(d), gb.constInt(i++)},
                              e.getType()));
    gb.setListGrads(0, grads);
    return success();
  };
  t["aten::slice.Tensor"] = [](GradientBuilder &gb) {
    Value start = gb.operand(2), end = gb.operand(3);
    if (isa<ds::NoneType>(start.getType()))
      start = gb.constInt(0);
    if (isa<ds::NoneType>(end.getType()))
      end = gb.constInt(std::numeric_limits<int64_t>::max());
    gb.setGrad(0, gb.aten("aten::slice_backward",
                          {gb.resultGradOrZeros(0), sizesOf(gb, gb.operand(0)),
                           gb.operand(1), start, end, gb.operand(4)},
                          gb.operand(0).getType()));
    return success();
  };
  t["aten::select.int"] = [](GradientBuilder &gb) {
    gb.setGrad(0, gb.aten("aten::select_backward",
                          {gb.resultGradOrZeros(0), sizesOf(gb, gb.operand(0)),
                           gb.operand(1), gb.operand(2)},
                          gb.operand(0).getType()));
    return success();
  };
  // slice_scatter(x, src, dim, start, end, step) and select_scatter(x, src,
  // dim, index): x with src written into the slice (the importer's form of
  // an in-place write into a view). x's gradient is g with the written part
  // zeroed, src's the written part of g.
  auto scatterIntoView = [](StringRef scatter, StringRef view) {
    return [scatter, view](GradientBuilder &gb) {
      Value g = gb.resultGradOrZeros(0);
      Value src = gb.operand(1);
      SmallVector<Value> where;
      for (unsigned i = 2; i < gb.op.getArgs().size(); ++i)
        where.push_back(gb.operand(i));
      if (gb.needsGrad(0)) {
        SmallVector<Value> args = {g, gb.zerosLike(src)};
        args.append(where);
        gb.setGrad(0, gb.aten(scatter, args, gb.operand(0).getType()));
      }
      if (gb.needsGrad(1)) {
        SmallVector<Value> args = {g};
        args.append(where);
        gb.setGrad(1, gb.aten(view, args, src.getType()));
      }
      return success();
    };
  };
  t["aten::slice_scatter"] =
      scatterIntoView("aten::slice_scatter", "aten::slice.Tensor");
  t["aten::select_scatter"] =
      scatterIntoView("aten::select_scatter", "aten::select.int");
  t["aten::narrow"] = [](GradientBuilder &gb) {
    // narrow(x, dim, start, length) == slice(x, dim, start, start + length)
    Value end = gb.aten("aten::add.int", {gb.operand(2), gb.operand(3)},
                        gb.b.getI64Type());
    gb.setGrad(0, gb.aten("aten::slice_backward",
                          {gb.resultGradOrZeros(0), sizesOf(gb, gb.operand(0)),
                           gb.operand(1), gb.operand(2), end, gb.constInt(1)},
                          gb.operand(0).getType()));
    return success();
  };
  t["aten::index_select"] = [](GradientBuilder &gb) {
    Value x = gb.operand(0);
    Value zeros = gb.zerosLike(x);
    gb.setGrad(0, gb.aten("aten::index_add",
                          {zeros, gb.operand(1), gb.operand(2),
                           gb.resultGradOrZeros(0), gb.constInt(1)},
                          x.getType()));
    return success();
  };
  // x[indices] (advanced indexing): the gradient accumulates into the
  // indexed positions, as autograd's index_backward does (repeated indices
  // add up). The hacked twin (indices a Tensor[], no None: what torch.export
  // writes for `w[ids]`) accumulates with index_put's own twin.
  auto indexRule = [](StringRef put) {
    return [put](GradientBuilder &gb) -> LogicalResult {
      Value x = gb.operand(0);
      Value zeros = gb.zerosLike(x);
      gb.setGrad(0, gb.aten(put,
                            {zeros, gb.operand(1), gb.resultGradOrZeros(0),
                             gb.constBool(true)},
                            x.getType()));
      return success();
    };
  };
  t["aten::index.Tensor"] = indexRule("aten::index_put");
  t["aten::index.Tensor_hacked_twin"] = indexRule("aten::index_put.hacked_twin");
  // index_put(x, indices, values, accumulate): x with values written (or
  // added) at the indexed positions. x's gradient is g, with the
  // overwritten positions zeroed unless accumulating; the values' is
  // g[indices], summed over the dims they were broadcast along. The hacked
  // twin (run_decompositions' spelling) with its twins.
  auto indexPutRule = [](StringRef put, StringRef index) {
    return [put, index](GradientBuilder &gb) -> LogicalResult {
      Value x = gb.operand(0), values = gb.operand(2);
      Value g = gb.resultGradOrZeros(0);
      auto accumulate = gb.staticInt(gb.operand(3));
      if (!accumulate)
        return gb.op.emitOpError()
               << "gradient of index_put needs a constant accumulate flag";
      if (gb.needsGrad(0)) {
        Value keep = g;
        if (!*accumulate) {
          Value zeros = gb.zerosLike(values);
          keep = gb.aten(put, {g, gb.operand(1), zeros, gb.constBool(false)},
                         x.getType());
        }
        gb.setGrad(0, keep);
      }
      if (gb.needsGrad(2)) {
        RankedTensorType picked = indexResultType(
            cast<RankedTensorType>(g.getType()), gb.listOperand(1));
        if (!picked)
          return gb.op.emitOpError()
                 << "gradient of index_put's values needs integer or "
                    "boolean index tensors";
        Value v = gb.aten(index, {g, gb.operand(1)}, picked);
        gb.setGrad(2, gb.sumToShapeOf(v, values));
      }
      return success();
    };
  };
  t["aten::index_put"] = indexPutRule("aten::index_put", "aten::index.Tensor");
  t["aten::index_put.hacked_twin"] = indexPutRule(
      "aten::index_put.hacked_twin", "aten::index.Tensor_hacked_twin");
  t["aten::repeat_interleave.self_int"] =
      [](GradientBuilder &gb) -> LogicalResult {
    // repeat_interleave(x, r, dim): each slice along dim repeated r times in
    // place, so the gradient sums each run of r: g.unflatten(dim, [n, r])
    // .sum(dim + 1).
    Value x = gb.operand(0);
    auto repeats = gb.staticInt(gb.operand(1));
    auto dim = gb.staticInt(gb.operand(2));
    auto type = cast<RankedTensorType>(x.getType());
    if (!repeats || !dim)
      return gb.op.emitOpError()
             << "gradient of repeat_interleave needs constant repeats and a "
                "constant dim (a flattening repeat_interleave has none)";
    int64_t d = *dim < 0 ? *dim + type.getRank() : *dim;
    if (type.isDynamicDim(d))
      return gb.op.emitOpError() << "gradient of repeat_interleave along a "
                                    "dynamic dimension is not supported";
    SmallVector<int64_t> split(type.getShape());
    split.insert(split.begin() + d + 1, *repeats);
    Value g = gb.aten("aten::unflatten.int",
                      {gb.resultGradOrZeros(0), gb.constInt(d),
                       gb.intList({type.getDimSize(d), *repeats})},
                      RankedTensorType::get(split, type.getElementType()));
    gb.setGrad(0,
               gb.aten("aten::sum.dim_IntList",
                       {g, gb.intList({d + 1}), gb.constBool(false), gb.none()},
                       x.getType()));
    return success();
  };
  t["aten::index_add"] = [](GradientBuilder &gb) {
    Value g = gb.resultGradOrZeros(0);
    if (gb.needsGrad(0))
      gb.setGrad(0, g);
    if (gb.needsGrad(3)) {
      Value src =
          gb.aten("aten::index_select", {g, gb.operand(1), gb.operand(2)},
                  gb.operand(3).getType());
      gb.setGrad(3, gb.aten("aten::mul.Scalar", {src, gb.operand(4)},
                            gb.operand(3).getType()));
    }
    return success();
  };
  t["aten::gather"] = [](GradientBuilder &gb) {
    Value x = gb.operand(0);
    Value zeros = gb.zerosLike(x);
    gb.setGrad(0, gb.aten("aten::scatter_add",
                          {zeros, gb.operand(1), gb.operand(2),
                           gb.resultGradOrZeros(0)},
                          x.getType()));
    return success();
  };
  auto scatterIndices = [](GradientBuilder &gb, Value values, Value indices,
                           Value dim, bool keepDim) {
    Value x = gb.operand(0);
    if (!keepDim) {
      auto vt = cast<RankedTensorType>(values.getType());
      auto it = cast<RankedTensorType>(indices.getType());
      auto d = gb.staticInt(dim);
      int64_t dd = *d < 0 ? *d + rankOf(x) : *d;
      SmallVector<int64_t> vs(vt.getShape()), is(it.getShape());
      vs.insert(vs.begin() + dd, 1);
      is.insert(is.begin() + dd, 1);
      values = gb.aten("aten::unsqueeze", {values, gb.constInt(dd)},
                       RankedTensorType::get(vs, vt.getElementType()));
      indices = gb.aten("aten::unsqueeze", {indices, gb.constInt(dd)},
                        RankedTensorType::get(is, it.getElementType()));
    }
    Value zeros = gb.zerosLike(x);
    return gb.aten("aten::scatter_add", {zeros, dim, indices, values},
                   x.getType());
  };
  t["aten::topk"] = [scatterIndices](GradientBuilder &gb) {
    gb.setGrad(0, scatterIndices(gb, gb.resultGradOrZeros(0), gb.result(1),
                                 gb.operand(2), true));
    return success();
  };
  t["aten::max.dim"] = [scatterIndices](GradientBuilder &gb) -> LogicalResult {
    auto keep = gb.staticInt(gb.operand(2));
    if (!keep || !gb.staticInt(gb.operand(1)))
      return gb.op.emitOpError() << "gradient of max needs a constant dim";
    gb.setGrad(0, scatterIndices(gb, gb.resultGradOrZeros(0), gb.result(1),
                                 gb.operand(1), *keep));
    return success();
  };
  t["aten::repeat"] = [](GradientBuilder &gb) -> LogicalResult {
    auto repeats = staticIntList(gb, gb.operand(1));
    auto xt = cast<RankedTensorType>(gb.operand(0).getType());
    if (!repeats || !xt.hasStaticShape())
      return gb.op.emitOpError() << "gradient of repeat needs static shapes";
    // g: [r0*s0, r1*s1, ...] (leading dims of repeats beyond x's rank are
    // pure repeats) -> [r0, s0, r1, s1, ...] -> sum over the r dims.
    int64_t lead = repeats->size() - xt.getRank();
    SmallVector<int64_t> split, sumDims;
    for (int64_t i = 0; i < static_cast<int64_t>(repeats->size()); ++i) {
      int64_t s = i < lead ? 1 : xt.getDimSize(i - lead);
      sumDims.push_back(split.size());
      split.push_back((*repeats)[i]);
      split.push_back(s);
    }
    Value g = gb.resultGradOrZeros(0);
    Type elem = xt.getElementType();
    Value r = gb.aten("aten::reshape", {g, gb.intList(split)},
                      RankedTensorType::get(split, elem));
    SmallVector<int64_t> summed;
    for (size_t i = 1; i < split.size(); i += 2)
      summed.push_back(split[i]);
    Value s = gb.aten("aten::sum.dim_IntList",
                      {r, gb.intList(sumDims), gb.constBool(false), gb.none()},
                      RankedTensorType::get(summed, elem));
    gb.setGrad(0, gb.aten("aten::reshape", {s, gb.intList(xt.getShape())}, xt));
    return success();
  };
  auto padBack = [](GradientBuilder &gb) -> LogicalResult {
    auto pad = staticIntList(gb, gb.operand(1));
    if (!pad)
      return gb.op.emitOpError() << "gradient of pad needs constant padding";
    if (gb.op.getOp() == "aten::pad") {
      std::optional<StringRef> mode = staticStr(gb.operand(2));
      // F.pad(mode="reflect" | "replicate") pads the last pad.size()/2 dims
      // with reflection_padNd / replication_padNd, whose backward it takes.
      if (mode && (*mode == "reflect" || *mode == "replicate") &&
          pad->size() % 2 == 0 && pad->size() >= 2 && pad->size() <= 6) {
        std::string backward =
            (Twine("aten::") +
             (*mode == "reflect" ? "reflection" : "replication") + "_pad" +
             Twine(pad->size() / 2) + "d_backward")
                .str();
        gb.setGrad(0, gb.aten(backward,
                              {gb.resultGradOrZeros(0), gb.operand(0),
                               gb.operand(1)},
                              gb.operand(0).getType()));
        return success();
      }
      if (!mode || *mode != "constant")
        return gb.op.emitOpError()
               << "gradient of pad supports modes 'constant', 'reflect' and "
                  "'replicate' only";
    }
    SmallVector<int64_t> negated;
    for (int64_t p : *pad)
      negated.push_back(-p);
    gb.setGrad(0, gb.aten("aten::constant_pad_nd",
                          {gb.resultGradOrZeros(0), gb.intList(negated),
                           gb.constFloat(0.0)},
                          gb.operand(0).getType()));
    return success();
  };
  // masked_select(self, mask): the gradient in the chosen positions of zeros
  // of the broadcast shape (masked_scatter, as autograd's
  // masked_select_backward), summed back to self's shape.
  t["aten::masked_select"] = [](GradientBuilder &gb) -> LogicalResult {
    Value self = gb.operand(0), mask = gb.operand(1);
    auto st = cast<RankedTensorType>(self.getType());
    auto mt = cast<RankedTensorType>(mask.getType());
    // A mask of self's shape (`x[x > 0]`) needs no broadcast, dynamic dims
    // or not.
    if (st.getShape() == mt.getShape()) {
      Value scattered = gb.aten(
          "aten::masked_scatter",
          {gb.zerosLike(self), mask, gb.resultGradOrZeros(0)}, st);
      gb.setGrad(0, scattered);
      return success();
    }
    if (!st.hasStaticShape() || !mt.hasStaticShape())
      return gb.op.emitOpError() << "gradient of masked_select needs a mask "
                                    "of self's shape or static shapes";
    // The broadcast shape, aligned at the last dim.
    int64_t rank = std::max(st.getRank(), mt.getRank());
    SmallVector<int64_t> shape(rank, 1);
    for (auto t : {st, mt})
      for (int64_t d = 0; d < t.getRank(); ++d) {
        int64_t &out = shape[rank - t.getRank() + d];
        out = std::max(out, t.getDimSize(d));
      }
    auto full = RankedTensorType::get(shape, st.getElementType());
    Value base = self;
    if (full != st)
      base = gb.aten("aten::expand",
                     {self, gb.intList(shape), gb.constBool(false)}, full);
    Value scattered =
        gb.aten("aten::masked_scatter",
                {gb.zerosLike(base), mask, gb.resultGradOrZeros(0)}, full);
    gb.setGrad(0, gb.sumToShapeOf(scattered, self));
    return success();
  };
  // diagonal(x, offset, dim1, dim2): the gradient on that diagonal of zeros.
  t["aten::diagonal"] = [](GradientBuilder &gb) {
    Value x = gb.operand(0);
    gb.setGrad(0, gb.aten("aten::diagonal_backward",
                          {gb.resultGradOrZeros(0), sizesOf(gb, x),
                           gb.operand(1), gb.operand(2), gb.operand(3)},
                          x.getType()));
    return success();
  };
  // as_strided(x, size, stride, offset?): result element i reads x's
  // storage at offset + sum_k i_k * stride_k. On a contiguous x (the rule's
  // assumption: torch.export's programs take it of fresh tensors) the same
  // view of arange(numel) names those positions, and the gradient adds each
  // result element's gradient there (index_add: overlapping windows
  // accumulate, as autograd's as_strided_backward does).
  t["aten::as_strided"] = [](GradientBuilder &gb) -> LogicalResult {
    Value x = gb.operand(0);
    auto xt = cast<RankedTensorType>(x.getType());
    auto out = cast<RankedTensorType>(gb.result(0).getType());
    if (!xt.hasStaticShape() || !out.hasStaticShape())
      return gb.op.emitOpError()
             << "gradient of as_strided needs static shapes";
    int64_t n = xt.getNumElements(), m = out.getNumElements();
    Type i64 = gb.b.getI64Type();
    Value positions = gb.aten(
        "aten::arange",
        {gb.constInt(n), gb.constInt(scalarTypeCode(i64)), gb.none(),
         gb.none(), gb.none()},
        RankedTensorType::get({n}, i64));
    Value picked = gb.aten("aten::as_strided",
                           {positions, gb.operand(1), gb.operand(2),
                            gb.operand(3)},
                           out.clone(i64));
    Value flatIndex = gb.aten("aten::reshape", {picked, gb.intList({m})},
                              RankedTensorType::get({m}, i64));
    Value flatGrad = gb.aten(
        "aten::reshape", {gb.resultGradOrZeros(0), gb.intList({m})},
        RankedTensorType::get({m}, xt.getElementType()));
    gb.setGrad(0, addAtFlatPositions(gb, x, flatIndex, flatGrad));
    return success();
  };
  // masked_scatter(self, mask, source): self keeps its gradient where the
  // mask is false; source element k went to the k-th true position (in
  // row-major order), so its gradient is g there: position k of each true
  // element is its running count minus one, and the gradients are added
  // into a flat source at those positions (false ones add zero).
  t["aten::masked_scatter"] = [](GradientBuilder &gb) -> LogicalResult {
    Value self = gb.operand(0), mask = gb.operand(1), src = gb.operand(2);
    Value g = gb.resultGradOrZeros(0);
    auto gt = cast<RankedTensorType>(g.getType());
    auto st = cast<RankedTensorType>(src.getType());
    if (!gt.hasStaticShape() || !st.hasStaticShape())
      return gb.op.emitOpError()
             << "gradient of masked_scatter needs static shapes";
    Value fullMask = gb.aten("aten::expand",
                             {mask, gb.intList(gt.getShape()),
                              gb.constBool(false)},
                             gt.clone(gb.b.getI1Type()));
    if (gb.needsGrad(0))
      gb.setGrad(0, gb.sumToShapeOf(
                        gb.aten("aten::masked_fill.Scalar",
                                {g, fullMask, gb.constFloat(0.0)}, gt),
                        self));
    if (!gb.needsGrad(2))
      return success();
    int64_t m = gt.getNumElements();
    Type i64 = gb.b.getI64Type();
    auto flatMaskType = RankedTensorType::get({m}, gb.b.getI1Type());
    auto flatIndexType = RankedTensorType::get({m}, i64);
    Value flatMask = gb.aten("aten::reshape", {fullMask, gb.intList({m})},
                             flatMaskType);
    Value count = gb.aten("aten::cumsum",
                          {flatMask, gb.constInt(0),
                           gb.constInt(scalarTypeCode(i64))},
                          flatIndexType);
    Value position = gb.aten(
        "aten::clamp_min",
        {gb.aten("aten::sub.Scalar",
                 {count, gb.constInt(1), gb.constInt(1)}, flatIndexType),
         gb.constInt(0)},
        flatIndexType);
    auto flatGradType = RankedTensorType::get({m}, gt.getElementType());
    Value flatGrad = gb.aten(
        "aten::masked_fill.Scalar",
        {gb.aten("aten::reshape", {g, gb.intList({m})}, flatGradType),
         gb.aten("aten::logical_not", {flatMask}, flatMaskType),
         gb.constFloat(0.0)},
        flatGradType);
    gb.setGrad(2, addAtFlatPositions(gb, src, position, flatGrad));
    return success();
  };
  t["aten::pad"] = padBack;
  t["aten::constant_pad_nd"] = padBack;
}
