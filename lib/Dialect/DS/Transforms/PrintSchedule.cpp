//===- PrintSchedule.cpp - per-rank order of compute and collectives ------===//
//
// Prints what every rank does, in order, in the training function and in
// @step: runs of compute ops compressed to one line each, and every
// collective, wait and optimizer update on its own line. This is the
// schedule -ds-zero-partition made; being the same on every rank is what
// keeps collectives from deadlocking, and it holds when no collective is
// inside a ds.if (the printer checks, the verifier guarantees it). The IR is
// left unchanged.
//
//===----------------------------------------------------------------------===//

#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSPRINTSCHEDULE
#include "ds/Dialect/DS/Transforms/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

/// A bucket as the schedule names it: its engine, its number (by offset)
/// and its size.
struct BucketInfo {
  std::string engine;
  int64_t index = 0;
  int64_t numel = 0;
};

bool isCollective(Operation *op) {
  return isa<AllReduceOp, ReduceScatterOp, AllGatherOp>(op);
}

/// "0.001", "1e-08".
std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

class SchedulePrinter {
public:
  SchedulePrinter(ModuleOp module, llvm::raw_ostream &os) : os(os) {
    for (auto &entry : bucketsByEngine(module))
      for (auto [index, bucket] : llvm::enumerate(entry.second))
        buckets[bucket.getSymName()] = {entry.first().str(), int64_t(index),
                                        bucket.getNumel()};
  }

  void print(func::FuncOp func);

private:
  struct Line {
    std::string text;
    Operation *waitedBy = nullptr;
  };

  /// "reduce_scatter @model bucket 1", with " (544 elements)" when `size`.
  std::string describe(Operation *collective, bool size) const;

  llvm::raw_ostream &os;
  llvm::StringMap<BucketInfo> buckets;
};

} // namespace

std::string SchedulePrinter::describe(Operation *collective, bool size) const {
  auto bucketName = collective->getAttrOfType<FlatSymbolRefAttr>("bucket");
  std::string text = collective->getName().stripDialect().str();
  auto it = buckets.find(bucketName.getValue());
  if (it == buckets.end())
    return text + " " + bucketName.getValue().str();
  const BucketInfo &info = it->second;
  text += " @" + info.engine + " bucket " + std::to_string(info.index);
  if (size)
    text += " (" + std::to_string(info.numel) + " elements)";
  return text;
}

void SchedulePrinter::print(func::FuncOp func) {
  Block &body = func.getBody().front();
  int64_t inBranches = 0;
  func.walk([&](Operation *op) {
    if (isCollective(op) && op->getParentOfType<IfOp>())
      ++inBranches;
  });

  SmallVector<Line> lines;
  llvm::DenseMap<Operation *, size_t> lineOf;
  // The open run of compute ops.
  int64_t runOps = 0;
  StringRef lastGrad;
  bool backward = false;
  auto flush = [&] {
    if (runOps == 0)
      return;
    std::string text = std::string(backward ? "backward: " : "forward: ") +
                       std::to_string(runOps) + (runOps == 1 ? " op" : " ops");
    if (!lastGrad.empty())
      text += " (through grad @" + lastGrad.str() + ")";
    lines.push_back({text});
    runOps = 0;
    lastGrad = StringRef();
  };
  for (Operation &op : body) {
    if (isa<BackwardBeginOp>(op)) {
      flush();
      backward = true;
      continue;
    }
    if (op.hasTrait<OpTrait::IsTerminator>())
      continue;
    if (isCollective(&op)) {
      flush();
      lineOf[&op] = lines.size();
      lines.push_back(
          {describe(&op, true), *op.getResult(0).getUsers().begin()});
      continue;
    }
    if (auto wait = dyn_cast<WaitOp>(op)) {
      flush();
      lineOf[&op] = lines.size();
      lines.push_back(
          {"wait " + describe(wait.getToken().getDefiningOp(), false)});
      continue;
    }
    if (auto step = dyn_cast<OptimizerStepOp>(op)) {
      flush();
      std::string text = "optimizer_step @" + step.getEngine().str() + " (" +
                         step.getType().str() + ", lr " +
                         number(step.getLr().convertToDouble());
      if (auto scheduler = step.getSchedulerAttr())
        if (auto type = scheduler.getAs<StringAttr>("type"))
          text += " scheduled by " + type.getValue().str();
      lines.push_back({text + ")"});
      continue;
    }
    ++runOps;
    op.walk([&](GradOp grad) { lastGrad = grad.getParam(); });
  }
  flush();

  os << "schedule of @" << func.getSymName();
  if (inBranches == 0)
    os << " (identical on every rank: no collective is inside a ds.if)\n";
  else
    os << " (NOT identical on every rank: " << inBranches
       << " collective(s) inside a ds.if)\n";
  if (lines.empty())
    os << "  (nothing)\n";
  for (auto [index, line] : llvm::enumerate(lines)) {
    os << llvm::format("%4zu  ", index + 1) << line.text;
    if (line.waitedBy) {
      auto it = lineOf.find(line.waitedBy);
      if (it != lineOf.end())
        os << " -> wait at " << it->second + 1;
    }
    os << "\n";
  }
}

namespace {

struct PrintSchedulePass
    : public mlir::ds::impl::DSPrintScheduleBase<PrintSchedulePass> {
  using DSPrintScheduleBase::DSPrintScheduleBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SchedulePrinter printer(module, llvm::outs());
    bool any = false;
    for (StringRef name : {StringRef(funcName), StringRef("step")})
      if (auto func = module.lookupSymbol<func::FuncOp>(name);
          func && !func.isExternal()) {
        printer.print(func);
        any = true;
      }
    if (!any)
      llvm::outs() << "no @" << funcName << " or @step to print\n";
    llvm::outs().flush();
    markAllAnalysesPreserved();
  }
};

} // namespace
