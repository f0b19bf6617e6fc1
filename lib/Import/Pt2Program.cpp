//===- Pt2Program.cpp - read a .pt2 into a TorchScript module -------------===//
//
// The JSON is read with the schema types the torch wheel ships
// (generated_serialization_types.h); this is the only file that includes
// them. Each ATen call becomes a TorchScript node of the same operator with
// every schema argument present (defaults filled in), so that the importer's
// walk, handlers and typing apply unchanged.
//
//===----------------------------------------------------------------------===//

#include "Pt2Program.h"
#include "ds/TensorIO/Pt2Weights.h"
#include "ds/TensorIO/RuntimeError.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/frontend/source_range.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/normalize_ops.h>
#include <torch/csrc/jit/runtime/operator.h>
#include <torch/csrc/utils/generated_serialization_types.h>

#include <cctype>
#include <map>
#include <set>

using namespace mlir;
using namespace mlir::ds::import;
namespace jit = torch::jit;
namespace ex = torch::_export;

/// The schema versions this reader knows (torch/_export/serde/schema.py's
/// SCHEMA_VERSION): a newer major version changes the format.
static constexpr int64_t kSchemaMajor = 8;

namespace {
struct ReadError {
  std::string message;
};
[[noreturn]] void fail(std::string message) { throw ReadError{std::move(message)}; }
} // namespace

//===----------------------------------------------------------------------===//
// The zip
//===----------------------------------------------------------------------===//

ModelFileKind mlir::ds::import::sniffModelFile(const std::string &path) {
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    if (reader.hasRecord("archive_format")) {
      auto [data, size] = reader.getRecord("archive_format");
      std::string format(static_cast<const char *>(data.get()), size);
      if (format.rfind("pt2", 0) == 0) {
        for (const std::string &name : reader.getAllRecords())
          if (name.rfind("models/", 0) == 0 && name.size() > 12 &&
              name.compare(name.size() - 5, 5, ".json") == 0)
            return ModelFileKind::ExportedProgram;
        return ModelFileKind::AOTInductor;
      }
    }
    if (reader.hasRecord("data.pkl") || reader.hasRecord("constants.pkl"))
      return reader.hasRecord("traced_inputs.pkl")
                 ? ModelFileKind::TracedTorchScript
                 : ModelFileKind::TorchScript;
  } catch (const std::exception &) {
  }
  return ModelFileKind::Unknown;
}

static std::string readRecord(caffe2::serialize::PyTorchStreamReader &reader,
                              const std::string &name) {
  if (!reader.hasRecord(name))
    fail("no '" + name + "' in the archive");
  auto [data, size] = reader.getRecord(name);
  return std::string(static_cast<const char *>(data.get()), size);
}

template <typename T>
static T parseJson(const std::string &text, const std::string &what) {
  try {
    return nlohmann::json::parse(text).get<T>();
  } catch (const std::exception &e) {
    fail(what + " is not valid: " + e.what());
  }
}

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

static at::ScalarType scalarTypeOf(ex::ScalarType t) {
  std::optional<at::ScalarType> dtype =
      ::ds::runtime::dtypeOfExportCode(static_cast<int>(t));
  if (!dtype)
    fail("dtype code " + std::to_string(static_cast<int>(t)) +
         " is not supported");
  return *dtype;
}

//===----------------------------------------------------------------------===//
// The module tree
//===----------------------------------------------------------------------===//

namespace {
/// nn_module_stack's innermost entry: "key,path,class;key,path,class".
std::pair<std::string, std::string> innermostModule(const std::string &stack) {
  size_t start = stack.rfind(';');
  std::string last = stack.substr(start == std::string::npos ? 0 : start + 1);
  size_t a = last.find(',');
  size_t b = a == std::string::npos ? a : last.find(',', a + 1);
  if (b == std::string::npos)
    return {"", ""};
  std::string path = last.substr(a + 1, b - a - 1);
  std::string cls = last.substr(b + 1);
  // TorchScript spells a class of the script run as `__torch__.Cls`.
  if (cls.rfind("__main__.", 0) == 0)
    cls = cls.substr(9);
  return {path, cls};
}

/// `File "f.py", line 12, in forward\n    code` frames: the innermost's file,
/// line and code. Parsed by hand: std::regex recurses per character and a
/// long generated line could exhaust the stack.
jit::SourceRange sourceRangeOf(const std::string &trace) {
  static const std::string kFile = "File \"", kLine = "\", line ";
  std::string file, code;
  size_t line = 0;
  for (size_t at = trace.find(kFile); at != std::string::npos;
       at = trace.find(kFile, at + 1)) {
    size_t nameStart = at + kFile.size();
    size_t nameEnd = trace.find(kLine, nameStart);
    if (nameEnd == std::string::npos)
      break;
    std::string name = trace.substr(nameStart, nameEnd - nameStart);
    // Code torch generates (`<eval_with_key>.3`) is no place to point at.
    if (name.rfind("<", 0) == 0 && !file.empty())
      continue;
    size_t digits = nameEnd + kLine.size();
    size_t number = 0, k = digits;
    for (; k < trace.size() && k < digits + 9 && std::isdigit(
                                                   static_cast<unsigned char>(trace[k]));
         ++k)
      number = number * 10 + static_cast<size_t>(trace[k] - '0');
    if (k == digits)
      continue;
    file = name;
    line = number;
    size_t eol = trace.find('\n', k);
    code.clear();
    if (eol != std::string::npos) {
      size_t next = trace.find('\n', eol + 1);
      code = trace.substr(eol + 1, next == std::string::npos ? std::string::npos
                                                             : next - eol - 1);
    }
  }
  if (file.empty())
    return jit::SourceRange();
  code = code.empty() ? std::string(" ") : code;
  auto source = std::make_shared<jit::Source>(code, file, line);
  return jit::SourceRange(source, 0, code.size());
}

/// The symbol names an argument reads (SymInt / SymFloat / SymBool names).
std::vector<std::string> symbolsOf(const ex::Argument &arg) {
  using Tag = ex::Argument::Tag;
  std::vector<std::string> names;
  switch (arg.tag()) {
  case Tag::AS_SYM_INT:
    if (arg.get_as_sym_int().tag() == ex::SymIntArgument::Tag::AS_NAME)
      names.push_back(arg.get_as_sym_int().get_as_name());
    break;
  case Tag::AS_SYM_INTS:
    for (const auto &s : arg.get_as_sym_ints())
      if (s.tag() == ex::SymIntArgument::Tag::AS_NAME)
        names.push_back(s.get_as_name());
    break;
  case Tag::AS_SYM_FLOAT:
    if (arg.get_as_sym_float().tag() == ex::SymFloatArgument::Tag::AS_NAME)
      names.push_back(arg.get_as_sym_float().get_as_name());
    break;
  case Tag::AS_SYM_BOOL:
    if (arg.get_as_sym_bool().tag() == ex::SymBoolArgument::Tag::AS_NAME)
      names.push_back(arg.get_as_sym_bool().get_as_name());
    break;
  default:
    break;
  }
  return names;
}

/// Whether a node's results are all symbols (no tensor); a node without
/// results counts when it is one of export's checks on symbols.
bool onlySymbolicResults(const ex::Node &node) {
  using Tag = ex::Argument::Tag;
  if (node.get_outputs().empty())
    return node.get_target().rfind("torch.ops.aten.sym_constrain_range", 0) ==
               0 ||
           node.get_target().rfind("torch.ops.aten._assert_", 0) == 0;
  for (const ex::Argument &o : node.get_outputs())
    if (o.tag() != Tag::AS_SYM_INT && o.tag() != Tag::AS_SYM_FLOAT &&
        o.tag() != Tag::AS_SYM_BOOL)
      return false;
  return true;
}

/// The ATen operator of a Python operator on symbols (`_operator.le`), with
/// its result type.
std::optional<std::pair<std::string, c10::TypePtr>>
atenOfSymbolicOperator(const std::string &target) {
  static const std::map<std::string, std::pair<std::string, bool>> ops = {
      {"_operator.add", {"aten::add", false}},
      {"_operator.sub", {"aten::sub", false}},
      {"_operator.mul", {"aten::mul", false}},
      {"_operator.floordiv", {"aten::floordiv", false}},
      {"_operator.le", {"aten::le", true}},
      {"_operator.lt", {"aten::lt", true}},
      {"_operator.ge", {"aten::ge", true}},
      {"_operator.gt", {"aten::gt", true}},
      {"_operator.eq", {"aten::eq", true}},
      {"_operator.ne", {"aten::ne", true}}};
  auto it = ops.find(target);
  if (it == ops.end())
    return std::nullopt;
  return std::make_pair(it->second.first,
                        it->second.second ? c10::TypePtr(c10::BoolType::get())
                                          : c10::TypePtr(c10::IntType::get()));
}

class ProgramBuilder {
public:
  ProgramBuilder(const ex::ExportedProgram &program,
                 std::map<std::string, at::Tensor> weights,
                 std::map<std::string, at::Tensor> constants, Pt2Model &out)
      : program(program), weights(std::move(weights)),
        constants(std::move(constants)), out(out),
        cu(std::make_shared<jit::CompilationUnit>()) {}

