//===- EmitPlan.cpp - ds IR -> plan ---------------------------------------===//
//
// One program per function (`@forward_eval` -> "eval", `@forward` -> "train",
// `@step` -> "step"): values are numbered in definition order, every op
// becomes a plan op, and each value gets a `free` entry on the op that uses
// it last, so that the runtime drops it as early as the schedule allows. A
// value used inside a `ds.if` but defined outside is freed by the `if`
// itself; values a branch defines die with the branch. Collectives define a
// token value that their `wait` uses (and frees).
//
// Engines carry their settings from the typed config (`deepspeed`: seed,
// batch sizes, ZeRO stage, 16-bit save policy), the config as given
// (`config`) as provenance, and what -ds-lower-optimizer and
// -ds-zero-partition decided: the
// resolved optimizer (from the engine's ds.optimizer_step) and the partition
// (stage, flat layout, buckets numbered by offset, stage 3's persistent
// ones marked). Stage 3 gathers and releases its sharded buckets in the
// train and eval programs. A frozen engine has no optimizer, and a
// partition only at stage 3 (every parameter sharded, gathered for the
// forward and, where activation gradients flow through it, the backward).
// Each trainable engine's ds.backward_prologue / ds.backward_epilogue
// (-ds-engine-backward) become the plan's backward_prologue /
// backward_epilogue ops. A tensor value with dynamic dims carries the
// upper bound ShapeBounds derives for them (`bound`), when every dim has one.
//
//===----------------------------------------------------------------------===//

#include "ds/Target/Plan/EmitPlan.h"
#include "ds/Dialect/DS/Analysis/ShapeBounds.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/ErrorHandling.h"

using namespace mlir;
using namespace mlir::ds;
namespace plan = ::ds::plan;

static std::optional<plan::DType> dtypeOf(Type type) {
  if (type.isF32())
    return plan::DType::Float32;
  if (type.isF64())
    return plan::DType::Float64;
  if (type.isF16())
    return plan::DType::Float16;
  if (type.isBF16())
    return plan::DType::BFloat16;
  if (type.isInteger(1))
    return plan::DType::Bool;
  if (type.isUnsignedInteger(8))
    return plan::DType::UInt8;
  if (type.isInteger(64))
    return plan::DType::Int64;
  if (type.isInteger(32))
    return plan::DType::Int32;
  if (type.isInteger(16))
    return plan::DType::Int16;
  if (type.isInteger(8))
    return plan::DType::Int8;
  return std::nullopt;
}

static std::vector<int64_t> shapeOf(ShapedType type) {
  std::vector<int64_t> shape;
  for (int64_t d : type.getShape())
    shape.push_back(ShapedType::isDynamic(d) ? plan::kDynamicDim : d);
  return shape;
}

/// Scalar kind of a non-tensor type. A device argument is written as None:
/// the runtime runs every operator on the run's device (docs/plan-format.md),
/// whatever device the model was traced or compiled on.
static std::optional<plan::ValueType> scalarKindOf(Type type) {
  if (type.isInteger(64))
    return plan::ValueType::Int;
  if (type.isF64())
    return plan::ValueType::Float;
  if (type.isInteger(1))
    return plan::ValueType::Bool;
  if (isa<mlir::ds::NoneType, mlir::ds::DeviceType>(type))
    return plan::ValueType::None;
  if (isa<mlir::ds::StrType>(type))
    return plan::ValueType::Str;
  if (isa<TensorType>(type))
    return plan::ValueType::Tensor;
  return std::nullopt;
}

static std::string locationText(Location loc) {
  if (auto flc = dyn_cast<FileLineColLoc>(loc))
    return (flc.getFilename().getValue() + ":" + Twine(flc.getLine())).str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (auto text = locationText(inner); !text.empty())
        return text;
  if (auto named = dyn_cast<NameLoc>(loc))
    return locationText(named.getChildLoc());
  return "";
}

namespace {

/// Which program a function becomes: what may appear in it.
enum class ProgramKind { Eval, Train, Step };

/// A bucket as the plan names it: its engine and its index in the engine's
/// partition.buckets.
struct BucketRef {
  std::string engine;
  int64_t index = 0;
  int64_t stage = 0;
  /// Stage 3, not persistent: gathered where its parameters are read.
  bool sharded = false;
};

class ProgramEmitter {
public:
  ProgramEmitter(plan::Program &program, ProgramKind kind,
                 const llvm::StringMap<BucketRef> &buckets,
                 const ShapeBounds &bounds)
      : program(program), programKind(kind), buckets(buckets), bounds(bounds) {}

