//===- ImportInternal.h - shared pieces of the TorchScript importer -------===//
//
// Internal to lib/Import: the only files that see LibTorch and MLIR together.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_IMPORT_IMPORTINTERNAL_H
#define DS_LIB_IMPORT_IMPORTINTERNAL_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Location.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include <torch/script.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mlir {
class RewritePatternSet;
} // namespace mlir

namespace mlir::ds::import {

/// Removes TorchScript's `__torch__.` prefix and `___torch_mangle_N.`
/// segments: `__torch__.torch.nn.modules.linear.___torch_mangle_0.Linear`
/// becomes `torch.nn.modules.linear.Linear`.
std::string demangleClassName(const std::string &qualifiedName);

/// MLIR element type of an ATen dtype; null for dtypes the dialect lacks.
Type elementTypeOf(MLIRContext *ctx, at::ScalarType dtype);

/// Ranked tensor type of `tensor`; dims marked in `dynamicDims` become `?`.
RankedTensorType tensorTypeOf(MLIRContext *ctx, const at::Tensor &tensor,
                              const std::vector<bool> &dynamicDims = {});

/// Schema name and overload: `aten::add.Tensor`, `aten::view`.
std::string operatorName(const c10::FunctionSchema &schema);

/// Location of a TorchScript source range (`file:line:col`), or `fallback`.
Location locationOf(MLIRContext *ctx, const torch::jit::SourceRange &range,
                    Location fallback);

/// One forward argument's example: shape of one micro-step of one rank.
struct ExampleInput {
  std::string name;
  at::Tensor example; // rank 0's rows of the example micro-step
  bool batched = true;
};

/// Reads the data file and cuts rank 0's rows of micro-step `microStep` (the
/// list form; the stacked form's micro-steps share one shape: its first)
/// for every forward argument. On error returns a message naming the file
/// and key.
std::optional<std::string>
loadExampleInputs(const std::string &path, int64_t microStep,
                  const std::vector<std::string> &argNames,
                  const std::vector<std::string> &unbatched, unsigned worldSize,
                  std::vector<ExampleInput> &out);

/// Owning module path and demangled class of every module in the hierarchy.
struct ModuleInfo {
  std::string path;
  std::string className;
};

/// The model's state as declared in IR: qualified name -> kind.
struct StateTable {
  llvm::StringMap<bool> isParam; // true: parameter, false: buffer
  /// Tied state (`head.weight = emb.weight`): alias name -> declared name.
  llvm::StringMap<std::string> aliasOf;
  /// The declared name of `name` (itself unless it is an alias).
  std::string canonical(const std::string &name) const {
    auto it = aliasOf.find(name);
    return it == aliasOf.end() ? name : it->second;
  }
  std::map<std::string, std::string> moduleClass; // module path -> class
};

/// Declares `ds.param` / `ds.buffer` for every parameter and buffer of
/// `module`, at the builder's insertion point.
StateTable declareState(OpBuilder &builder, Location loc,
                        const torch::jit::Module &module);

/// Records the submodules `model` holds in eval mode as `module`'s
/// `ds.eval_modules` and names them in a remark at `loc`.
void noteEvalModules(ModuleOp module, const torch::jit::Module &model,
                     Location loc);

/// What the importer knows about one TorchScript value.
struct Abstract {
  enum class Kind { Static, Dynamic, Module, Tuple, List };
  Kind kind = Kind::Static;
  /// Static: the value. Dynamic: an example of it (undefined when the op
  /// could not run on examples, which only happens in a data-dependent branch).
  c10::IValue example;
  /// Dynamic: its IR value.
  Value value;
  /// Dynamic tensors: which dims vary at run time.
  std::vector<bool> dynamicDims;
  /// Tuple and structural list elements.
  std::vector<Abstract> elements;
  /// List element type (TorchScript), for building lists and examples.
  c10::TypePtr elementType;
  /// Module: qualified path; Dynamic tensors read from state: state name.
  std::string path;
  bool isBuffer = false;
  bool isParam = false;
  /// Produced by a view operator (shares storage with another value).
  bool isView = false;
  /// A view taken by `aten::slice` or `aten::select` from a tensor that is
  /// not a view itself: the node that took it (its first input is the base),
  /// so that an in-place write into the view can be written into the base.
  torch::jit::Node *viewOf = nullptr;

