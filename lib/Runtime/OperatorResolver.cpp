//===- OperatorResolver.cpp - Operator names -> executable kernels --------===//

#include "OperatorResolver.h"

#include "ds/Plan/Plan.h"

#include <torch/csrc/jit/runtime/operator.h>
#include <torch/version.h>

#include <set>

namespace ds::runtime::detail {

namespace {

/// "aten::add.Tensor" -> {"aten::add", "Tensor"}; no dot -> overload "".
c10::OperatorName splitName(const std::string &qualified) {
  size_t sep = qualified.find("::");
  size_t dot = qualified.find('.', sep == std::string::npos ? 0 : sep + 2);
  if (dot == std::string::npos)
    return {qualified, ""};
  return {qualified.substr(0, dot), qualified.substr(dot + 1)};
}

std::string fullName(const c10::OperatorName &name) {
  return name.overload_name.empty() ? name.name
                                    : name.name + "." + name.overload_name;
}

/// Known overloads of `name` in both registries, for the error message.
std::string knownOverloads(const std::string &name) {
  std::set<std::string> overloads;
  for (const c10::OperatorName &op :
       c10::Dispatcher::singleton().getAllOpNames())
    if (op.name == name)
      overloads.insert(fullName(op));
  for (const auto &op :
       torch::jit::getAllOperatorsFor(c10::Symbol::fromQualString(name)))
    overloads.insert(fullName(op->schema().operator_name()));
  std::string text;
  for (const std::string &overload : overloads)
    text += (text.empty() ? "" : ", ") + overload;
  return text;
}

} // namespace

const char *OperatorResolver::runtimeTorchVersion() { return TORCH_VERSION; }

std::optional<ResolvedOperator>
OperatorResolver::resolve(const std::string &qualified, std::string &error,
                          const std::string &planTorchVersion) {
  c10::OperatorName name = splitName(qualified);
  std::string overloadText = name.overload_name.empty()
                                 ? "no overload name"
                                 : "overload \"" + name.overload_name + "\"";
  ResolvedOperator resolved;

  if (auto handle = c10::Dispatcher::singleton().findSchema(name)) {
    resolved.handle_ = *handle;
    resolved.schema_ = &handle->schema();
    return resolved;
  }

  // Interpreter-level operators live only in the TorchScript registry.
  c10::Symbol symbol = c10::Symbol::fromQualString(name.name);
  for (const auto &op : torch::jit::getAllOperatorsFor(symbol)) {
    if (op->schema().overload_name() != name.overload_name)
      continue;
    if (!op->hasOperation()) {
      error = "operator " + name.name + " (" + overloadText +
              ") is built from a TorchScript graph node and cannot run "
              "outside one; express it with plan ops (list, unpack, if)";
      return std::nullopt;
    }
    resolved.operation_ = op->getOperation();
    resolved.schema_ = &op->schema(); // Operators live as long as the process.
    return resolved;
  }

  std::string overloads = knownOverloads(name.name);
  error = "unknown operator " + name.name + " with " + overloadText +
          (overloads.empty()
               ? std::string(" (neither the ATen dispatcher nor the "
                             "TorchScript operator registry has this name)")
               : " (known overloads: " + overloads + ")") +
          plan::torchVersionNote(planTorchVersion, runtimeTorchVersion());
  return std::nullopt;
}

} // namespace ds::runtime::detail