  LogicalResult emitFunction(func::FuncOp func);

private:
  FailureOr<plan::ValueId> define(Value value);
  plan::ValueId idOf(Value value) { return ids.lookup(value); }
  LogicalResult emitBlock(Block &block, std::vector<plan::Op> &out);
  LogicalResult emitOp(Operation *op, std::vector<plan::Op> &out);
  void assignFrees(Block &block, std::vector<plan::Op> &ops,
                   const llvm::DenseSet<Value> &keepAlive, size_t firstOpIndex);

  LogicalResult emitCollective(Operation *op, plan::OpKind opKind,
                               plan::ValueId token, std::vector<plan::Op> &out);
  FailureOr<BucketRef> bucketOf(Operation *op);
  StringRef programName() const {
    return programKind == ProgramKind::Eval    ? "eval"
           : programKind == ProgramKind::Train ? "train"
                                               : "step";
  }

  plan::Program &program;
  ProgramKind programKind;
  const llvm::StringMap<BucketRef> &buckets;
  const ShapeBounds &bounds;
  llvm::DenseMap<Value, plan::ValueId> ids;
};

} // namespace

FailureOr<plan::ValueId> ProgramEmitter::define(Value value) {
  plan::ValueId id = program.values.size();
  Type type = value.getType();
  if (auto tensor = dyn_cast<RankedTensorType>(type)) {
    auto dtype = dtypeOf(tensor.getElementType());
    if (!dtype)
      return emitError(value.getLoc()) << "the plan has no dtype for " << type;
    program.values.push_back(
        plan::ValueDesc::tensor(id, *dtype, shapeOf(tensor)));
    // The memory prediction counts a dynamic tensor at its bound.
    if (!tensor.hasStaticShape() && bounds.getNumelBound(value)) {
      SmallVector<int64_t> bound = bounds.getBounds(value);
      program.values.back().bound.emplace(bound.begin(), bound.end());
    }
  } else if (auto list = dyn_cast<mlir::ds::ListType>(type)) {
    auto elem = scalarKindOf(list.getElementType());
    if (!elem || *elem == plan::ValueType::None)
      return emitError(value.getLoc())
             << "the plan has no list of " << list.getElementType();
    program.values.push_back(plan::ValueDesc::list(id, *elem));
  } else if (isa<mlir::ds::TokenType>(type)) {
    program.values.push_back(
        plan::ValueDesc::scalar(id, plan::ValueType::Token));
  } else if (auto kind = scalarKindOf(type);
             kind && *kind != plan::ValueType::Tensor) {
    program.values.push_back(plan::ValueDesc::scalar(id, *kind));
  } else {
    return emitError(value.getLoc())
           << "the plan cannot carry a value of type " << type;
  }
  ids[value] = id;
  return id;
}

static FailureOr<plan::Constant> constantOf(ConstantOp op) {
  Attribute value = op.getValue();
  Type type = op.getType();
  if (isa<mlir::ds::NoneType, mlir::ds::DeviceType>(type))
    return plan::Constant::none();
  if (isa<mlir::ds::StrType>(type))
    return plan::Constant::ofStr(cast<StringAttr>(value).getValue().str());
  if (type.isInteger(1))
    return plan::Constant::ofBool(
        cast<IntegerAttr>(value).getValue().getBoolValue());
  if (type.isInteger(64))
    return plan::Constant::ofInt(cast<IntegerAttr>(value).getInt());
  if (type.isF64())
    return plan::Constant::ofFloat(cast<FloatAttr>(value).getValueAsDouble());
  if (auto tensor = dyn_cast<RankedTensorType>(type)) {
    auto dense = dyn_cast<DenseElementsAttr>(value);
    auto dtype = dtypeOf(tensor.getElementType());
    if (!dense || !dtype)
      return op.emitOpError() << "the plan cannot carry this tensor constant";
    std::string bytes;
    int64_t numel = tensor.getNumElements();
    if (tensor.getElementType().isInteger(1)) {
      for (bool b : dense.getValues<bool>())
        bytes.push_back(b ? 1 : 0);
    } else {
      ArrayRef<char> raw = dense.getRawData();
      if (dense.isSplat()) {
        for (int64_t i = 0; i < numel; ++i)
          bytes.append(raw.data(), raw.size());
      } else {
        bytes.assign(raw.data(), raw.size());
      }
    }
    return plan::Constant::ofTensor(*dtype, shapeOf(tensor), std::move(bytes));
  }
  return op.emitOpError() << "the plan cannot carry a constant of type "
                          << type;
}

