//===- AssignPrecision.cpp - fp16 / bf16 / torch_autocast as IR -----------===//

#include "ds/Dialect/DS/Analysis/ShardedParams.h"
#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/Transforms/Passes.h"
#include "ds/Dialect/DS/Utils/DTypeInference.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Support/DebugStringHelper.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>

// torch.autocast("cuda")'s lists, generated from LibTorch's
// ATen/autocast_mode.h (lib/Dialect/DS/Transforms/CMakeLists.txt).
#include "AutocastCUDALists.inc"

namespace mlir::ds {
#define GEN_PASS_DEF_DSASSIGNPRECISION
#include "ds/Dialect/DS/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

/// `aten::add.Tensor` -> `aten::add`; an in-place `aten::relu_` ->
/// `aten::relu` (the same kernels).
StringRef baseName(StringRef op) {
  size_t colons = op.find("::");
  size_t dot = op.find('.', colons == StringRef::npos ? 0 : colons + 2);
  StringRef base = dot == StringRef::npos ? op : op.take_front(dot);
  if (base.ends_with("_") && !base.ends_with("__"))
    base = base.drop_back();
  return base;
}

/// One operator list: entries are base names (every overload) or qualified
/// overloads (that overload only); `exact` entries match only the name as
/// given ("aten::sum" is the overload without a name, not aten::sum.int).
struct OpList {
  llvm::StringSet<> names, exact;
  bool contains(StringRef op) const {
    return exact.contains(op) || names.contains(op) ||
           names.contains(baseName(op));
  }
};

/// The operator lists of one target device.
struct PrecisionTables {
  OpList f16NoKernel, bf16NoKernel, autocastLower, autocastFp32,
      autocastPromote;
  /// CUDA's fp32_set_opt_dtype list (softmax, sum, ...): run in f32 when
  /// their first operand is a 16-bit float (dtype=torch.float32).
  OpList autocastFp32FirstOperand;

  static const PrecisionTables &get(TargetDevice device) {
    return device == TargetDevice::CUDA ? cuda() : cpu();
  }

  /// LibTorch's CPU kernels and torch.autocast("cpu")'s lists, as probed
  /// (PrecisionTables.def).
  static const PrecisionTables &cpu() {
    static const PrecisionTables tables = [] {
      PrecisionTables t;
#define F16_NO_KERNEL(NAME) t.f16NoKernel.names.insert(NAME);
#define BF16_NO_KERNEL(NAME) t.bf16NoKernel.names.insert(NAME);
#define AUTOCAST_LOWER(NAME) t.autocastLower.names.insert(NAME);
#define AUTOCAST_FP32(NAME) t.autocastFp32.names.insert(NAME);
#define AUTOCAST_PROMOTE(NAME) t.autocastPromote.names.insert(NAME);
#include "ds/Dialect/DS/Utils/PrecisionTables.def"
      return t;
    }();
    return tables;
  }

