//===- DTypes.cpp - Plan dtypes <-> ATen scalar types ---------------------===//

#include "ds/TensorIO/DTypes.h"

namespace ds::runtime {

using plan::DType;

at::ScalarType toScalarType(DType dtype) {
  switch (dtype) {
  case DType::Float32:
    return at::kFloat;
  case DType::Float64:
    return at::kDouble;
  case DType::Float16:
    return at::kHalf;
  case DType::BFloat16:
    return at::kBFloat16;
  case DType::Int64:
    return at::kLong;
  case DType::Int32:
    return at::kInt;
  case DType::Int16:
    return at::kShort;
  case DType::Int8:
    return at::kChar;
  case DType::UInt8:
    return at::kByte;
  case DType::Bool:
    return at::kBool;
  }
  return at::kFloat;
}

std::optional<DType> fromScalarType(at::ScalarType type) {
  switch (type) {
  case at::kFloat:
    return DType::Float32;
  case at::kDouble:
    return DType::Float64;
  case at::kHalf:
    return DType::Float16;
  case at::kBFloat16:
    return DType::BFloat16;
  case at::kLong:
    return DType::Int64;
  case at::kInt:
    return DType::Int32;
  case at::kShort:
    return DType::Int16;
  case at::kChar:
    return DType::Int8;
  case at::kByte:
    return DType::UInt8;
  case at::kBool:
    return DType::Bool;
  default:
    return std::nullopt;
  }
}

std::string scalarTypeName(at::ScalarType type) {
  if (std::optional<DType> dtype = fromScalarType(type))
    return plan::dtypeName(*dtype);
  return c10::toString(type);
}

std::string describeTensor(const at::Tensor &tensor) {
  if (!tensor.defined())
    return "an undefined tensor";
  return scalarTypeName(tensor.scalar_type()) + " " +
         plan::formatShape(tensor.sizes().vec());
}

std::string describeTensor(DType dtype, const std::vector<int64_t> &shape) {
  return std::string(plan::dtypeName(dtype)) + " " + plan::formatShape(shape);
}

} // namespace ds::runtime
