//===- Base64.h - Base64 for inline constant tensors ------------*- C++ -*-===//
//
// Standard alphabet with '=' padding (RFC 4648), as Python's base64 module
// writes it. Private to lib/Plan.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_PLAN_BASE64_H
#define DS_LIB_PLAN_BASE64_H

#include <optional>
#include <string>
#include <string_view>

namespace ds::plan::detail {

std::string encodeBase64(std::string_view bytes);

/// The decoded bytes, or nullopt if `text` is not valid padded base64.
std::optional<std::string> decodeBase64(std::string_view text);

} // namespace ds::plan::detail

#endif // DS_LIB_PLAN_BASE64_H
