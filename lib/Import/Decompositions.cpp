//===- Decompositions.cpp - rewrites of imported operators ----------------===//
//
// The importer emits operators as the model calls them; these patterns
// rewrite the ones the runtime and the autodiff take apart, once, on the
// module the importer built (as torch-mlir's DecomposeComplexOps does):
//
// - `aten::_native_batch_norm_legit_functional` (training-mode batch norm with
//   its running statistics, from the TorchScript importer or a core-ATen
//   program): a batch_norm without running statistics, the
//   unbiased batch variance and mean (`aten::var_mean.correction`, as PyTorch
//   updates the running variance) and `running = lerp(running, batch_stat,
//   momentum)` for both statistics; in eval mode, a batch_norm with the
//   running statistics, which stay;
// - `aten::_convolution` (what `torch.jit.trace` records for a convolution
//   module) and `aten::convolution` (a core-ATen program's) that are not
//   transposed: `aten::conv1d` / `aten::conv2d` by the
//   input's rank, the op a scripted module calls (its benchmark, deterministic,
//   cudnn and tf32 flags do not change CPU results);
// - `aten::to.device` and `aten::to.dtype_layout` (a trace records
//   `x.to(other.device)` with the device it ran on): `aten::to.dtype`, or x
//   itself when no dtype is given; `aten::_to_copy` (a core-ATen program's
//   `x.to(...)`): `aten::to.dtype` with copy, `aten::clone` without a dtype.
//   A plan is device-neutral and
//   every tensor of a run lives on the run's device;
// - `aten::native_layer_norm` and `aten::max_pool2d_with_indices` (core
//   ATen's) whose statistics or indices nothing reads: `aten::layer_norm` and
//   `aten::max_pool2d`;
// - `aten::copy(self, src)` (a core-ATen program's buffer write) where src
//   has self's type: src.
//
//===----------------------------------------------------------------------===//

#include "ImportInternal.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/Utils/DTypeInference.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::import;

/// A `ds.aten` at `like`'s location, tagged with its module.
static Value createAten(PatternRewriter &rewriter, AtenOp like, StringRef name,
                        ValueRange operands, Type resultType) {
  return AtenOp::create(rewriter, like.getLoc(), resultType, name, operands,
                        like.getModule(), like.getModuleClass())
      .getResult(0);
}

