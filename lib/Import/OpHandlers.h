//===- OpHandlers.h - operators the importer treats specially ---*- C++ -*-===//
//
// Most operators are imported generically: run on the examples, typed from
// the results, emitted as `ds.aten`. The few that need more (folded flags,
// metadata queries, structural list operations, the example of training-mode
// dropout, the running statistics of training-mode batch norm) have a handler
// in one table keyed by aten schema. A handler sees the call through `OpCall`,
// not through a TorchScript node, so an importer of another graph format can
// implement `OpCall` and reuse the table.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_IMPORT_OPHANDLERS_H
#define DS_LIB_IMPORT_OPHANDLERS_H

#include "ImportInternal.h"
#include "mlir/IR/Diagnostics.h"

namespace mlir::ds::import {

/// One operator call being imported: its schema, its arguments as the
/// importer tracks them, and what a handler may do with them.
class OpCall {
public:
  virtual ~OpCall() = default;

  /// Schema name and overload (`aten::add.Tensor`; `aten::view`).
  virtual std::string name() const = 0;
  virtual ArrayRef<Abstract> args() const = 0;
  /// Every argument is static (or a module).
  bool allArgsStatic() const;
  /// Some result is a tensor or a list of tensors.
  virtual bool producesTensor() const = 0;
  /// Static evaluation applies: every argument is static and no result is a
  /// tensor (the importer folds such a call if no handler takes it).
  bool foldsStatically() const { return allArgsStatic() && !producesTensor(); }

  virtual Location loc() = 0;
  /// An error at the call's source line.
  virtual InFlightDiagnostic error() = 0;
  virtual OpBuilder &builder() = 0;
  /// The call is in a branch the example does not take: it may fail on the
  /// examples.
  virtual bool speculative() const = 0;
  /// Whether grad mode is on at the call (folds `torch.is_grad_enabled()`).
  virtual bool gradEnabled() const = 0;

  /// The IR value of `a` (constants for static values); null for modules and
  /// tuples.
  virtual Value materialize(const Abstract &a) = 0;
  /// `ds.aten` named `name`, tagged with the calling module.
  virtual Operation *emitAten(StringRef name, ArrayRef<Value> operands,
                              TypeRange resultTypes) = 0;
  /// Runs the operator on the arguments' examples.
  virtual bool runOnExamples(std::vector<c10::IValue> &outputs,
                             std::string &message) = 0;
  /// Runs the operator on the examples and makes its results static; fails
  /// with an error when it cannot run.
  virtual LogicalResult evaluateStatic() = 0;

  /// Binds result `index` of the call.
  virtual void setResult(unsigned index, Abstract value) = 0;
  /// Rebinds argument `index` (a structural list updated in place): later
  /// uses of it see `value`.
  virtual void updateArgument(unsigned index, Abstract value) = 0;
};

/// What a handler did with a call.
enum class HandlerResult {
  /// Imported: every result is bound.
  Handled,
  /// Not this case: the generic import applies.
  Declined,
  /// An error was emitted.
  Failed,
};

using OpHandler = HandlerResult (*)(OpCall &call);

/// The handler of the operator `schemaName` (`aten::add.Tensor`): the one
/// registered for that overload, else the one registered for the operator's
/// name (`aten::size`, every overload); null when there is none.
OpHandler lookupOpHandler(StringRef schemaName);

} // namespace mlir::ds::import

#endif // DS_LIB_IMPORT_OPHANDLERS_H