  void build();

private:
  using JitValue = jit::Value;

  const ex::Graph &graph() const {
    return program.get_graph_module().get_graph();
  }
  void collectClasses(const ex::Graph &from);
  c10::ClassTypePtr newClass(const std::string &className);
  jit::Module &moduleAt(const std::string &path);
  JitValue *getAttrChain(const std::string &qualifiedName);
  JitValue *argumentValue(const ex::Argument &arg, const c10::Argument &formal,
                          const std::string &where);
  JitValue *constant(const c10::IValue &v) { return g->insertConstant(v); }
  JitValue *tensorNamed(const std::string &name, const std::string &where);
  void importNode(const ex::Node &node, bool eval);
  void importCond(const ex::Node &node, bool eval, const jit::SourceRange &range,
                  const std::string &where);
  void importSetGradEnabled(const ex::Node &node, bool eval,
                            const jit::SourceRange &range,
                            const std::string &where);
  void buildMethod(jit::Module &root, const std::string &name, bool eval);
  std::shared_ptr<jit::Operator> operatorFor(const std::string &target,
                                                    const std::string &where);

  const ex::ExportedProgram &program;
  std::map<std::string, at::Tensor> weights, constants;
  Pt2Model &out;
  std::shared_ptr<jit::CompilationUnit> cu;
  std::shared_ptr<jit::Graph> g;
  std::map<std::string, std::string> classOfPath; // module path -> class
  std::map<std::string, jit::Module> modules;     // module path -> module
  std::map<std::string, JitValue *> values;       // graph names -> values
  std::map<std::string, JitValue *> attrValues;   // state / module paths
  std::set<std::string> usedClassNames;
  std::map<std::string, std::string> bufferOfInput; // placeholder -> buffer
  // In the eval twin, the results of batch norms taken out of training mode:
  // the running statistics they return are the ones they were given, so
  // writing them back (BUFFER_MUTATION) is left out.
  std::set<std::string> unchangedInEval;
  /// Named SymInt / SymFloat / SymBool values (`u0 = x.item()`, `sym_size`,
  /// `u0 <= 6`) -> their values in the graph.
  std::map<std::string, JitValue *> symbols;
  /// The symbols some imported node reads (neededSymbols): a node whose
  /// results are symbols nothing reads (a check of `x.item()` that export
  /// turned into `_assert_scalar`) is left out.
  std::set<std::string> readSymbols;
  void collectReadSymbols(const ex::Graph &from);
  bool isDeadSymbolic(const ex::Node &node) const;
  JitValue *symbolNamed(const std::string &name, const std::string &where);
  bool importSymbolicOperator(const ex::Node &node, const jit::SourceRange &range,
                              const std::string &where);
  /// The modules of the torch.cond nodes being imported: torch 2.15 records
  /// no nn_module_stack in branch graphs, whose calls are then the module's
  /// that called torch.cond.
  std::vector<std::pair<std::string, std::string>> condModules;
  std::pair<std::string, std::string> enclosingModule() {
    return condModules.empty() ? std::make_pair(std::string(), classOfPath[""])
                               : condModules.back();
  }
};
} // namespace

void ProgramBuilder::collectClasses(const ex::Graph &from) {
  for (const ex::Node &node : from.get_nodes()) {
    // Modules called only inside a torch.cond branch are named there.
    for (const auto &named : node.get_inputs())
      if (named.get_arg().tag() == ex::Argument::Tag::AS_GRAPH)
        collectClasses(*named.get_arg().get_as_graph().get_graph());
    auto it = node.get_metadata().find("nn_module_stack");
    if (it == node.get_metadata().end())
      continue;
    std::string stack = it->second;
    size_t start = 0;
    while (start <= stack.size()) {
      size_t end = stack.find(';', start);
      std::string entry = stack.substr(start, end == std::string::npos
                                                  ? std::string::npos
                                                  : end - start);
      auto [path, cls] = innermostModule(entry);
      if (!cls.empty())
        classOfPath.emplace(path, cls);
      if (end == std::string::npos)
        break;
      start = end + 1;
    }
  }
}

