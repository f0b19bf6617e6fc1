//===- TorchUnpickler.cpp - Pickles of torch.save as values ---------------===//
//
// The opcodes of pickle protocols 2-4 that torch.save (and our pickler)
// write. Python globals are turned into plain values (TorchSave.h): what
// DeepSpeed's checkpoints hold (torch.Size, OrderedDict, sets, enums, its
// loss scaler objects, dtypes) reads without Python.
//
//===----------------------------------------------------------------------===//

#include "Pickle.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <map>

namespace ds::runtime::detail {

namespace {

c10::impl::GenericDict anyDict() {
  return c10::impl::GenericDict(c10::AnyType::get(), c10::AnyType::get());
}

/// A global on the stack: called by REDUCE / NEWOBJ, or a plain value.
struct Global {
  std::string module, name;
  std::string qualified() const { return module + "." + name; }
};

class Unpickler {
public:
  Unpickler(const std::string &pickle, const StorageReader &readStorage)
      : data_(pickle), readStorage_(readStorage) {}

  c10::IValue run() {
    while (true) {
      TORCH_CHECK(pos_ < data_.size(), "pickle: unexpected end of data");
      unsigned char code = byte();
      if (code == '.')
        break;
      step(code);
    }
    TORCH_CHECK(stack_.size() == 1, "pickle: ", stack_.size(),
                " values left at STOP");
    return value(stack_.back());
  }

private:
  /// A stack entry: a value or a global not yet called.
  struct Item {
    c10::IValue value;
    int64_t global = -1;
  };

