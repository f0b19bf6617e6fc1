//===- ShapeBounds.h - upper bounds of data-dependent sizes -----*- C++ -*-===//
//
// Tensors whose sizes depend on the data (`nonzero`, `torch.where(c)`,
// boolean-mask indexing, indexing by such indices) have `?` dims. The memory
// prediction needs an upper bound for each: `nonzero(x)` has at most numel(x)
// rows, `index_select(x, d, i)` at most numel(i) entries along d, and so on.
// This analysis derives them forward, op by op, from rules keyed by the aten
// operator's name (lib/Dialect/DS/Analysis/*BoundRules.cpp). A dynamic
// dim that no rule bounds is unbounded, never 0.
//
//===----------------------------------------------------------------------===//

#ifndef DS_DIALECT_DS_ANALYSIS_SHAPEBOUNDS_H
#define DS_DIALECT_DS_ANALYSIS_SHAPEBOUNDS_H

#include "ds/Dialect/DS/IR/DSOps.h"
#include "llvm/ADT/DenseMap.h"

#include <optional>

namespace mlir::ds {

class ShapeBounds {
public:
  /// A dim without a bound.
  static constexpr int64_t kUnbounded = ShapedType::kDynamic;

  /// Bounds every ranked tensor value defined inside `root` (regions are
  /// walked in program order, a `ds.if`'s branches before its results).
  explicit ShapeBounds(Operation *root);

  /// Per dim of a ranked tensor value: its static size, the bound of a
  /// dynamic dim, or kUnbounded. Empty for values that are not ranked
  /// tensors.
  SmallVector<int64_t> getBounds(Value value) const;
  /// Whether `value` is a ranked tensor with a dynamic dim.
  static bool isDynamic(Value value);
  /// The product of getBounds; nullopt when a dim is unbounded.
  std::optional<int64_t> getNumelBound(Value value) const;
  /// Upper bound of an integer scalar: a constant, a size of a tensor or
  /// its numel; nullopt when unknown.
  std::optional<int64_t> getIntBound(Value value) const;
  /// Per element of an int list (ds.list_construct, aten::size): constants
  /// as they are (-1 included), other elements their getIntBound or
  /// kUnbounded; nullopt when the elements are unknown.
  std::optional<SmallVector<int64_t>> getIntListBounds(Value list) const;

private:
  void visit(Operation *op);
  void setBounds(Value value, ArrayRef<int64_t> bounds);

  /// Dynamic values only; static ones answer from their type.
  llvm::DenseMap<Value, SmallVector<int64_t>> dynamicBounds;
};

} // namespace mlir::ds

#endif // DS_DIALECT_DS_ANALYSIS_SHAPEBOUNDS_H