LogicalResult ProgramEmitter::emitOp(Operation *op,
                                     std::vector<plan::Op> &out) {
  SmallVector<plan::ValueId> results;
  for (Value result : op->getResults()) {
    auto id = define(result);
    if (failed(id))
      return failure();
    results.push_back(*id);
  }
  auto args = [&](ValueRange values) {
    std::vector<plan::ValueId> list;
    for (Value v : values)
      list.push_back(idOf(v));
    return list;
  };

  if (auto get = dyn_cast<GetParamOp>(op)) {
    out.push_back(plan::Op::state(get.getName().str(), results[0]));
  } else if (auto get = dyn_cast<GetBufferOp>(op)) {
    out.push_back(plan::Op::state(get.getName().str(), results[0]));
  } else if (auto set = dyn_cast<SetBufferOp>(op)) {
    out.push_back(
        plan::Op::setState(set.getName().str(), idOf(set.getValue())));
  } else if (auto constant = dyn_cast<ConstantOp>(op)) {
    auto value = constantOf(constant);
    if (failed(value))
      return failure();
    out.push_back(plan::Op::constant(*value, results[0]));
  } else if (auto list = dyn_cast<ListConstructOp>(op)) {
    out.push_back(plan::Op::list(args(list.getElements()), results[0]));
  } else if (auto unpack = dyn_cast<ListUnpackOp>(op)) {
    out.push_back(plan::Op::unpack(idOf(unpack.getList()),
                                   {results.begin(), results.end()}));
  } else if (auto aten = dyn_cast<AtenOp>(op)) {
    plan::Op call = plan::Op::call(aten.getOp().str(), args(aten.getArgs()),
                                   {results.begin(), results.end()});
    call.module = aten.getModule().str();
    call.moduleClass = aten.getModuleClass().str();
    call.loc = locationText(op->getLoc());
    out.push_back(std::move(call));
  } else if (isa<RngStateGetOp, RngStateSetOp>(op)) {
    // Operators of the runtime's own `ds` library
    // (lib/Runtime/RngStateOps.cpp).
    plan::Op call =
        isa<RngStateGetOp>(op)
            ? plan::Op::call("ds::get_rng_state", {}, {results[0]})
            : plan::Op::call("ds::set_rng_state", args(op->getOperands()), {});
    call.loc = locationText(op->getLoc());
    out.push_back(std::move(call));
  } else if (auto grad = dyn_cast<GradOp>(op)) {
    if (programKind != ProgramKind::Train)
      return op->emitOpError()
             << "belongs to the training function (@forward after "
                "-ds-autodiff)";
    out.push_back(plan::Op::grad(grad.getParam().str(), idOf(grad.getValue())));
  } else if (isa<AllReduceOp>(op)) {
    return emitCollective(op, plan::OpKind::AllReduce, results[0], out);
  } else if (isa<ReduceScatterOp>(op)) {
    return emitCollective(op, plan::OpKind::ReduceScatter, results[0], out);
  } else if (isa<AllGatherOp>(op)) {
    return emitCollective(op, plan::OpKind::AllGather, results[0], out);
  } else if (auto wait = dyn_cast<WaitOp>(op)) {
    // Its collective was checked against the program.
    out.push_back(plan::Op::wait(idOf(wait.getToken())));
  } else if (isa<ReleaseOp>(op)) {
    auto bucket = bucketOf(op);
    if (failed(bucket))
      return failure();
    if (!bucket->sharded || programKind == ProgramKind::Step)
      return op->emitOpError()
             << "on a bucket of engine @" << bucket->engine
             << " does not belong in the " << programName()
             << " program: only the sharded buckets of a ZeRO stage 3 "
                "engine are released, in the train and eval programs";
    out.push_back(plan::Op::release(bucket->engine, bucket->index));
  } else if (auto update = dyn_cast<OptimizerStepOp>(op)) {
    if (programKind != ProgramKind::Step)
      return op->emitOpError()
             << "belongs to @step (the accumulation boundary)";
    out.push_back(plan::Op::optimizerStep(update.getEngine().str()));
  } else if (isa<BackwardPrologueOp, BackwardEpilogueOp>(op)) {
    if (programKind != ProgramKind::Train || &out != &program.body)
      return op->emitOpError() << "belongs to the top level of the training "
                                  "function's backward";
    std::string engine =
        op->getAttrOfType<FlatSymbolRefAttr>("engine").getValue().str();
    out.push_back(isa<BackwardPrologueOp>(op)
                      ? plan::Op::backwardPrologue(std::move(engine))
                      : plan::Op::backwardEpilogue(std::move(engine)));
  } else if (auto scale = dyn_cast<LossScaleOp>(op)) {
    if (programKind != ProgramKind::Train || &out != &program.body ||
        !program.backwardStart)
      return op->emitOpError() << "belongs to the top level of the training "
                                  "function's backward";
    out.push_back(plan::Op::lossScale(scale.getEngine().str(), results[0]));
  } else if (auto cotangent = dyn_cast<CotangentOp>(op)) {
    if (programKind != ProgramKind::Train || &out != &program.body ||
        !program.backwardStart)
      return op->emitOpError() << "belongs to the top level of the training "
                                  "function's backward";
    out.push_back(plan::Op::cotangent(cotangent.getIndex(), results[0]));
  } else if (isa<BackwardBeginOp>(op)) {
    // Marks where backward() starts; not an op of the plan.
    if (&out != &program.body)
      return op->emitOpError() << "must be at the top level of the function";
    program.backwardStart = out.size();
  } else if (auto ifOp = dyn_cast<IfOp>(op)) {
    plan::Branch branches[2];
    Region *regions[2] = {&ifOp.getThenRegion(), &ifOp.getElseRegion()};
    for (int b = 0; b < 2; ++b) {
      Block &block = regions[b]->front();
      if (failed(emitBlock(block, branches[b].body)))
        return failure();
      branches[b].yields = args(block.getTerminator()->getOperands());
    }
    out.push_back(plan::Op::ifOp(idOf(ifOp.getCondition()),
                                 std::move(branches[0]), std::move(branches[1]),
                                 {results.begin(), results.end()}));
  } else {
    return op->emitOpError() << "has no plan form";
  }
  return success();
}