  static Abstract makeStatic(c10::IValue v) {
    Abstract a;
    a.kind = Kind::Static;
    a.example = std::move(v);
    return a;
  }
  bool isStatic() const {
    if (kind == Kind::Static)
      return true;
    if (kind == Kind::List || kind == Kind::Tuple)
      return llvm::all_of(elements,
                          [](const Abstract &e) { return e.isStatic(); });
    return false;
  }
};

/// The example of `a` (tuples and lists rebuilt from their elements).
c10::IValue exampleOf(const Abstract &a);

/// The module path and class (TorchScript's spelling) of the module whose
/// code a node is, for graphs whose calls are not nested method calls (the
/// torch.export front door, Pt2Program.h).
using NodeModules =
    llvm::DenseMap<const torch::jit::Node *, std::pair<std::string, std::string>>;

/// Imports the graph of `model`'s method `method` into `func.func @name`.
/// `training` fixes every module's `training` flag; `nodeModules`, where
/// given, names the module of each node. Returns failure after emitting a
/// diagnostic.
LogicalResult importForward(OpBuilder &builder, const torch::jit::Module &model,
                            const StateTable &state, StringRef funcName,
                            bool training,
                            const std::vector<ExampleInput> &inputs,
                            const std::string &modelPath,
                            const std::string &method = "forward",
                            const NodeModules *nodeModules = nullptr);

//===- ShapeEvaluation.cpp ------------------------------------------------===//

/// Operators of traced shape arithmetic (`prim::NumToTensor`,
/// `aten::floor_divide`, ...) that are evaluated statically when all their
/// arguments are static and their results are 0-dim tensors.
bool isShapeArithmetic(llvm::StringRef qualName);

/// True when every value of `outs` is a 0-dim tensor (a traced number).
bool isStaticShapeValue(llvm::ArrayRef<c10::IValue> outs);

/// The `.Scalar` overload of a binary `aten::add/sub/mul/div.Tensor(_mode)`
/// whose `other` is a 0-dim number tensor and whose `self` has rank >= 1 (the
/// same promotion and result); nullopt otherwise.
std::optional<std::string> scalarOverloadOf(const c10::FunctionSchema &schema,
                                            const c10::IValue &self,
                                            const c10::IValue &other);

/// True for a static `pin_memory=False` argument (traced factory ops), which
/// is imported as the `None` a scripted call passes (both: not pinned).
bool isDefaultPinMemory(const c10::FunctionSchema &schema, size_t index,
                        const c10::IValue &value);

/// The number held by a 0-dim tensor (double for floating dtypes, else int).
c10::IValue scalarOf(const at::Tensor &t);

//===- GradMode.cpp -------------------------------------------------------===//

/// For the class of `torch.no_grad()` false, of `torch.enable_grad()` true;
/// nullopt for any other type.
std::optional<bool> gradModeOf(const c10::TypePtr &type);

/// Values produced by the nodes strictly between `enter` and `exit` (one
/// block) that are used after `exit` (or returned by the block).
std::vector<torch::jit::Value *> valuesLeavingBlock(torch::jit::Node *enter,
                                                    torch::jit::Node *exit);

/// Values defined before `enter` (or outside its block) that the nodes
/// strictly between `enter` and `exit`, or blocks nested in them, use.
std::vector<torch::jit::Value *> valuesEnteringBlock(torch::jit::Node *enter,
                                                     torch::jit::Node *exit);

//===- Decompositions.cpp -------------------------------------------------===//

/// Rewrites of operators the importer emits as the model calls them into the
/// operators the runtime and the autodiff take (training-mode dropout,
/// training-mode batch norm's functional form).
void populateImportDecompositionPatterns(RewritePatternSet &patterns);

/// Applies those rewrites to every op of `module`, once.
void decomposeImportedOps(ModuleOp module);

} // namespace mlir::ds::import

#endif // DS_LIB_IMPORT_IMPORTINTERNAL_H
