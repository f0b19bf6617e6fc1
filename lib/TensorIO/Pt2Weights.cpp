//===- Pt2Weights.cpp - State tensors of a torch.export archive -----------===//
//
// A .pt2 (torch.export.save) is a zip under one top folder: archive_format
// ("pt2"), models/NAME.json (the program; NAME is "model" unless the saver
// named it), data/weights/ and data/constants/, each with a PayloadConfig
// JSON (NAME_weights_config.json, ...) that maps a state name to
// a storage record (path_name) and a TensorMeta. Several names may share one
// record (tied weights, or views of one storage at other offsets). The
// JSON is parsed with the schema types the torch wheel ships.
//
//===----------------------------------------------------------------------===//

#include "ds/TensorIO/Pt2Weights.h"

#include "ds/Plan/Plan.h"
#include "ds/Support/JsonPath.h"
#include "ds/TensorIO/RuntimeError.h"

#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/utils/generated_serialization_types.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <tuple>

namespace ds::runtime {

namespace {

namespace ex = torch::_export;
using caffe2::serialize::PyTorchStreamReader;

/// The first line of a c10 message: the rest is a C++ trace.
std::string firstLine(const std::string &message) {
  return message.substr(0, message.find('\n'));
}

std::string quoted(const std::string &name) { return "\"" + name + "\""; }

bool startsWithZipMagic(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && magic[0] == 'P' && magic[1] == 'K' &&
         magic[2] == 3 && magic[3] == 4;
}

std::string readText(PyTorchStreamReader &reader, const std::string &name) {
  auto [data, size] = reader.getRecord(name);
  return std::string(static_cast<const char *>(data.get()), size);
}

/// The schema's dtype codes are not at::ScalarType's: mapped one by one, by
/// number (torch/_export/serde/schema.py's ScalarType), since older wheels'
/// generated headers lack the newer enumerators (torch 2.11: no UINT32).
std::optional<at::ScalarType> atenOfCode(int code) {
  switch (code) {
  case 1: return at::kByte;
  case 2: return at::kChar;
  case 3: return at::kShort;
  case 4: return at::kInt;
  case 5: return at::kLong;
  case 6: return at::kHalf;
  case 7: return at::kFloat;
  case 8: return at::kDouble;
  case 9: return at::kComplexHalf;
  case 10: return at::kComplexFloat;
  case 11: return at::kComplexDouble;
  case 12: return at::kBool;
  case 13: return at::kBFloat16;
  case 28: return at::kUInt16;
  case 29: return at::kFloat8_e4m3fn;
  case 30: return at::kFloat8_e5m2;
  case 31: return at::kFloat8_e4m3fnuz;
  case 32: return at::kFloat8_e5m2fnuz;
  case 33: return at::ScalarType::Float8_e8m0fnu;
  case 34: return at::kUInt32;
  case 35: return at::kUInt64;
  default: return std::nullopt;
  }
}

std::optional<at::ScalarType> toAten(ex::ScalarType type) {
  return atenOfCode(static_cast<int>(type));
}

std::string dtypeName(ex::ScalarType type) {
  switch (type) {
  case ex::ScalarType::UNKNOWN:
    return "UNKNOWN";
  default:
    // Not printEnum: it throws on codes its header does not know.
    return "code " + std::to_string(int64_t(type));
  }
}

/// The integers of a list of SymInts; nullopt if one is symbolic.
std::optional<std::vector<int64_t>> ints(const std::vector<ex::SymInt> &list) {
  std::vector<int64_t> values;
  for (const ex::SymInt &item : list) {
    if (item.tag() != ex::SymInt::Tag::AS_INT)
      return std::nullopt;
    values.push_back(item.get_as_int());
  }
  return values;
}

/// Elements of storage that a view reaches (offset + sum((size - 1) *
/// stride) + 1; 0 when it has no element), or nullopt on overflow.
std::optional<uint64_t> extentOf(const std::vector<int64_t> &sizes,
                                 const std::vector<int64_t> &strides,
                                 int64_t offset) {
  uint64_t last = uint64_t(offset);
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0)
      return 0;
    uint64_t step = 0;
    if (__builtin_mul_overflow(uint64_t(sizes[i] - 1), uint64_t(strides[i]),
                               &step) ||
        __builtin_add_overflow(last, step, &last))
      return std::nullopt;
  }
  return last + 1;
}