FailureOr<BucketRef> ProgramEmitter::bucketOf(Operation *op) {
  auto name = op->getAttrOfType<FlatSymbolRefAttr>("bucket");
  auto it = buckets.find(name.getValue());
  if (it == buckets.end())
    return op->emitOpError() << "names bucket " << name
                             << ", which is not a ds.bucket of the module";
  return it->second;
}

LogicalResult ProgramEmitter::emitCollective(Operation *op, plan::OpKind opKind,
                                             plan::ValueId token,
                                             std::vector<plan::Op> &out) {
  auto found = bucketOf(op);
  if (failed(found))
    return failure();
  const BucketRef &bucket = *found;
  // Where each stage's collectives go (docs/plan-format.md): the backward
  // holds stage 2 and 3's reduce-scatters, train and eval stage 3's gathers
  // of sharded buckets, everything else is in @step.
  bool reduceInTrain =
      opKind == plan::OpKind::ReduceScatter && bucket.stage >= 2;
  bool gatherWhereRead = opKind == plan::OpKind::AllGather && bucket.sharded;
  bool allowed =
      programKind == ProgramKind::Step    ? !reduceInTrain && !gatherWhereRead
      : programKind == ProgramKind::Train ? reduceInTrain || gatherWhereRead
                                          : gatherWhereRead;
  if (!allowed)
    return op->emitOpError()
           << "on a bucket of engine @" << bucket.engine << " (ZeRO stage "
           << bucket.stage << ") does not belong in the " << programName()
           << " program"
           << (reduceInTrain ? ": stage " + std::to_string(bucket.stage) +
                                   " reduces in the backward"
               : gatherWhereRead
                   ? ": a sharded bucket is gathered where its parameters "
                     "are read, in the train and eval programs"
                   : ": it runs at the accumulation boundary, in @step");
  out.push_back(
      plan::Op::collective(opKind, bucket.engine, bucket.index, token));
  return success();
}

/// Values an op reads, including those its regions read from outside.
static llvm::SetVector<Value> usesOf(Operation *op) {
  llvm::SetVector<Value> uses(op->operand_begin(), op->operand_end());
  op->walk([&](Operation *inner) {
    if (inner == op)
      return;
    for (Value v : inner->getOperands())
      if (!op->isAncestor(v.getParentRegion()->getParentOp()))
        uses.insert(v);
  });
  return uses;
}

