//===- PrintSchedule.cpp - per-rank order of compute and collectives ------===//

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
  bool persistent = false;
  /// Stage 3, not persistent: counts as live while gathered.
  bool sharded = false;
  /// Stage 3: the leaf module the bucket holds (empty: none).
  std::optional<std::string> leaf;
  /// The dtype its collectives move ("bf16"); empty: the gradients' own.
  std::string dtype;
};

/// "0.001", "1e-08".
std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

class SchedulePrinter {
public:
  SchedulePrinter(ModuleOp module, llvm::raw_ostream &os) : os(os) {
    for (auto &entry : bucketsByEngine(module)) {
      auto engine = module.lookupSymbol<EngineOp>(entry.first());
      int64_t stage =
          engine && engine.isPartitioned() ? *engine.getZeroStage() : 0;
      for (auto [index, bucket] : llvm::enumerate(entry.second)) {
        BucketInfo &info = buckets[bucket.getSymName()];
        info = {entry.first().str(), int64_t(index), bucket.getNumel(),
                bucket.getPersistent(), bucket.isShardedAt(stage)};
        if (std::optional<StringRef> leaf = bucket.getLeaf())
          info.leaf = leaf->str();
        if (std::optional<Type> dtype = bucket.getDtype()) {
          llvm::raw_string_ostream dtypeText(info.dtype);
          dtypeText << *dtype;
        }
      }
    }
  }

  void print(func::FuncOp func);

private:
  struct Line {
    std::string text;
    Operation *waitedBy = nullptr;
    /// Printed after the wait pointer ("; live 48").
    std::string suffix;
  };

  /// "reduce_scatter @model bucket 1", with " (544 elements)" when `size`.
  std::string describe(Operation *collective, bool size) const;
  const BucketInfo *infoOf(Operation *op) const {
    auto name = op->getAttrOfType<FlatSymbolRefAttr>("bucket");
    auto it = buckets.find(name.getValue());
    return it == buckets.end() ? nullptr : &it->second;
  }

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
    text += " (" + std::to_string(info.numel) +
            (info.dtype.empty() ? "" : " " + info.dtype) + " elements" +
            (info.persistent ? ", persistent" : "") +
            (info.leaf ? ", leaf '" + *info.leaf + "'" : "") + ")";
  return text;
}

void SchedulePrinter::print(func::FuncOp func) {
  Block &body = func.getBody().front();
  int64_t inBranches = 0;
  func.walk([&](Operation *op) {
    if ((isCollective(op) || isa<WaitOp, ReleaseOp>(op)) &&
        op->getParentOfType<IfOp>())
      ++inBranches;
  });

  SmallVector<Line> lines;
  llvm::DenseMap<Operation *, size_t> lineOf;
  // Elements of sharded buckets gathered (from all_gather to release).
  int64_t live = 0, peak = 0;
  size_t peakLine = 0;
  auto liveText = [&](const BucketInfo *info, int64_t delta) -> std::string {
    if (!info || !info->sharded)
      return "";
    live += delta;
    if (live > peak) {
      peak = live;
      peakLine = lines.size() + 1; // the line about to be added
    }
    return "; live " + std::to_string(live);
  };
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
      const BucketInfo *info = infoOf(&op);
      std::string suffix =
          isa<AllGatherOp>(op) && info ? liveText(info, info->numel) : "";
      Operation *waitedBy = op.getResult(0).use_empty()
                                ? nullptr
                                : *op.getResult(0).getUsers().begin();
      lines.push_back({describe(&op, true), waitedBy, suffix});
      continue;
    }
    if (auto release = dyn_cast<ReleaseOp>(op)) {
      flush();
      const BucketInfo *info = infoOf(&op);
      std::string suffix = info ? liveText(info, -info->numel) : "";
      lines.push_back({describe(&op, false), nullptr, suffix});
      continue;
    }
    if (auto wait = dyn_cast<WaitOp>(op)) {
      flush();
      lineOf[&op] = lines.size();
      lines.push_back(
          {"wait " + describe(wait.getToken().getDefiningOp(), false)});
      continue;
    }
    if (isa<BackwardPrologueOp, BackwardEpilogueOp, LossScaleOp>(op)) {
      flush();
      auto engine = op.getAttrOfType<FlatSymbolRefAttr>("engine");
      lines.push_back(
          {op.getName().stripDialect().str() + " @" + engine.getValue().str()});
      continue;
    }
    if (auto step = dyn_cast<OptimizerStepOp>(op)) {
      flush();
      std::string text = "optimizer_step @" + step.getEngine().str() + " (" +
                         stringifyOptimizerKind(step.getType()).str() +
                         ", lr " + number(step.getLr().convertToDouble());
      if (SchedulerAttr scheduler = step.getSchedulerAttr())
        text += " scheduled by " +
                stringifySchedulerKind(scheduler.getKind()).str();
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
    os << line.suffix << "\n";
  }
  if (peak > 0)
    os << "  peak live gathered parameters: " << peak << " elements (line "
       << peakLine << ")\n";
}

namespace {

struct PrintSchedulePass
    : public mlir::ds::impl::DSPrintScheduleBase<PrintSchedulePass> {
  using DSPrintScheduleBase::DSPrintScheduleBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SchedulePrinter printer(module, llvm::outs());
    bool any = false;
    for (StringRef name :
         {StringRef(funcName), StringRef(evalFuncName), StringRef("step")}) {
      auto func = module.lookupSymbol<func::FuncOp>(name);
      if (!func || func.isExternal())
        continue;
      // The eval function has collectives only at stage 3.
      if (name == evalFuncName && name != funcName) {
        bool hasCollectives = false;
        func.walk([&](Operation *op) { hasCollectives |= isCollective(op); });
        if (!hasCollectives)
          continue;
      }
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
