//===- ShapeBoundRules.h - per-operator rules of ShapeBounds ----*- C++ -*-===//
//
// A rule gives the bounds of an aten op's first result from its operands'
// (ShapeBounds applies them to every tensor result of that rank: topk's
// values and indices, where's index tensors). The rules live in one file
// per family (IndexingBoundRules.cpp, ViewBoundRules.cpp,
// ComputeBoundRules.cpp); ShapeBoundRules.cpp holds the tables, the query and
// the helpers they share. Private to the analysis.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_DIALECT_DS_ANALYSIS_SHAPEBOUNDRULES_H
#define DS_LIB_DIALECT_DS_ANALYSIS_SHAPEBOUNDRULES_H

#include "ds/Dialect/DS/Analysis/ShapeBounds.h"

#include "llvm/ADT/StringMap.h"

#include <functional>

namespace mlir::ds::bounds {

constexpr int64_t kUnbounded = ShapeBounds::kUnbounded;

using Bounds = SmallVector<int64_t>;
using MaybeBounds = std::optional<Bounds>;

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
  /// Constant dim operand `i` counted from the front of `rank` dims; -1 if
  /// it is not a constant or out of range.
  int64_t dim(unsigned i, int64_t rank) const;
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

using RuleTable = llvm::StringMap<BoundRule>;
/// Registration, one per rule file: by qualified name (`exact`) or, for
/// rules every overload shares, by name without overload (`base`).
void addIndexingRules(RuleTable &exact);
void addViewRules(RuleTable &exact);
void addComputeRules(RuleTable &exact, RuleTable &base);

/// Saturating arithmetic on bounds: kUnbounded absorbs, overflow gives it.
int64_t addBounds(int64_t a, int64_t b);
int64_t mulBounds(int64_t a, int64_t b);
int64_t maxBounds(int64_t a, int64_t b);
/// The smaller of two bounds of the same size (either one is sound).
int64_t minBounds(int64_t a, int64_t b);
std::optional<int64_t> product(ArrayRef<int64_t> bounds);

/// `dim` counted from the front of `rank` dims, or -1 if out of range.
int64_t normalizeDim(int64_t dim, int64_t rank);
/// NumPy broadcasting of bounds: an aligned dim is at most the largest of
/// the operands' (a size 1 stretches to the other size).
Bounds broadcastBounds(ArrayRef<Bounds> shapes);
/// The shape of operand 0.
MaybeBounds likeOperand0(const BoundQuery &q);
/// Operand 0 with dim (operand `dimArg`) set to `size`, or to the smaller of
/// the two when `shrinksOnly` (slices and top-k never grow a dim).
MaybeBounds withDim(const BoundQuery &q, unsigned dimArg, int64_t size,
                    bool shrinksOnly);

} // namespace mlir::ds::bounds

#endif // DS_LIB_DIALECT_DS_ANALYSIS_SHAPEBOUNDRULES_H
