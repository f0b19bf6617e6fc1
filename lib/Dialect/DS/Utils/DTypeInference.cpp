//===- DTypeInference.cpp - element types of ds.aten results --------------===//
//
// LibTorch's type promotion, restricted to what the passes change: float
// element types. See DTypeInference.h for the rules.
//
//===----------------------------------------------------------------------===//

#include "ds/Dialect/DS/Utils/DTypeInference.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::ds;

bool mlir::ds::isFloatTensorType(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && isa<FloatType>(tensor.getElementType());
}

Type mlir::ds::withElementType(Type type, Type elem) {
  if (auto tensor = dyn_cast<RankedTensorType>(type))
    return tensor.clone(elem);
  return type;
}

/// f64 > f32 > {f16, bf16}.
static int floatRank(Type t) {
  if (t.isF64())
    return 3;
  if (t.isF32())
    return 2;
  return 1;
}

Type mlir::ds::promoteFloatTypes(Type a, Type b) {
  if (!a || a == b)
    return b;
  if (!b)
    return a;
  int ra = floatRank(a), rb = floatRank(b);
  if (ra != rb)
    return ra > rb ? a : b;
  // f16 and bf16: torch.promote_types(half, bfloat16) is float32.
  return Float32Type::get(a.getContext());
}

int64_t mlir::ds::scalarTypeCodeOf(Type elem) {
  if (elem.isF16())
    return 5;
  if (elem.isF32())
    return 6;
  if (elem.isF64())
    return 7;
  if (elem.isBF16())
    return 15;
  if (elem.isInteger(64))
    return 4;
  return -1;
}

Type mlir::ds::elementTypeOfScalarTypeCode(MLIRContext *context,
                                           int64_t code) {
  Builder b(context);
  switch (code) {
  case 0:
    return b.getIntegerType(8, /*isSigned=*/false);
  case 1:
    return b.getI8Type();
  case 2:
    return b.getI16Type();
  case 3:
    return b.getI32Type();
  case 4:
    return b.getI64Type();
  case 5:
    return b.getF16Type();
  case 6:
    return b.getF32Type();
  case 7:
    return b.getF64Type();
  case 11:
    return b.getI1Type();
  case 15:
    return b.getBF16Type();
  default:
    return Type();
  }
}

/// The position of the `dtype` argument of the registered operators that
/// have one (from LibTorch 2.15's schemas; `out_dtype` of the `.dtype`
/// overloads of mm, bmm, addmm and baddbmm).
std::optional<unsigned> mlir::ds::dtypeArgumentPosition(StringRef op) {
  static const llvm::StringMap<unsigned> positions = {
      {"aten::arange", 1},        {"aten::arange.start", 2},
      {"aten::arange.start_step", 3},
      {"aten::addmm.dtype", 3},   {"aten::baddbmm.dtype", 3},
      {"aten::bmm.dtype", 2},     {"aten::mm.dtype", 2},
      {"aten::cumsum", 2},        {"aten::empty.memory_format", 1},
      {"aten::empty_like", 1},    {"aten::full", 2},
      {"aten::full_like", 2},     {"aten::log_softmax.int", 2},
      {"aten::_safe_softmax", 2},
      {"aten::mean", 1},          {"aten::mean.dim", 3},
      {"aten::new_full", 3},      {"aten::new_ones", 2},
      {"aten::new_zeros", 2},     {"aten::ones", 1},
      {"aten::ones_like", 1},     {"aten::softmax.int", 2},
      {"aten::sum", 1},           {"aten::sum.dim_IntList", 3},
      {"aten::to.device", 2},     {"aten::to.dtype", 1},
      {"aten::to.prim_Device", 2}, {"aten::to.prim_dtype", 1},
      {"aten::view.dtype", 1},    {"aten::zeros", 1},
      {"aten::zeros_like", 1}};
  auto it = positions.find(op);
  if (it == positions.end())
    return std::nullopt;
  return it->second;
}