c10::ClassTypePtr ProgramBuilder::newClass(const std::string &className) {
  // Every submodule has its own type (they hold different attributes);
  // TorchScript's mangling keeps the names apart and demangleClassName
  // removes it again.
  std::string base = className.empty() ? "Module" : className;
  std::string qualified = "__torch__." + base;
  for (int k = 0; !usedClassNames.insert(qualified).second; ++k) {
    size_t dot = base.rfind('.');
    qualified = "__torch__." +
                (dot == std::string::npos ? std::string()
                                          : base.substr(0, dot + 1)) +
                "___torch_mangle_" + std::to_string(k) + "." +
                base.substr(dot == std::string::npos ? 0 : dot + 1);
  }
  return c10::ClassType::create(c10::QualifiedName(qualified), cu,
                                /*is_module=*/true);
}

jit::Module &ProgramBuilder::moduleAt(const std::string &path) {
  auto it = modules.find(path);
  if (it != modules.end())
    return it->second;
  size_t dot = path.rfind('.');
  std::string parent = dot == std::string::npos ? "" : path.substr(0, dot);
  std::string name = path.substr(dot == std::string::npos ? 0 : dot + 1);
  jit::Module &owner = moduleAt(parent);
  auto cls = classOfPath.count(path) ? classOfPath[path] : std::string();
  jit::Module sub(cu, newClass(cls));
  sub.register_attribute("training", c10::BoolType::get(), true);
  owner.register_module(name, sub);
  return modules.emplace(path, sub).first->second;
}

jit::Value *ProgramBuilder::getAttrChain(const std::string &qualifiedName) {
  auto it = attrValues.find(qualifiedName);
  if (it != attrValues.end())
    return it->second;
  size_t dot = qualifiedName.rfind('.');
  JitValue *owner =
      dot == std::string::npos
          ? g->inputs()[0]
          : getAttrChain(qualifiedName.substr(0, dot));
  JitValue *v = g->insertGetAttr(
      owner, qualifiedName.substr(dot == std::string::npos ? 0 : dot + 1));
  attrValues[qualifiedName] = v;
  return v;
}

jit::Value *ProgramBuilder::tensorNamed(const std::string &name,
                                      const std::string &where) {
  auto it = values.find(name);
  if (it == values.end())
    fail(where + ": uses '" + name + "' before it is defined");
  return it->second;
}

std::shared_ptr<jit::Operator>
ProgramBuilder::operatorFor(const std::string &target,
                            const std::string &where) {
  static const std::string prefix = "torch.ops.aten.";
  if (target.rfind("torch.ops.higher_order.", 0) == 0)
    fail(where + ": the higher-order operator '" + target.substr(10) +
         "' is not supported");
  if (target.rfind("torch._functorch.predispatch.", 0) == 0)
    fail(where + ": unsupported operator '" + target +
         "': the program calls torch.vmap (transformers' attention masks do); "
         "save program.run_decompositions({}), which writes it as ATen "
         "operators (dsopt does so itself)");
  if (target.rfind(prefix, 0) != 0)
    fail(where + ": unsupported operator '" + target +
         "' (only ATen operators are imported)");
  std::string rest = target.substr(prefix.size());
  size_t dot = rest.rfind('.');
  std::string name = rest.substr(0, dot);
  std::string overload = dot == std::string::npos ? "" : rest.substr(dot + 1);
  if (overload == "default")
    overload.clear();
  for (const auto &op :
       jit::getAllOperatorsFor(c10::Symbol::fromQualString("aten::" + name)))
    if (op->schema().overload_name() == overload)
      return op;
  fail(where + ": no ATen operator 'aten::" + name +
       (overload.empty() ? "" : "." + overload) + "' in this LibTorch");
}

