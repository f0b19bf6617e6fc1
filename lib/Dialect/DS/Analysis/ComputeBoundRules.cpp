//===- ComputeBoundRules.cpp - products, reductions, elementwise ops ------===//
//
// Matrix products, reductions and elementwise ops (broadcasting).
//
//===----------------------------------------------------------------------===//

#include "ShapeBoundRules.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::bounds;

namespace {

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

} // namespace

void bounds::addComputeRules(RuleTable &t, RuleTable &base) {
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
  t["aten::sum.dim_IntList"] = reduction(1, 2);
  t["aten::mean.dim"] = reduction(1, 2);
  t["aten::amax"] = reduction(1, 2);
  t["aten::amin"] = reduction(1, 2);
  t["aten::logsumexp"] = reduction(1, 2);
  t["aten::max.dim"] = reduction(1, 2);
  t["aten::min.dim"] = reduction(1, 2);
  t["aten::argmax"] = reduction(1, 2);
  t["aten::argmin"] = reduction(1, 2);
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
        "elu_backward", "mse_loss_backward", "softplus_backward",
        "native_dropout_backward",
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
  // Loss gradients have the shape of the input (operand 1, after the
  // incoming gradient).
  for (StringRef name :
       {"aten::nll_loss_backward", "aten::nll_loss2d_backward"})
    t[name] = [](const BoundQuery &q) -> MaybeBounds { return q.tensor(1); };
  // Gradients scattered back into the input's sizes (operand 1).
  for (StringRef name : {"aten::select_backward", "aten::slice_backward",
                         "aten::index_select_backward"})
    t[name] = [](const BoundQuery &q) { return q.intList(1); };
}
