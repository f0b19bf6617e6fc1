//===- DTypes.h - Plan dtypes <-> ATen scalar types -------------*- C++ -*-===//

#ifndef DS_TENSORIO_DTYPES_H
#define DS_TENSORIO_DTYPES_H

#include "ds/Plan/Plan.h"

#include <ATen/core/Tensor.h>

#include <optional>
#include <string>

namespace ds::runtime {

at::ScalarType toScalarType(plan::DType dtype);
/// nullopt for ATen types the plan format has no name for (complex, ...).
std::optional<plan::DType> fromScalarType(at::ScalarType type);
/// The plan's name ("float32") when it has one, ATen's otherwise.
std::string scalarTypeName(at::ScalarType type);
/// "float32 [4, 8]" for messages.
std::string describeTensor(const at::Tensor &tensor);
/// "float32 [4, 8]" for a plan-side dtype and shape.
std::string describeTensor(plan::DType dtype,
                           const std::vector<int64_t> &shape);

} // namespace ds::runtime

#endif // DS_TENSORIO_DTYPES_H
