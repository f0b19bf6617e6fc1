//===- DSOps.cpp - ds dialect operations ----------------------------------===//

#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/IR/AtenRegistry.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace mlir::ds;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// Whether a value of type `actual` may stand where `expected` is declared.
/// Tensor-typed list elements only fix the kind (any shape, any dtype).
static bool isCompatibleElement(Type expected, Type actual) {
  if (expected == actual)
    return true;
  // Tensor lists hold tensors of any shape and dtype, and None where the
  // schema says `Tensor?[]` (aten::index).
  return isa<TensorType>(expected) && isa<TensorType, ds::NoneType>(actual);
}

/// Resolves a state symbol and checks that it is a `StateOp` whose declared
/// type equals `type`.
template <typename StateOp>
static LogicalResult verifyStateUse(Operation *op, FlatSymbolRefAttr name,
                                    Type type, StringRef kind,
                                    SymbolTableCollection &symbolTable) {
  Operation *decl = symbolTable.lookupNearestSymbolFrom(op, name.getAttr());
  if (!decl)
    return op->emitOpError() << "refers to undeclared " << kind << " " << name;
  auto state = dyn_cast<StateOp>(decl);
  if (!state)
    return op->emitOpError()
           << "expects " << name << " to be a ds." << kind << ", but it is a '"
           << decl->getName() << "'";
  if (state.getType() != type)
    return op->emitOpError()
           << "type " << type << " does not match the declared type "
           << state.getType() << " of " << kind << " " << name;
  return success();
}

//===----------------------------------------------------------------------===//
// ParamOp / BufferOp
//===----------------------------------------------------------------------===//

template <typename StateOp>
static LogicalResult verifyStateDecl(StateOp op) {
  auto type = cast<RankedTensorType>(op.getType());
  if (!type.hasStaticShape())
    return op.emitOpError() << "state must have a static shape, but "
                            << op.getSymName() << " has type " << type;
  return success();
}

template <typename StateOp>
static LogicalResult verifyEngineRef(StateOp op,
                                     SymbolTableCollection &symbolTable) {
  auto engine = op.getEngineAttr();
  if (!engine)
    return success();
  Operation *decl = symbolTable.lookupNearestSymbolFrom(op, engine.getAttr());
  if (!isa_and_nonnull<EngineOp>(decl))
    return op.emitOpError() << "names engine " << engine
                            << ", which is not a ds.engine in this module";
  return success();
}

LogicalResult ParamOp::verify() { return verifyStateDecl(*this); }
LogicalResult BufferOp::verify() { return verifyStateDecl(*this); }

LogicalResult ParamOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyEngineRef(*this, symbolTable);
}
LogicalResult BufferOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyEngineRef(*this, symbolTable);
}

//===----------------------------------------------------------------------===//
// GetParamOp / GetBufferOp / SetBufferOp
//===----------------------------------------------------------------------===//

LogicalResult GetParamOp::verifySymbolUses(SymbolTableCollection &table) {
  return verifyStateUse<ParamOp>(*this, getNameAttr(), getType(), "param",
                                 table);
}

LogicalResult GetBufferOp::verifySymbolUses(SymbolTableCollection &table) {
  return verifyStateUse<BufferOp>(*this, getNameAttr(), getType(), "buffer",
                                  table);
}

LogicalResult SetBufferOp::verifySymbolUses(SymbolTableCollection &table) {
  return verifyStateUse<BufferOp>(*this, getNameAttr(), getValue().getType(),
                                  "buffer", table);
}

LogicalResult GradOp::verifySymbolUses(SymbolTableCollection &table) {
  if (failed(verifyStateUse<ParamOp>(*this, getParamAttr(),
                                     getValue().getType(), "param", table)))
    return failure();
  auto param = cast<ParamOp>(
      table.lookupNearestSymbolFrom(*this, getParamAttr().getAttr()));
  if (!param.getRequiresGrad())
    return emitOpError() << "gradient of " << getParamAttr()
                         << ", which does not require grad";
  return success();
}

//===----------------------------------------------------------------------===//
// ConstantOp
//===----------------------------------------------------------------------===//

/// Whether `value` is a valid constant of `type`; when not, `reason` says why.
static bool checkConstant(Attribute value, Type type, std::string *reason) {
  auto fail = [&](StringRef expected) {
    if (reason)
      *reason = ("expects " + expected + " for a constant of type ").str();
    return false;
  };
  if (isa<ds::NoneType>(type))
    return isa<UnitAttr>(value) || fail("'unit'");
  if (isa<StrType, DeviceType>(type))
    return isa<StringAttr>(value) || fail("a string");
  if (isa<ListType>(type)) {
    if (reason)
      *reason = "cannot hold a constant list (use ds.list_construct) of type ";
    return false;
  }
  if (auto tensor = dyn_cast<TensorType>(type)) {
    auto elements = dyn_cast<ElementsAttr>(value);
    if (!elements)
      return fail("an elements attribute");
    return elements.getType() == tensor ||
           fail("an elements attribute of the same type");
  }
  if (type.isInteger(64) || type.isInteger(1)) {
    auto integer = dyn_cast<IntegerAttr>(value);
    return (integer && integer.getType() == type) ||
           fail(type.isInteger(1) ? "'true' or 'false'" : "an integer");
  }
  if (type.isF64()) {
    auto fp = dyn_cast<FloatAttr>(value);
    return (fp && fp.getType() == type) || fail("a float");
  }
  if (reason)
    *reason = "cannot hold a constant of type ";
  return false;
}

bool ConstantOp::isValidConstant(Attribute value, Type type) {
  return checkConstant(value, type, nullptr);
}

