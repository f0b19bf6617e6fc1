//===- DSDialect.cpp - the ds dialect -------------------------------------===//

#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSAttrs.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/IR/DSTypes.h"
#include "mlir/IR/BuiltinOps.h"

using namespace mlir;
using namespace mlir::ds;

#include "ds/Dialect/DS/IR/DSOpsDialect.cpp.inc"

void DSDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "ds/Dialect/DS/IR/DSOps.cpp.inc"
      >();
  registerTypes();
  registerAttributes();
}

Operation *DSDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                          Type type, Location loc) {
  if (!ConstantOp::isValidConstant(value, type))
    return nullptr;
  return ConstantOp::create(builder, loc, type, value);
}

/// The module attributes that list module paths, and what the list means.
static std::optional<StringRef> describePathList(StringRef name) {
  if (name == DSDialect::getEvalModulesAttrName())
    return StringRef("the submodules in eval mode");
  if (name == DSDialect::getCheckpointModulesAttrName())
    return StringRef("the activation-checkpointed modules");
  return std::nullopt;
}

LogicalResult DSDialect::verifyOperationAttribute(Operation *op,
                                                  NamedAttribute attribute) {
  StringRef name = attribute.getName().getValue();
  if (std::optional<StringRef> meaning = describePathList(name)) {
    if (!isa<ModuleOp>(op))
      return op->emitError() << "'" << name
                             << "' is an attribute of builtin.module ("
                             << *meaning << "), not of '" << op->getName()
                             << "'";
    auto paths = dyn_cast<ArrayAttr>(attribute.getValue());
    if (!paths || !llvm::all_of(paths, llvm::IsaPred<StringAttr>))
      return op->emitError() << "'" << name
                             << "' must be an array of module paths "
                                "(strings), got "
                             << attribute.getValue();
    return success();
  }
  if (name == getTargetDeviceAttrName()) {
    if (!isa<ModuleOp>(op))
      return op->emitError() << "'" << name
                             << "' is an attribute of builtin.module (the "
                                "device the module is compiled for), not of '"
                             << op->getName() << "'";
    auto device = dyn_cast<StringAttr>(attribute.getValue());
    if (!device || !parseTargetDevice(device.getValue()))
      return op->emitError()
             << "'" << name << "' must be \"cpu\" or \"cuda\", got "
             << attribute.getValue();
    return success();
  }
  if (name != getWorldSizeAttrName())
    return success();
  if (!isa<ModuleOp>(op))
    return op->emitError() << "'" << name
                           << "' is an attribute of builtin.module (the "
                              "ranks the module is compiled for), not of '"
                           << op->getName() << "'";
  auto size = dyn_cast<IntegerAttr>(attribute.getValue());
  if (!size || !size.getType().isSignlessInteger(64))
    return op->emitError() << "'" << name << "' must be an i64, got "
                           << attribute.getValue();
  if (size.getInt() < 1)
    return op->emitError() << "'" << name << "' must be >= 1, got "
                           << size.getInt();
  return success();
}

std::optional<int64_t> mlir::ds::getWorldSize(ModuleOp module) {
  if (auto size =
          module->getAttrOfType<IntegerAttr>(DSDialect::getWorldSizeAttrName()))
    return size.getInt();
  return std::nullopt;
}

void mlir::ds::setWorldSize(ModuleOp module, int64_t worldSize) {
  module->setAttr(DSDialect::getWorldSizeAttrName(),
                  Builder(module.getContext()).getI64IntegerAttr(worldSize));
}

StringRef mlir::ds::stringifyTargetDevice(TargetDevice device) {
  return device == TargetDevice::CUDA ? "cuda" : "cpu";
}

std::optional<TargetDevice> mlir::ds::parseTargetDevice(StringRef name) {
  if (name == "cpu")
    return TargetDevice::CPU;
  if (name == "cuda")
    return TargetDevice::CUDA;
  return std::nullopt;
}

TargetDevice mlir::ds::getTargetDevice(ModuleOp module) {
  if (auto device = module->getAttrOfType<StringAttr>(
          DSDialect::getTargetDeviceAttrName()))
    if (std::optional<TargetDevice> parsed =
            parseTargetDevice(device.getValue()))
      return *parsed;
  return TargetDevice::CPU;
}

TargetDevice mlir::ds::getTargetDevice(Operation *op) {
  auto module =
      isa<ModuleOp>(op) ? cast<ModuleOp>(op) : op->getParentOfType<ModuleOp>();
  return module ? getTargetDevice(module) : TargetDevice::CPU;
}

void mlir::ds::setTargetDevice(ModuleOp module, TargetDevice device) {
  module->setAttr(
      DSDialect::getTargetDeviceAttrName(),
      StringAttr::get(module.getContext(), stringifyTargetDevice(device)));
}

static SmallVector<StringRef> getPathList(ModuleOp module, StringRef name) {
  SmallVector<StringRef> paths;
  if (auto array = module->getAttrOfType<ArrayAttr>(name))
    for (auto path : array.getAsRange<StringAttr>())
      paths.push_back(path.getValue());
  return paths;
}

static void setPathList(ModuleOp module, StringRef name,
                        ArrayRef<std::string> paths) {
  if (paths.empty()) {
    module->removeAttr(name);
    return;
  }
  Builder builder(module.getContext());
  SmallVector<Attribute> names;
  for (const std::string &path : paths)
    names.push_back(builder.getStringAttr(path));
  module->setAttr(name, builder.getArrayAttr(names));
}

SmallVector<StringRef> mlir::ds::getEvalModules(ModuleOp module) {
  return getPathList(module, DSDialect::getEvalModulesAttrName());
}

void mlir::ds::setEvalModules(ModuleOp module, ArrayRef<std::string> paths) {
  setPathList(module, DSDialect::getEvalModulesAttrName(), paths);
}

SmallVector<StringRef> mlir::ds::getCheckpointModules(ModuleOp module) {
  return getPathList(module, DSDialect::getCheckpointModulesAttrName());
}

void mlir::ds::setCheckpointModules(ModuleOp module,
                                    ArrayRef<std::string> paths) {
  setPathList(module, DSDialect::getCheckpointModulesAttrName(), paths);
}

std::string mlir::ds::describeModule(StringRef path, StringRef moduleClass) {
  if (path.empty())
    return ("in the root module (" + moduleClass + ")").str();
  return ("in module '" + path + "' (" + moduleClass + ")").str();
}
