//===- LeafModules.h - ZeRO-3 leaf modules of an engine ---------*- C++ -*-===//
//
// Which modules of an engine are ZeRO-3 leaf modules
// (`zero_optimization.leaf_module`, docs/leaf-modules.md). The modules of an
// engine are those its parameters and the ops of the functions are tagged
// with, and every dotted prefix of those paths (a ModuleList that owns no op
// of its own is still a module). A module is a leaf when its class matches a
// `classes` entry, its path (relative to the engine's module) equals a
// `names` entry or ends with a `name_suffixes` entry on a `.` boundary; a
// leaf inside a leaf is part of the outer one.
//
//===----------------------------------------------------------------------===//

#ifndef DS_DIALECT_DS_ANALYSIS_LEAFMODULES_H
#define DS_DIALECT_DS_ANALYSIS_LEAFMODULES_H

#include "ds/Config/Config.h"
#include "ds/Dialect/DS/IR/DSOps.h"

#include <string>

namespace mlir::ds {

/// One outermost leaf module.
struct LeafModule {
  /// The module path relative to the engine's module ("moe").
  std::string path;
  /// The module path as ops and parameters carry it ("student.moe").
  std::string qualified;
  /// Its class ("SparseMoeBlock"); empty when no op or parameter names it.
  std::string moduleClass;
  /// The config entry that made it a leaf:
  /// `zero_optimization.leaf_module.classes[0] "SparseMoeBlock"`.
  std::string matchedBy;

  /// Whether module path `module` (qualified) is in this leaf's subtree.
  bool contains(StringRef module) const;
};

/// Whether class spec `spec` (bare or dotted) names `moduleClass` (demangled,
/// as the importer records it). Classes match exactly (TorchScript keeps no
/// base classes): a bare spec matches the last component, a dotted one the
/// whole class, its public alias (`torch.nn.Linear` for
/// `torch.nn.modules.linear.Linear`: the spec's package a prefix of the
/// class's) or, with Python's `__main__.` in front, a class of the script
/// the model was defined in (TorchScript records `__torch__.Name`).
bool leafClassMatches(StringRef spec, StringRef moduleClass);

/// The outermost leaf modules of `engine` under `config`, in path order. A
/// user-given entry (`classes` only when the user gave them, `names`,
/// `name_suffixes`) that matches no module of the engine is an error on the
/// engine naming the key and the entry; DeepSpeed's default class list never
/// is.
FailureOr<SmallVector<LeafModule>>
findLeafModules(EngineOp engine, const ::ds::config::LeafModuleConfig &config);

/// The outermost modules of `engine` that `selection` matches, by the same
/// rules; errors name the entries under `keyPrefix`
/// ("activation_checkpointing.modules.").
FailureOr<SmallVector<LeafModule>>
findSelectedModules(EngineOp engine,
                    const ::ds::config::LeafModuleConfig &selection,
                    StringRef keyPrefix);

} // namespace mlir::ds

#endif // DS_DIALECT_DS_ANALYSIS_LEAFMODULES_H