void ProgramEmitter::assignFrees(Block &block, std::vector<plan::Op> &ops,
                                 const llvm::DenseSet<Value> &keepAlive,
                                 size_t firstOpIndex) {
  // ops[firstOpIndex + i] corresponds to the i-th non-terminator op that
  // has a plan form (markers have none).
  llvm::DenseMap<Value, size_t> lastUse;
  SmallVector<Operation *> blockOps;
  for (Operation &op : block.without_terminator())
    if (!isa<BackwardBeginOp>(op))
      blockOps.push_back(&op);
  for (size_t i = 0; i < blockOps.size(); ++i)
    for (Value v : usesOf(blockOps[i]))
      lastUse[v] = i;
  auto freeAt = [&](Value v, size_t defIndex) {
    if (keepAlive.contains(v))
      return;
    auto it = lastUse.find(v);
    size_t at = it == lastUse.end() ? defIndex : it->second;
    ops[firstOpIndex + at].free.push_back(idOf(v));
  };
  for (size_t i = 0; i < blockOps.size(); ++i)
    for (Value result : blockOps[i]->getResults())
      freeAt(result, i);
  // Block arguments (the function's inputs) are defined by the input ops,
  // which precede the block's ops in `ops`.
  for (BlockArgument arg : block.getArguments()) {
    if (keepAlive.contains(arg))
      continue;
    auto it = lastUse.find(arg);
    if (it == lastUse.end())
      ops[arg.getArgNumber()].free.push_back(idOf(arg));
    else
      ops[firstOpIndex + it->second].free.push_back(idOf(arg));
  }
}

LogicalResult ProgramEmitter::emitBlock(Block &block,
                                        std::vector<plan::Op> &out) {
  size_t first = out.size();
  for (Operation &op : block.without_terminator())
    if (failed(emitOp(&op, out)))
      return failure();
  // Values the terminator yields die with the branch, not before.
  llvm::DenseSet<Value> keep(block.getTerminator()->operand_begin(),
                             block.getTerminator()->operand_end());
  assignFrees(block, out, keep, first);
  return success();
}

LogicalResult ProgramEmitter::emitFunction(func::FuncOp func) {
  Block &entry = func.getBody().front();
  std::vector<plan::Op> &body = program.body;
  for (BlockArgument arg : entry.getArguments()) {
    auto id = define(arg);
    if (failed(id))
      return failure();
    body.push_back(plan::Op::input(arg.getArgNumber(), *id));
  }
  size_t first = body.size();
  for (Operation &op : entry.without_terminator())
    if (failed(emitOp(&op, body)))
      return failure();
  Operation *ret = entry.getTerminator();
  for (Value v : ret->getOperands())
    program.results.push_back(idOf(v));
  llvm::DenseSet<Value> keep(ret->operand_begin(), ret->operand_end());
  assignFrees(entry, body, keep, first);
  return success();
}

// The dialect's enums as the plan's.

static plan::PrecisionMode planPrecisionMode(PrecisionMode mode) {
  switch (mode) {
  case PrecisionMode::BF16:
    return plan::PrecisionMode::BF16;
  case PrecisionMode::FP16:
    return plan::PrecisionMode::FP16;
  case PrecisionMode::Autocast:
    return plan::PrecisionMode::Autocast;
  case PrecisionMode::FP32:
    break;
  }
  llvm_unreachable("the ds.engine verifier rejects precision fp32");
}

static plan::LossScalerType planLossScalerType(LossScalerKind kind) {
  switch (kind) {
  case LossScalerKind::Static:
    return plan::LossScalerType::Static;
  case LossScalerKind::Dynamic:
    return plan::LossScalerType::Dynamic;
  case LossScalerKind::GradScaler:
    return plan::LossScalerType::GradScaler;
  }
  llvm_unreachable("unknown LossScalerKind");
}

static plan::OptimizerType planOptimizerType(OptimizerKind kind) {
  switch (kind) {
  case OptimizerKind::Adam:
    return plan::OptimizerType::Adam;
  case OptimizerKind::AdamW:
    return plan::OptimizerType::AdamW;
  case OptimizerKind::SGD:
    return plan::OptimizerType::SGD;
  }
  llvm_unreachable("unknown OptimizerKind");
}

static plan::SchedulerType planSchedulerType(SchedulerKind kind) {
  switch (kind) {
  case SchedulerKind::WarmupLR:
    return plan::SchedulerType::WarmupLR;
  case SchedulerKind::WarmupDecayLR:
    return plan::SchedulerType::WarmupDecayLR;
  case SchedulerKind::WarmupCosineLR:
    return plan::SchedulerType::WarmupCosineLR;
  }
  llvm_unreachable("unknown SchedulerKind");
}