  /// torch.autocast("cuda")'s lists as LibTorch's ATen/autocast_mode.h
  /// registers them (AutocastCUDALists.inc, generated from that header when
  /// the build is configured), each entry one overload as torch registers
  /// it; CUDA has Half and BFloat16 kernels for every operator, so nothing
  /// is computed in f32 for want of one.
  static const PrecisionTables &cuda() {
    static const PrecisionTables tables = [] {
      PrecisionTables t;
#define DS_AUTOCAST_NAME_1(NAME) "aten::" #NAME
#define DS_AUTOCAST_NAME_2(NAME, OVERLOAD) "aten::" #NAME "." #OVERLOAD
#define DS_AUTOCAST_PICK(A, B, PICKED, ...) PICKED
#define DS_AUTOCAST_NAME(...)                                                  \
  DS_AUTOCAST_PICK(__VA_ARGS__, DS_AUTOCAST_NAME_2, DS_AUTOCAST_NAME_1)        \
  (__VA_ARGS__)
#define DS_LOWER(...)                                                          \
  t.autocastLower.exact.insert(DS_AUTOCAST_NAME(__VA_ARGS__));
#define DS_FP32(...) t.autocastFp32.exact.insert(DS_AUTOCAST_NAME(__VA_ARGS__));
#define DS_FIRST(...)                                                          \
  t.autocastFp32FirstOperand.exact.insert(DS_AUTOCAST_NAME(__VA_ARGS__));
#define DS_PROMOTE(...)                                                        \
  t.autocastPromote.exact.insert(DS_AUTOCAST_NAME(__VA_ARGS__));
      DS_CUDA_AUTOCAST_LOWER_PRECISION_FP(DS_LOWER)
      DS_CUDA_AUTOCAST_FP32(DS_FP32)
      // The norm overloads without a dtype, redispatched with dtype f32:
      // their operands cast to f32.
      DS_CUDA_AUTOCAST_FP32_APPEND_DTYPE(DS_FP32)
      DS_CUDA_AUTOCAST_FP32_SET_OPT_DTYPE(DS_FIRST)
      DS_CUDA_AUTOCAST_PROMOTE(DS_PROMOTE)
#undef DS_LOWER
#undef DS_FP32
#undef DS_FIRST
#undef DS_PROMOTE
      // Composite operators of the registry that torch does not list but
      // that run listed ones on their float operands: cross_entropy_loss is
      // log_softmax (fp32_set_opt_dtype: f32) then nll_loss (fp32), and
      // nll_loss_nd is nll_loss or nll_loss2d, so their results are those
      // of f32 operands.
      t.autocastFp32.exact.insert("aten::cross_entropy_loss");
      t.autocastFp32.exact.insert("aten::nll_loss_nd");
      // (autocast_mode.cpp also registers binary_cross_entropy for CUDA, as
      // binary_cross_entropy_banned, which raises: it is not in the
      // registry, so no module holds it.)
      return t;
    }();
    return tables;
  }
};

enum class Mode { FP32, BF16, FP16, Autocast };

/// Ordered op names with counts, for the remarks.
using OpCounts = llvm::MapVector<StringRef, unsigned>;

std::string describe(const OpCounts &ops) {
  std::string text;
  for (auto [i, entry] : llvm::enumerate(ops))
    text += (i ? ", " : "") + entry.first.str();
  return text;
}

/// "1 op", "3 ops".
std::string count(unsigned n, StringRef noun) {
  return std::to_string(n) + " " + noun.str() + (n == 1 ? "" : "s");
}

unsigned total(const OpCounts &ops) {
  unsigned n = 0;
  for (const auto &entry : ops)
    n += entry.second;
  return n;
}

/// One engine's decisions and what the pass did with them.
struct EnginePrecision {
  EngineOp engine;
  Mode mode = Mode::FP32;
  /// The stored dtype (native modes) or the autocast dtype.
  Type lowType;
  unsigned params = 0, buffers = 0;
  /// Native: ops run in the engine's dtype, ops computed in f32, ops kept
  /// in the wider dtype the model's code asks for.
  OpCounts native, wrapped, kept;
  /// Autocast: ops cast to the autocast dtype, to f32, promoted, others.
  OpCounts lower, fp32, promoted, other;
};

struct AssignPrecisionPass
    : public mlir::ds::impl::DSAssignPrecisionBase<AssignPrecisionPass> {
  using DSAssignPrecisionBase::DSAssignPrecisionBase;

  std::vector<EnginePrecision> engines;
  /// The module's target device (ds.target_device) and its tables.
  TargetDevice device = TargetDevice::CPU;
  const PrecisionTables *tables = nullptr;
  /// The `no-kernel-ops` option.
  OpList extraNoKernel;
  /// Casts made so far: (value, element type) -> the cast values.
  DenseMap<std::pair<Value, Type>, SmallVector<Value, 1>> casts;
  /// Values of native engines that the model's code made wider than the
  /// engine's dtype on purpose (`.float()`, `dtype=`), and what follows from
  /// them: kept wide ("Explicit upcasts" in docs/precision.md).
  DenseSet<Value> upcast;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    device = getTargetDevice(module);
    tables = &PrecisionTables::get(device);
    engines.clear();
    casts.clear();
    upcast.clear();
    extraNoKernel.names.clear();
    for (const std::string &op : noKernelOps)
      extraNoKernel.names.insert(op);
    WalkResult differentiated = module.walk([](BackwardBeginOp op) {
      op.emitError() << "-ds-assign-precision must run before -ds-autodiff "
                        "(the backward would keep the forward's dtypes)";
      return WalkResult::interrupt();
    });
    if (differentiated.wasInterrupted())
      return signalPassFailure();
    for (EngineOp engine : module.getOps<EngineOp>()) {
      FailureOr<EngineConfigAttr> config =
          engine.requireConfig("-ds-assign-precision");
      if (failed(config))
        return signalPassFailure();
      engines.push_back(decide(engine, config->getPrecisionOrDefault()));
    }
    retypeState(module);
    for (auto func : module.getOps<func::FuncOp>())
      if (failed(rewrite(func)))
        return signalPassFailure();
    for (EnginePrecision &e : engines)
      remark(e);
  }

