//===- Communicator.cpp - What every backend shares -----------------------===//

#include "CommChecks.h"

#include "ds/TensorIO/DTypes.h"

#include <cerrno>
#include <cstdint>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace ds::runtime {

const char *reduceOpName(ReduceOp op) {
  switch (op) {
  case ReduceOp::Sum:
    return "sum";
  case ReduceOp::Avg:
    return "avg";
  case ReduceOp::Max:
    return "max";
  }
  return "?";
}

namespace {
std::atomic<int64_t> trainingStep{0};
} // namespace

void noteTrainingStep(int64_t step) { trainingStep = step; }
int64_t currentTrainingStep() { return trainingStep.load(); }

CommWork::~CommWork() = default;
Communicator::~Communicator() = default;

CommVolume Communicator::volume() const {
  CommVolume volume;
  volume.allReduce = allReduceElements_.load();
  volume.reduceScatter = reduceScatterElements_.load();
  volume.allGather = allGatherElements_.load();
  volume.broadcast = broadcastElements_.load();
  return volume;
}

void Communicator::count(std::atomic<int64_t> &counter, int64_t elements) {
  if (size() > 1)
    counter += elements;
}

void Communicator::countAllReduce(int64_t numel) {
  count(allReduceElements_, 2 * numel);
}
void Communicator::countReduceScatter(int64_t numel) {
  count(reduceScatterElements_, numel);
}
void Communicator::countAllGather(int64_t numel) {
  count(allGatherElements_, numel);
}
void Communicator::countBroadcast(int64_t numel) {
  count(broadcastElements_, numel);
}

void waitAll(const std::vector<CommHandle> &handles) {
  for (const CommHandle &handle : handles)
    handle.wait();
}

CommOptions CommOptions::fromEnvironment() {
  CommOptions options;
  const char *text = std::getenv("DS_COMM_TIMEOUT_SECONDS");
  if (!text || !*text)
    return options;
  errno = 0;
  char *end = nullptr;
  double seconds = std::strtod(text, &end);
  if (*end != '\0' || errno == ERANGE || !std::isfinite(seconds) || seconds < 0)
    throw CommError(std::string("DS_COMM_TIMEOUT_SECONDS: '") + text +
                    "' is not a number of seconds >= 0 (0 waits forever)");
  options.timeoutSeconds = seconds;
  return options;
}