static plan::WarmupType planWarmupType(WarmupType type) {
  switch (type) {
  case WarmupType::Log:
    return plan::WarmupType::Log;
  case WarmupType::Linear:
    return plan::WarmupType::Linear;
  }
  llvm_unreachable("unknown WarmupType");
}

/// The engine's mixed precision, from the attributes -ds-assign-precision
/// set (the ds.engine verifier has checked them); none for fp32.
static std::optional<plan::PrecisionDesc> precisionOf(EngineOp engine) {
  std::optional<PrecisionMode> mode = engine.getPrecision();
  if (!mode)
    return std::nullopt;
  plan::PrecisionDesc desc;
  desc.mode = planPrecisionMode(*mode);
  desc.paramDtype =
      desc.mode == plan::PrecisionMode::BF16   ? plan::DType::BFloat16
      : desc.mode == plan::PrecisionMode::FP16 ? plan::DType::Float16
                                               : plan::DType::Float32;
  desc.masterDtype = plan::DType::Float32;
  desc.gradAccumDtype = desc.paramDtype;
  if (std::optional<Type> accum = engine.getGradAccumDtype())
    desc.gradAccumDtype = *dtypeOf(*accum);
  if (std::optional<Type> autocast = engine.getAutocastDtype())
    desc.autocastDtype = *dtypeOf(*autocast);
  if (LossScalerAttr scaler = engine.getLossScalerAttr()) {
    plan::LossScalerDesc loss;
    loss.type = planLossScalerType(scaler.getKind());
    loss.scale = scaler.getScale();
    loss.scaleWindow = scaler.getScaleWindow();
    loss.hysteresis = scaler.getHysteresis();
    loss.consecutiveHysteresis = scaler.getConsecutiveHysteresis();
    loss.minScale = scaler.getMinScale();
    desc.lossScaler = loss;
  }
  return desc;
}

/// The layout -ds-zero-partition recorded for a partitioned engine.
static plan::PartitionDesc partitionOf(ModuleOp module, EngineOp engine) {
  plan::PartitionDesc partition;
  partition.stage = *engine.getZeroStage();
  partition.numel = *engine.getFlatNumel();
  for (ParamOp param : module.getOps<ParamOp>())
    if (param.getEngine() && *param.getEngine() == engine.getSymName() &&
        param.getFlatOffset())
      partition.params.push_back(
          {param.getSymName().str(), *param.getFlatOffset()});
  llvm::stable_sort(partition.params, [](const auto &a, const auto &b) {
    return a.offset < b.offset;
  });
  for (BucketOp bucket : module.getOps<BucketOp>()) {
    if (bucket.getEngine() != engine.getSymName())
      continue;
    plan::BucketDesc desc;
    desc.offset = bucket.getOffset();
    desc.numel = bucket.getNumel();
    desc.persistent = bucket.getPersistent();
    if (std::optional<Type> dtype = bucket.getDtype())
      desc.dtype = dtypeOf(*dtype);
    partition.buckets.push_back(desc);
  }
  llvm::stable_sort(partition.buckets, [](const auto &a, const auto &b) {
    return a.offset < b.offset;
  });
  return partition;
}

/// The engine's update, from its ds.optimizer_step.
static plan::OptimizerDesc optimizerOf(OptimizerStepOp op) {
  plan::OptimizerDesc desc;
  desc.type = planOptimizerType(op.getType());
  desc.lr = op.getLr().convertToDouble();
  ArrayRef<double> betas = op.getBetas();
  desc.betas = {betas[0], betas[1]};
  desc.eps = op.getEps().convertToDouble();
  desc.weightDecay = op.getWeightDecay().convertToDouble();
  desc.momentum = op.getMomentum().convertToDouble();
  desc.dampening = op.getDampening().convertToDouble();
  desc.nesterov = op.getNesterov();
  desc.gradientClipping = op.getGradientClipping().convertToDouble();
  SchedulerAttr schedule = op.getSchedulerAttr();
  if (!schedule)
    return desc;
  plan::SchedulerDesc scheduler;
  scheduler.type = planSchedulerType(schedule.getKind());
  scheduler.warmupMinLr = schedule.getWarmupMinLr();
  if (std::optional<F64> maxLr = schedule.getWarmupMaxLr())
    scheduler.warmupMaxLr = *maxLr;
  scheduler.warmupNumSteps = schedule.getWarmupNumSteps();
  scheduler.warmupType = planWarmupType(schedule.getWarmupType());
  scheduler.totalNumSteps = schedule.getTotalNumSteps();
  scheduler.warmupMinRatio = schedule.getWarmupMinRatio();
  scheduler.cosMinRatio = schedule.getCosMinRatio();
  desc.scheduler = scheduler;
  return desc;
}