/// Operators whose first result has the dtype of their input (operand 0)
/// even when their parameters are wider: FOLLOWS_INPUT of
/// PrecisionTables.def (LibTorch 2.15's CPU batch norm takes a bf16 / f16
/// input with f32 weights and statistics and returns the input's dtype).
/// Their other float results (native_batch_norm's saved statistics) keep
/// their declared types. Entries are base names.
static bool followsInput(StringRef op) {
  static const llvm::StringSet<> names = [] {
    llvm::StringSet<> set;
#define FOLLOWS_INPUT(NAME) set.insert(NAME);
#include "ds/Dialect/DS/Utils/PrecisionTables.def"
    return set;
  }();
  size_t dot = op.find('.', op.find("::") + 2);
  return names.contains(dot == StringRef::npos ? op : op.take_front(dot));
}

bool mlir::ds::followsPromotion(AtenOp op) {
  StringRef name = op.getOp();
  return !dtypeArgumentPosition(name) && !followsInput(name) &&
         name != "aten::type_as" && name != "aten::to.other";
}

SmallVector<Value> mlir::ds::floatTensorOperands(AtenOp op) {
  SmallVector<Value> values;
  for (Value arg : op.getArgs()) {
    if (isFloatTensorType(arg.getType())) {
      values.push_back(arg);
      continue;
    }
    if (auto list = arg.getDefiningOp<ListConstructOp>())
      for (Value element : list.getElements())
        if (isFloatTensorType(element.getType()))
          values.push_back(element);
  }
  return values;
}

Type mlir::ds::promotedFloatType(ValueRange values) {
  Type dimensioned, zeroDim;
  for (Value v : values) {
    auto tensor = dyn_cast<RankedTensorType>(v.getType());
    if (!tensor || !isa<FloatType>(tensor.getElementType()))
      continue;
    Type &slot = tensor.getRank() > 0 ? dimensioned : zeroDim;
    slot = promoteFloatTypes(slot, tensor.getElementType());
  }
  return dimensioned ? dimensioned : zeroDim;
}

Type mlir::ds::inferredFloatResultType(AtenOp op) {
  StringRef name = op.getOp();
  if (std::optional<unsigned> pos = dtypeArgumentPosition(name);
      pos && *pos < op.getArgs().size()) {
    // dtype=None falls through to the operands (zeros_like, sum); a
    // constant code decides; anything else keeps the declared type.
    Value dtype = op.getArgs()[*pos];
    if (auto constant = dtype.getDefiningOp<ConstantOp>()) {
      if (auto code = dyn_cast<IntegerAttr>(constant.getValue()))
        return elementTypeOfScalarTypeCode(op.getContext(), code.getInt());
    }
    if (!isa<NoneType>(dtype.getType()))
      return Type();
  }
  if (followsInput(name))
    return op.getArgs().empty() || !isFloatTensorType(op.getArgs()[0].getType())
               ? Type()
               : cast<RankedTensorType>(op.getArgs()[0].getType())
                     .getElementType();
  if ((name == "aten::type_as" || name == "aten::to.other") &&
      op.getArgs().size() > 1) {
    auto other = dyn_cast<RankedTensorType>(op.getArgs()[1].getType());
    return other ? other.getElementType() : Type();
  }
  return promotedFloatType(floatTensorOperands(op));
}

