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
#include <memory>
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

struct ViewRecord;

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
  /// Dynamic tensors: which tensor's memory this value is (an id the
  /// importer hands out; views and in-place results keep their base's), so
  /// that a name rebound to another tensor (a loop's next iteration) is not
  /// taken for the same one written in place. 0 until bound.
  unsigned storage = 0;
  /// Shares memory with another value (a view, or the result of a view of
  /// one): an in-place write into it changes that value too.
  bool isView = false;
  /// For a view: how it was taken from its base, so that it can be taken
  /// again once the base is written in place and a write into it can be
  /// written into the base (Views.cpp). Null for views that cannot be
  /// followed (taken in a branch, or by an operator the importer cannot
  /// invert), whose bases are then never written through them.
  std::shared_ptr<const ViewRecord> view;

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

/// One step from a tensor to a view of it, in a form that can be taken
/// again from the tensor's current value and written back into it.
struct ViewStep {
  enum class Kind {
    Slice,     // args: dim, start, end, step (as aten::slice.Tensor)
    Select,    // args: dim, index
    Reshape,   // args: the view's sizes (view, reshape, squeeze, flatten, ...)
    Transpose, // args: dim0, dim1
    Permute,   // args: dims
    Identity,  // contiguous, alias, to and type_as that return their input
    Detach,    // detach: the same values, no gradient through it
    Opaque,    // any other view: taken again as imported, never written into
  };
  Kind kind;
  std::vector<c10::IValue> args;
  /// The view's IR type.
  Type type;
  /// Opaque: the operator node, its name as emitted, its arguments after the
  /// first (all static, else the step cannot be taken again) and which of
  /// its results (or list elements) the view is.
  torch::jit::Node *node = nullptr;
  std::string opName;
  std::vector<Abstract> opArgs;
  std::vector<Type> opResultTypes;
  bool replayable = true;
  unsigned resultIndex = 0;
  bool listElement = false;
};

/// How a view was taken: from the tensor named `root` (a value that is not
/// itself a view; null once that name is out of scope) as it was when its IR
/// value was `rootValue`, by `steps` in order.
struct ViewRecord {
  torch::jit::Value *root = nullptr;
  Value rootValue;
  std::vector<ViewStep> steps;
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
                            const NodeModules *nodeModules = nullptr,
                            bool growExamples = true);

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
