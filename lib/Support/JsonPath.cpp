//===- JsonPath.cpp - Values of JSON documents in messages ----------------===//

#include "ds/Support/JsonPath.h"

namespace ds::json {

std::string describeValue(const ordered_json &value) {
  switch (value.type()) {
  case ordered_json::value_t::null:
    return "null";
  case ordered_json::value_t::boolean:
    return value.get<bool>() ? "boolean true" : "boolean false";
  case ordered_json::value_t::number_integer:
  case ordered_json::value_t::number_unsigned:
  case ordered_json::value_t::number_float:
    return "number " + value.dump();
  case ordered_json::value_t::string:
    return "string " + ordered_json(shortened(value.get<std::string>())).dump();
  case ordered_json::value_t::array:
    return "array";
  case ordered_json::value_t::object:
    return "object";
  default:
    return "binary";
  }
}

} // namespace ds::json