jit::Value *ProgramBuilder::argumentValue(const ex::Argument &arg,
                                        const c10::Argument &formal,
                                        const std::string &where) {
  using Tag = ex::Argument::Tag;
  c10::TypePtr type = formal.type();
  bool wantsTensor = type->kind() == c10::TypeKind::TensorType ||
                     (type->kind() == c10::TypeKind::OptionalType &&
                      type->containedType(0)->kind() == c10::TypeKind::TensorType);
  // A Python number where the schema has a Tensor (`x.add_(1)` calls
  // add_.Tensor): a wrapped number, as eager PyTorch makes it.
  auto number = [&](c10::Scalar s) -> JitValue * {
    // TorchScript's Scalar is a number, not a bool (`masked_fill(m, True)`).
    if (s.isBoolean() && type->kind() == c10::TypeKind::NumberType)
      s = c10::Scalar(static_cast<int64_t>(s.toBool()));
    if (!wantsTensor)
      return constant(s.isFloatingPoint() ? c10::IValue(s.toDouble())
                      : s.isBoolean()     ? c10::IValue(s.toBool())
                                          : c10::IValue(s.toLong()));
    at::Tensor t = c10::scalar_to_tensor(s);
    t.unsafeGetTensorImpl()->set_wrapped_number(true);
    return constant(t);
  };
  switch (arg.tag()) {
  case Tag::AS_NONE:
    return constant(c10::IValue());
  case Tag::AS_TENSOR:
    return tensorNamed(arg.get_as_tensor().get_name(), where);
  case Tag::AS_OPTIONAL_TENSOR:
    if (arg.get_as_optional_tensor().tag() ==
        ex::OptionalTensorArgument::Tag::AS_NONE)
      return constant(c10::IValue());
    return tensorNamed(arg.get_as_optional_tensor().get_as_tensor().get_name(),
                       where);
  case Tag::AS_TENSORS: {
    std::vector<JitValue *> items;
    for (const auto &t : arg.get_as_tensors())
      items.push_back(tensorNamed(t.get_name(), where));
    return g->insertNode(g->createList(c10::TensorType::get(), items))
        ->output();
  }
  case Tag::AS_OPTIONAL_TENSORS: {
    std::vector<JitValue *> items;
    for (const auto &t : arg.get_as_optional_tensors())
      items.push_back(t.tag() == ex::OptionalTensorArgument::Tag::AS_NONE
                          ? constant(c10::IValue())
                          : tensorNamed(t.get_as_tensor().get_name(), where));
    return g
        ->insertNode(g->createList(
            c10::OptionalType::create(c10::TensorType::get()), items))
        ->output();
  }
  case Tag::AS_INT:
    return number(c10::Scalar(arg.get_as_int()));
  case Tag::AS_FLOAT:
    return number(c10::Scalar(arg.get_as_float().get()));
  case Tag::AS_BOOL:
    return number(c10::Scalar(arg.get_as_bool()));
  case Tag::AS_SYM_INT:
    if (arg.get_as_sym_int().tag() != ex::SymIntArgument::Tag::AS_INT)
      return symbolNamed(arg.get_as_sym_int().get_as_name(), where);
    return number(c10::Scalar(arg.get_as_sym_int().get_as_int()));
  case Tag::AS_SYM_FLOAT:
    if (arg.get_as_sym_float().tag() != ex::SymFloatArgument::Tag::AS_FLOAT)
      return symbolNamed(arg.get_as_sym_float().get_as_name(), where);
    return number(c10::Scalar(arg.get_as_sym_float().get_as_float().get()));
  case Tag::AS_SYM_BOOL:
    if (arg.get_as_sym_bool().tag() != ex::SymBoolArgument::Tag::AS_BOOL)
      return symbolNamed(arg.get_as_sym_bool().get_as_name(), where);
    return number(c10::Scalar(arg.get_as_sym_bool().get_as_bool()));
  case Tag::AS_INTS:
    return constant(c10::IValue(arg.get_as_ints()));
  case Tag::AS_SYM_INTS: {
    std::vector<int64_t> ints;
    std::vector<JitValue *> items;
    bool named = false;
    for (const auto &s : arg.get_as_sym_ints()) {
      if (s.tag() == ex::SymIntArgument::Tag::AS_INT) {
        ints.push_back(s.get_as_int());
        items.push_back(constant(c10::IValue(s.get_as_int())));
      } else {
        named = true;
        items.push_back(symbolNamed(s.get_as_name(), where));
      }
    }
    if (!named)
      return constant(c10::IValue(ints));
    return g->insertNode(g->createList(c10::IntType::get(), items))->output();
  }
  case Tag::AS_FLOATS: {
    std::vector<double> floats;
    for (const auto &f : arg.get_as_floats())
      floats.push_back(f.get());
    return constant(c10::IValue(floats));
  }
  case Tag::AS_BOOLS: {
    c10::List<bool> bools;
    for (bool b : arg.get_as_bools())
      bools.push_back(b);
    return constant(c10::IValue(bools));
  }
  case Tag::AS_STRING:
    return constant(c10::IValue(arg.get_as_string()));
  case Tag::AS_SCALAR_TYPE:
    return constant(
        c10::IValue(static_cast<int64_t>(scalarTypeOf(arg.get_as_scalar_type()))));
  case Tag::AS_MEMORY_FORMAT: {
    static const std::map<ex::MemoryFormat, at::MemoryFormat> formats = {
        {ex::MemoryFormat::ContiguousFormat, at::MemoryFormat::Contiguous},
        {ex::MemoryFormat::ChannelsLast, at::MemoryFormat::ChannelsLast},
        {ex::MemoryFormat::ChannelsLast3d, at::MemoryFormat::ChannelsLast3d},
        {ex::MemoryFormat::PreserveFormat, at::MemoryFormat::Preserve}};
    auto it = formats.find(arg.get_as_memory_format());
    if (it == formats.end())
      fail(where + ": unknown memory format");
    return constant(c10::IValue(static_cast<int64_t>(it->second)));
  }
  case Tag::AS_LAYOUT:
    if (arg.get_as_layout() != ex::Layout::Strided)
      fail(where + ": only the strided layout is supported");
    return constant(c10::IValue(static_cast<int64_t>(at::kStrided)));
  case Tag::AS_DEVICE: {
    const ex::Device &d = arg.get_as_device();
    std::string spec = d.get_type();
    if (d.get_index())
      spec += ":" + std::to_string(*d.get_index());
    return constant(c10::IValue(c10::Device(spec)));
  }
  default:
    fail(where + ": argument '" + formal.name() + "' of a kind (tag " +
         std::to_string(static_cast<int>(arg.tag())) +
         ") the importer does not support");
  }
}

/// Whether the eval twin replaces argument `formal` of `node`: a training
/// flag (`train`, `training`, bool or bool?) becomes false and attention's
/// `dropout_p` 0, as `module.eval()` would have exported them. Batch norm
/// without running statistics (track_running_stats=False) normalises by the
/// batch's in eval too: its flag stays.
static bool evalOverride(const c10::FunctionSchema &schema,
                         const c10::Argument &formal, const ex::Node &node) {
  if (formal.name() == "dropout_p")
    return true;
  if (formal.name() != "train" && formal.name() != "training")
    return false;
  c10::TypePtr type = formal.type();
  if (type->kind() == c10::TypeKind::OptionalType)
    type = type->containedType(0);
  if (type->kind() != c10::TypeKind::BoolType)
    return false;
  if (llvm::StringRef(schema.name()).contains("batch_norm"))
    for (const auto &named : node.get_inputs())
      if (named.get_name() == "running_mean")
        return named.get_arg().tag() != ex::Argument::Tag::AS_NONE &&
               !(named.get_arg().tag() == ex::Argument::Tag::AS_OPTIONAL_TENSOR &&
                 named.get_arg().get_as_optional_tensor().tag() ==
                     ex::OptionalTensorArgument::Tag::AS_NONE);
  return true;
}

