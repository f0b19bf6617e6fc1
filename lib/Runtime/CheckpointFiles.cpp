//===- CheckpointFiles.cpp - Files and folders of a checkpoint ------------===//

#include "CheckpointFiles.h"

#include "CheckpointHash.h"

#include "ds/TensorIO/TorchSave.h"

#include "ds/Plan/AtomicFile.h"
#include "ds/TensorIO/RuntimeError.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <ftw.h>
#include <optional>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace ds::runtime::detail {

std::string modelStatesFile(int64_t stage, int64_t rank) {
  if (stage == 3)
    return "zero_pp_rank_" + std::to_string(rank) +
           "_mp_rank_00_model_states.pt";
  return "mp_rank_00_model_states.pt";
}

std::string precisionMode(const plan::EngineDesc &engine) {
  return engine.precision ? plan::precisionModeName(engine.precision->mode)
                          : "fp32";
}

std::string optimStatesFile(int64_t rank, bool bf16) {
  return std::string(bf16 ? "bf16_" : "") + "zero_pp_rank_" +
         std::to_string(rank) + "_mp_rank_00_optim_states.pt";
}

std::string findOptimStatesFile(const std::string &folder, int64_t rank) {
  std::string plain = optimStatesFile(rank);
  if (!isFile(folder + "/" + plain) &&
      isFile(folder + "/" + optimStatesFile(rank, true)))
    return optimStatesFile(rank, true);
  return plain;
}

c10::impl::GenericDict newDict() {
  return c10::impl::GenericDict(c10::StringType::get(), c10::AnyType::get());
}

c10::impl::GenericList newList() {
  return c10::impl::GenericList(c10::AnyType::get());
}

c10::IValue jsonToIValue(const plan::ordered_json &json) {
  if (json.is_object()) {
    c10::impl::GenericDict dict = newDict();
    for (const auto &[key, value] : json.items())
      dict.insert(key, jsonToIValue(value));
    return dict;
  }
  if (json.is_array()) {
    c10::impl::GenericList list = newList();
    for (const auto &value : json)
      list.push_back(jsonToIValue(value));
    return list;
  }
  if (json.is_string())
    return json.get<std::string>();
  if (json.is_boolean())
    return json.get<bool>();
  if (json.is_number_integer())
    return json.get<int64_t>();
  if (json.is_number())
    return json.get<double>();
  return c10::IValue();
}

namespace {

/// RANK:N from the test hook `name`, or nullopt when it is unset.
std::optional<std::pair<int64_t, int64_t>> rankAndCount(const char *name) {
  const char *text = std::getenv(name);
  if (!text || !*text)
    return std::nullopt;
  long long rank = -1, count = -1;
  char tail = 0;
  if (std::sscanf(text, "%lld:%lld%c", &rank, &count, &tail) != 2 || rank < 0 ||
      count < 1)
    throw RuntimeError(std::string(name) + ": '" + text +
                       "' is not RANK:N (RANK >= 0, N >= 1)");
  return std::make_pair(int64_t(rank), int64_t(count));
}

/// The failure tests' hooks, counting this process's checkpoint files.
/// DS_TEST_CHECKPOINT_ENOSPC=RANK:N: rank RANK's N-th file fails half-way
/// with ENOSPC, as on a full disk (the error path is the real one).
/// DS_TEST_CHECKPOINT_KILL=RANK:N: rank RANK kills itself (SIGKILL) right
/// after writing its N-th file, a crash in mid-save.
struct TestHooks {
  int64_t written = 0;

  bool fullDiskNext(int64_t rank) const {
    auto hook = rankAndCount("DS_TEST_CHECKPOINT_ENOSPC");
    return hook && hook->first == rank && hook->second == written + 1;
  }

  void fileWritten(int64_t rank) {
    ++written;
    auto hook = rankAndCount("DS_TEST_CHECKPOINT_KILL");
    if (hook && hook->first == rank && hook->second == written) {
      std::fprintf(stderr,
                   "DS_TEST_CHECKPOINT_KILL: rank %lld killed after "
                   "checkpoint file %lld\n",
                   static_cast<long long>(rank),
                   static_cast<long long>(written));
      std::fflush(stderr);
      std::raise(SIGKILL);
    }
  }
};

TestHooks &testHooks() {
  static TestHooks hooks;
  return hooks;
}

} // namespace

