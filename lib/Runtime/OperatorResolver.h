//===- OperatorResolver.h - Operator names -> executable kernels -*- C++
//-*-===//
//
// A `call` op names an operator by schema name and overload. ATen operators
// come from the c10 dispatcher (called boxed); TorchScript's interpreter-level
// operators (aten::size.int, aten::__getitem__.t, prim::...) exist only in
// the TorchScript operator registry and are called through their Operation.
// Private to lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_RUNTIME_OPERATORRESOLVER_H
#define DS_LIB_RUNTIME_OPERATORRESOLVER_H

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <optional>
#include <string>

namespace ds::runtime::detail {

class ResolvedOperator {
public:
  /// Runs the operator on `stack`: arguments in schema order in, results
  /// in schema order out.
  void call(torch::jit::Stack &stack) {
    if (handle_)
      handle_->callBoxed(stack);
    else
      operation_(stack);
  }
  const c10::FunctionSchema &schema() const { return *schema_; }
  bool fromDispatcher() const { return handle_.has_value(); }

private:
  friend class OperatorResolver;
  std::optional<c10::OperatorHandle> handle_;
  torch::jit::Operation operation_{nullptr};
  const c10::FunctionSchema *schema_ = nullptr;
};

class OperatorResolver {
public:
  /// Resolves "ns::name" or "ns::name.overload". On failure returns nullopt
  /// and sets `error` to a message naming the operator, the overload and,
  /// when the name exists, its known overloads; for an operator this
  /// runtime does not have, also `planTorchVersion` (the plan's
  /// torch_version) and this runtime's TORCH_VERSION when they are different
  /// releases (plan::torchVersionNote): the operator may be newer than this
  /// runtime's LibTorch.
  static std::optional<ResolvedOperator>
  resolve(const std::string &qualified, std::string &error,
          const std::string &planTorchVersion = "");

  /// The version of the LibTorch this runtime is built against
  /// (TORCH_VERSION of <torch/version.h>: "2.15.0").
  static const char *runtimeTorchVersion();
};

} // namespace ds::runtime::detail

#endif // DS_LIB_RUNTIME_OPERATORRESOLVER_H
