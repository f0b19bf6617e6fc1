//===- ShapeBoundRules.h - per-operator rules of ShapeBounds ----*- C++ -*-===//
//
// A rule gives the bounds of an aten op's first result from its operands'
// (ShapeBounds applies them to every tensor result of that rank: topk's
// values and indices, where's index tensors). Private to the analysis.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_DIALECT_DS_ANALYSIS_SHAPEBOUNDRULES_H
#define DS_LIB_DIALECT_DS_ANALYSIS_SHAPEBOUNDRULES_H

#include "ds/Dialect/DS/Analysis/ShapeBounds.h"

#include <functional>

namespace mlir::ds::bounds {

constexpr int64_t kUnbounded = ShapeBounds::kUnbounded;

/// What a rule sees: the op and the bounds of what it reads.
class BoundQuery {
public:
  BoundQuery(const ShapeBounds &analysis, AtenOp op)
      : analysis(analysis), op(op) {}

  unsigned numArgs() const { return op.getArgs().size(); }
  Value arg(unsigned i) const { return op.getArgs()[i]; }
  /// Bounds of tensor operand `i` (empty when it is not a ranked tensor).
  SmallVector<int64_t> tensor(unsigned i) const {
    return i < numArgs() ? analysis.getBounds(arg(i)) : SmallVector<int64_t>();
  }
  std::optional<int64_t> numel(unsigned i) const {
    return i < numArgs() ? analysis.getNumelBound(arg(i)) : std::nullopt;
  }
  /// The value of a ds.constant int operand.
  std::optional<int64_t> constInt(unsigned i) const;
  std::optional<bool> constBool(unsigned i) const;
  /// getIntListBounds of operand `i`.
  std::optional<SmallVector<int64_t>> intList(unsigned i) const {
    return i < numArgs() ? analysis.getIntListBounds(arg(i)) : std::nullopt;
  }
  /// The elements of a ds.list_construct operand (None entries included).
  std::optional<SmallVector<Value>> listElements(unsigned i) const;
  /// Rank of the first result (-1 when it is not a ranked tensor).
  int64_t resultRank() const;

  const ShapeBounds &analysis;
  /// Accessors of ops are not const.
  mutable AtenOp op;
};

/// Bounds of the first result; nullopt: no bound.
using BoundRule =
    std::function<std::optional<SmallVector<int64_t>>(const BoundQuery &)>;

/// The rule of `qualifiedName` ("aten::index_select"), else of its name
/// without the overload ("aten::add" for "aten::add.Tensor"); null when
/// there is none.
const BoundRule *lookupBoundRule(StringRef qualifiedName);

/// Saturating arithmetic on bounds: kUnbounded absorbs, overflow gives it.
int64_t addBounds(int64_t a, int64_t b);
int64_t mulBounds(int64_t a, int64_t b);
int64_t maxBounds(int64_t a, int64_t b);
/// The smaller of two bounds of the same size (either one is sound).
int64_t minBounds(int64_t a, int64_t b);
std::optional<int64_t> product(ArrayRef<int64_t> bounds);

} // namespace mlir::ds::bounds

#endif // DS_LIB_DIALECT_DS_ANALYSIS_SHAPEBOUNDRULES_H