/// torch.cond(pred, true_fn, false_fn, operands) as TorchScript writes an
/// `if` on a tensor: `prim::If(aten::Bool(pred))` with one block per branch
/// graph, so that the importer folds it when the example decides it and
/// makes a `ds.if` when the data does.
void ProgramBuilder::importCond(const ex::Node &node, bool eval,
                                const jit::SourceRange &range,
                                const std::string &where) {
  using Tag = ex::Argument::Tag;
  const auto &inputs = node.get_inputs();
  if (inputs.size() != 4 || inputs[0].get_arg().tag() != Tag::AS_TENSOR ||
      inputs[1].get_arg().tag() != Tag::AS_GRAPH ||
      inputs[2].get_arg().tag() != Tag::AS_GRAPH ||
      inputs[3].get_arg().tag() != Tag::AS_TENSORS)
    fail(where + ": a torch.cond whose arguments are not (a tensor, two "
                 "graphs, tensors)");
  jit::Value *pred =
      tensorNamed(inputs[0].get_arg().get_as_tensor().get_name(), where);
  std::vector<jit::Value *> operands;
  for (const auto &t : inputs[3].get_arg().get_as_tensors())
    operands.push_back(tensorNamed(t.get_name(), where));

  jit::Node *toBool = g->create(c10::Symbol::fromQualString("aten::Bool"),
                                {pred}, 1);
  g->insertNode(toBool);
  toBool->setSourceRange(range);
  toBool->output()->setType(c10::BoolType::get());
  if (!toBool->maybeSchema())
    fail(where + ": cannot make the branch condition");
  const auto &outputs = node.get_outputs();
  jit::Node *branch = g->create(c10::prim::If, {toBool->output()},
                                outputs.size());
  g->insertNode(branch);
  branch->setSourceRange(range);
  for (jit::Value *o : branch->outputs())
    o->setType(c10::TensorType::get());

  auto stack = node.get_metadata().find("nn_module_stack");
  condModules.push_back(stack == node.get_metadata().end()
                            ? enclosingModule()
                            : innermostModule(stack->second));
  for (int side = 1; side <= 2; ++side) {
    const ex::Graph &sub = *inputs[side].get_arg().get_as_graph().get_graph();
    if (sub.get_inputs().size() != operands.size())
      fail(where + ": a branch takes " +
           std::to_string(sub.get_inputs().size()) + " operands, torch.cond "
           "passes " + std::to_string(operands.size()));
    jit::Block *block = branch->addBlock();
    // The branch's names are its own: the outer ones are restored after.
    std::map<std::string, jit::Value *> outer = values;
    for (size_t i = 0; i < operands.size(); ++i) {
      if (sub.get_inputs()[i].tag() != Tag::AS_TENSOR)
        fail(where + ": a branch operand that is not a tensor");
      values[sub.get_inputs()[i].get_as_tensor().get_name()] = operands[i];
    }
    {
      jit::WithInsertPoint guard(block);
      for (const ex::Node &inner : sub.get_nodes())
        importNode(inner, eval);
      if (sub.get_outputs().size() != outputs.size())
        fail(where + ": a branch returns " +
             std::to_string(sub.get_outputs().size()) + " values, the cond " +
             std::to_string(outputs.size()));
      for (const ex::Argument &o : sub.get_outputs()) {
        if (o.tag() != Tag::AS_TENSOR)
          fail(where + ": a branch result that is not a tensor");
        block->registerOutput(tensorNamed(o.get_as_tensor().get_name(), where));
      }
    }
    values = std::move(outer);
  }
  condModules.pop_back();
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].tag() != Tag::AS_TENSOR)
      fail(where + ": a result that is not a tensor");
    values[outputs[i].get_as_tensor().get_name()] = branch->output(i);
  }
}

/// wrap_with_set_grad_enabled(enabled, body, *operands): a `with
/// torch.no_grad():` (or `enable_grad`) block of the model, which export
/// keeps as a graph of its own. Its nodes are imported in place; with grad
/// disabled its results are detached, as TorchScript's no_grad blocks are:
/// no gradient leaves the block.
void ProgramBuilder::importSetGradEnabled(const ex::Node &node, bool eval,
                                          const jit::SourceRange &range,
                                          const std::string &where) {
  using Tag = ex::Argument::Tag;
  const auto &inputs = node.get_inputs();
  if (inputs.size() < 2 || inputs[0].get_arg().tag() != Tag::AS_BOOL ||
      inputs[1].get_arg().tag() != Tag::AS_GRAPH)
    fail(where + ": a wrap_with_set_grad_enabled whose arguments are not (a "
                 "bool, a graph, tensors)");
  bool enabled = inputs[0].get_arg().get_as_bool();
  std::vector<jit::Value *> operands;
  for (size_t i = 2; i < inputs.size(); ++i) {
    const ex::Argument &arg = inputs[i].get_arg();
    if (arg.tag() == Tag::AS_TENSOR)
      operands.push_back(tensorNamed(arg.get_as_tensor().get_name(), where));
    else if (arg.tag() == Tag::AS_TENSORS)
      for (const auto &t : arg.get_as_tensors())
        operands.push_back(tensorNamed(t.get_name(), where));
    else
      fail(where + ": a grad-mode block operand that is not a tensor");
  }
  const ex::Graph &body = *inputs[1].get_arg().get_as_graph().get_graph();
  if (body.get_inputs().size() != operands.size())
    fail(where + ": the block takes " + std::to_string(body.get_inputs().size()) +
         " operands, the call passes " + std::to_string(operands.size()));
  // The block's names are its own: the outer ones are restored after.
  std::map<std::string, jit::Value *> outer = values;
  for (size_t i = 0; i < operands.size(); ++i) {
    if (body.get_inputs()[i].tag() != Tag::AS_TENSOR)
      fail(where + ": a grad-mode block operand that is not a tensor");
    values[body.get_inputs()[i].get_as_tensor().get_name()] = operands[i];
  }
  for (const ex::Node &inner : body.get_nodes())
    importNode(inner, eval);
  std::vector<jit::Value *> results;
  for (const ex::Argument &o : body.get_outputs()) {
    if (o.tag() != Tag::AS_TENSOR)
      fail(where + ": a grad-mode block result that is not a tensor");
    results.push_back(tensorNamed(o.get_as_tensor().get_name(), where));
  }
  values = std::move(outer);
  const auto &outputs = node.get_outputs();
  if (outputs.size() != results.size())
    fail(where + ": the block returns " + std::to_string(results.size()) +
         " values, the call " + std::to_string(outputs.size()));
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].tag() != Tag::AS_TENSOR)
      fail(where + ": a result that is not a tensor");
    jit::Value *result = results[i];
    if (!enabled) {
      jit::Node *detach = g->create(
          c10::Symbol::fromQualString("aten::detach"), {result}, 1);
      g->insertNode(detach);
      detach->setSourceRange(range);
      detach->output()->setType(c10::TensorType::get());
      result = detach->output();
    }
    values[outputs[i].get_as_tensor().get_name()] = result;
  }
}

void ProgramBuilder::collectReadSymbols(const ex::Graph &from) {
  // Backwards, so that a symbol only a dead node reads is not read.
  const auto &nodes = from.get_nodes();
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    if (isDeadSymbolic(*it))
      continue;
    for (const auto &named : it->get_inputs()) {
      if (named.get_arg().tag() == ex::Argument::Tag::AS_GRAPH)
        collectReadSymbols(*named.get_arg().get_as_graph().get_graph());
      for (std::string &name : symbolsOf(named.get_arg()))
        readSymbols.insert(std::move(name));
    }
  }
}

bool ProgramBuilder::isDeadSymbolic(const ex::Node &node) const {
  if (!onlySymbolicResults(node))
    return false;
  for (const ex::Argument &o : node.get_outputs())
    for (const std::string &name : symbolsOf(o))
      if (readSymbols.count(name))
        return false;
  return true;
}