/// One entry of a PayloadConfig, checked and described.
struct Entry {
  std::string name;
  /// "data/weights/weight_0": the record within the top folder.
  std::string record;
  bool isParam = false;
  bool requiresGrad = true;
  at::ScalarType dtype = at::kFloat;
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;

  /// What identifies one tensor: tied names have the same key.
  std::string key() const {
    return record + " " + std::string(c10::toString(dtype)) + " " +
           plan::formatShape(sizes) + " " + plan::formatShape(strides) + " " + std::to_string(offset);
  }
};

} // namespace

std::string pt2ProgramName(PyTorchStreamReader &reader) {
  std::string found;
  for (const std::string &record : reader.getAllRecords()) {
    if (record.rfind("models/", 0) != 0 || record.size() <= 12 ||
        record.compare(record.size() - 5, 5, ".json") != 0 ||
        record.find('/', 7) != std::string::npos)
      continue;
    std::string name = record.substr(7, record.size() - 12);
    if (!found.empty())
      throw RuntimeError("the archive holds several programs (models/" +
                         found + ".json, " + record + "): one is supported");
    found = name;
  }
  if (found.empty())
    throw RuntimeError("not a torch.export program: the archive has no "
                       "models/<name>.json");
  return found;
}

namespace {

class Pt2Reader {
public:
  explicit Pt2Reader(std::string path) : path_(std::move(path)) {}

  Pt2State read() {
    open();
    checkKind();
    std::string program;
    try {
      program = pt2ProgramName(*reader_);
    } catch (const RuntimeError &error) {
      fail(error.what());
    }
    std::set<std::string> buffers = signatureBuffers("models/" + program +
                                                     ".json");
    std::vector<Entry> entries = readConfig(
        "data/weights/" + program + "_weights_config.json", "data/weights/");
    // Non-persistent buffers live among the constants, next to the tensor
    // constants of the program, which are no module state.
    std::set<std::string> constantNames;
    for (Entry &entry :
         readConfig("data/constants/" + program + "_constants_config.json",
                    "data/constants/")) {
      if (!buffers.count(entry.name))
        constantNames.insert(entry.name);
      entry.isParam = false;
      entries.push_back(std::move(entry));
    }

    // Record by record, so that each is read once (views of one storage
    // share it) and only one is held at a time.
    std::stable_sort(
        entries.begin(), entries.end(),
        [](const Entry &a, const Entry &b) { return a.record < b.record; });
    Pt2State state;
    std::map<std::string, size_t> tieIndex;
    std::map<std::string, at::Tensor> byKey;
    at::DataPtr data;
    size_t bytes = 0;
    std::string held;
    for (const Entry &entry : entries) {
      std::string key = entry.key();
      auto [it, fresh] = tieIndex.emplace(key, state.ties.size());
      if (fresh)
        state.ties.emplace_back();
      state.ties[it->second].push_back(entry.name);
      at::Tensor &tensor = byKey[key];
      if (!tensor.defined()) {
        if (entry.record != held) {
          if (!reader_->hasRecord(entry.record))
            fail(quoted(entry.name) + " (" + entry.record +
                 "): the archive has no such record");
          std::tie(data, bytes) = reader_->getRecord(entry.record);
          held = entry.record;
        }
        tensor = materialize(entry, data.get(), bytes);
      }
      (constantNames.count(entry.name) ? state.constants
       : entry.isParam                   ? state.params
                                         : state.buffers)
          .emplace_back(entry.name, tensor);
      if (entry.isParam && !entry.requiresGrad)
        state.frozen.push_back(entry.name);
    }
    // Only groups of several names are ties.
    std::vector<std::vector<std::string>> ties;
    for (auto &group : state.ties)
      if (group.size() > 1)
        ties.push_back(std::move(group));
    state.ties = std::move(ties);
    return state;
  }

private:
  [[noreturn]] void fail(const std::string &detail) const {
    throw RuntimeError(path_ + ": " + detail);
  }

