//===- TypeConversion.cpp - ATen types, names and locations in MLIR -------===//

#include "ImportInternal.h"

using namespace mlir;
using namespace mlir::ds::import;

std::string mlir::ds::import::demangleClassName(const std::string &name) {
  llvm::SmallVector<llvm::StringRef> parts;
  llvm::StringRef(name).split(parts, '.');
  std::string out;
  for (llvm::StringRef part : parts) {
    if (part == "__torch__" || part.starts_with("___torch_mangle_"))
      continue;
    if (!out.empty())
      out += '.';
    out += part.str();
  }
  return out;
}

std::string mlir::ds::import::operatorName(const c10::FunctionSchema &schema) {
  if (schema.overload_name().empty())
    return schema.name();
  return schema.name() + "." + schema.overload_name();
}

Type mlir::ds::import::elementTypeOf(MLIRContext *ctx, at::ScalarType dtype) {
  Builder b(ctx);
  switch (dtype) {
  case at::kFloat:
    return b.getF32Type();
  case at::kDouble:
    return b.getF64Type();
  case at::kHalf:
    return b.getF16Type();
  case at::kBFloat16:
    return b.getBF16Type();
  case at::kLong:
    return b.getI64Type();
  case at::kInt:
    return b.getI32Type();
  case at::kShort:
    return b.getI16Type();
  case at::kChar:
    return b.getI8Type();
  case at::kByte:
    return IntegerType::get(ctx, 8, IntegerType::Unsigned);
  case at::kBool:
    return b.getI1Type();
  default:
    return {};
  }
}

RankedTensorType
mlir::ds::import::tensorTypeOf(MLIRContext *ctx, const at::Tensor &tensor,
                               const std::vector<bool> &dynamicDims) {
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < tensor.dim(); ++d) {
    bool dynamic =
        d < static_cast<int64_t>(dynamicDims.size()) && dynamicDims[d];
    shape.push_back(dynamic ? ShapedType::kDynamic : tensor.size(d));
  }
  return RankedTensorType::get(shape, elementTypeOf(ctx, tensor.scalar_type()));
}

Location mlir::ds::import::locationOf(MLIRContext *ctx,
                                      const torch::jit::SourceRange &range,
                                      Location fallback) {
  // Archives keep the user's source beside the serialized code: prefer it.
  auto original = range.findSourceRangeThatGenerated();
  auto flc = (original ? *original : range).file_line_col();
  if (!flc)
    return fallback;
  auto [file, line, col] = *flc;
  return FileLineColLoc::get(ctx, file, line, col + 1);
}
