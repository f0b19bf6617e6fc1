//===- DTypeInference.h - element types of ds.aten results ------*- C++ -*-===//
//
// After a pass changes the element type of some values (-ds-assign-precision
// retypes parameters and inserts `aten::to.dtype` casts), the result types of
// the ops downstream must follow, as LibTorch would compute them:
//
// - an op with an explicit, non-None `dtype` argument (`aten::to.dtype`,
//   `aten::softmax.int`, `aten::sum`, ...) produces that dtype;
// - `aten::type_as` and `aten::to.other` produce the dtype of their second
//   operand;
// - the first result of the FOLLOWS_INPUT operators of PrecisionTables.def
//   (batch_norm, native_batch_norm, instance_norm) has the dtype of their
//   input (LibTorch 2.15's CPU kernels take a bf16 / f16 input with f32
//   weights and statistics);
// - otherwise a float result takes the promoted float dtype of the op's
//   float tensor operands (elements of `ds.list_construct` operands count):
//   dimensioned tensors win over 0-dim tensors, which win over Python
//   scalars (which never count); f64 > f32 > {f16, bf16}, and f16 with bf16
//   gives f32 (torch.promote_types); the logsumexp result of
//   _scaled_dot_product_flash_attention_for_cpu is at least f32;
// - a float result of an op without float tensor operands (`aten::zeros`
//   with dtype None, `aten::arange`, `aten::randn`) keeps its declared type,
//   and integer and bool results never change.
//
//===----------------------------------------------------------------------===//

#ifndef DS_DIALECT_DS_UTILS_DTYPEINFERENCE_H
#define DS_DIALECT_DS_UTILS_DTYPEINFERENCE_H

#include "ds/Dialect/DS/IR/DSOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::ds {

/// Whether `type` is a ranked tensor of a float element type.
bool isFloatTensorType(Type type);

/// `type` (a ranked tensor) with element type `elem`; other types unchanged.
Type withElementType(Type type, Type elem);

/// The float element type torch.promote_types gives `a` and `b` (either may
/// be null: the other is returned).
Type promoteFloatTypes(Type a, Type b);

/// ATen's ScalarType code of an element type (f16 5, f32 6, f64 7, i64 4,
/// bf16 15), as TorchScript passes dtypes; -1 for other types.
int64_t scalarTypeCodeOf(Type elem);

/// The element type of ATen ScalarType code `code`; null when unknown.
Type elementTypeOfScalarTypeCode(MLIRContext *context, int64_t code);

/// The position of the `dtype` argument of registered operator `op`
/// (`aten::softmax.int`: 2, `aten::sum`: 1, `aten::to.dtype`: 1); nullopt
/// for operators without one.
std::optional<unsigned> dtypeArgumentPosition(StringRef op);

/// The float tensor operands of `op` that decide its result dtype, lists
/// expanded (elements of `ds.list_construct` operands).
SmallVector<Value> floatTensorOperands(AtenOp op);

/// The promoted float element type of `values` by torch's priority
/// (dimensioned tensors over 0-dim tensors); null when none is a float
/// tensor.
Type promotedFloatType(ValueRange values);

/// Whether `op`'s float result follows LibTorch's type promotion of its
/// float tensor operands (not an explicit dtype, not the input's or another
/// operand's dtype): only then does casting a narrower operand up to the
/// promoted type leave the result unchanged.
bool followsPromotion(AtenOp op);

/// The element type `op`'s float results must have, by the rules above; null
/// when the declared types stand.
Type inferredFloatResultType(AtenOp op);

/// Sets the element type of `op`'s float tensor results to
/// inferredFloatResultType. Returns whether a type changed.
bool inferResultTypes(AtenOp op);

/// `value` cast to element type `elem` with `aten::to.dtype` (non_blocking
/// and copy false, memory_format None), built at `builder`'s insertion point
/// and tagged with `module` / `moduleClass`.
Value createDtypeCast(OpBuilder &builder, Location loc, Value value, Type elem,
                      StringRef module, StringRef moduleClass);

/// Gives `op`'s float tensor results the promoted type of what its branches
/// yield; a branch that yields a narrower float type is cast up before its
/// `ds.yield`.
void inferIfResultTypes(IfOp op);

/// Re-infers, in program order, the result types of every `ds.aten` in
/// `func` (nested ones first), of every `ds.if` from its yields (a branch
/// that yields a narrower float type than the other is cast up before its
/// `ds.yield`), and the function's result types from its return.
void inferFunctionTypes(func::FuncOp func);

} // namespace mlir::ds

#endif // DS_DIALECT_DS_UTILS_DTYPEINFERENCE_H