ProgramBuilder::JitValue *
ProgramBuilder::symbolNamed(const std::string &name, const std::string &where) {
  auto it = symbols.find(name);
  if (it == symbols.end())
    fail(where + ": a symbolic size ('" + name +
         "') that no node of the program computes: export with static shapes");
  return it->second;
}

bool ProgramBuilder::importSymbolicOperator(const ex::Node &node,
                                            const jit::SourceRange &range,
                                            const std::string &where) {
  auto aten = atenOfSymbolicOperator(node.get_target());
  if (!aten)
    return false;
  if (node.get_outputs().size() != 1)
    fail(where + ": a Python operator with " +
         std::to_string(node.get_outputs().size()) + " results");
  std::vector<JitValue *> inputs;
  c10::Argument formal("a", c10::IntType::get());
  for (const auto &named : node.get_inputs())
    inputs.push_back(argumentValue(named.get_arg(), formal, where));
  jit::Node *n = g->insertNode(
      g->create(c10::Symbol::fromQualString(aten->first), inputs, 1));
  n->setSourceRange(range);
  n->output()->setType(aten->second);
  if (!n->maybeSchema())
    fail(where + ": no " + aten->first + " overload takes these operands");
  for (const std::string &name : symbolsOf(node.get_outputs()[0]))
    symbols[name] = n->output();
  return true;
}

void ProgramBuilder::importNode(const ex::Node &node, bool eval) {
  const auto &meta = node.get_metadata();
  auto metaOf = [&](const char *key) {
    auto it = meta.find(key);
    return it == meta.end() ? std::string() : it->second;
  };
  jit::SourceRange range = sourceRangeOf(metaOf("stack_trace"));
  std::string where = "'" + node.get_target() + "'";
  if (auto flc = range.file_line_col())
    where += " at " + std::get<0>(*flc) + ":" +
             std::to_string(std::get<1>(*flc));
  // Export's own checks of what the trace assumed (`_assert_*`,
  // `sym_constrain_range*`) and the symbols only they read: the import
  // specialises on the examples, which make them hold.
  if (isDeadSymbolic(node))
    return;
  if (importSymbolicOperator(node, range, where))
    return;
  if (node.get_target() == "torch.ops.higher_order.cond")
    return importCond(node, eval, range, where);
  if (node.get_target() == "torch.ops.higher_order.wrap_with_set_grad_enabled")
    return importSetGradEnabled(node, eval, range, where);
  // alias(x) is x (export keeps it where the model returns an input's view).
  if (node.get_target() == "torch.ops.aten.alias.default" &&
      node.get_inputs().size() == 1 && node.get_outputs().size() == 1 &&
      node.get_inputs()[0].get_arg().tag() == ex::Argument::Tag::AS_TENSOR &&
      node.get_outputs()[0].tag() == ex::Argument::Tag::AS_TENSOR) {
    values[node.get_outputs()[0].get_as_tensor().get_name()] = tensorNamed(
        node.get_inputs()[0].get_arg().get_as_tensor().get_name(), where);
    return;
  }
  std::shared_ptr<jit::Operator> op = operatorFor(node.get_target(), where);
  // A Python number where the schema has a Tensor (`x * 0.5` calls
  // mul.Tensor): the overload that takes a Scalar there, as TorchScript
  // would call (mul.Scalar), else a wrapped-number tensor (below).
  auto isNumber = [](const ex::Argument &a) {
    using Tag = ex::Argument::Tag;
    return a.tag() == Tag::AS_INT || a.tag() == Tag::AS_FLOAT ||
           a.tag() == Tag::AS_BOOL ||
           (a.tag() == Tag::AS_SYM_INT &&
            a.get_as_sym_int().tag() == ex::SymIntArgument::Tag::AS_INT);
  };
  auto givenOf = [&](const std::string &name) -> const ex::NamedArgument * {
    for (const auto &named : node.get_inputs())
      if (named.get_name() == name)
        return &named;
    return nullptr;
  };
  auto numberInTensorSlot = [&](const c10::FunctionSchema &schema) {
    for (const c10::Argument &formal : schema.arguments())
      if (const auto *given = givenOf(formal.name()))
        if (formal.type()->kind() == c10::TypeKind::TensorType &&
            isNumber(given->get_arg()))
          return true;
    return false;
  };
  if (numberInTensorSlot(op->schema())) {
    for (const auto &other :
         jit::getAllOperatorsFor(c10::Symbol::fromQualString(op->schema().name()))) {
      const c10::FunctionSchema &cand = other->schema();
      bool fits = cand.arguments().size() >= node.get_inputs().size();
      for (const auto &named : node.get_inputs()) {
        auto idx = cand.argumentIndexWithName(named.get_name());
        if (!idx) {
          fits = false;
          break;
        }
        c10::TypeKind kind = cand.arguments()[*idx].type()->kind();
        if (isNumber(named.get_arg()) && kind == c10::TypeKind::TensorType)
          fits = false;
        if (named.get_arg().tag() == ex::Argument::Tag::AS_TENSOR &&
            kind != c10::TypeKind::TensorType)
          fits = false;
      }
      for (const c10::Argument &formal : cand.arguments())
        if (!givenOf(formal.name()) && !formal.default_value())
          fits = false;
      if (fits && cand.returns().size() == op->schema().returns().size()) {
        op = other;
        break;
      }
    }
  }
  const c10::FunctionSchema &schema = op->schema();

  // The eval program is the same graph as module.eval() would have exported
  // it: dropout and batch norm out of training mode, and BatchNorm's counter
  // of batches not advanced.
  if (eval && schema.name() == "aten::add_" &&
      node.get_inputs().size() >= 1 &&
      node.get_inputs()[0].get_arg().tag() == ex::Argument::Tag::AS_TENSOR) {
    auto it = bufferOfInput.find(
        node.get_inputs()[0].get_arg().get_as_tensor().get_name());
    if (it != bufferOfInput.end() &&
        llvm::StringRef(it->second).ends_with("num_batches_tracked")) {
      for (const auto &o : node.get_outputs())
        if (o.tag() == ex::Argument::Tag::AS_TENSOR)
          values[o.get_as_tensor().get_name()] =
              tensorNamed(node.get_inputs()[0].get_arg().get_as_tensor().get_name(), where);
      return;
    }
  }
  std::vector<JitValue *> inputs;
  for (const c10::Argument &formal : schema.arguments()) {
    const ex::NamedArgument *given = nullptr;
    for (const auto &named : node.get_inputs())
      if (named.get_name() == formal.name())
        given = &named;
    if (eval && evalOverride(schema, formal, node)) {
      if (llvm::StringRef(schema.name()).contains("batch_norm"))
        for (const ex::Argument &o : node.get_outputs())
          if (o.tag() == ex::Argument::Tag::AS_TENSOR)
            unchangedInEval.insert(o.get_as_tensor().get_name());
      inputs.push_back(formal.name() == "dropout_p" ? constant(0.0)
                                                    : constant(false));
    } else if (given) {
      inputs.push_back(argumentValue(given->get_arg(), formal, where));
    } else if (formal.default_value()) {
      inputs.push_back(constant(*formal.default_value()));
    } else {
      fail(where + ": no value for argument '" + formal.name() + "'");
    }
  }
  jit::Node *n = g->create(c10::Symbol::fromQualString(schema.name()), inputs,
                           schema.returns().size());
  g->insertNode(n);
  n->setSourceRange(range);
  for (size_t i = 0; i < schema.returns().size(); ++i)
    n->output(i)->setType(schema.returns()[i].type());
  if (!n->maybeSchema())
    fail(where + ": the call does not match the schema " +
         c10::toString(schema));
  std::string stack = metaOf("nn_module_stack");
  out.nodeModules[n] = stack.empty() ? enclosingModule()
                                     : innermostModule(stack);

  const auto &outputs = node.get_outputs();
  using Tag = ex::Argument::Tag;
  if (outputs.size() != schema.returns().size())
    fail(where + ": " + std::to_string(outputs.size()) +
         " outputs, the schema returns " +
         std::to_string(schema.returns().size()));
  for (size_t i = 0; i < outputs.size(); ++i) {
    const ex::Argument &o = outputs[i];
    if (o.tag() == Tag::AS_TENSOR) {
      values[o.get_as_tensor().get_name()] = n->output(i);
    } else if (o.tag() == Tag::AS_TENSORS) {
      const auto &names = o.get_as_tensors();
      jit::Node *unpack =
          g->insertNode(g->createListUnpack(n->output(i), names.size()));
      for (size_t k = 0; k < names.size(); ++k)
        values[names[k].get_name()] = unpack->output(k);
    } else if (o.tag() == Tag::AS_SYM_INT || o.tag() == Tag::AS_SYM_FLOAT ||
               o.tag() == Tag::AS_SYM_BOOL) {
      // `x.item()` returns a Scalar; the symbol is the int, float or bool.
      JitValue *v = n->output(i);
      if (v->type()->kind() == c10::TypeKind::NumberType) {
        const char *cast = o.tag() == Tag::AS_SYM_FLOAT ? "aten::Float"
                                                          : "aten::Int";
        jit::Node *c = g->insertNode(
            g->create(c10::Symbol::fromQualString(cast), {v}, 1));
        c->setSourceRange(range);
        c->output()->setType(o.tag() == Tag::AS_SYM_FLOAT
                                 ? c10::TypePtr(c10::FloatType::get())
                                 : c10::TypePtr(c10::IntType::get()));
        v = c->output();
        if (o.tag() == Tag::AS_SYM_BOOL) {
          jit::Node *b = g->insertNode(g->create(
              c10::Symbol::fromQualString("aten::Bool"), {v}, 1));
          b->setSourceRange(range);
          b->output()->setType(c10::BoolType::get());
          v = b->output();
        }
      }
      const std::string &name =
          o.tag() == Tag::AS_SYM_INT     ? o.get_as_sym_int().get_as_name()
          : o.tag() == Tag::AS_SYM_FLOAT ? o.get_as_sym_float().get_as_name()
                                         : o.get_as_sym_bool().get_as_name();
      symbols[name] = v;
    } else if (o.tag() != Tag::AS_NONE) {
      fail(where + ": result #" + std::to_string(i) +
           " is not a tensor (tag " + std::to_string(static_cast<int>(o.tag())) +
           ")");
    }
  }
}

