//===- LowerDropout.cpp - training-mode dropout as the device draws it ----===//
//
// Training-mode dropout keeps its mask as a value, so that the backward uses
// the forward's mask and activation checkpointing can replay the draw. The
// mask must be the one eager PyTorch draws on the same device from the same
// generator state, and ATen's two dropout kernels draw differently:
// - on the CPU, `at::dropout` computes noise = bernoulli(x, 1 - p) / (1 - p)
//   and out = x * noise (its `_dropout_impl`);
// - on CUDA, `at::dropout` calls the fused `at::native_dropout`, which
//   returns the output and a boolean mask from its own Philox draw.
// So the lowering depends on the module's target device, and runs after
// -ds-assign-engines has set it.
//
//===----------------------------------------------------------------------===//

#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/Transforms/GradientRules.h"
#include "ds/Dialect/DS/Transforms/Passes.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSLOWERDROPOUT
#include "ds/Dialect/DS/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

/// The drop probability of a training-mode dropout whose p is a constant in
/// (0, 1); nullopt for any other (eval mode, p = 0 or 1, p computed at run
/// time), which the pass leaves alone.
std::optional<double> trainingDropProbability(AtenOp op) {
  ValueRange args = op.getArgs();
  auto p = args[1].getDefiningOp<ConstantOp>();
  auto train = args[2].getDefiningOp<ConstantOp>();
  if (!p || !train || !isa<FloatAttr>(p.getValue()) ||
      !isa<BoolAttr>(train.getValue()) ||
      !cast<BoolAttr>(train.getValue()).getValue())
    return std::nullopt;
  double drop = cast<FloatAttr>(p.getValue()).getValueAsDouble();
  if (drop <= 0.0 || drop >= 1.0)
    return std::nullopt;
  return drop;
}

Value createAten(PatternRewriter &rewriter, AtenOp like, StringRef name,
                 ValueRange operands, TypeRange resultTypes,
                 unsigned result = 0) {
  return AtenOp::create(rewriter, like.getLoc(), resultTypes, name, operands,
                        like.getModule(), like.getModuleClass())
      .getResult(result);
}

/// `aten::dropout(x, p, true)`, or an `aten::native_dropout` whose mask
/// nothing reads, as the CPU draws it.
struct DropoutAsBernoulli : OpRewritePattern<AtenOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AtenOp op,
                                PatternRewriter &rewriter) const override {
    bool native = op.getOp() == "aten::native_dropout";
    if (op.getOp() != "aten::dropout" &&
        !(native && op.getResult(1).use_empty()))
      return failure();
    std::optional<double> drop = trainingDropProbability(op);
    if (!drop)
      return failure();
    Location l = op.getLoc();
    Value x = op.getArgs()[0];
    Type type = op.getResult(0).getType();
    Value keep = ConstantOp::create(rewriter, l, rewriter.getF64Type(),
                                    rewriter.getF64FloatAttr(1.0 - *drop));
    Value none = ConstantOp::create(
        rewriter, l, ds::NoneType::get(getContext()), rewriter.getUnitAttr());
    Value bits =
        createAten(rewriter, op, "aten::bernoulli.p", {x, keep, none}, type);
    Value noise =
        createAten(rewriter, op, "aten::div.Scalar", {bits, keep}, type);
    Value out = createAten(rewriter, op, "aten::mul.Tensor", {x, noise}, type);
    rewriter.replaceAllUsesWith(op.getResult(0), out);
    rewriter.eraseOp(op);
    return success();
  }
};

/// `aten::scaled_dot_product_attention` with a constant dropout_p in (0, 1):
/// the kernels draw its mask internally, so it is written as ATen's math
/// path, which LibTorch runs for attention with dropout on the CPU, its
/// dropout an `aten::dropout(p, train=true)` on the probabilities that the
/// device's dropout pattern lowers next (emitAttentionWithDropout).
struct AttentionDropoutAsMath : OpRewritePattern<AtenOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AtenOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getOp() != "aten::scaled_dot_product_attention" ||
        op.getArgs().size() != 8)
      return failure();
    auto p = op.getArgs()[4].getDefiningOp<ConstantOp>();
    if (!p || !isa<FloatAttr>(p.getValue()))
      return failure();
    double drop = cast<FloatAttr>(p.getValue()).getValueAsDouble();
    if (drop <= 0.0 || drop >= 1.0)
      return failure();
    FailureOr<Value> out = emitAttentionWithDropout(rewriter, op, drop);
    if (failed(out))
      return failure();
    rewriter.replaceAllUsesWith(op.getResult(0), *out);
    rewriter.eraseOp(op);
    return success();
  }
};

/// `aten::dropout(x, p, true)` as CUDA draws it: `aten::native_dropout`, whose
/// mask result the gradient rule reads.
struct DropoutAsNative : OpRewritePattern<AtenOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AtenOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getOp() != "aten::dropout" || !trainingDropProbability(op))
      return failure();
    auto type = dyn_cast<RankedTensorType>(op.getResult(0).getType());
    if (!type)
      return failure();
    auto maskType = type.clone(rewriter.getI1Type());
    rewriter.replaceOp(
        op, createAten(rewriter, op, "aten::native_dropout", op.getArgs(),
                       {type, maskType}));
    return success();
  }
};

struct LowerDropoutPass
    : public mlir::ds::impl::DSLowerDropoutBase<LowerDropoutPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Attention first: its dropout is then lowered with the others.
    RewritePatternSet attention(&getContext());
    attention.add<AttentionDropoutAsMath>(&getContext());
    walkAndApplyPatterns(module, std::move(attention));
    RewritePatternSet patterns(&getContext());
    if (getTargetDevice(module) == TargetDevice::CUDA)
      patterns.add<DropoutAsNative>(&getContext());
    else
      patterns.add<DropoutAsBernoulli>(&getContext());
    walkAndApplyPatterns(module, std::move(patterns));
  }
};

} // namespace