bool mlir::ds::inferResultTypes(AtenOp op) {
  if (followsInput(op.getOp())) {
    if (op.getArgs().empty() || op->getNumResults() == 0 ||
        !isFloatTensorType(op.getArgs()[0].getType()) ||
        !isFloatTensorType(op->getResult(0).getType()))
      return false;
    Type elem = cast<RankedTensorType>(op.getArgs()[0].getType())
                    .getElementType();
    Value result = op->getResult(0);
    if (cast<RankedTensorType>(result.getType()).getElementType() == elem)
      return false;
    result.setType(withElementType(result.getType(), elem));
    return true;
  }
  Type elem = inferredFloatResultType(op);
  if (!elem || !isa<FloatType>(elem))
    return false;
  // The flash attention kernel's second result (logsumexp) is f32 for bf16 /
  // f16 / f32 inputs (probed with LibTorch 2.15), f64 for f64 ones.
  int statResult =
      op.getOp() == "aten::_scaled_dot_product_flash_attention_for_cpu" ? 1
                                                                         : -1;
  bool changed = false;
  for (auto [i, result] : llvm::enumerate(op.getResults())) {
    auto tensor = dyn_cast<RankedTensorType>(result.getType());
    if (!tensor || !isa<FloatType>(tensor.getElementType()))
      continue;
    Type want = int(i) == statResult
                    ? promoteFloatTypes(elem, Float32Type::get(op.getContext()))
                    : elem;
    if (tensor.getElementType() == want)
      continue;
    result.setType(tensor.clone(want));
    changed = true;
  }
  return changed;
}

Value mlir::ds::createDtypeCast(OpBuilder &builder, Location loc, Value value,
                                Type elem, StringRef module,
                                StringRef moduleClass) {
  MLIRContext *context = builder.getContext();
  Value code = ConstantOp::create(builder, loc, builder.getI64Type(),
                                  builder.getI64IntegerAttr(scalarTypeCodeOf(elem)));
  Value no = ConstantOp::create(builder, loc, builder.getI1Type(),
                                builder.getBoolAttr(false));
  Value none = ConstantOp::create(builder, loc, NoneType::get(context),
                                  builder.getUnitAttr());
  OperationState state(loc, AtenOp::getOperationName());
  state.addOperands({value, code, no, no, none});
  state.addTypes(withElementType(value.getType(), elem));
  state.addAttribute("op", builder.getStringAttr("aten::to.dtype"));
  state.addAttribute("module", builder.getStringAttr(module));
  state.addAttribute("module_class", builder.getStringAttr(moduleClass));
  return builder.create(state)->getResult(0);
}

void mlir::ds::inferIfResultTypes(IfOp op) {
  SmallVector<YieldOp> yields;
  for (Region *region : {&op.getThenRegion(), &op.getElseRegion()})
    if (!region->empty())
      if (auto yield = dyn_cast<YieldOp>(region->front().getTerminator()))
        yields.push_back(yield);
  if (yields.empty())
    return;
  for (auto [i, result] : llvm::enumerate(op.getResults())) {
    if (!isFloatTensorType(result.getType()))
      continue;
    Type elem;
    for (YieldOp yield : yields)
      if (i < yield.getValues().size())
        if (auto t = dyn_cast<RankedTensorType>(yield.getValues()[i].getType()))
          if (isa<FloatType>(t.getElementType()))
            elem = promoteFloatTypes(elem, t.getElementType());
    if (!elem)
      continue;
    for (YieldOp yield : yields) {
      if (i >= yield.getValues().size())
        continue;
      Value v = yield.getValues()[i];
      auto t = dyn_cast<RankedTensorType>(v.getType());
      if (!t || t.getElementType() == elem)
        continue;
      OpBuilder builder(yield);
      StringRef module, moduleClass;
      if (auto def = v.getDefiningOp<AtenOp>()) {
        module = def.getModule();
        moduleClass = def.getModuleClass();
      }
      yield->setOperand(i, createDtypeCast(builder, yield.getLoc(), v, elem,
                                           module, moduleClass));
    }
    result.setType(withElementType(result.getType(), elem));
  }
}

void mlir::ds::inferFunctionTypes(func::FuncOp func) {
  // Post-order: the ops of a ds.if's branches before the ds.if, which is
  // program order for every use.
  func.walk([](Operation *op) {
    if (auto aten = dyn_cast<AtenOp>(op))
      inferResultTypes(aten);
    else if (auto ifOp = dyn_cast<IfOp>(op))
      inferIfResultTypes(ifOp);
  });
  if (func.getBody().empty())
    return;
  auto ret = cast<func::ReturnOp>(func.getBody().back().getTerminator());
  func.setType(FunctionType::get(func.getContext(), func.getArgumentTypes(),
                                 ret.getOperandTypes()));
}
