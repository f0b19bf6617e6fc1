//===- TestShapeBounds.cpp - print ShapeBounds for lit tests --------------===//
//
// -ds-test-print-shape-bounds: a remark on every op with a dynamic tensor
// result, giving each such result's bound per dim ("?" where there is none)
// and its numel bound.
//
//===----------------------------------------------------------------------===//

#include "ds/Dialect/DS/Analysis/ShapeBounds.h"

#include "mlir/Pass/Pass.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::ds;

namespace {

struct TestShapeBoundsPass
    : PassWrapper<TestShapeBoundsPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TestShapeBoundsPass)

  StringRef getArgument() const final { return "ds-test-print-shape-bounds"; }
  StringRef getDescription() const final {
    return "Print the upper bounds of dynamic tensor sizes (a remark per op)";
  }

  void runOnOperation() override {
    ShapeBounds bounds(getOperation());
    getOperation().walk([&](Operation *op) {
      for (OpResult result : op->getResults()) {
        if (!ShapeBounds::isDynamic(result))
          continue;
        InFlightDiagnostic remark = op->emitRemark();
        remark << "result #" << result.getResultNumber() << " <= [";
        llvm::interleaveComma(bounds.getBounds(result), remark,
                              [&](int64_t dim) {
                                if (dim == ShapeBounds::kUnbounded)
                                  remark << "?";
                                else
                                  remark << dim;
                              });
        remark << "]";
        if (std::optional<int64_t> numel = bounds.getNumelBound(result))
          remark << ", numel <= " << *numel;
        else
          remark << ", unbounded";
      }
    });
  }
};

} // namespace

namespace mlir::ds {
/// Declared where it is called (tools/ds-opt), as MLIR's test passes are.
void registerTestShapeBoundsPass();
} // namespace mlir::ds

void mlir::ds::registerTestShapeBoundsPass() {
  PassRegistration<TestShapeBoundsPass>();
}