ManifestEntry writeTorchFile(const std::string &path, const c10::IValue &value,
                             int64_t rank) {
  std::vector<char> bytes;
  try {
    bytes = writeTorchSave(value);
  } catch (const c10::Error &error) {
    throw RuntimeError("cannot write " + path + ": " +
                       error.what_without_backtrace());
  }
  // The manifest's hash, of the bytes as they go out: no second read.
  Xxh64 hash;
  plan::WriteTap tap;
  tap.written = [&](std::string_view chunk) { hash.update(chunk); };
  if (testHooks().fullDiskNext(rank))
    tap.failAfter = bytes.size() / 2;
  try {
    plan::writeFileAtomic(path, std::string_view(bytes.data(), bytes.size()),
                          tap);
  } catch (const std::runtime_error &error) {
    throw RuntimeError(error.what());
  }
  testHooks().fileWritten(rank);
  return ManifestEntry{hash.size(), hash.digest()};
}

c10::IValue readTorchFile(const std::string &path) {
  if (!isFile(path))
    throw RuntimeError("cannot read " + path + ": no such file");
  try {
    return readTorchSave(path);
  } catch (const c10::Error &error) {
    throw RuntimeError("cannot read " + path + " (not a torch.save file?): " +
                       error.what_without_backtrace());
  }
}

DictView::DictView(c10::IValue value, std::string file, std::string path)
    : dict_(newDict()), file_(std::move(file)), path_(std::move(path)) {
  if (!value.isGenericDict())
    throw RuntimeError(file_ + ": " + (path_.empty() ? "the file" : path_) +
                       ": expected a dict, found " + value.tagKind());
  dict_ = value.toGenericDict();
}

std::string DictView::where(const std::string &key) const {
  return file_ + ": key '" + (path_.empty() ? key : path_ + "." + key) + "'";
}

void DictView::fail(const std::string &key, const std::string &problem) const {
  throw RuntimeError(where(key) + ": " + problem);
}

bool DictView::has(const std::string &key) const {
  return dict_.contains(c10::IValue(key));
}

c10::IValue DictView::get(const std::string &key) const {
  auto it = dict_.find(c10::IValue(key));
  if (it == dict_.end())
    fail(key, "missing");
  return it->value();
}

DictView DictView::dict(const std::string &key) const {
  c10::IValue value = get(key);
  if (!value.isGenericDict())
    fail(key, std::string("expected a dict, found ") + value.tagKind());
  return DictView(value, file_, path_.empty() ? key : path_ + "." + key);
}

at::Tensor DictView::tensor(const std::string &key) const {
  c10::IValue value = get(key);
  if (!value.isTensor())
    fail(key, std::string("expected a tensor, found ") + value.tagKind());
  return value.toTensor();
}

int64_t DictView::integer(const std::string &key) const {
  c10::IValue value = get(key);
  if (!value.isInt())
    fail(key, std::string("expected an int, found ") + value.tagKind());
  return value.toInt();
}

double DictView::number(const std::string &key) const {
  c10::IValue value = get(key);
  if (value.isDouble())
    return value.toDouble();
  if (value.isInt())
    return double(value.toInt());
  if (value.isTensor() && value.toTensor().numel() == 1)
    return value.toTensor().item<double>();
  fail(key, std::string("expected a number, found ") + value.tagKind());
}

std::string DictView::string(const std::string &key) const {
  c10::IValue value = get(key);
  if (!value.isString())
    fail(key, std::string("expected a string, found ") + value.tagKind());
  return value.toStringRef();
}

std::vector<c10::IValue> DictView::list(const std::string &key) const {
  c10::IValue value = get(key);
  if (!value.isList())
    fail(key, std::string("expected a list, found ") + value.tagKind());
  return value.toListRef().vec();
}

std::vector<std::pair<std::string, c10::IValue>> DictView::items() const {
  std::vector<std::pair<std::string, c10::IValue>> items;
  for (const auto &entry : dict_) {
    std::string key = entry.key().isString() ? entry.key().toStringRef()
                                             : entry.key().tagKind();
    items.emplace_back(key, entry.value());
  }
  return items;
}

