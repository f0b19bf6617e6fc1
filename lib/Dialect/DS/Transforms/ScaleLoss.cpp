//===- ScaleLoss.cpp - the fp16 loss scale on the backward's seed ---------===//

#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/Utils/DTypeInference.h"
#include "ds/Dialect/DS/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSSCALELOSS
#include "ds/Dialect/DS/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

/// The attribute -ds-autodiff puts on each seed of the backward.
constexpr StringLiteral kSeedMarker = "ds.backward_seed";

struct ScaleLossPass : public mlir::ds::impl::DSScaleLossBase<ScaleLossPass> {
  using DSScaleLossBase::DSScaleLossBase;

  void runOnOperation() override;

private:
  /// `to(mul(to(seed, f32), scale), seed's dtype)`; the casts are left out
  /// for an f32 seed. Returns the scaled seed.
  Value scaleSeed(OpBuilder &builder, ConstantOp seed, Value scale);
};

} // namespace

Value ScaleLossPass::scaleSeed(OpBuilder &builder, ConstantOp seed,
                               Value scale) {
  Location loc = seed.getLoc();
  auto type = cast<RankedTensorType>(seed.getType());
  Type f32 = builder.getF32Type();
  auto aten = [&](StringRef name, ValueRange args, Type result) {
    return AtenOp::create(builder, loc, TypeRange{result},
                          builder.getStringAttr(name), args)
        .getResult(0);
  };
  auto cast = [&](Value value, RankedTensorType to) {
    Value code = ConstantOp::create(
        builder, loc, builder.getI64Type(),
        builder.getI64IntegerAttr(scalarTypeCodeOf(to.getElementType())));
    Value no = ConstantOp::create(builder, loc, builder.getI1Type(),
                                  builder.getBoolAttr(false));
    Value none = ConstantOp::create(
        builder, loc, mlir::ds::NoneType::get(builder.getContext()),
        builder.getUnitAttr());
    return aten("aten::to.dtype", {value, code, no, no, none}, to);
  };
  if (type.getElementType() == f32)
    return aten("aten::mul.Tensor", {seed, scale}, type);
  auto wide = RankedTensorType::get(type.getShape(), f32);
  Value product = aten("aten::mul.Tensor", {cast(seed, wide), scale}, wide);
  return cast(product, type);
}

void ScaleLossPass::runOnOperation() {
  ModuleOp module = getOperation();

  // The trainable engines, and which of them scale their loss (fp16, fp16
  // autocast).
  SmallVector<EngineOp> trainable, scaledEngines;
  llvm::DenseMap<Operation *, std::string> modes;
  for (EngineOp engine : module.getOps<EngineOp>()) {
    if (engine.getFrozen())
      continue;
    FailureOr<EngineConfigAttr> config = engine.requireConfig("-ds-scale-loss");
    if (failed(config))
      return signalPassFailure();
    trainable.push_back(engine);
    PrecisionAttr precision = config->getPrecisionOrDefault();
    if (precision.getLossScaler()) {
      scaledEngines.push_back(engine);
      modes[engine] = precision.getMode() == PrecisionMode::FP16
                          ? "in fp16"
                          : "in fp16 autocast";
    }
  }
  if (scaledEngines.empty())
    return;
  // The scale multiplies the backward's one seed, and only the scaled engine
  // divides it out again: any other trainable engine's gradients would keep
  // it.
  if (trainable.size() > 1) {
    EngineOp fp16 = scaledEngines.front();
    EngineOp other = trainable.front() == fp16 ? trainable[1] : trainable[0];
    bool bothFp16 = llvm::is_contained(scaledEngines, other);
    other.emitError()
        << "engine @" << fp16.getSymName() << " trains " << modes[fp16]
        << (modes[fp16] == "in fp16" ? " (fp16.enabled)"
                                     : " (torch_autocast.dtype float16)")
        << " and engine @" << other.getSymName() << " trains "
        << (bothFp16 ? "with a loss scale too" : "as well")
        << " on the one backward of @" << funcName
        << ": the loss scale multiplies that backward's one seed, so @"
        << other.getSymName() << "'s gradients would carry @"
        << fp16.getSymName()
        << "'s scale (DeepSpeed scales each engine's own loss); an engine "
           "with a loss scale (fp16, fp16 autocast) must be the only "
           "trainable engine of its plan (bf16 and bf16 autocast need none)";
    return signalPassFailure();
  }
  EngineOp engine = scaledEngines.front();

  auto func = module.lookupSymbol<func::FuncOp>(funcName);
  BackwardBeginOp begin;
  if (func && !func.isExternal())
    for (Operation &op : func.getBody().front())
      if (auto found = dyn_cast<BackwardBeginOp>(op)) {
        begin = found;
        break;
      }
  if (!begin) {
    engine.emitError() << "engine @" << engine.getSymName() << " trains "
                       << modes[engine] << ", but @" << funcName
                       << " has no backward (ds.backward_begin) to scale: "
                          "run -ds-autodiff first";
    return signalPassFailure();
  }
  for (auto scale : func.getBody().front().getOps<LossScaleOp>())
    if (scale.getEngine() == engine.getSymName()) {
      scale.emitError() << "the backward of @" << funcName
                        << " is already scaled by the loss scale of engine @"
                        << engine.getSymName();
      return signalPassFailure();
    }

  SmallVector<ConstantOp> seeds;
  for (Operation *op = begin->getNextNode(); op; op = op->getNextNode())
    if (auto constant = dyn_cast<ConstantOp>(op))
      if (constant->hasAttr(kSeedMarker))
        seeds.push_back(constant);
  if (seeds.empty()) {
    engine.emitError()
        << "engine @" << engine.getSymName() << " trains " << modes[engine]
        << ", but the backward of @" << funcName
        << " has no seed to scale (a ds.constant marked " << kSeedMarker
        << " after ds.backward_begin): run -ds-scale-loss right after "
           "-ds-autodiff, before -canonicalize merges the seed into other "
           "constants";
    return signalPassFailure();
  }
  for (ConstantOp seed : seeds) {
    auto type = dyn_cast<RankedTensorType>(seed.getType());
    if (!type || !isa<FloatType>(type.getElementType())) {
      seed.emitError() << "the backward seed must be a float tensor, got "
                       << seed.getType();
      return signalPassFailure();
    }
  }

  OpBuilder builder(begin->getContext());
  builder.setInsertionPointAfter(begin);
  auto f32Scalar = RankedTensorType::get({}, builder.getF32Type());
  Value scale =
      LossScaleOp::create(builder, begin.getLoc(), f32Scalar,
                          FlatSymbolRefAttr::get(engine.getSymNameAttr()))
          .getResult();
  for (ConstantOp seed : seeds) {
    // The backward's uses of the seed, before the scaling adds its own.
    SmallVector<OpOperand *> uses;
    for (OpOperand &use : seed->getUses())
      uses.push_back(&use);
    builder.setInsertionPointAfter(seed);
    Value scaled = scaleSeed(builder, seed, scale);
    for (OpOperand *use : uses)
      use->set(scaled);
  }
}
