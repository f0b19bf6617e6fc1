//===- TorchPickler.cpp - Values as pickle protocol 2, as torch.save ------===//
//
// The opcodes Python's pickler writes for the same objects; no memo (no
// object is written twice). A tensor is torch._utils._rebuild_tensor_v2 of
// a persistent storage id ("storage", torch.<T>Storage, key, "cpu", numel),
// as torch.save writes it.
//
//===----------------------------------------------------------------------===//

#include "Pickle.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cstring>

namespace ds::runtime::detail {

namespace {

class Pickler {
public:
  explicit Pickler(std::vector<at::Tensor> &storages) : storages_(storages) {}

  std::string finish(const c10::IValue &value) {
    out_ += "\x80\x02"; // PROTO 2
    push(value);
    out_ += '.'; // STOP
    return std::move(out_);
  }

private:
  void op(char code) { out_ += code; }
  void raw(const void *bytes, size_t size) {
    out_.append(static_cast<const char *>(bytes), size);
  }
  void global(const std::string &module, const std::string &name) {
    op('c');
    out_ += module + "\n" + name + "\n";
  }

  void integer(int64_t value) {
    if (value >= INT32_MIN && value <= INT32_MAX) {
      op('J'); // BININT, little endian
      int32_t v = int32_t(value);
      raw(&v, 4);
      return;
    }
    op('\x8a'); // LONG1: 8 bytes two's complement, little endian
    out_ += char(8);
    raw(&value, 8);
  }

  void number(double value) {
    op('G'); // BINFLOAT, big endian
    unsigned char bytes[8];
    std::memcpy(bytes, &value, 8);
    for (int i = 7; i >= 0; --i)
      out_ += char(bytes[i]);
  }

  void string(const std::string &text) {
    op('X'); // BINUNICODE
    uint32_t size = uint32_t(text.size());
    raw(&size, 4);
    out_ += text;
  }

  void tuple(c10::ArrayRef<c10::IValue> items) {
    op('(');
    for (const c10::IValue &item : items)
      push(item);
    op('t');
  }

  void intTuple(c10::IntArrayRef values) {
    op('(');
    for (int64_t value : values)
      integer(value);
    op('t');
  }

  void tensor(const at::Tensor &value) {
    // A device tensor is written as a host one: the file loads anywhere,
    // without a GPU or a map_location.
    at::Tensor data = value.device().is_cpu()
                          ? value.clone(at::MemoryFormat::Contiguous)
                          : value.to(at::kCPU).contiguous();
    std::string key = std::to_string(storages_.size());
    storages_.push_back(data);
    global("torch._utils", "_rebuild_tensor_v2");
    op('(');
    op('(');
    string("storage");
    global("torch", std::string(c10::toString(data.scalar_type())) + "Storage");
    string(key);
    string("cpu");
    integer(data.numel());
    op('t');
    op('Q'); // BINPERSID
    integer(0);
    intTuple(data.sizes());
    intTuple(data.strides());
    op('\x89'); // requires_grad False
    global("collections", "OrderedDict");
    op(')');
    op('R');
    op('t');
    op('R');
  }

  void push(const c10::IValue &value) {
    if (value.isNone()) {
      op('N');
    } else if (value.isBool()) {
      op(value.toBool() ? '\x88' : '\x89');
    } else if (value.isInt()) {
      integer(value.toInt());
    } else if (value.isDouble()) {
      number(value.toDouble());
    } else if (value.isString()) {
      string(value.toStringRef());
    } else if (value.isTensor()) {
      tensor(value.toTensor());
    } else if (value.isList()) {
      op(']');
      if (!value.toListRef().empty()) {
        op('(');
        for (const c10::IValue &item : value.toListRef())
          push(item);
        op('e'); // APPENDS
      }
    } else if (value.isGenericDict()) {
      op('}');
      const c10::impl::GenericDict dict = value.toGenericDict();
      if (!dict.empty()) {
        op('(');
        for (const auto &entry : dict) {
          push(entry.key());
          push(entry.value());
        }
        op('u'); // SETITEMS
      }
    } else if (value.isTuple()) {
      const auto &items = value.toTupleRef().elements();
      if (items.size() == 3 && items[0].isString() &&
          items[0].toStringRef() == kPythonCallTag) {
        // pythonCall(): the Python global called with the arguments.
        const std::string &name = items[1].toStringRef();
        size_t dot = name.rfind('.');
        global(name.substr(0, dot), name.substr(dot + 1));
        push(items[2]);
        op('R');
      } else {
        tuple(items.asArrayRef());
      }
    } else {
      TORCH_CHECK(false, "cannot pickle a value of kind ", value.tagKind());
    }
  }

  std::string out_;
  std::vector<at::Tensor> &storages_;
};

} // namespace

std::string pickleValue(const c10::IValue &value,
                        std::vector<at::Tensor> &storages) {
  return Pickler(storages).finish(value);
}

} // namespace ds::runtime::detail
