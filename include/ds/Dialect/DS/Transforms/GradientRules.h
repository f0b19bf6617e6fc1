//===- GradientRules.h - vector-Jacobian products of ds.aten ----*- C++ -*-===//
//
// The interface every differentiable operator implements for `-ds-autodiff`:
// given the gradients of an op's results, build the gradients of its operands
// with ds ops. Rules are keyed by the operator's qualified name
// (`aten::linear`), so adding an operator to autodiff means adding its rule
// (lib/Dialect/DS/Transforms/Gradients/*.cpp) and nothing else.
//
//===----------------------------------------------------------------------===//

#ifndef DS_DIALECT_DS_TRANSFORMS_GRADIENTRULES_H
#define DS_DIALECT_DS_TRANSFORMS_GRADIENTRULES_H

#include "ds/Dialect/DS/IR/DSOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include <functional>

namespace mlir::ds {

/// What a rule sees and the helpers it builds with.
class GradientBuilder {
public:
  GradientBuilder(OpBuilder &builder, AtenOp op, ArrayRef<Value> resultGrads,
                  ArrayRef<bool> operandNeedsGrad,
                  ArrayRef<SmallVector<Value>> listElements)
      : b(builder), op(op), resultGrads(resultGrads),
        operandNeedsGrad(operandNeedsGrad), listElements(listElements) {}

  OpBuilder &b;
  AtenOp op;

  /// Gradient of result `i`, or null when no gradient reaches it.
  Value resultGrad(unsigned i) const {
    return i < resultGrads.size() ? resultGrads[i] : Value();
  }
  /// Gradient of result `i`, or zeros of its type when none reaches it.
  Value resultGradOrZeros(unsigned i);
  /// zeros_like(v): v's shape and dtype.
  Value zerosLike(Value v);
  /// Whether operand `i` needs a gradient (it depends on a trainable
  /// parameter and is a floating-point tensor or a list holding such).
  bool needsGrad(unsigned i) const {
    return i < operandNeedsGrad.size() && operandNeedsGrad[i];
  }
  Value operand(unsigned i) { return op.getArgs()[i]; }
  Value result(unsigned i) { return op.getResult(i); }
  /// Elements of a list operand built by ds.list_construct.
  ArrayRef<Value> listOperand(unsigned i) const { return listElements[i]; }

  /// The gradients of the pieces of an operator's one list result (split,
  /// chunk, unbind by sizes the data decides), unpacked by ds.list_unpack
  /// into `elements`; null where no gradient reaches a piece.
  void setResultListGrads(ArrayRef<Value> elementGrads,
                          ArrayRef<Value> elements) {
    resultListGrads = elementGrads;
    resultListElements = elements;
  }
  /// The gradients of the op's pieces: one per result, or, for one list
  /// result, one per element it was unpacked into (zeros where none reaches
  /// a piece); failure where the list was never unpacked.
  FailureOr<SmallVector<Value>> pieceGrads();

  /// Sets the gradient of tensor operand `i`.
  void setGrad(unsigned i, Value grad) { grads[i] = grad; }
  /// Sets the gradients of the elements of list operand `i` (null: none).
  void setListGrads(unsigned i, SmallVector<Value> elementGrads) {
    listGrads[i] = std::move(elementGrads);
  }

  // Builders. Emitted ops carry the forward op's module tags and location.
  Value aten(StringRef name, ArrayRef<Value> args, Type resultType);
  SmallVector<Value> atenN(StringRef name, ArrayRef<Value> args,
                           TypeRange resultTypes);
  Value constInt(int64_t v);
  Value constFloat(double v);
  Value constBool(bool v);
  Value constStr(StringRef v);
  Value none();
  Value intList(ArrayRef<int64_t> values);
  Value boolList(ArrayRef<bool> values);
  /// `grad` summed over broadcast dims to the shape of `like` (a no-op when
  /// the static shapes already agree).
  Value sumToShapeOf(Value grad, Value like);
  /// Static int of a ds.constant operand, if it is one.
  std::optional<int64_t> staticInt(Value v) const;
  std::optional<double> staticFloat(Value v) const;

  llvm::DenseMap<unsigned, Value> grads;
  llvm::DenseMap<unsigned, SmallVector<Value>> listGrads;

private:
  ArrayRef<Value> resultGrads;
  ArrayRef<Value> resultListGrads, resultListElements;
  ArrayRef<bool> operandNeedsGrad;
  ArrayRef<SmallVector<Value>> listElements;
};

using GradientRule = std::function<LogicalResult(GradientBuilder &)>;

/// The rule of an operator, or null when it has none (not differentiable).
const GradientRule *lookupGradientRule(StringRef qualifiedName);

/// Operators whose results never carry a gradient (comparisons, indices,
/// shape queries, makers, and the piecewise-constant roundings, whose
/// gradient autograd defines as zero); autodiff treats them as constants.
bool isNonDifferentiable(StringRef qualifiedName);

/// ATen's math path of `op` (an aten::scaled_dot_product_attention whose
/// dropout_p is `dropout`, in (0, 1)), emitted at the builder's insertion
/// point: s = (q * sqrt(scale)) @ (k^T * sqrt(scale)) + mask,
/// p = _safe_softmax(s), then aten::dropout(p, dropout, true) @ v, as
/// LibTorch computes attention with dropout. Returns the output; an error on
/// `op` names what cannot be written so (a non-constant is_causal, ...).
FailureOr<Value> emitAttentionWithDropout(OpBuilder &builder, AtenOp op,
                                          double dropout);

namespace rules {
using RuleTable = llvm::StringMap<GradientRule>;
/// Rule files register into the table through these (one per file).
void addElementwiseRules(RuleTable &table);
void addShapeRules(RuleTable &table);
void addNNRules(RuleTable &table);
void addEinsumRules(RuleTable &table);
void addReductionRules(RuleTable &table);
void addLossRules(RuleTable &table);
void addSpatialRules(RuleTable &table);
void addNativeNNRules(RuleTable &table);
} // namespace rules

} // namespace mlir::ds

#endif // DS_DIALECT_DS_TRANSFORMS_GRADIENTRULES_H
