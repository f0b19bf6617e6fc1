//===- GraphImporter.h - the walk over a TorchScript graph ------*- C++ -*-===//
//
// Internal to lib/Import. The walk is split by job: GraphImporter.cpp (values,
// scopes, examples, IR emission, structural nodes, calls), ControlFlow.cpp
// (prim::If, prim::Loop), GradMode.cpp (`with torch.no_grad()` blocks) and
// OperatorImport.cpp (one operator call: handlers, static evaluation,
// in-place operators, the generic `ds.aten`).
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_IMPORT_GRAPHIMPORTER_H
#define DS_LIB_IMPORT_GRAPHIMPORTER_H

#include "ImportInternal.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

#include <torch/csrc/jit/ir/ir.h>

namespace mlir::ds::import {

class GraphImporter {
public:
  GraphImporter(OpBuilder &builder, const torch::jit::Module &model,
                const StateTable &state, bool training,
                const std::string &modelPath,
                const NodeModules *nodeModules = nullptr,
                bool growExamples = true)
      : builder(builder), ctx(builder.getContext()), model(model), state(state),
        training(training), modelPath(modelPath), nodeModules(nodeModules),
        growExamples(growExamples),
        unknownLoc(FileLineColLoc::get(ctx, modelPath, 0, 0)) {}

  LogicalResult run(torch::jit::Graph &graph, func::FuncOp func,
                    const std::vector<ExampleInput> &inputs);

private:
  friend class NodeCall;
  using JitValue = torch::jit::Value;
  using JitNode = torch::jit::Node;

  // Values and scopes.
  Abstract &lookup(JitValue *v);
  /// The binding of `v`, or null when it is not bound (out of scope).
  Abstract *find(JitValue *v);
  bool isDefinedOutside(JitValue *v) const;
  void bind(JitValue *v, Abstract a) {
    assignStorage(a);
    scopes.back().map[v] = std::move(a);
  }
  /// Binds `v` and notes it as rebound when it comes from an outer scope.
  void rebind(JitValue *v, Abstract a);

  // Nodes.
  LogicalResult importBlock(torch::jit::Block *block, ArrayRef<Abstract> args,
                            SmallVectorImpl<Abstract> &results);
  LogicalResult importNode(JitNode *node);
  LogicalResult importGetAttr(JitNode *node);
  LogicalResult importCall(JitNode *node);
  LogicalResult importIf(JitNode *node);             // ControlFlow.cpp
  LogicalResult importLoop(JitNode *node);           // ControlFlow.cpp
  LogicalResult importGradMode(JitNode *node);       // GradMode.cpp
  LogicalResult importOperator(JitNode *node);       // OperatorImport.cpp
  LogicalResult evaluateStatic(JitNode *node);       // OperatorImport.cpp
  LogicalResult importGenericOperator(JitNode *node, // OperatorImport.cpp
                                      ArrayRef<Abstract> args);
  void rebindUpdated(JitValue *target, const Abstract &updated);

  // Views (Views.cpp): how each view was taken, taken again once its base is
  // written in place, and writes into views written into their bases.
  /// The view of `parent` (named `parentName`) that `step` takes, as `result`
  /// records it (`result` is the op's result, typed and with its example).
  void recordView(Abstract &result, const Abstract &parent,
                  JitValue *parentName, ViewStep step);
  /// The step by which result `index` of `node` (list element when
  /// `listElement`) is a view of its first argument, if it is one.
  std::optional<ViewStep> viewStepOf(JitNode *node, ArrayRef<Abstract> args,
                                     const Abstract &result, unsigned index,
                                     bool listElement, StringRef emittedName);
  /// Whether `a` or a tensor in it is a view whose root was written since.
  bool isStale(const Abstract &a);
  /// `a` (and the tensors in it) taken again from its base if the base was
  /// written in place since; an error at `at` when it cannot be.
  LogicalResult refreshView(Abstract &a, JitNode *at);
  /// Refreshes the bound values `node` reads.
  LogicalResult refreshInputs(JitNode *node);
  FailureOr<Abstract> replayStep(const ViewStep &step, const Abstract &parent,
                                 JitNode *at);
  FailureOr<Abstract> writeBackStep(const ViewStep &step,
                                    const Abstract &parent,
                                    const Abstract &src, JitNode *at);
  /// `base[view] = updated` in functional form, through every step from the
  /// view's root; later uses of the root see the result.
  LogicalResult writeIntoBase(JitNode *node, const Abstract &view,
                              const Abstract &updated);
  /// Why an in-place op may not write into `view`, or empty.
  std::string unwritableViewReason(const Abstract &view);
  /// Names of views' roots that leave a callee: `names` maps the callee's
  /// to the caller's; other roots are out of scope from here on.
  static void renameViewRoots(Abstract &a,
                              const llvm::DenseMap<JitValue *, JitValue *> &names);