  /// Records the engine's precision decision on it.
  EnginePrecision decide(EngineOp engine, PrecisionAttr precision) {
    EnginePrecision e;
    e.engine = engine;
    for (StringRef name :
         {"precision", "grad_accum_dtype", "autocast_dtype", "loss_scaler"})
      engine->removeAttr(name);
    switch (precision.getMode()) {
    case PrecisionMode::FP32:
      return e;
    case PrecisionMode::FP16:
      e.mode = Mode::FP16;
      break;
    case PrecisionMode::BF16:
      e.mode = Mode::BF16;
      break;
    case PrecisionMode::Autocast:
      e.mode = Mode::Autocast;
      break;
    }
    e.lowType = e.mode == Mode::Autocast ? precision.getAutocastDtype()
                                         : precision.getModelDtype();
    engine.setPrecision(precision.getMode());
    engine.setGradAccumDtype(precision.getResolvedGradAccumDtype());
    if (e.mode == Mode::Autocast)
      engine.setAutocastDtype(e.lowType);
    // fp16: DeepSpeed's loss scaler; fp16 autocast: the torch.amp.GradScaler
    // DeepSpeed creates for it.
    if (LossScalerAttr scaler = precision.getLossScaler())
      engine.setLossScalerAttr(scaler);
    return e;
  }

  /// Native modes: the engine's float parameters and buffers, and every read
  /// of them, in the engine's dtype.
  void retypeState(ModuleOp module) {
    llvm::StringMap<Type> retyped;
    for (EnginePrecision &e : engines) {
      if (e.mode != Mode::BF16 && e.mode != Mode::FP16)
        continue;
      StringRef name = e.engine.getSymName();
      auto retype = [&](Operation *op, TypeAttr typeAttr, unsigned &count) {
        auto tensor = dyn_cast<RankedTensorType>(typeAttr.getValue());
        if (!tensor || !isa<FloatType>(tensor.getElementType()) ||
            tensor.getElementType() == e.lowType)
          return;
        Type newType = tensor.clone(e.lowType);
        op->setAttr("type", TypeAttr::get(newType));
        retyped[SymbolTable::getSymbolName(op).getValue()] = newType;
        ++count;
      };
      for (ParamOp param : module.getOps<ParamOp>())
        if (param.getEngine() && *param.getEngine() == name)
          retype(param, param.getTypeAttr(), e.params);
      for (BufferOp buffer : module.getOps<BufferOp>())
        if (buffer.getEngine() && *buffer.getEngine() == name)
          retype(buffer, buffer.getTypeAttr(), e.buffers);
    }
    if (retyped.empty())
      return;
    module.walk([&](Operation *op) {
      if (auto get = dyn_cast<GetParamOp>(op)) {
        if (Type t = retyped.lookup(get.getName()))
          get.getResult().setType(cast<RankedTensorType>(t));
      } else if (auto get = dyn_cast<GetBufferOp>(op)) {
        if (Type t = retyped.lookup(get.getName()))
          get.getResult().setType(cast<RankedTensorType>(t));
      }
    });
  }