namespace {

/// The ds_config's section `key` when the config is a dict holding one.
std::optional<DictView> configSection(const DictView &model,
                                      const std::string &key) {
  if (!model.has("ds_config") || !model.get("ds_config").isGenericDict())
    return std::nullopt;
  DictView config = model.dict("ds_config");
  if (!config.has(key) || !config.get(key).isGenericDict())
    return std::nullopt;
  return config.dict(key);
}

bool sectionEnabled(const DictView &model, const std::string &key) {
  std::optional<DictView> section = configSection(model, key);
  return section && section->has("enabled") &&
         section->get("enabled").isBool() && section->get("enabled").toBool();
}

} // namespace

int64_t savedZeroStage(const DictView &model, int64_t unknown) {
  if (model.has("ds_zero_stage"))
    return model.integer("ds_zero_stage");
  std::optional<DictView> zero = configSection(model, "zero_optimization");
  if (!zero)
    return 0;
  return zero->has("stage") ? zero->integer("stage") : unknown;
}

bool savedTrainable(const DictView &model) {
  if (model.has("ds_trainable"))
    return model.get("ds_trainable").toBool();
  return (model.has("param_shapes") && !model.get("param_shapes").isNone()) ||
         (model.has("optimizer") && !model.get("optimizer").isNone());
}

std::string savedPrecision(const DictView &model) {
  if (model.has("ds_precision"))
    return model.string("ds_precision");
  if (sectionEnabled(model, "bf16"))
    return "bf16";
  return sectionEnabled(model, "fp16") ? "fp16" : "fp32";
}

std::vector<std::pair<std::string, c10::IValue>>
frozenParamShapes(const DictView &model) {
  if (!model.has("frozen_param_shapes") ||
      model.get("frozen_param_shapes").isNone())
    return {};
  return model.dict("frozen_param_shapes").items();
}

namespace {

/// zero_stage: an int, or DeepSpeed's ZeroStageEnum member by name.
int64_t zeroStageIn(const DictView &inner) {
  c10::IValue value = inner.get("zero_stage");
  if (value.isString()) {
    const std::string &name = value.toStringRef();
    const char *members[] = {"disabled", "optimizer_states", "gradients",
                             "weights"};
    for (int64_t stage = 0; stage < 4; ++stage) {
      std::string suffix = std::string("ZeroStageEnum.") + members[stage];
      if (name.size() >= suffix.size() &&
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
        return stage;
    }
  }
  return inner.integer("zero_stage");
}

} // namespace

DictView readOptimStates(const std::string &path, int64_t stage) {
  DictView inner =
      DictView(readTorchFile(path), path).dict("optimizer_state_dict");
  if (zeroStageIn(inner) != stage)
    inner.fail("zero_stage", "stage " + std::to_string(zeroStageIn(inner)) +
                                 " in the optimizer shard, but stage " +
                                 std::to_string(stage) + " is expected");
  return inner;
}

at::Tensor fp32PartitionIn(const DictView &optimStates, int64_t stage,
                           int64_t numel, const std::string &expected) {
  const char *key =
      stage == 3 ? "fp32_flat_groups" : "single_partition_of_fp32_groups";
  std::vector<c10::IValue> groups = optimStates.list(key);
  if (groups.size() != 1 || !groups[0].isTensor())
    optimStates.fail(key, "expected one tensor (one param group)");
  at::Tensor partition = groups[0].toTensor();
  if (partition.dim() != 1 || partition.numel() != numel)
    optimStates.fail(key, "shape " + plan::formatShape(partition.sizes().vec()) +
                              ", expected [" + std::to_string(numel) + "] (" +
                              expected + ")");
  return partition;
}

std::vector<int64_t> intList(const c10::IValue &value,
                             const std::string &what) {
  // torch.Size reads as a tuple.
  if (!value.isList() && !value.isTuple())
    throw RuntimeError(what + ": expected a list of ints, found " +
                       value.tagKind());
  std::vector<int64_t> ints;
  for (const c10::IValue &item : value.isList()
                                     ? value.toListRef().vec()
                                     : value.toTupleRef().elements().vec()) {
    if (!item.isInt())
      throw RuntimeError(what + ": expected a list of ints, found an item " +
                         item.tagKind());
    ints.push_back(item.toInt());
  }
  return ints;
}

std::optional<std::string> readSmallFile(const std::string &path,
                                         size_t maxBytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT)
    return std::nullopt;
  if (fd < 0)
    throw RuntimeError("cannot read " + path + ": " + std::strerror(errno));
  std::string text;
  char block[1 << 14];
  // One byte past the cap tells the caller the file is larger.
  while (text.size() <= maxBytes) {
    ssize_t n =
        ::read(fd, block, std::min(sizeof block, maxBytes + 1 - text.size()));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int error = errno;
      ::close(fd);
      throw RuntimeError("cannot read " + path + ": " + std::strerror(error));
    }
    if (n == 0)
      break;
    text.append(block, size_t(n));
  }
  ::close(fd);
  return text;
}

