//===- RuntimeError.cpp - Errors while loading data or running a plan -----===//

#include "ds/TensorIO/RuntimeError.h"

#include <utility>

namespace ds::runtime {

std::string OpContext::describe() const {
  std::string text = origin.empty() ? where : origin + ": " + where;
  if (!module.empty())
    text += " in module " + module;
  else if (!moduleClass.empty())
    text += " in the root module";
  if (!moduleClass.empty())
    text += " (" + moduleClass + ")";
  if (!loc.empty())
    text += " at " + loc;
  return text;
}

RuntimeError::RuntimeError(const std::string &message)
    : std::runtime_error(message), detail_(message) {}

RuntimeError::RuntimeError(OpContext context, const std::string &detail)
    : std::runtime_error(context.describe() + ": " + detail),
      context_(std::move(context)), detail_(detail) {}

} // namespace ds::runtime