namespace detail {

const char *collectiveName(Collective kind) {
  switch (kind) {
  case Collective::AllReduce:
    return "allReduce";
  case Collective::ReduceScatter:
    return "reduceScatter";
  case Collective::AllGather:
    return "allGather";
  case Collective::Broadcast:
    return "broadcast";
  case Collective::Barrier:
    return "barrier";
  }
  return "?";
}

namespace {

[[noreturn]] void fail(Collective kind, const std::string &detail) {
  throw CommError(std::string(collectiveName(kind)) + ": " + detail);
}

std::string describeLayout(const at::Tensor &tensor) {
  std::string text = describeTensor(tensor) + " with strides [";
  for (size_t i = 0; i < size_t(tensor.dim()); ++i)
    text += (i ? ", " : "") + std::to_string(tensor.stride(int64_t(i)));
  return text + "]";
}

/// Whether the byte ranges of two tensors intersect.
/// As addresses, not pointers: a tensor without data (the meta device of the
/// placement tests) has a null storage, and data_ptr()'s offset from null
/// is undefined (UBSan found it).
uintptr_t addressOf(const at::Tensor &tensor) {
  if (!tensor.has_storage())
    return 0;
  return reinterpret_cast<uintptr_t>(tensor.storage().data()) +
         uintptr_t(tensor.storage_offset()) * uintptr_t(tensor.itemsize());
}

bool overlaps(const at::Tensor &a, const at::Tensor &b) {
  uintptr_t aBegin = addressOf(a), bBegin = addressOf(b);
  return aBegin < bBegin + b.nbytes() && bBegin < aBegin + a.nbytes();
}

/// Both buffers of one collective on one device.
void checkSameDevice(Collective kind, const at::Tensor &output,
                     const at::Tensor &input) {
  if (input.device() != output.device())
    fail(kind, "the input is on " + input.device().str() + ", the output on " +
                   output.device().str());
}

} // namespace

void checkBuffer(Collective kind, const char *role, const at::Tensor &tensor) {
  if (!tensor.defined())
    fail(kind, std::string("the ") + role + " tensor is undefined");
  if (!tensor.is_contiguous())
    fail(kind, std::string("the ") + role + " must be contiguous, got " +
                   describeLayout(tensor));
}

void checkOnHost(Collective kind, const char *role, const at::Tensor &tensor) {
  if (tensor.defined() && !tensor.device().is_cpu())
    fail(kind, std::string("the ") + role + " must be a CPU tensor, got " +
                   tensor.device().str());
}

void checkReducible(Collective kind, const char *role, const at::Tensor &tensor,
                    ReduceOp op) {
  checkBuffer(kind, role, tensor);
  switch (tensor.scalar_type()) {
  case at::kFloat:
  case at::kDouble:
  case at::kBFloat16:
  case at::kHalf:
    return;
  case at::kInt:
  case at::kLong:
    if (op == ReduceOp::Avg)
      fail(kind, "avg needs a floating-point tensor, got " +
                     scalarTypeName(tensor.scalar_type()));
    return;
  default:
    fail(kind, std::string("cannot reduce ") +
                   scalarTypeName(tensor.scalar_type()) +
                   " tensors (float32, float64, bfloat16, float16, int32 and "
                   "int64 only)");
  }
}

void checkReduceScatter(const at::Tensor &output, const at::Tensor &input,
                        int64_t size, ReduceOp op) {
  Collective kind = Collective::ReduceScatter;
  checkReducible(kind, "input", input, op);
  checkReducible(kind, "output", output, op);
  checkSameDevice(kind, output, input);
  if (input.scalar_type() != output.scalar_type())
    fail(kind, "input and output dtypes differ (" +
                   scalarTypeName(input.scalar_type()) + " vs " +
                   scalarTypeName(output.scalar_type()) + ")");
  if (input.numel() != output.numel() * size)
    fail(kind, "the input must hold size() x output elements: " +
                   std::to_string(input.numel()) +
                   " != " + std::to_string(size) + " x " +
                   std::to_string(output.numel()));
  if (output.numel() > 0 && overlaps(input, output))
    fail(kind, "input and output overlap");
}

bool checkAllGather(const at::Tensor &output, const at::Tensor &input,
                    int64_t rank, int64_t size) {
  Collective kind = Collective::AllGather;
  checkBuffer(kind, "input", input);
  checkBuffer(kind, "output", output);
  checkSameDevice(kind, output, input);
  if (input.scalar_type() != output.scalar_type())
    fail(kind, "input and output dtypes differ (" +
                   scalarTypeName(input.scalar_type()) + " vs " +
                   scalarTypeName(output.scalar_type()) + ")");
  if (output.numel() != input.numel() * size)
    fail(kind, "the output must hold size() x input elements: " +
                   std::to_string(output.numel()) +
                   " != " + std::to_string(size) + " x " +
                   std::to_string(input.numel()));
  if (input.numel() == 0 || !overlaps(input, output))
    return false;
  auto *own = static_cast<const char *>(output.data_ptr()) +
              rank * int64_t(input.nbytes());
  if (input.data_ptr() != own)
    fail(kind, "the input overlaps the output without being this rank's "
               "block of it");
  return true;
}

void checkRoot(int64_t root, int64_t size) {
  if (root < 0 || root >= size)
    fail(Collective::Broadcast, "root " + std::to_string(root) +
                                    " is not a rank (0.." +
                                    std::to_string(size - 1) + ")");
}

std::string describeCollective(Collective kind, uint64_t id,
                               const at::Tensor &tensor, const char *op) {
  std::string text =
      std::string(collectiveName(kind)) + " #" + std::to_string(id);
  if (!tensor.defined())
    return text;
  text += " (";
  if (op)
    text += std::string(op) + ", ";
  return text + std::to_string(tensor.numel()) + " x " +
         scalarTypeName(tensor.scalar_type()) + ")";
}

std::string timeoutMessage(int64_t rank, const std::string &collective,
                           double seconds) {
  char number[32];
  std::snprintf(number, sizeof number, "%g", seconds);
  int64_t step = currentTrainingStep();
  return "rank " + std::to_string(rank) + ": collective " + collective +
         (step > 0 ? " in training step " + std::to_string(step) : "") +
         " timed out after " + number +
         " s (a peer rank may have died); DS_COMM_TIMEOUT_SECONDS sets the "
         "limit";
}

} // namespace detail
} // namespace ds::runtime