  /// The engine an op with module path `module` belongs to: the one whose
  /// module is the longest prefix of it; null when none.
  EnginePrecision *engineOf(StringRef module) {
    EnginePrecision *best = nullptr;
    for (EnginePrecision &e : engines) {
      StringRef prefix = e.engine.getModule();
      // The engine's own module (`student`) and everything below it.
      if ((module == prefix || isUnderModule(module, prefix)) &&
          (!best || prefix.size() > best->engine.getModule().size()))
        best = &e;
    }
    return best;
  }

  /// `v` as element type `elem`, before `user`: an earlier cast of `v` to
  /// `elem` that dominates `user` is reused.
  Value castTo(Value v, Type elem, Operation *user, StringRef module,
               StringRef moduleClass) {
    if (cast<RankedTensorType>(v.getType()).getElementType() == elem)
      return v;
    SmallVector<Value, 1> &made = casts[{v, elem}];
    for (Value c : made)
      if (c.getParentBlock()->findAncestorOpInBlock(*user))
        return c;
    OpBuilder builder(user);
    Value c =
        createDtypeCast(builder, user->getLoc(), v, elem, module, moduleClass);
    made.push_back(c);
    ++numCasts;
    return c;
  }

  /// The element types a float operand is cast through (empty: none).
  using CastChain = SmallVector<Type, 2>;

  /// Casts every float tensor operand of `op`, and every float tensor
  /// element of a ds.list_construct operand, through `chainOf(value)`. The
  /// casts of list elements go before the list; a list another op reads
  /// too is copied first, so that only `op` sees the casts.
  template <typename Fn> void castFloatOperands(AtenOp op, Fn chainOf) {
    auto apply = [&](Value v, Operation *at) {
      for (Type t : chainOf(v))
        v = castTo(v, t, at, op.getModule(), op.getModuleClass());
      return v;
    };
    for (unsigned i = 0, n = op->getNumOperands(); i < n; ++i) {
      Value arg = op->getOperand(i);
      if (isFloatTensorType(arg.getType())) {
        if (!chainOf(arg).empty())
          op->setOperand(i, apply(arg, op));
        continue;
      }
      auto list = arg.getDefiningOp<ListConstructOp>();
      if (!list || llvm::none_of(list.getElements(), [&](Value e) {
            return isFloatTensorType(e.getType()) && !chainOf(e).empty();
          }))
        continue;
      if (!list->hasOneUse()) {
        OpBuilder builder(op);
        list = cast<ListConstructOp>(builder.clone(*list));
        op->setOperand(i, list.getResult());
      }
      for (unsigned j = 0; j < list->getNumOperands(); ++j) {
        Value e = list->getOperand(j);
        if (isFloatTensorType(e.getType()) && !chainOf(e).empty())
          list->setOperand(j, apply(e, list));
      }
    }
  }

  static Type elementOf(Value v) {
    return cast<RankedTensorType>(v.getType()).getElementType();
  }

  /// Makes LibTorch's implicit promotion explicit: when `op`'s result follows
  /// promotion (DTypeInference.h) and its float tensor
  /// operands (dimensioned ones, or 0-dim ones when there are only those)
  /// have different dtypes, the narrower are cast up. Returns whether a cast
  /// was made.
  bool promoteExplicitly(AtenOp op) {
    if (!followsPromotion(op))
      return false;
    SmallVector<Value> floats = floatTensorOperands(op);
    Type target = promotedFloatType(floats);
    if (!target)
      return false;
    bool anyDimensioned = llvm::any_of(floats, [](Value v) {
      return cast<RankedTensorType>(v.getType()).getRank() > 0;
    });
    bool mixed = llvm::any_of(floats, [&](Value v) {
      bool decides =
          !anyDimensioned || cast<RankedTensorType>(v.getType()).getRank() > 0;
      return decides && elementOf(v) != target;
    });
    if (!mixed)
      return false;
    castFloatOperands(op, [&](Value v) {
      bool decides =
          !anyDimensioned || cast<RankedTensorType>(v.getType()).getRank() > 0;
      return decides && elementOf(v) != target ? CastChain{target}
                                               : CastChain{};
    });
    return true;
  }