/// The engine's settings from its typed config (`deepspeed`): the seed, the
/// stage 3 16-bit save policy, the resolved batch sizes and the configured
/// ZeRO stage; and its config as given (`config`), kept as provenance.
static LogicalResult engineSettings(EngineOp engine, plan::EngineDesc &desc) {
  FailureOr<EngineConfigAttr> config = engine.requireConfig("plan emission");
  if (failed(config))
    return failure();
  desc.seed = config->getSeed();
  ZeroAttr zero = config->getZeroOrDefault();
  desc.zeroStage = zero.getStage();
  desc.gather16BitWeightsOnModelSave =
      zero.getStage3Gather_16bitWeightsOnModelSave();
  if (zero.getOffloadOptimizer())
    desc.offloadOptimizer = plan::OffloadDesc{zero.getOffloadPinMemory()};
  desc.batch = {config->getTrainBatchSize(),
                config->getTrainMicroBatchSizePerGpu(),
                config->getGradientAccumulationSteps()};
  desc.dsConfig = plan::ordered_json::parse(engine.getConfig().str(), nullptr,
                                            /*allow_exceptions=*/false);
  if (desc.dsConfig.is_discarded() || !desc.dsConfig.is_object())
    return engine.emitOpError() << "config is not a JSON object";
  return success();
}

