//===- ShapeEvaluation.cpp - static evaluation of traced shape arithmetic -===//
//
// torch.jit.trace records `B, T, C = x.size(); q.view(B, T, h, C // h)` as
// chains on 0-dim tensors: `aten::size` (an int), `prim::NumToTensor` (a
// 0-dim tensor), `aten::floor_divide` / `aten::div` / `aten::mul` /
// `aten::add` / `aten::sub` on such tensors, then `aten::Int` or
// `aten::ScalarImplicit` back to a number and `prim::ListConstruct` of those.
// The example inputs fix every shape per micro-step, so such a chain is
// evaluated once on the examples and its values are static, exactly like
// the int arithmetic of a scripted model.
//
// Python numbers in tensor arithmetic are traced as 0-dim tensor constants
// (`att * 0.25` becomes `aten::mul.Tensor(att, {0.25})`), where a scripted
// model has `aten::mul.Scalar(att, 0.25)`. With a self of rank >= 1, both
// promote the same way (a 0-dim operand only contributes its category), so
// the importer emits the `.Scalar` overload: scripted and traced twins give
// the same IR. Likewise a traced factory op's `pin_memory=False` is imported
// as the `None` (not pinned) a scripted call passes.
//
//===----------------------------------------------------------------------===//

#include "ImportInternal.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir::ds::import;

bool mlir::ds::import::isShapeArithmetic(llvm::StringRef qualName) {
  static const llvm::StringSet<> ops = {
      "prim::NumToTensor", "aten::floor_divide", "aten::div",
      "aten::true_divide", "aten::mul",          "aten::add",
      "aten::sub",         "aten::rsub",         "aten::remainder",
      "aten::neg",         "aten::floor",        "aten::ceil",
      "aten::to",          "aten::detach",       "aten::clone",
      "aten::sqrt",        "aten::pow",          "aten::eq",
      "aten::ne",          "aten::lt",           "aten::le",
      "aten::gt",          "aten::ge",           "aten::max",
      "aten::min",         "aten::abs"};
  return ops.contains(qualName);
}

bool mlir::ds::import::isStaticShapeValue(llvm::ArrayRef<c10::IValue> outs) {
  return !outs.empty() && llvm::all_of(outs, [](const c10::IValue &v) {
    return v.isTensor() && v.toTensor().defined() && v.toTensor().dim() == 0;
  });
}

std::optional<std::string>
mlir::ds::import::scalarOverloadOf(const c10::FunctionSchema &schema,
                                   const c10::IValue &self,
                                   const c10::IValue &other) {
  static const llvm::StringSet<> binary = {"aten::add", "aten::sub",
                                           "aten::mul", "aten::div"};
  if (!binary.contains(schema.name()))
    return std::nullopt;
  std::string overload = schema.overload_name();
  std::string scalarOverload;
  if (overload == "Tensor")
    scalarOverload = "Scalar";
  else if (overload == "Tensor_mode")
    scalarOverload = "Scalar_mode";
  else
    return std::nullopt;
  if (!self.isTensor() || !self.toTensor().defined() ||
      self.toTensor().dim() == 0 || !other.isTensor() ||
      !other.toTensor().defined() || other.toTensor().dim() != 0)
    return std::nullopt;
  at::ScalarType st = other.toTensor().scalar_type();
  if (!at::isFloatingType(st) && !at::isIntegralType(st, /*includeBool=*/false))
    return std::nullopt;
  return schema.name() + "." + scalarOverload;
}

c10::IValue mlir::ds::import::scalarOf(const at::Tensor &t) {
  if (at::isFloatingType(t.scalar_type()))
    return c10::IValue(t.item<double>());
  return c10::IValue(t.item<int64_t>());
}

bool mlir::ds::import::isDefaultPinMemory(const c10::FunctionSchema &schema,
                                          size_t index,
                                          const c10::IValue &value) {
  return index < schema.arguments().size() &&
         schema.arguments()[index].name() == "pin_memory" && value.isBool() &&
         !value.toBool();
}