  LogicalResult rewrite(func::FuncOp func) {
    SmallVector<Operation *> ops;
    // Post-order is program order for every definition and use.
    func.walk([&](Operation *op) { ops.push_back(op); });
    for (Operation *op : ops) {
      if (auto aten = dyn_cast<AtenOp>(op)) {
        if (failed(rewriteAten(aten)))
          return failure();
      } else if (auto ifOp = dyn_cast<IfOp>(op)) {
        inferIfResultTypes(ifOp);
      } else if (auto unpack = dyn_cast<ListUnpackOp>(op)) {
        // The elements of a list an operator returned have its dtype.
        if (auto producer = unpack.getList().getDefiningOp<AtenOp>())
          if (Type elem = inferredFloatResultType(producer))
            for (Value r : unpack.getResults())
              if (isFloatTensorType(r.getType()))
                r.setType(withElementType(r.getType(), elem));
      } else if (auto set = dyn_cast<SetBufferOp>(op)) {
        // A buffer keeps its (engine's) dtype whatever computed the update.
        auto buffer = SymbolTable::lookupNearestSymbolFrom<BufferOp>(
            op, set.getNameAttr());
        if (!buffer)
          continue;
        Type want = cast<RankedTensorType>(buffer.getType()).getElementType();
        Value v = set.getValue();
        if (isFloatTensorType(v.getType()) && elementOf(v) != want) {
          StringRef module, moduleClass;
          if (auto def = v.getDefiningOp<AtenOp>()) {
            module = def.getModule();
            moduleClass = def.getModuleClass();
          }
          set.getValueMutable().assign(castTo(v, want, op, module, moduleClass));
        }
      }
    }
    auto ret = cast<func::ReturnOp>(func.getBody().back().getTerminator());
    func.setType(FunctionType::get(func.getContext(), func.getArgumentTypes(),
                                   ret.getOperandTypes()));
    return success();
  }

  LogicalResult rewriteAten(AtenOp op) {
    EnginePrecision *e = engineOf(op.getModule());
    Mode mode = e ? e->mode : Mode::FP32;
    bool hasFloats = !floatTensorOperands(op).empty();
    if (mode == Mode::FP32 || !hasFloats) {
      promoteExplicitly(op);
      inferResultTypes(op);
      return success();
    }
    if (mode == Mode::Autocast)
      return rewriteAutocast(op, *e);
    rewriteNative(op, *e);
    return success();
  }

  /// Whether LibTorch has no kernel on the target device for `op` in a
  /// native engine's dtype (the device's tables, or the no-kernel-ops
  /// option).
  bool hasNoKernel(StringRef op, Mode mode) const {
    return extraNoKernel.contains(op) ||
           (mode == Mode::FP16 ? tables->f16NoKernel : tables->bf16NoKernel)
               .contains(op);
  }

  /// The float dtype `op`'s `dtype` argument asks for, when it is a
  /// constant; null otherwise.
  static Type requestedFloatType(AtenOp op) {
    std::optional<unsigned> pos = dtypeArgumentPosition(op.getOp());
    if (!pos || *pos >= op.getArgs().size())
      return Type();
    auto constant = op.getArgs()[*pos].getDefiningOp<ConstantOp>();
    if (!constant || !isa<IntegerAttr>(constant.getValue()))
      return Type();
    Type elem = elementTypeOfScalarTypeCode(
        op.getContext(), cast<IntegerAttr>(constant.getValue()).getInt());
    return elem && isa<FloatType>(elem) ? elem : Type();
  }

  /// Whether float type `t` is wider than a native engine's `low`.
  static bool widerThan(Type t, Type low) {
    return t && (t.isF32() || t.isF64()) && t != low;
  }