LogicalResult ConstantOp::verify() {
  std::string reason;
  if (!checkConstant(getValue(), getType(), &reason))
    return emitOpError() << reason << getType() << ", but got " << getValue();
  return success();
}

// The value prints with its own type where it has one (`1 : i64`,
// `dense<0.0> : tensor<2xf32>`); otherwise the result type follows
// (`unit : !ds.none`).
void ConstantOp::print(OpAsmPrinter &p) {
  p << " ";
  p.printAttribute(getValue());
  auto typed = dyn_cast<TypedAttr>(getValue());
  if (!typed || typed.getType() != getType())
    p << " : " << getType();
  p.printOptionalAttrDict((*this)->getAttrs(), {"value"});
}

ParseResult ConstantOp::parse(OpAsmParser &parser, OperationState &result) {
  Attribute value;
  Type type;
  if (parser.parseAttribute(value))
    return failure();
  if (succeeded(parser.parseOptionalColon())) {
    if (parser.parseType(type))
      return failure();
  } else if (auto typed = dyn_cast<TypedAttr>(value)) {
    type = typed.getType();
  }
  // `"tanh" : !ds.str` parses as a string attribute carrying the type; the
  // op keeps the plain string, as the importer builds it.
  if (auto str = dyn_cast<StringAttr>(value)) {
    if (!type)
      type = str.getType();
    value = StringAttr::get(parser.getContext(), str.getValue());
  }
  if (!type)
    return parser.emitError(parser.getCurrentLocation(),
                            "expected ':' and the constant's type");
  result.addAttribute("value", value);
  result.addTypes(type);
  return parser.parseOptionalAttrDict(result.attributes);
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

//===----------------------------------------------------------------------===//
// ListConstructOp / ListUnpackOp
//===----------------------------------------------------------------------===//

LogicalResult ListConstructOp::verify() {
  Type elementType = getType().getElementType();
  for (auto [index, element] : llvm::enumerate(getElements()))
    if (!isCompatibleElement(elementType, element.getType()))
      return emitOpError() << "element #" << index << " has type "
                           << element.getType() << ", but the list holds "
                           << elementType;
  return success();
}

LogicalResult ListUnpackOp::verify() {
  Type elementType = getList().getType().getElementType();
  for (auto [index, result] : llvm::enumerate(getElements()))
    if (!isCompatibleElement(elementType, result.getType()))
      return emitOpError() << "result #" << index << " has type "
                           << result.getType() << ", but the list holds "
                           << elementType;
  return success();
}

//===----------------------------------------------------------------------===//
// AtenOp
//===----------------------------------------------------------------------===//

LogicalResult AtenOp::verify() {
  std::optional<AtenOpInfo> info = lookupAtenOp(getOp());
  if (!info)
    return emitOpError() << "operator '" << getOp()
                         << "' is not in the supported operator registry";
  if (getArgs().size() != info->numArgs)
    return emitOpError() << "operator '" << getOp() << "' takes "
                         << info->numArgs << " arguments, but "
                         << getArgs().size() << " were given";
  // A list-returning operator may be unpacked into several results.
  if (getNumResults() != info->numResults &&
      !(info->returnsList && getNumResults() != 1))
    return emitOpError() << "operator '" << getOp() << "' returns "
                         << info->numResults << " values, but the op has "
                         << getNumResults() << " results";
  return success();
}

void AtenOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  std::optional<AtenOpInfo> info = lookupAtenOp(getOp());
  // Unknown operators are rejected by the verifier; until then assume the
  // worst so that no rewrite drops or reorders them.
  if (info && info->effect == AtenEffect::Pure)
    return;
  effects.emplace_back(MemoryEffects::Read::get());
  effects.emplace_back(MemoryEffects::Write::get());
}

//===----------------------------------------------------------------------===//
// IfOp
//===----------------------------------------------------------------------===//

/// Whether a branch may yield `yielded` for a result of type `expected`: the
/// same type, or a tensor whose static dims fill the result's dynamic ones
/// (branches that see different routings yield different row counts).
static bool isRefinementOf(Type yielded, Type expected) {
  if (yielded == expected)
    return true;
  auto y = dyn_cast<RankedTensorType>(yielded);
  auto e = dyn_cast<RankedTensorType>(expected);
  if (!y || !e || y.getElementType() != e.getElementType() ||
      y.getRank() != e.getRank())
    return false;
  for (int64_t d = 0; d < y.getRank(); ++d)
    if (!e.isDynamicDim(d) && y.getDimSize(d) != e.getDimSize(d))
      return false;
  return true;
}

LogicalResult IfOp::verify() {
  for (auto [name, region] :
       {std::pair<StringRef, Region *>{"then", &getThenRegion()},
        std::pair<StringRef, Region *>{"else", &getElseRegion()}}) {
    auto yield = cast<YieldOp>(region->front().getTerminator());
    if (yield.getValues().size() != getNumResults())
      return emitOpError() << "'" << name << "' branch yields "
                           << yield.getValues().size()
                           << " values, but the op has " << getNumResults()
                           << " results";
    for (auto [index, pair] :
         llvm::enumerate(llvm::zip(yield.getValues(), getResultTypes()))) {
      Type yielded = std::get<0>(pair).getType();
      Type expected = std::get<1>(pair);
      if (!isRefinementOf(yielded, expected))
        return emitOpError() << "'" << name << "' branch yields " << yielded
                             << " as result #" << index << ", but the op has "
                             << expected;
    }
  }
  return success();
}

#define GET_OP_CLASSES
#include "ds/Dialect/DS/IR/DSOps.cpp.inc"
