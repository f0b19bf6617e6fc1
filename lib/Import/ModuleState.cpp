//===- ModuleState.cpp - parameters and buffers of the module tree --------===//

#include "ImportInternal.h"
#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "mlir/IR/BuiltinOps.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::import;

/// Module path of a qualified state name: `blocks.0.fc.weight` ->
/// `blocks.0.fc`.
static std::string ownerPath(const std::string &name) {
  size_t dot = name.rfind('.');
  return dot == std::string::npos ? "" : name.substr(0, dot);
}

StateTable mlir::ds::import::declareState(OpBuilder &builder, Location loc,
                                          const torch::jit::Module &module) {
  StateTable table;
  table.moduleClass[""] =
      demangleClassName(module.type()->name()->qualifiedName());
  for (const auto &sub : module.named_modules())
    table.moduleClass[sub.name] =
        demangleClassName(sub.value.type()->name()->qualifiedName());

  auto classOf = [&](const std::string &path) {
    auto it = table.moduleClass.find(path);
    return it == table.moduleClass.end() ? std::string() : it->second;
  };

  // A tensor reachable under several names (tied weights) is one piece of
  // state, declared under its first name, as named_parameters() lists it
  // once in PyTorch.
  std::map<const void *, std::string> seen;
  auto isAlias = [&](const std::string &name, const at::Tensor &t) {
    auto [it, inserted] = seen.emplace(t.unsafeGetTensorImpl(), name);
    if (!inserted)
      table.aliasOf[name] = it->second;
    return !inserted;
  };
  for (const auto &param : module.named_parameters(/*recurse=*/true)) {
    if (isAlias(param.name, param.value))
      continue;
    std::string owner = ownerPath(param.name);
    ParamOp::create(builder, loc, param.name,
                    tensorTypeOf(builder.getContext(), param.value), owner,
                    classOf(owner), param.value.requires_grad(),
                    FlatSymbolRefAttr(), /*flat_offset=*/IntegerAttr());
    table.isParam[param.name] = true;
  }
  for (const auto &buffer : module.named_buffers(/*recurse=*/true)) {
    if (isAlias(buffer.name, buffer.value))
      continue;
    std::string owner = ownerPath(buffer.name);
    BufferOp::create(builder, loc, buffer.name,
                     tensorTypeOf(builder.getContext(), buffer.value), owner,
                     classOf(owner), FlatSymbolRefAttr());
    table.isParam[buffer.name] = false;
  }
  return table;
}

void mlir::ds::import::noteEvalModules(ModuleOp module,
                                       const torch::jit::Module &model,
                                       Location loc) {
  std::vector<std::string> paths;
  std::string subtrees;
  for (const auto &sub : model.named_modules()) {
    if (sub.value.is_training())
      continue;
    // Name the subtrees in the remark, not every module inside them.
    bool insideListed = llvm::any_of(paths, [&](const std::string &p) {
      return p.empty() || sub.name.rfind(p + ".", 0) == 0;
    });
    paths.push_back(sub.name);
    if (insideListed)
      continue;
    subtrees += subtrees.empty() ? "" : ", ";
    subtrees += sub.name.empty() ? "the root module" : "'" + sub.name + "'";
  }
  setEvalModules(module, paths);
  if (!paths.empty())
    emitRemark(loc) << "saved in eval mode, so also in the training step (no "
                       "dropout, BatchNorm on its running statistics): "
                    << subtrees << " (with their submodules)";
}