  /// The model's explicit upcasts in a native engine (docs/precision.md,
  /// "Explicit upcasts"); returns whether `op` was handled here.
  bool keepExplicitUpcast(AtenOp op, EnginePrecision &e) {
    Type low = e.lowType;
    SmallVector<Value> floats = floatTensorOperands(op);
    bool readsUpcast =
        llvm::any_of(floats, [&](Value v) { return upcast.contains(v); });
    Type requested = requestedFloatType(op);
    StringRef name = op.getOp();
    bool isCast = name == "aten::to.dtype" || name == "aten::to.dtype_layout";
    if (readsUpcast && isCast && requested == elementOf(op.getArgs()[0])) {
      // A cast of an upcast value to the dtype it already has: in the f32
      // capture, `x.to(input_dtype)` after `x.float()` (the model restoring
      // its input's dtype, which was f32 when it was captured). It restores
      // the engine's dtype.
      std::optional<unsigned> pos = dtypeArgumentPosition(name);
      OpBuilder builder(op);
      op->setOperand(*pos, ConstantOp::create(
                               builder, op.getLoc(), builder.getI64Type(),
                               builder.getI64IntegerAttr(scalarTypeCodeOf(low))));
      inferResultTypes(op);
      e.native[name]++;
      return true;
    }
    // A factory that takes its shape from a tensor (`zeros_like(x)`, which
    // torch.jit.trace records with the dtype it saw, f32) is no upcast:
    // only casts and ops that compute in the dtype they are given.
    bool factory = name.ends_with("_like") ||
                   name.starts_with("aten::new_") ||
                   name.starts_with("aten::full") ||
                   name.starts_with("aten::empty");
    bool asks = widerThan(requested, low) && !floats.empty() && !factory;
    if (!readsUpcast && !asks)
      return false;
    // Values from outside the upcast still enter in the engine's dtype;
    // then torch's promotion decides (a bf16 weight times an f32 upcast
    // value is f32).
    castFloatOperands(op, [&](Value v) {
      return upcast.contains(v) || elementOf(v) == low ? CastChain{}
                                                       : CastChain{low};
    });
    promoteExplicitly(op);
    inferResultTypes(op);
    for (Value r : op.getResults())
      if (isFloatTensorType(r.getType()) && widerThan(elementOf(r), low))
        upcast.insert(r);
    e.kept[name]++;
    return true;
  }

  void rewriteNative(AtenOp op, EnginePrecision &e) {
    if (keepExplicitUpcast(op, e))
      return;
    Type low = e.lowType;
    Type f32 = Float32Type::get(op.getContext());
    bool native = !hasNoKernel(op.getOp(), e.mode);
    Type compute = native ? low : f32;
    // Round every float operand to the engine's dtype, then (no kernel)
    // widen it to f32.
    castFloatOperands(op, [&](Value v) {
      CastChain chain;
      if (elementOf(v) != low)
        chain.push_back(low);
      if (compute != low)
        chain.push_back(compute);
      return chain;
    });
    inferResultTypes(op);
    (native ? e.native : e.wrapped)[op.getOp()]++;
    if (native)
      return;
    // Each f32 result is rounded back to the engine's dtype.
    OpBuilder builder(op->getContext());
    builder.setInsertionPointAfter(op);
    for (Value r : op.getResults()) {
      if (!isFloatTensorType(r.getType()) || elementOf(r) != f32)
        continue;
      Value back = createDtypeCast(builder, op.getLoc(), r, low, op.getModule(),
                                   op.getModuleClass());
      r.replaceAllUsesExcept(back, back.getDefiningOp());
      ++numCasts;
    }
  }