namespace {

struct DecomposeBatchNormFunctional : OpRewritePattern<AtenOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AtenOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getOp() != "aten::_native_batch_norm_legit_functional" ||
        op.getNumResults() != 5 || !op.getResult(1).use_empty() ||
        !op.getResult(2).use_empty())
      return failure();
    auto inputType = dyn_cast<RankedTensorType>(op.getArgs()[0].getType());
    if (!inputType)
      return failure();

    Location l = op.getLoc();
    ValueRange args = op.getArgs();
    Value input = args[0], runningMean = args[3], runningVar = args[4],
          training = args[5], momentum = args[6], eps = args[7];
    Value none = ConstantOp::create(
        rewriter, l, ds::NoneType::get(getContext()), rewriter.getUnitAttr());
    Value cudnnEnabled = ConstantOp::create(rewriter, l, rewriter.getI1Type(),
                                            rewriter.getBoolAttr(true));
    auto mode = training.getDefiningOp<ConstantOp>();
    if (mode && isa<BoolAttr>(mode.getValue()) &&
        !cast<BoolAttr>(mode.getValue()).getValue()) {
      // Eval mode (a core-ATen program's eval twin): normalise by the running
      // statistics, which stay as they are.
      Value out = createAten(rewriter, op, "aten::batch_norm",
                             {input, args[1], args[2], runningMean, runningVar,
                              training, momentum, eps, cudnnEnabled},
                             inputType);
      rewriter.replaceAllUsesWith(op.getResult(0), out);
      rewriter.replaceAllUsesWith(op.getResult(3), runningMean);
      rewriter.replaceAllUsesWith(op.getResult(4), runningVar);
      rewriter.eraseOp(op);
      return success();
    }
    Value out = createAten(rewriter, op, "aten::batch_norm",
                           {input, args[1], args[2], none, none, training,
                            momentum, eps, cudnnEnabled},
                           inputType);

    // Batch statistics over every dim but the channel dim (1).
    auto constantInt = [&](int64_t v) -> Value {
      return ConstantOp::create(rewriter, l, rewriter.getI64Type(),
                                rewriter.getI64IntegerAttr(v));
    };
    SmallVector<Value> dims = {constantInt(0)};
    for (int64_t d = 2; d < inputType.getRank(); ++d)
      dims.push_back(constantInt(d));
    Value dimList = ListConstructOp::create(
        rewriter, l, ds::ListType::get(getContext(), rewriter.getI64Type()),
        dims);
    Value correction = constantInt(1);
    Value keepDim = ConstantOp::create(rewriter, l, rewriter.getI1Type(),
                                       rewriter.getBoolAttr(false));
    Type statType = runningMean.getType();
    auto varMean = AtenOp::create(
        rewriter, l, TypeRange{statType, statType}, "aten::var_mean.correction",
        ValueRange{input, dimList, correction, keepDim}, op.getModule(),
        op.getModuleClass());
    Value newMean =
        createAten(rewriter, op, "aten::lerp.Scalar",
                   {runningMean, varMean.getResult(1), momentum}, statType);
    Value newVar =
        createAten(rewriter, op, "aten::lerp.Scalar",
                   {runningVar, varMean.getResult(0), momentum}, statType);
    rewriter.replaceAllUsesWith(op.getResult(0), out);
    rewriter.replaceAllUsesWith(op.getResult(3), newMean);
    rewriter.replaceAllUsesWith(op.getResult(4), newVar);
    rewriter.eraseOp(op);
    return success();
  }
};

struct DecomposeTracedConvolution : OpRewritePattern<AtenOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AtenOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getOp() != "aten::_convolution" &&
        op.getOp() != "aten::_convolution.deprecated" &&
        op.getOp() != "aten::convolution")
      return failure();
    // [_]convolution(input, weight, bias, stride, padding, dilation,
    //                transposed, output_padding, groups, ...flags)
    ValueRange args = op.getArgs();
    auto transposed = args[6].getDefiningOp<ConstantOp>();
    if (!transposed || !isa<BoolAttr>(transposed.getValue()) ||
        cast<BoolAttr>(transposed.getValue()).getValue())
      return failure();
    auto inputType = dyn_cast<RankedTensorType>(args[0].getType());
    if (!inputType || (inputType.getRank() != 3 && inputType.getRank() != 4))
      return failure();
    StringRef conv = inputType.getRank() == 3 ? "aten::conv1d" : "aten::conv2d";
    rewriter.replaceOp(op, createAten(rewriter, op, conv,
                                      {args[0], args[1], args[2], args[3],
                                       args[4], args[5], args[8]},
                                      op.getResult(0).getType()));
    return success();
  }
};