  void open() {
    if (!std::ifstream(path_))
      fail("cannot open the .pt2 archive");
    if (!startsWithZipMagic(path_))
      fail("not a .pt2 archive (torch.export.save): not a zip file");
    try {
      reader_ = std::make_unique<PyTorchStreamReader>(path_);
    } catch (const c10::Error &error) {
      fail("not a .pt2 archive (torch.export.save): " +
           firstLine(error.what_without_backtrace()));
    }
  }

  /// Says what the zip is when it is not a torch.export program.
  void checkKind() {
    if (!reader_->hasRecord("archive_format")) {
      if (reader_->hasRecord("constants.pkl"))
        fail("a TorchScript archive (torch.jit.save), not a .pt2 "
             "(torch.export.save); use weights kind \"torchscript\"");
      if (reader_->hasRecord("data.pkl"))
        fail("a torch.save file, not a .pt2 (torch.export.save)");
      fail("not a .pt2 archive (torch.export.save): it has no "
           "archive_format");
    }
    std::string format = readText(*reader_, "archive_format");
    if (format != "pt2")
      fail("not a .pt2 archive: its archive_format is \"" + format +
           "\", expected \"pt2\"");
    if (reader_->hasRecord("byteorder") &&
        readText(*reader_, "byteorder") != "little")
      fail("its tensors are stored big-endian (byteorder \"" +
           readText(*reader_, "byteorder") + "\"); only little-endian is read");
    for (const std::string &record : reader_->getAllRecords())
      if (record.rfind("data/aotinductor/", 0) == 0)
        fail("an AOTInductor package (aoti_compile_and_package), not a "
             "torch.export program; save the ExportedProgram with "
             "torch.export.save");
  }

  nlohmann::json parseJson(const std::string &record) {
    try {
      return nlohmann::json::parse(readText(*reader_, record));
    } catch (const nlohmann::json::exception &error) {
      fail(record + ": not valid JSON: " + ds::json::parseFailure(error));
    }
  }

  /// The buffer names of the program's signature (non-persistent ones
  /// included).
  std::set<std::string> signatureBuffers(const std::string &record) {
    nlohmann::json program = parseJson(record);
    std::set<std::string> names;
    try {
      auto specs = program.at("graph_module")
                       .at("signature")
                       .at("input_specs")
                       .get<std::vector<ex::InputSpec>>();
      for (const ex::InputSpec &spec : specs)
        if (spec.tag() == ex::InputSpec::Tag::BUFFER)
          names.insert(spec.get_buffer().get_buffer_name());
    } catch (const std::exception &error) {
      fail(record + ": cannot read graph_module.signature.input_specs: " +
           firstLine(error.what()));
    }
    return names;
  }

  std::vector<Entry> readConfig(const std::string &record,
                                const std::string &folder) {
    std::vector<Entry> entries;
    if (!reader_->hasRecord(record)) {
      // Every export writes both; a program without state may lack them.
      return entries;
    }
    nlohmann::json json = parseJson(record);
    if (!json.is_object() || !json.contains("config") ||
        !json["config"].is_object())
      fail(record + ": expected {\"config\": {...}}");
    for (const auto &item : json["config"].items()) {
      std::string where = record + ": entry " + quoted(item.key());
      ex::PayloadMeta meta;
      try {
        meta = item.value().get<ex::PayloadMeta>();
      } catch (const std::exception &error) {
        fail(where + ": " + firstLine(error.what()));
      }
      entries.push_back(entry(item.key(), meta, folder, where));
    }
    return entries;
  }