FailureOr<plan::Plan> mlir::ds::emitPlan(ModuleOp module,
                                         const EmitPlanOptions &options) {
  plan::Plan result;
  result.producer = options.producer;
  result.device = stringifyTargetDevice(getTargetDevice(module)).str();
  result.torchVersion = options.torchVersion;
  // The weights are read in place from the imported file: a TorchScript
  // archive, or a .pt2 when the module came from torch.export.
  if (auto source = module->getAttrOfType<StringAttr>("ds.source")) {
    auto frontend = module->getAttrOfType<StringAttr>("ds.frontend");
    bool exported = frontend && frontend.getValue() == "torch.export";
    result.weights = plan::WeightsDesc{exported ? "pt2" : "torchscript",
                                       source.getValue().str()};
  }
  if (std::optional<int64_t> worldSize = getWorldSize(module))
    result.worldSize = *worldSize;

  // The training step, when autodiff has derived it; it brings the boundary
  // work (@step) and every trainable engine's optimizer and partition.
  auto train = module.lookupSymbol<func::FuncOp>("forward");
  bool hasBackward = false;
  if (train)
    train.walk([&](BackwardBeginOp) { hasBackward = true; });
  auto step = module.lookupSymbol<func::FuncOp>("step");
  if (hasBackward && !step)
    return module.emitError()
           << "a training plan needs @step, the accumulation boundary's work "
              "(run -ds-lower-optimizer and -ds-zero-partition)";

  // Buckets by name, numbered by offset within their engine.
  llvm::StringMap<BucketRef> buckets;
  {
    for (auto &entry : bucketsByEngine(module)) {
      auto engine = module.lookupSymbol<EngineOp>(entry.first());
      int64_t stage =
          engine && engine.getZeroStage() ? *engine.getZeroStage() : 0;
      for (auto [index, bucket] : llvm::enumerate(entry.second))
        buckets[bucket.getSymName()] = {entry.first().str(), int64_t(index),
                                        stage, bucket.isShardedAt(stage)};
    }
  }

  for (Operation &op : module.getBody()->getOperations()) {
    if (auto engine = dyn_cast<EngineOp>(op)) {
      plan::EngineDesc desc;
      desc.precision = precisionOf(engine);
      desc.name = engine.getSymName().str();
      desc.module = engine.getModule().str();
      desc.trainable = !engine.getFrozen();
      if (failed(engineSettings(engine, desc)))
        return failure();
      // A plan has one accumulation window: every engine steps together.
      if (result.engines.empty())
        result.gradientAccumulationSteps = desc.batch.gradientAccumulationSteps;
      else if (desc.batch.gradientAccumulationSteps !=
               result.gradientAccumulationSteps)
        return engine.emitOpError()
               << "has gradient_accumulation_steps = "
               << desc.batch.gradientAccumulationSteps << ", but engine @"
               << result.engines.front().name << " has "
               << result.gradientAccumulationSteps
               << " (the engines of a plan step together)";
      if (std::optional<int64_t> stage = engine.getZeroStage())
        desc.zeroStage = *stage;
      if (hasBackward && !engine.getFrozen()) {
        OptimizerStepOp update;
        for (auto candidate : step.getBody().front().getOps<OptimizerStepOp>())
          if (candidate.getEngine() == engine.getSymName()) {
            if (update)
              return candidate.emitOpError()
                     << "updates engine @" << engine.getSymName()
                     << " a second time in @step";
            update = candidate;
          }
        if (!update)
          return engine.emitOpError()
                 << "is trainable, but @step has no ds.optimizer_step for it "
                    "(run -ds-lower-optimizer)";
        if (!engine.isPartitioned())
          return engine.emitOpError()
                 << "is trainable, but not partitioned (run "
                    "-ds-zero-partition)";
        desc.optimizer = optimizerOf(update);
        desc.partition = partitionOf(module, engine);
      } else if (engine.getFrozen() && engine.isPartitioned()) {
        // A frozen stage 3 engine: its parameters are sharded, it has no
        // optimizer.
        desc.partition = partitionOf(module, engine);
      }
      result.engines.push_back(std::move(desc));
    }
    auto addState = [&](auto decl, plan::StateKind kind, bool requiresGrad) {
      auto type = cast<RankedTensorType>(decl.getType());
      plan::StateDesc desc;
      desc.name = decl.getSymName().str();
      desc.kind = kind;
      desc.dtype = *dtypeOf(type.getElementType());
      desc.shape = shapeOf(type);
      desc.requiresGrad = requiresGrad;
      desc.engine = decl.getEngine() ? decl.getEngine()->str() : "";
      desc.module = decl.getModule().str();
      desc.moduleClass = decl.getModuleClass().str();
      result.state.push_back(std::move(desc));
    };
    if (isa<ParamOp, BufferOp>(op) && !op.getAttr("engine"))
      return op.emitOpError()
             << "has no engine; run -ds-assign-engines before emitting a plan";
    if (auto param = dyn_cast<ParamOp>(op))
      addState(param, plan::StateKind::Param, param.getRequiresGrad());
    if (auto buffer = dyn_cast<BufferOp>(op))
      addState(buffer, plan::StateKind::Buffer, false);
  }

  auto eval = module.lookupSymbol<func::FuncOp>("forward_eval");
  if (!eval)
    return module.emitError() << "no @forward_eval to lower to the eval "
                                 "program (import with --eval)";
  for (BlockArgument arg : eval.getArguments()) {
    auto type = cast<RankedTensorType>(arg.getType());
    plan::InputDesc input;
    auto name =
        eval.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "ds.name");
    input.name = name ? name.getValue().str()
                      : "in" + std::to_string(arg.getArgNumber());
    input.dtype = *dtypeOf(type.getElementType());
    input.shape = shapeOf(type);
    input.batched = !eval.getArgAttr(arg.getArgNumber(), "ds.unbatched");
    if (input.batched && !input.shape.empty() && input.shape[0] > 0)
      result.microBatchPerRank = input.shape[0];
    result.inputs.push_back(std::move(input));
  }
  // A 0-dim float result is a loss (ds-run reports it and seeds its
  // backward with 1); any other result is a tensor output (by rank, not by
  // element count: logits of a one-row micro-batch stay logits).
  unsigned numResults = eval.getNumResults();
  for (unsigned i = 0; i < numResults; ++i) {
    auto type = dyn_cast<RankedTensorType>(eval.getResultTypes()[i]);
    bool loss =
        type && isa<FloatType>(type.getElementType()) && type.getRank() == 0;
    std::string kind = loss ? "loss" : "tensor";
    std::string stem = loss ? "loss" : "output";
    result.outputs.push_back(
        {numResults == 1 ? stem : stem + std::to_string(i), kind});
  }

  ShapeBounds bounds(module);
  ProgramEmitter emitter(result.programs["eval"], ProgramKind::Eval, buckets,
                         bounds);
  if (failed(emitter.emitFunction(eval)))
    return failure();

  if (hasBackward) {
    ProgramEmitter trainEmitter(result.programs["train"], ProgramKind::Train,
                                buckets, bounds);
    if (failed(trainEmitter.emitFunction(train)))
      return failure();
    if (step.getNumArguments() != 0 || step.getNumResults() != 0)
      return step.emitOpError()
             << "the accumulation boundary's work takes no arguments and "
                "returns nothing";
    ProgramEmitter stepEmitter(result.programs["step"], ProgramKind::Step,
                               buckets, bounds);
    if (failed(stepEmitter.emitFunction(step)))
      return failure();
  }
  return result;
}