void ProgramBuilder::build() {
  collectClasses(graph());
  jit::Module root(cu, newClass(classOfPath.count("") ? classOfPath[""]
                                                      : std::string()));
  root.register_attribute("training", c10::BoolType::get(), true);
  modules.emplace("", root);

  const ex::GraphSignature &signature =
      program.get_graph_module().get_signature();
  // Declare the state in the signature's order (named_parameters' order).
  auto stateTensor = [&](const std::string &name, bool constant) {
    auto &from = constant ? constants : weights;
    auto it = from.find(name);
    if (it == from.end())
      fail("the signature names '" + name + "', which the archive's " +
           (constant ? "constants" : "weights") + " lack");
    return it->second;
  };
  auto declare = [&](const std::string &qualified, const at::Tensor &t,
                     bool isParam) {
    size_t dot = qualified.rfind('.');
    jit::Module &owner =
        moduleAt(dot == std::string::npos ? "" : qualified.substr(0, dot));
    std::string leaf = qualified.substr(dot == std::string::npos ? 0 : dot + 1);
    if (isParam)
      owner.register_parameter(leaf, t, /*is_buffer=*/false);
    else
      owner.register_buffer(leaf, t);
  };
  using InTag = ex::InputSpec::Tag;
  for (const ex::InputSpec &spec : signature.get_input_specs()) {
    switch (spec.tag()) {
    case InTag::PARAMETER: {
      const std::string &name = spec.get_parameter().get_parameter_name();
      declare(name, stateTensor(name, false), true);
      break;
    }
    case InTag::BUFFER: {
      const auto &b = spec.get_buffer();
      declare(b.get_buffer_name(),
              stateTensor(b.get_buffer_name(), false), false);
      break;
    }
    case InTag::USER_INPUT:
    case InTag::TENSOR_CONSTANT:
      break;
    default:
      fail("an input of a kind the importer does not support (custom "
           "objects, tokens, constant inputs)");
    }
  }

  buildMethod(root, "forward", /*eval=*/false);
  buildMethod(root, "forward_eval", /*eval=*/true);
  out.module = root;
}