  Entry entry(const std::string &name, const ex::PayloadMeta &meta,
              const std::string &folder, const std::string &where) const {
    if (meta.get_use_pickle())
      fail(where + " is a pickled tensor (a tensor subclass, use_pickle); "
                   "only plain tensors are read");
    if (!meta.get_tensor_meta())
      fail(where + " has no tensor_meta");
    const ex::TensorMeta &tensorMeta = *meta.get_tensor_meta();
    if (meta.get_path_name().empty() ||
        meta.get_path_name().find('/') != std::string::npos)
      fail(where + ": bad path_name \"" + meta.get_path_name() + "\"");
    Entry entry;
    entry.name = name;
    entry.record = folder + meta.get_path_name();
    entry.isParam = meta.get_is_param();
    entry.requiresGrad = tensorMeta.get_requires_grad();
    std::optional<at::ScalarType> dtype = toAten(tensorMeta.get_dtype());
    if (!dtype)
      fail(where + ": unsupported dtype " + dtypeName(tensorMeta.get_dtype()));
    entry.dtype = *dtype;
    if (tensorMeta.get_layout() != ex::Layout::Strided)
      fail(where + ": layout " +
           std::to_string(int64_t(tensorMeta.get_layout())) +
           " is not strided (sparse tensors are not read)");
    auto sizes = ints(tensorMeta.get_sizes());
    auto strides = ints(tensorMeta.get_strides());
    if (!sizes || !strides ||
        tensorMeta.get_storage_offset().tag() != ex::SymInt::Tag::AS_INT)
      fail(where + ": its sizes, strides and storage_offset must be "
                   "integers");
    entry.sizes = *sizes;
    entry.strides = *strides;
    entry.offset = tensorMeta.get_storage_offset().get_as_int();
    bool negative = entry.offset < 0;
    for (int64_t value : entry.sizes)
      negative = negative || value < 0;
    for (int64_t value : entry.strides)
      negative = negative || value < 0;
    if (entry.sizes.size() != entry.strides.size() || negative)
      fail(where + ": bad tensor_meta: sizes " + plan::formatShape(entry.sizes) +
           ", strides " + plan::formatShape(entry.strides) + ", storage_offset " +
           std::to_string(entry.offset));
    return entry;
  }

  /// The entry's view of its record (`bytes` at `data`), copied into an
  /// owning contiguous tensor.
  at::Tensor materialize(const Entry &entry, void *data, size_t bytes) const {
    uint64_t itemSize = c10::elementSize(entry.dtype);
    std::optional<uint64_t> extent =
        extentOf(entry.sizes, entry.strides, entry.offset);
    uint64_t needed = 0;
    std::string where = quoted(entry.name) + " (" + entry.record + ")";
    std::string view = std::string(c10::toString(entry.dtype)) + " " +
                       plan::formatShape(entry.sizes) + " view (strides " +
                       plan::formatShape(entry.strides) + ", storage_offset " +
                       std::to_string(entry.offset) + ")";
    if (!extent || __builtin_mul_overflow(*extent, itemSize, &needed))
      fail(where + ": its " + view + " overflows 64 bits");
    if (needed > bytes)
      fail(where + ": " + std::to_string(bytes) + " bytes, fewer than the " +
           std::to_string(needed) + " that its " + view + " needs");
    if (needed == 0)
      return at::empty(entry.sizes, at::TensorOptions().dtype(entry.dtype));
    return at::from_blob(static_cast<char *>(data) + entry.offset * itemSize,
                         entry.sizes, entry.strides,
                         at::TensorOptions().dtype(entry.dtype))
        .clone(at::MemoryFormat::Contiguous);
  }

  std::string path_;
  std::unique_ptr<PyTorchStreamReader> reader_;
};

} // namespace

std::optional<at::ScalarType> dtypeOfExportCode(int code) {
  return atenOfCode(code);
}

bool isPt2Archive(const std::string &path) {
  if (!startsWithZipMagic(path))
    return false;
  try {
    PyTorchStreamReader reader(path);
    return reader.hasRecord("archive_format") &&
           readText(reader, "archive_format") == "pt2";
  } catch (const std::exception &) {
    return false;
  }
}

Pt2State readPt2State(const std::string &path) {
  try {
    return Pt2Reader(path).read();
  } catch (const RuntimeError &) {
    throw;
  } catch (const c10::Error &error) {
    // A damaged zip record (a CRC mismatch, a truncated entry).
    throw RuntimeError(path + ": cannot read the .pt2 archive: " +
                       firstLine(error.what_without_backtrace()));
  } catch (const std::exception &error) {
    throw RuntimeError(
        path + ": cannot read the .pt2 archive: " + firstLine(error.what()));
  }
}

} // namespace ds::runtime