void checkTag(const std::string &tag) {
  if (tag.empty() || tag == "." || tag == ".." || tag[0] == '.' ||
      tag.find('/') != std::string::npos || tag.find('\0') != std::string::npos)
    throw RuntimeError("checkpoint tag '" + tag +
                       "' is not a folder name (no '/', not starting with "
                       "'.')");
}

std::string readLatest(const std::string &dir) {
  std::string path = dir + "/latest";
  // DeepSpeed's and ours hold the tag alone.
  constexpr size_t kMaxBytes = 4096;
  std::optional<std::string> text = readSmallFile(path, kMaxBytes);
  if (!text)
    throw RuntimeError("no checkpoint in " + dir + ": " + path +
                       " does not exist (no checkpoint was completed there; "
                       "a tag names a specific one)");
  if (text->size() > kMaxBytes)
    throw RuntimeError(path + ": larger than " + std::to_string(kMaxBytes) +
                       " bytes (expected the tag of a checkpoint)");
  std::string tag = *text;
  while (!tag.empty() && (tag.back() == '\n' || tag.back() == ' '))
    tag.pop_back();
  if (tag.empty())
    throw RuntimeError(path + ": empty (expected the tag of a checkpoint)");
  // A tag is a folder inside DIR: `latest` naming "../other" must not lead
  // a load or ds-zero-to-fp32 out of it.
  try {
    checkTag(tag);
  } catch (const RuntimeError &error) {
    throw RuntimeError(path + ": " + error.what());
  }
  return tag;
}

void writeLatest(const std::string &dir, const std::string &tag) {
  try {
    plan::writeFileAtomic(dir + "/latest", tag);
  } catch (const std::runtime_error &error) {
    throw RuntimeError(error.what());
  }
}

bool isDirectory(const std::string &path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

bool isFile(const std::string &path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

void makeDirectories(const std::string &path) {
  for (size_t slash = 1; slash != std::string::npos;) {
    slash = path.find('/', slash + 1);
    std::string prefix = path.substr(0, slash);
    if (::mkdir(prefix.c_str(), 0777) != 0 && errno != EEXIST)
      throw RuntimeError("cannot create folder " + prefix + ": " +
                         std::strerror(errno));
  }
  if (!isDirectory(path))
    throw RuntimeError("cannot create folder " + path +
                       ": a file of that name exists");
}

void removeTree(const std::string &path) {
  if (::access(path.c_str(), F_OK) != 0)
    return;
  auto remove = [](const char *entry, const struct stat *, int, struct FTW *) {
    return ::remove(entry);
  };
  if (::nftw(path.c_str(), remove, 16, FTW_DEPTH | FTW_PHYS) != 0)
    throw RuntimeError("cannot remove " + path + ": " + std::strerror(errno));
}

std::string stagingFolder(const std::string &dir, const std::string &tag) {
  return dir + "/." + tag + ".partial";
}

void publishFolder(const std::string &staging, const std::string &target) {
  if (!isDirectory(target)) {
    if (::rename(staging.c_str(), target.c_str()) != 0)
      throw RuntimeError("cannot rename " + staging + " to " + target + ": " +
                         std::strerror(errno));
    return;
  }
  // A tag saved again: swap the folders in one step, so that a reader (or
  // a crash) sees either the old checkpoint or the new one, never neither.
  if (::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, target.c_str(),
                  RENAME_EXCHANGE) != 0)
    throw RuntimeError("cannot replace " + target + " by " + staging + ": " +
                       std::strerror(errno));
  removeTree(staging);
}

} // namespace ds::runtime::detail