  // IR emission.
  Value materialize(const Abstract &a, Location loc);
  Value materializeConstant(const c10::IValue &v, Location loc);
  Type typeOfExample(const c10::IValue &v, const std::vector<bool> &dyn,
                     const c10::TypePtr &jitType);
  Type listElementType(const Abstract &list);
  Operation *emitAten(StringRef name, ArrayRef<Value> args,
                      TypeRange resultTypes, JitNode *node);

  // Examples.
  bool runOnExamples(JitNode *node, ArrayRef<Abstract> args,
                     std::vector<c10::IValue> &outputs, std::string &error);

  // Diagnostics and tags.
  Location loc(JitNode *node);
  /// The module (path, class) whose code `node` is.
  const std::pair<std::string, std::string> &moduleOf(JitNode *node) const;
  /// An error at `node`'s source line, with a note naming the module whose
  /// code it is.
  InFlightDiagnostic error(JitNode *node);

  struct Scope {
    llvm::DenseMap<JitValue *, Abstract> map;
    /// Outer values rebound in this scope (in-place updates), in order.
    llvm::SmallVector<JitValue *> rebound;
  };

  OpBuilder &builder;
  MLIRContext *ctx;
  const torch::jit::Module &model;
  const StateTable &state;
  bool training;
  std::string modelPath;
  const NodeModules *nodeModules;
  /// ImportOptions::growExamples.
  bool growExamples;
  Location unknownLoc;
  std::vector<Scope> scopes;
  /// Walking a branch the example does not take: ops may fail on examples.
  int speculative = 0;
  /// (path, class) of the module whose method is being imported.
  std::vector<std::pair<std::string, std::string>> moduleStack;
  /// The calls, ifs and loops being imported, outermost first.
  std::vector<JitNode *> enclosing;
  /// Open `with torch.no_grad()` / `torch.enable_grad()` blocks: their
  /// prim::Enter and whether they enable grad (GradMode.cpp).
  struct GradModeBlock {
    JitNode *enter;
    bool enabled;
    /// Outer values the block uses, as they were at prim::Enter.
    llvm::SmallVector<std::pair<JitValue *, Value>> before;
  };
  std::vector<GradModeBlock> gradModes;
  /// The last storage id handed out (Abstract::storage).
  unsigned lastStorage = 0;
  /// Hands out storage ids to the tensors in `a` that have none.
  void assignStorage(Abstract &a);
  /// The output of an in-place operator -> the value it updated (its alias).
  llvm::DenseMap<JitValue *, JitValue *> inplaceResultOf;
  /// The value an in-place operator updated -> its outputs.
  llvm::DenseMap<JitValue *, llvm::SmallVector<JitValue *, 1>> inplaceResultsOf;
  bool gradEnabled() const {
    return training && (gradModes.empty() || gradModes.back().enabled);
  }

  /// Keeps `node` on `enclosing` while its blocks are imported.
  struct Enclosing {
    Enclosing(GraphImporter &gi, JitNode *node) : gi(gi) {
      gi.enclosing.push_back(node);
    }
    ~Enclosing() { gi.enclosing.pop_back(); }
    GraphImporter &gi;
  };
};

} // namespace mlir::ds::import

#endif // DS_LIB_IMPORT_GRAPHIMPORTER_H
