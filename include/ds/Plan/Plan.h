//===- Plan.h - In-memory form of a plan file -------------------*- C++ -*-===//
//
// Plain structs that mirror the plan JSON (docs/plan-format.md) one to one.
// The compiler fills them and calls writePlan; the runtime gets them from
// readPlan. No MLIR, LLVM or LibTorch types appear here: the runtime must be
// able to read a plan with nothing but this library.
//
//===----------------------------------------------------------------------===//

#ifndef DS_PLAN_PLAN_H
#define DS_PLAN_PLAN_H

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ds::plan {

using ordered_json = nlohmann::ordered_json;

/// The plan format version this library reads and writes.
inline constexpr int64_t kPlanFormatVersion = 1;
/// The value of the top-level "format" field.
inline constexpr const char *kPlanFormatName = "ds-plan";

/// Index into Program::values.
using ValueId = int64_t;

//===----------------------------------------------------------------------===//
// Element and value types
//===----------------------------------------------------------------------===//

enum class DType {
  Float32,
  Float64,
  Float16,
  BFloat16,
  Int64,
  Int32,
  Int16,
  Int8,
  UInt8,
  Bool,
};

/// "float32", "bfloat16", ... as spelled in the plan.
const char *dtypeName(DType dtype);
std::optional<DType> parseDType(std::string_view name);
/// Bytes per element.
int64_t dtypeSize(DType dtype);
/// All dtype names, comma separated, for error messages.
std::string allDTypeNames();

enum class ValueType { Tensor, Int, Float, Bool, None, Str, List };

/// "tensor", "int", ... as spelled in the plan.
const char *valueTypeName(ValueType type);
std::optional<ValueType> parseValueType(std::string_view name);

/// Shape entry for a data-dependent size.
inline constexpr int64_t kDynamicDim = -1;

//===----------------------------------------------------------------------===//
// Top-level descriptions
//===----------------------------------------------------------------------===//

struct WeightsDesc {
  /// "torchscript" (an archive from torch.jit.save) or "safetensors".
  std::string kind = "torchscript";
  /// Absolute, or relative to the plan file's folder.
  std::string path;
};

struct EngineDesc {
  std::string name;
  /// Submodule path of the TorchScript root; "" for the root itself.
  std::string module;
  /// The engine's DeepSpeed config, as given.
  ordered_json config = ordered_json::object();
};

enum class StateKind { Param, Buffer };

struct StateDesc {
  /// Qualified name as named_parameters() / named_buffers() spell it.
  std::string name;
  StateKind kind = StateKind::Param;
  DType dtype = DType::Float32;
  /// Always static.
  std::vector<int64_t> shape;
  bool requiresGrad = false;
  /// Name of an EngineDesc.
  std::string engine;
  std::string module;
  std::string moduleClass;
};

struct InputDesc {
  std::string name;
  DType dtype = DType::Float32;
  /// One micro-step of one rank; kDynamicDim accepts any size.
  std::vector<int64_t> shape;
  /// False for `--unbatched` arguments.
  bool batched = true;
};

struct OutputDesc {
  std::string name;
  /// "loss" for the scalar losses the forward returns.
  std::string kind = "loss";
};

//===----------------------------------------------------------------------===//
// Programs
//===----------------------------------------------------------------------===//

struct ValueDesc {
  ValueId id = 0;
  ValueType type = ValueType::Tensor;
  /// Tensors only; absent when the compiler does not know it.
  std::optional<DType> dtype;
  /// Tensors only; absent when even the rank is unknown. kDynamicDim marks
  /// data-dependent sizes.
  std::optional<std::vector<int64_t>> shape;
  /// Lists only: the element type (never List).
  std::optional<ValueType> elem;

  static ValueDesc tensor(ValueId id, DType dtype, std::vector<int64_t> shape);
  static ValueDesc scalar(ValueId id, ValueType type);
  static ValueDesc list(ValueId id, ValueType elem);
};

/// A constant operand: one of none/int/float/bool/str/tensor.
struct Constant {
  enum class Kind { None, Int, Float, Bool, Str, Tensor };
  Kind kind = Kind::None;
  int64_t intValue = 0;
  double floatValue = 0.0;
  bool boolValue = false;
  std::string strValue;
  /// Tensors: element type, shape, and raw little-endian bytes (row-major,
  /// exactly numel * dtypeSize bytes).
  DType tensorDType = DType::Float32;
  std::vector<int64_t> tensorShape;
  std::string tensorBytes;

  static Constant none();
  static Constant ofInt(int64_t value);
  static Constant ofFloat(double value);
  static Constant ofBool(bool value);
  static Constant ofStr(std::string value);
  static Constant ofTensor(DType dtype, std::vector<int64_t> shape,
                           std::string bytes);
};

enum class OpKind {
  Input,
  State,
  SetState,
  Constant,
  List,
  Unpack,
  Call,
  If,
  /// programs.train only: adds a value into a parameter's gradient buffer.
  Grad,
};

/// "input", "set_state", ... as spelled in the plan.
const char *opKindName(OpKind kind);
std::optional<OpKind> parseOpKind(std::string_view name);

struct Op;

/// One side of an `if`: ops, then the values it yields.
struct Branch {
  std::vector<Op> body;
  std::vector<ValueId> yields;
};

/// One op. Which fields matter depends on `kind` (see docs/plan-format.md);
/// the others stay at their defaults. Ops with a single JSON "result" keep it
/// as results[0].
struct Op {
  OpKind kind = OpKind::Call;
  /// input: position in Plan::inputs.
  int64_t index = 0;
  /// state, set_state, grad: qualified state name.
  std::string name;
  /// call: schema name with overload ("aten::add.Tensor", "aten::linear").
  std::string op;
  /// list, call: operands in order.
  std::vector<ValueId> args;
  /// unpack, set_state, grad: the operand.
  ValueId arg = -1;
  /// if: the condition (a bool value).
  ValueId cond = -1;
  std::vector<ValueId> results;
  /// constant: the value.
  Constant value;
  /// if: the branches.
  Branch thenBranch;
  Branch elseBranch;
  /// Values whose last use is this op (dropped right after it).
  std::vector<ValueId> free;
  /// For messages: qualified module path, demangled class, "file.py:LINE".
  std::string module;
  std::string moduleClass;
  std::string loc;

  static Op input(int64_t index, ValueId result);
  static Op state(std::string name, ValueId result);
  static Op setState(std::string name, ValueId arg);
  static Op constant(Constant value, ValueId result);
  static Op list(std::vector<ValueId> args, ValueId result);
  static Op unpack(ValueId arg, std::vector<ValueId> results);
  static Op call(std::string op, std::vector<ValueId> args,
                 std::vector<ValueId> results);
  static Op ifOp(ValueId cond, Branch thenBranch, Branch elseBranch,
                 std::vector<ValueId> results);
  /// Adds tensor `arg` into the gradient of parameter `name`.
  static Op grad(std::string name, ValueId arg);

  /// "aten::linear" for calls, the kind name ("if", "unpack") otherwise.
  std::string label() const;
};

struct Program {
  std::vector<ValueDesc> values;
  std::vector<Op> body;
  std::vector<ValueId> results;
  /// programs.train (required there): index into the top-level `body` of
  /// the first backward op. forward() runs body[0, backwardStart), backward()
  /// the rest. Other programs may carry it; it is checked and ignored.
  std::optional<int64_t> backwardStart;
};

struct Plan {
  std::string producer;
  /// Absent only in plans without state.
  std::optional<WeightsDesc> weights;
  int64_t worldSize = 1;
  int64_t microBatchPerRank = 1;
  int64_t gradientAccumulationSteps = 1;
  std::vector<EngineDesc> engines;
  std::vector<StateDesc> state;
  std::vector<InputDesc> inputs;
  std::vector<OutputDesc> outputs;
  /// "eval" (required), "train" (the training micro-step, optional); other
  /// names are kept, not run.
  std::map<std::string, Program> programs;

  const Program *findProgram(const std::string &name) const;
  const StateDesc *findState(const std::string &name) const;
};

/// Product of a static shape's entries; nullopt if any entry is dynamic.
std::optional<int64_t> staticNumel(const std::vector<int64_t> &shape);
/// "[4, -1]" for messages.
std::string formatShape(const std::vector<int64_t> &shape);

} // namespace ds::plan

#endif // DS_PLAN_PLAN_H