void ProgramBuilder::buildMethod(jit::Module &root, const std::string &name,
                                 bool eval) {
  const ex::GraphSignature &signature =
      program.get_graph_module().get_signature();
  using InTag = ex::InputSpec::Tag;
  auto stateTensor = [&](const std::string &name) {
    auto it = constants.find(name);
    if (it == constants.end())
      fail("the signature names '" + name +
           "', which the archive's constants lack");
    return it->second;
  };
  values.clear();
  symbols.clear();
  readSymbols.clear();
  attrValues.clear();
  out.inputNames.clear();
  out.inputShapes.clear();
  g = std::make_shared<jit::Graph>();
  g->addInput("self")->setType(root.type());
  for (const ex::InputSpec &spec : signature.get_input_specs()) {
    switch (spec.tag()) {
    case InTag::PARAMETER:
      values[spec.get_parameter().get_arg().get_name()] =
          getAttrChain(spec.get_parameter().get_parameter_name());
      break;
    case InTag::BUFFER:
      values[spec.get_buffer().get_arg().get_name()] =
          getAttrChain(spec.get_buffer().get_buffer_name());
      bufferOfInput[spec.get_buffer().get_arg().get_name()] =
          spec.get_buffer().get_buffer_name();
      break;
    case InTag::TENSOR_CONSTANT: {
      const auto &c = spec.get_tensor_constant();
      values[c.get_arg().get_name()] =
          constant(stateTensor(c.get_tensor_constant_name()));
      break;
    }
    case InTag::USER_INPUT: {
      const ex::Argument &arg = spec.get_user_input().get_arg();
      if (arg.tag() != ex::Argument::Tag::AS_TENSOR)
        fail("user input #" + std::to_string(out.inputNames.size()) +
             " is not a tensor; only tensor inputs come from the data file");
      const std::string &name = arg.get_as_tensor().get_name();
      JitValue *v = g->addInput(name);
      v->setType(c10::TensorType::get());
      values[name] = v;
      out.inputNames.push_back(name);
      std::optional<std::vector<int64_t>> shape;
      auto meta = graph().get_tensor_values().find(name);
      if (meta != graph().get_tensor_values().end()) {
        shape.emplace();
        for (const ex::SymInt &s : meta->second.get_sizes()) {
          if (s.tag() != ex::SymInt::Tag::AS_INT)
            fail("input '" + name +
                 "' has a dynamic dim (torch.export.Dim): not supported yet; "
                 "export with static shapes, one rank's micro-batch");
          shape->push_back(s.get_as_int());
        }
      }
      out.inputShapes.push_back(shape);
      break;
    }
    default:
      break;
    }
  }

  collectReadSymbols(graph());
  for (const ex::Node &node : graph().get_nodes())
    importNode(node, eval);

  // Outputs: the user's; buffer mutations (core-ATen programs) are written
  // back with copy_, which the importer turns into a buffer update.
  std::vector<JitValue *> results;
  using OutTag = ex::OutputSpec::Tag;
  for (const ex::OutputSpec &spec : signature.get_output_specs()) {
    switch (spec.tag()) {
    case OutTag::USER_OUTPUT: {
      const ex::Argument &arg = spec.get_user_output().get_arg();
      if (arg.tag() != ex::Argument::Tag::AS_TENSOR)
        fail("an output that is not a tensor");
      results.push_back(tensorNamed(arg.get_as_tensor().get_name(), "output"));
      break;
    }
    case OutTag::BUFFER_MUTATION: {
      const auto &m = spec.get_buffer_mutation();
      // In eval, BatchNorm's counter of batches stays (as for add_ above),
      // and so do its running statistics.
      if (eval &&
          (llvm::StringRef(m.get_buffer_name()).ends_with("num_batches_tracked") ||
           unchangedInEval.count(m.get_arg().get_name())))
        break;
      JitValue *target = getAttrChain(m.get_buffer_name());
      JitValue *value = tensorNamed(m.get_arg().get_name(), "output");
      jit::Node *n = g->create(c10::Symbol::fromQualString("aten::copy_"),
                               {target, value, constant(false)}, 1);
      g->insertNode(n);
      n->output()->setType(c10::TensorType::get());
      break;
    }
    default:
      fail("an output of a kind the importer does not support (gradients, "
           "parameter or user-input mutations, tokens)");
    }
  }
  if (results.empty())
    fail("the program has no user output");
  g->registerOutput(results.size() == 1
                        ? results[0]
                        : g->insertNode(g->createTuple(results))->output());
  // What TorchScript does to the graphs it makes: operator aliases become
  // their ATen names (`torch.multiply` exports as aten.multiply, scripts as
  // aten::mul), and nodes whose results and writes nothing observes go (a
  // module built inside forward whose weights are dropped leaves their
  // initialisation behind: uniform_ on a detached empty).
  jit::NormalizeOps(g);
  jit::EliminateDeadCode(g);

  jit::Function *fn =
      cu->create_function(c10::QualifiedName(*root.type()->name(), name), g);
  root.type()->addMethod(fn);
}

std::optional<std::string>
mlir::ds::import::loadExportedProgram(const std::string &path, Pt2Model &out) {
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    std::string modelName;
    try {
      modelName = "models/" + ::ds::runtime::pt2ProgramName(reader) + ".json";
    } catch (const ::ds::runtime::RuntimeError &error) {
      return error.what();
    }
    // The version first: a newer format may not parse as this one.
    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(readRecord(reader, modelName));
    } catch (const nlohmann::json::exception &e) {
      return "'" + modelName + "' is not valid JSON: " + e.what();
    }
    auto version = doc.find("schema_version");
    if (version == doc.end() || !version->is_object() ||
        !version->contains("major") || !(*version)["major"].is_number_integer())
      return "'" + modelName + "' has no schema_version";
    int64_t major = (*version)["major"].get<int64_t>();
    int64_t minor = version->value("minor", int64_t(0));
    out.schemaVersion = std::to_string(major) + "." + std::to_string(minor);
    if (major != kSchemaMajor)
      return "the program's schema version " + out.schemaVersion +
             " is not supported (this importer reads major version " +
             std::to_string(kSchemaMajor) + ", torch 2.15's)";
    ex::ExportedProgram program;
    try {
      program = doc.get<ex::ExportedProgram>();
    } catch (const std::exception &e) {
      return "'" + modelName + "' does not follow the export schema: " +
             std::string(e.what());
    }
    out.torchVersion = program.get_torch_version();
    // The state as the runtime reads it (tied weights are one tensor, which
    // declareState declares once).
    ::ds::runtime::Pt2State state = ::ds::runtime::readPt2State(path);
    std::map<std::string, at::Tensor> weights, constants;
    for (auto &[name, tensor] : state.params)
      weights[name] = tensor;
    for (auto &[name, tensor] : state.buffers)
      weights[name] = tensor;
    for (auto &[name, tensor] : state.constants)
      constants[name] = tensor;
    for (auto &[name, tensor] : state.params)
      tensor.set_requires_grad(
          !llvm::is_contained(state.frozen, name));
    ProgramBuilder(program, std::move(weights), std::move(constants), out)
        .build();
  } catch (const ::ds::runtime::RuntimeError &e) {
    return e.what();
  } catch (const ReadError &e) {
    return e.message;
  } catch (const c10::Error &e) {
    return e.what_without_backtrace();
  } catch (const std::exception &e) {
    return e.what();
  }
  return std::nullopt;
}