struct DecomposeToDevice : OpRewritePattern<AtenOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AtenOp op,
                                PatternRewriter &rewriter) const override {
    ValueRange args = op.getArgs();
    if (op.getOp() == "aten::_to_copy") {
      // _to_copy(self, *, dtype?, layout?, device?, pin_memory?, non_blocking,
      //          memory_format?)
      auto type = dyn_cast<RankedTensorType>(op.getResult(0).getType());
      if (!type)
        return failure();
      Value dtype = args[1];
      if (isa<ds::NoneType>(dtype.getType())) {
        // No dtype: a copy (of any dtype; layout and device do not matter
        // to a plan).
        rewriter.replaceOp(op, createAten(rewriter, op, "aten::clone",
                                          {args[0], args[6]}, type));
        return success();
      }
      Value copy = ConstantOp::create(rewriter, op.getLoc(),
                                      rewriter.getI1Type(),
                                      rewriter.getBoolAttr(true));
      rewriter.replaceOp(op, createAten(rewriter, op, "aten::to.dtype",
                                        {args[0], dtype, args[5], copy, args[6]},
                                        type));
      return success();
    }
    if (op.getOp() == "aten::to.device") {
      // to.device(self, device, dtype, non_blocking, copy, memory_format)
      rewriter.replaceOp(
          op, createAten(rewriter, op, "aten::to.dtype",
                         {args[0], args[2], args[3], args[4], args[5]},
                         op.getResult(0).getType()));
      return success();
    }
    if (op.getOp() != "aten::to.dtype_layout")
      return failure();
    // to.dtype_layout(self, dtype?, layout?, device?, pin_memory?,
    //                 non_blocking, copy, memory_format?): only the dtype
    // matters; without one (`x.to(device)`) the result is x itself unless a
    // copy is asked for.
    if (!isa<ds::NoneType>(args[1].getType())) {
      rewriter.replaceOp(
          op, createAten(rewriter, op, "aten::to.dtype",
                         {args[0], args[1], args[5], args[6], args[7]},
                         op.getResult(0).getType()));
      return success();
    }
    auto copy = args[6].getDefiningOp<ConstantOp>();
    if (!copy || !isa<BoolAttr>(copy.getValue()) ||
        cast<BoolAttr>(copy.getValue()).getValue() ||
        args[0].getType() != op.getResult(0).getType())
      return failure();
    rewriter.replaceOp(op, args[0]);
    return success();
  }
};

/// Core ATen's forms of `layer_norm` and `max_pool2d` that also return what
/// their backward needs (the statistics, the indices): when nothing reads
/// those, the composite the TorchScript path calls, whose gradient rule
/// derives them itself.
struct DecomposeUnreadExtraResults : OpRewritePattern<AtenOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AtenOp op,
                                PatternRewriter &rewriter) const override {
    StringRef composite;
    if (op.getOp() == "aten::native_layer_norm")
      composite = "aten::layer_norm";
    else if (op.getOp() == "aten::max_pool2d_with_indices")
      composite = "aten::max_pool2d";
    else
      return failure();
    if (!llvm::all_of(op.getResults().drop_front(),
                      [](Value v) { return v.use_empty(); }))
      return failure();
    SmallVector<Value> args(op.getArgs());
    if (composite == "aten::layer_norm")
      // layer_norm(input, normalized_shape, weight, bias, eps, cudnn_enable)
      args.push_back(ConstantOp::create(rewriter, op.getLoc(),
                                        rewriter.getI1Type(),
                                        rewriter.getBoolAttr(true)));
    rewriter.replaceAllUsesWith(
        op.getResult(0), createAten(rewriter, op, composite, args,
                                    op.getResult(0).getType()));
    rewriter.eraseOp(op);
    return success();
  }
};

/// `aten::copy(self, src, non_blocking)` (a core-ATen program's write of a
/// buffer, `copy_` in functional form) where src already has self's type:
/// src itself.
struct FoldSameTypeCopy : OpRewritePattern<AtenOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AtenOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getOp() != "aten::copy" ||
        op.getArgs()[1].getType() != op.getResult(0).getType())
      return failure();
    rewriter.replaceOp(op, op.getArgs()[1]);
    return success();
  }
};

} // namespace

void mlir::ds::import::populateImportDecompositionPatterns(
    RewritePatternSet &patterns) {
  patterns.add<DecomposeBatchNormFunctional, DecomposeTracedConvolution,
               DecomposeToDevice, DecomposeUnreadExtraResults,
               FoldSameTypeCopy>(
      patterns.getContext());
}

void mlir::ds::import::decomposeImportedOps(ModuleOp module) {
  RewritePatternSet patterns(module.getContext());
  populateImportDecompositionPatterns(patterns);
  walkAndApplyPatterns(module, std::move(patterns));
}