  unsigned char byte() {
    TORCH_CHECK(pos_ < data_.size(), "pickle: unexpected end of data");
    return static_cast<unsigned char>(data_[pos_++]);
  }
  template <typename T> T read() {
    TORCH_CHECK(sizeof(T) <= data_.size() - pos_,
                "pickle: unexpected end of data");
    T result;
    std::memcpy(&result, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return result;
  }
  std::string bytes(size_t size) {
    // Not pos_ + size: a BINUNICODE8 size near 2^64 would wrap around.
    TORCH_CHECK(size <= data_.size() - pos_, "pickle: unexpected end of data");
    std::string text = data_.substr(pos_, size);
    pos_ += size;
    return text;
  }
  std::string line() {
    size_t end = data_.find('\n', pos_);
    TORCH_CHECK(end != std::string::npos, "pickle: unterminated line");
    std::string text = data_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return text;
  }

  void push(c10::IValue value) { stack_.push_back({std::move(value), -1}); }
  Item pop() {
    TORCH_CHECK(!stack_.empty(), "pickle: stack underflow");
    Item item = std::move(stack_.back());
    stack_.pop_back();
    return item;
  }
  /// A stack entry as a value: an uncalled global is its name.
  c10::IValue value(const Item &item) const {
    if (item.global < 0)
      return item.value;
    return globals_[size_t(item.global)].qualified();
  }
  /// The items above the last MARK, removed.
  std::vector<c10::IValue> popMark() {
    TORCH_CHECK(!marks_.empty(), "pickle: no MARK");
    size_t start = marks_.back();
    marks_.pop_back();
    TORCH_CHECK(start <= stack_.size(), "pickle: bad MARK");
    std::vector<c10::IValue> items;
    for (size_t i = start; i < stack_.size(); ++i)
      items.push_back(value(stack_[i]));
    stack_.resize(start);
    return items;
  }
  void pushTuple(std::vector<c10::IValue> items) {
    push(c10::ivalue::Tuple::create(std::move(items)));
  }
  void setItems(const std::vector<c10::IValue> &items) {
    TORCH_CHECK(!stack_.empty() && stack_.back().value.isGenericDict(),
                "pickle: SETITEMS on a non-dict");
    c10::impl::GenericDict dict = stack_.back().value.toGenericDict();
    for (size_t i = 0; i + 1 < items.size(); i += 2)
      dict.insert_or_assign(items[i], items[i + 1]);
  }
  void appendItems(const std::vector<c10::IValue> &items) {
    TORCH_CHECK(!stack_.empty() && stack_.back().value.isList(),
                "pickle: APPENDS on a non-list");
    c10::List<c10::IValue> list = stack_.back().value.toList();
    for (const c10::IValue &item : items)
      list.push_back(item);
  }
  void memoize(size_t index) {
    TORCH_CHECK(!stack_.empty(), "pickle: PUT on an empty stack");
    memo_[index] = stack_.back();
  }
  void recall(size_t index) {
    auto it = memo_.find(index);
    TORCH_CHECK(it != memo_.end(), "pickle: GET of unknown memo ", index);
    stack_.push_back(it->second);
  }

  c10::IValue tensorOf(const std::vector<c10::IValue> &args) {
    TORCH_CHECK(args.size() >= 4 && args[0].isTensor(),
                "pickle: bad _rebuild_tensor_v2 arguments");
    const at::Tensor &storage = args[0].toTensor();
    std::vector<int64_t> size = ints(args[2]), stride = ints(args[3]);
    return at::empty({0}, storage.options())
        .set_(storage.storage(), args[1].toInt(), size, stride);
  }

  static std::vector<int64_t> ints(const c10::IValue &value) {
    std::vector<int64_t> result;
    const auto elements = value.isTuple() ? value.toTupleRef().elements().vec()
                                          : value.toListRef().vec();
    for (const c10::IValue &item : elements)
      result.push_back(item.toInt());
    return result;
  }

  /// "torch.FloatStorage" -> Float.
  static at::ScalarType storageType(const std::string &name) {
    static const std::string prefix = "torch.";
    static const std::string suffix = "Storage";
    if (name.size() > prefix.size() + suffix.size() &&
        name.compare(0, prefix.size(), prefix) == 0 &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      std::string type = name.substr(
          prefix.size(), name.size() - prefix.size() - suffix.size());
      for (at::ScalarType candidate :
           {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16, at::kLong,
            at::kInt, at::kShort, at::kChar, at::kByte, at::kBool})
        if (type == c10::toString(candidate))
          return candidate;
    }
    TORCH_CHECK(false, "pickle: unsupported storage type ", name);
  }

  c10::IValue persistent(const c10::IValue &id) {
    TORCH_CHECK(id.isTuple(), "pickle: persistent id is not a tuple");
    const auto &args = id.toTupleRef().elements();
    TORCH_CHECK(args.size() >= 5 && args[0].isString() &&
                    args[0].toStringRef() == "storage",
                "pickle: unknown persistent id");
    at::ScalarType type = storageType(args[1].toStringRef());
    const std::string key = args[2].toStringRef();
    auto found = storages_.find(key);
    if (found != storages_.end())
      return found->second;
    int64_t numel = args[4].toInt();
    size_t size = size_t(numel) * c10::elementSize(type);
    c10::Storage storage = readStorage_(key, size);
    at::Tensor tensor = at::empty({0}, at::TensorOptions().dtype(type))
                            .set_(storage, 0, {numel}, {1});
    storages_[key] = tensor;
    return tensor;
  }

  /// global(args...) as a value.
  c10::IValue call(const Global &global, const std::vector<c10::IValue> &args) {
    const std::string name = global.qualified();
    if (name == "torch._utils._rebuild_tensor_v2")
      return tensorOf(args);
    if (name == "torch._utils._rebuild_parameter" ||
        name == "torch._utils._rebuild_parameter_with_state") {
      TORCH_CHECK(!args.empty(), "pickle: bad _rebuild_parameter");
      return args[0];
    }
    if (name == "torch._tensor._rebuild_from_type_v2") {
      TORCH_CHECK(args.size() >= 3 && args[2].isTuple(),
                  "pickle: bad _rebuild_from_type_v2");
      return call(split(args[0].toStringRef()),
                  args[2].toTupleRef().elements().vec());
    }
    if (name == "torch.Size")
      return c10::ivalue::Tuple::create(
          args.empty() ? std::vector<c10::IValue>{} : asVector(args[0]));
    if (name == "collections.OrderedDict" || name == "builtins.dict") {
      c10::impl::GenericDict dict = anyDict();
      if (!args.empty())
        for (const c10::IValue &pair : asVector(args[0])) {
          std::vector<c10::IValue> kv = asVector(pair);
          TORCH_CHECK(kv.size() == 2, "pickle: bad OrderedDict item");
          dict.insert_or_assign(kv[0], kv[1]);
        }
      return dict;
    }
    if (name == "builtins.set" || name == "builtins.frozenset" ||
        name == "builtins.list") {
      c10::List<c10::IValue> list(c10::AnyType::get());
      if (!args.empty())
        for (const c10::IValue &item : asVector(args[0]))
          list.push_back(item);
      return list;
    }
    if (name == "torch.device" && !args.empty())
      return args[0];
    // TorchScript's pickler (torch::jit::pickle_save) tags typed containers:
    // restore_type_tag(value, "Dict[str, Tensor]"), build_intlist([...]).
    if (name == "torch.jit._pickle.restore_type_tag" && !args.empty())
      return args[0];
    if (global.module == "torch.jit._pickle" && args.size() == 1 &&
        name.find(".build_") != std::string::npos)
      return args[0];
    if (name == "copyreg._reconstructor" && !args.empty())
      return object(args[0].isString() ? args[0].toStringRef() : name);
    // getattr(Class, "name"): how Python 3.11 pickles an enum member
    // (DeepSpeed's ZeroStageEnum.gradients); reads as "module.Class.name".
    if ((name == "builtins.getattr" || name == "__builtin__.getattr") &&
        args.size() == 2 && args[0].isString() && args[1].isString())
      return args[0].toStringRef() + "." + args[1].toStringRef();
    // An older enum pickle, Enum(value): reads as the value.
    if (args.size() == 1 && (args[0].isInt() || args[0].isDouble() ||
                             args[0].isString() || args[0].isBool()))
      return args[0];
    // Any other object: its class name, then BUILD adds its state.
    c10::impl::GenericDict dict = object(name);
    if (!args.empty())
      dict.insert("__args__", c10::ivalue::Tuple::create(args));
    return dict;
  }

  static Global split(const std::string &qualified) {
    size_t dot = qualified.rfind('.');
    if (dot == std::string::npos)
      return {"", qualified};
    return {qualified.substr(0, dot), qualified.substr(dot + 1)};
  }
  static std::vector<c10::IValue> asVector(const c10::IValue &value) {
    if (value.isTuple())
      return value.toTupleRef().elements().vec();
    if (value.isList())
      return value.toListRef().vec();
    TORCH_CHECK(false, "pickle: expected a tuple or list, found ",
                value.tagKind());
  }
  static c10::impl::GenericDict object(const std::string &className) {
    c10::impl::GenericDict dict = anyDict();
    dict.insert("__class__", className);
    return dict;
  }

  /// BUILD: an object's state into it.
  void build() {
    c10::IValue state = value(pop());
    TORCH_CHECK(!stack_.empty(), "pickle: BUILD on an empty stack");
    c10::IValue &target = stack_.back().value;
    // (dict_state, slots_state) tuples: take the dict part.
    if (state.isTuple() && state.toTupleRef().elements().size() == 2)
      state = state.toTupleRef().elements()[0];
    // Only objects read as dicts keep their state (a tensor's Python
    // attributes, an enum's, are dropped).
    if (target.isGenericDict() && state.isGenericDict()) {
      c10::impl::GenericDict dict = target.toGenericDict();
      for (const auto &entry : state.toGenericDict())
        dict.insert_or_assign(entry.key(), entry.value());
    }
  }

  void step(unsigned char code) {
    switch (code) {
    case 0x80: // PROTO
      byte();
      break;
    case 0x95: // FRAME
      read<uint64_t>();
      break;
    case '(':
      marks_.push_back(stack_.size());
      break;
    case 'N':
      push(c10::IValue());
      break;
    case 0x88:
      push(true);
      break;
    case 0x89:
      push(false);
      break;
    case 'K':
      push(int64_t(byte()));
      break;
    case 'M':
      push(int64_t(read<uint16_t>()));
      break;
    case 'J':
      push(int64_t(read<int32_t>()));
      break;
    case 0x8a: { // LONG1
      size_t size = byte();
      TORCH_CHECK(size <= 8, "pickle: integer of ", size, " bytes");
      uint64_t bits = 0;
      for (size_t i = 0; i < size; ++i)
        bits |= uint64_t(byte()) << (8 * i);
      if (size > 0 && size < 8 && (bits >> (8 * size - 1)) & 1)
        bits |= ~uint64_t(0) << (8 * size);
      push(int64_t(bits));
      break;
    }
    case 'G': {
      unsigned char big[8], little[8];
      for (unsigned char &b : big)
        b = byte();
      for (int i = 0; i < 8; ++i)
        little[i] = big[7 - i];
      double number;
      std::memcpy(&number, little, 8);
      push(number);
      break;
    }
    case 'X':
      push(bytes(read<uint32_t>()));
      break;
    case 0x8c: // SHORT_BINUNICODE
      push(bytes(byte()));
      break;
    case 0x8d: // BINUNICODE8
      push(bytes(size_t(read<uint64_t>())));
      break;
    case 'B': // BINBYTES
      push(bytes(read<uint32_t>()));
      break;
    case 'C': // SHORT_BINBYTES
      push(bytes(byte()));
      break;
    case '}':
      push(anyDict());
      break;
    case ']':
      push(c10::List<c10::IValue>(c10::AnyType::get()));
      break;
    case ')':
      pushTuple({});
      break;
    case 't':
      pushTuple(popMark());
      break;
    case 0x85:
    case 0x86:
    case 0x87: {
      size_t count = code - 0x84;
      TORCH_CHECK(stack_.size() >= count, "pickle: stack underflow");
      std::vector<c10::IValue> items;
      for (size_t i = stack_.size() - count; i < stack_.size(); ++i)
        items.push_back(value(stack_[i]));
      stack_.resize(stack_.size() - count);
      pushTuple(std::move(items));
      break;
    }
    case 'l': {
      c10::List<c10::IValue> list(c10::AnyType::get());
      for (const c10::IValue &item : popMark())
        list.push_back(item);
      push(list);
      break;
    }
    case 'd': {
      std::vector<c10::IValue> items = popMark();
      push(anyDict());
      setItems(items);
      break;
    }
    case 'u':
      setItems(popMark());
      break;
    case 's': {
      c10::IValue item = value(pop());
      c10::IValue key = value(pop());
      setItems({key, item});
      break;
    }
    case 'e':
      appendItems(popMark());
      break;
    case 'a':
      appendItems({value(pop())});
      break;
    case 'q':
      memoize(byte());
      break;
    case 'r':
      memoize(read<uint32_t>());
      break;
    case 0x94: // MEMOIZE
      memoize(memo_.size());
      break;
    case 'h':
      recall(byte());
      break;
    case 'j':
      recall(read<uint32_t>());
      break;
    case '0':
      pop();
      break;
    case '1':
      popMark();
      break;
    case '2':
      TORCH_CHECK(!stack_.empty(), "pickle: DUP on an empty stack");
      stack_.push_back(stack_.back());
      break;
    case 'c': {
      Global global{line(), ""};
      global.name = line();
      globals_.push_back(global);
      stack_.push_back({c10::IValue(), int64_t(globals_.size() - 1)});
      break;
    }
    case 0x93: { // STACK_GLOBAL
      std::string name = value(pop()).toStringRef();
      std::string module = value(pop()).toStringRef();
      globals_.push_back({module, name});
      stack_.push_back({c10::IValue(), int64_t(globals_.size() - 1)});
      break;
    }
    case 'R':
    case 0x81: { // REDUCE, NEWOBJ
      c10::IValue args = value(pop());
      Item callee = pop();
      TORCH_CHECK(callee.global >= 0, "pickle: call of a non-global");
      push(call(globals_[size_t(callee.global)], asVector(args)));
      break;
    }
    case 'b':
      build();
      break;
    case 'Q':
      push(persistent(value(pop())));
      break;
    default:
      TORCH_CHECK(false, "pickle: unsupported opcode 0x", std::hex, int(code),
                  " at byte ", std::dec, pos_ - 1);
    }
  }

  const std::string &data_;
  const StorageReader &readStorage_;
  size_t pos_ = 0;
  std::vector<Item> stack_;
  std::vector<size_t> marks_;
  std::map<size_t, Item> memo_;
  std::vector<Global> globals_;
  std::map<std::string, at::Tensor> storages_;
};

} // namespace

c10::IValue unpickleValue(const std::string &pickle,
                          const StorageReader &readStorage) {
  return Unpickler(pickle, readStorage).run();
}

} // namespace ds::runtime::detail