  /// The first operand of an op of the fp32_set_opt_dtype list that
  /// autocast runs in f32: an eligible float tensor (not f64), the op's
  /// `dtype` None; null otherwise (the op then follows its inputs).
  Value fp32FirstOperand(AtenOp op) const {
    StringRef name = op.getOp();
    if (!tables->autocastFp32FirstOperand.contains(name) ||
        op.getArgs().empty())
      return Value();
    Value first = op.getArgs()[0];
    if (!isFloatTensorType(first.getType()) || elementOf(first).isF64())
      return Value();
    // Every such operator of the registry has a known dtype position; one
    // without is taken as called without a dtype.
    if (std::optional<unsigned> pos = dtypeArgumentPosition(name);
        pos && *pos < op.getArgs().size() &&
        !isa<mlir::ds::NoneType>(op.getArgs()[*pos].getType()))
      return Value();
    return first;
  }

  LogicalResult rewriteAutocast(AtenOp op, EnginePrecision &e) {
    StringRef name = op.getOp();
    Type f32 = Float32Type::get(op.getContext());
    // torch.autocast casts only eligible tensors: floating point, not f64.
    auto eligible = [](Value v) { return !elementOf(v).isF64(); };
    auto castAll = [&](Type target) {
      castFloatOperands(op, [&](Value v) {
        return eligible(v) && elementOf(v) != target ? CastChain{target}
                                                     : CastChain{};
      });
    };
    if (tables->autocastLower.contains(name)) {
      castAll(e.lowType);
      e.lower[op.getOp()]++;
    } else if (tables->autocastFp32.contains(name)) {
      castAll(f32);
      e.fp32[op.getOp()]++;
    } else if (Value first = fp32FirstOperand(op)) {
      // fp32_set_opt_dtype: an unset dtype becomes f32 when the first
      // operand is eligible, which casts that operand to f32 before the
      // operation (as dtype= does); the other operands are left alone.
      if (elementOf(first) != f32)
        op->setOperand(
            0, castTo(first, f32, op, op.getModule(), op.getModuleClass()));
      e.fp32[op.getOp()]++;
    } else if (tables->autocastPromote.contains(name)) {
      // at::autocast::promote_type: the autocast dtype unless an eligible
      // operand is f32.
      Type widest = e.lowType;
      for (Value v : floatTensorOperands(op))
        if (eligible(v) && elementOf(v) != e.lowType)
          widest = f32;
      castAll(widest);
      e.promoted[op.getOp()]++;
    } else {
      promoteExplicitly(op);
      e.other[op.getOp()]++;
    }
    inferResultTypes(op);
    return success();
  }

  void remark(EnginePrecision &e) {
    if (e.mode == Mode::FP32)
      return;
    InFlightDiagnostic diag = e.engine.emitRemark();
    std::string low = debugString(e.lowType);
    if (e.mode == Mode::Autocast) {
      diag << "autocast (" << low << "): parameters stay f32; "
           << count(total(e.lower), "op") << " cast to " << low;
      if (!e.lower.empty())
        diag << " (" << describe(e.lower) << ")";
      diag << ", " << count(total(e.fp32), "op") << " cast to f32";
      if (!e.fp32.empty())
        diag << " (" << describe(e.fp32) << ")";
      diag << ", " << count(total(e.promoted), "op")
           << " cast to the widest type";
      if (!e.promoted.empty())
        diag << " (" << describe(e.promoted) << ")";
      diag << ", " << count(total(e.other), "op")
           << " left in their inputs' dtype";
      return;
    }
    StringRef mode = e.mode == Mode::FP16 ? "fp16" : "bf16";
    diag << mode << ": " << count(e.params, "parameter") << " and "
         << count(e.buffers, "buffer") << " stored in " << low << "; "
         << count(total(e.native), "op") << " in " << low << ", "
         << count(total(e.wrapped), "op") << " computed in f32 and rounded to "
         << low;
    if (!e.wrapped.empty())
      diag << " (no " << low << " "
           << (device == TargetDevice::CUDA ? "CUDA" : "CPU")
           << " kernel: " << describe(e.wrapped) << ")";
    if (!e.kept.empty())
      diag << "; " << count(total(e.kept), "op")
           << " kept wider as the model's code asks (" << describe(e.kept)
           << ")";
  }
};

} // namespace
