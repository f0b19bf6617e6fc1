//===- MpiCommunicator.cpp - Open MPI collectives on a thread -------------===//
//
// The calling thread checks arguments and queues an Operation; the
// communication thread (MpiCore::run) starts queued operations with MPI_I*
// calls, in queue order, and tests the started ones with MPI_Testsome until
// they complete; a waiter sleeps on a condition variable until its
// operation is marked done, or until the timeout, which ends the job.
//
// Polling: while collectives are in flight the thread tests them again at
// once after a test that made progress, and sleeps briefly (kPollSleep)
// after one that did not, so that on a machine with as many ranks as cores
// it leaves the core to computation between messages. With nothing in
// flight it blocks on a condition variable and costs nothing. (Measured on
// 2 cores, 2 ranks, 64 MiB collectives started before as much compute as
// they take alone: 20 us sleeps hid about as much of them as pure spinning,
// 60-100%, for less compute slowdown; MpiCommCheck prints the numbers.)
//
//===----------------------------------------------------------------------===//

#define OMPI_SKIP_MPICXX 1
#include "MpiCommunicator.h"

#include "CommChecks.h"

#include <mpi.h>

#include <ATen/ATen.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <thread>

namespace ds::runtime {
namespace detail {

namespace {

using Clock = std::chrono::steady_clock;

/// Sleep after a test without progress: short against a collective's
/// duration, long enough to leave the core to computation.
constexpr std::chrono::microseconds kPollSleep(20);

/// Only one MPI initialisation per process, ever (MPI forbids a second).
std::atomic<bool> mpiClaimed{false};

std::string mpiErrorText(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    return "MPI error " + std::to_string(code);
  return std::string(text, size_t(length));
}

/// The MPI type of a reduction's elements (checkReducible allowed them).
/// MPI has no 16-bit float type: bf16 and fp16 travel as 16-bit integers
/// and are reduced by our own ops (Reductions16).
MPI_Datatype reductionType(at::ScalarType type) {
  switch (type) {
  case at::kFloat:
    return MPI_FLOAT;
  case at::kDouble:
    return MPI_DOUBLE;
  case at::kInt:
    return MPI_INT32_T;
  case at::kBFloat16:
  case at::kHalf:
    return MPI_UINT16_T;
  default:
    return MPI_INT64_T;
  }
}

/// Element-wise `inout = op(in, inout)` on 16-bit floats: each pair is
/// widened to float32, combined, and rounded back to nearest-even (what
/// c10::BFloat16 and c10::Half do), so every partial sum MPI forms is
/// rounded to the 16-bit type, as a 16-bit reduction on a GPU rounds.
template <typename T, bool IsMax>
void reduce16(void *in, void *inout, int *len, MPI_Datatype *) {
  auto *a = static_cast<const T *>(in);
  auto *b = static_cast<T *>(inout);
  for (int i = 0; i < *len; ++i) {
    float x = float(a[i]), y = float(b[i]);
    b[i] = T(IsMax ? (x > y || x != x ? x : y) : x + y);
  }
}

/// The user-defined MPI ops for bf16 and fp16 sum and max, created after
/// MPI_Init and freed before MPI_Finalize (on the communication thread).
struct Reductions16 {
  MPI_Op bf16Sum = MPI_OP_NULL, bf16Max = MPI_OP_NULL;
  MPI_Op fp16Sum = MPI_OP_NULL, fp16Max = MPI_OP_NULL;

  void create() {
    MPI_Op_create(&reduce16<c10::BFloat16, false>, /*commute=*/1, &bf16Sum);
    MPI_Op_create(&reduce16<c10::BFloat16, true>, 1, &bf16Max);
    MPI_Op_create(&reduce16<c10::Half, false>, 1, &fp16Sum);
    MPI_Op_create(&reduce16<c10::Half, true>, 1, &fp16Max);
  }
  void free() {
    for (MPI_Op *op : {&bf16Sum, &bf16Max, &fp16Sum, &fp16Max})
      if (*op != MPI_OP_NULL)
        MPI_Op_free(op);
  }
  MPI_Op select(at::ScalarType type, ReduceOp op) const {
    bool max = op == ReduceOp::Max; // Avg: sum, then divide.
    if (type == at::kBFloat16)
      return max ? bf16Max : bf16Sum;
    if (type == at::kHalf)
      return max ? fp16Max : fp16Sum;
    return max ? MPI_MAX : MPI_SUM;
  }
};

} // namespace

/// One queued or started collective.
struct Operation {
  Collective kind;
  uint64_t id = 0;
  ReduceOp op = ReduceOp::Sum;
  /// allReduce / broadcast: the tensor; reduceScatter / allGather: output.
  at::Tensor tensor;
  at::Tensor input;
  int64_t root = 0;
  bool inPlace = false;
  std::string description;
  /// Only the communication thread touches it.
  MPI_Request request = MPI_REQUEST_NULL;
  // Guarded by MpiCore::mutex.
  bool done = false;
  std::string error;
  /// When the communication thread saw it complete.
  Clock::time_point completedAt;
};

class MpiCore : public std::enable_shared_from_this<MpiCore> {
public:
  explicit MpiCore(const CommOptions &options) : options_(options) {}

  /// Starts the thread; returns once MPI is initialised. Throws CommError.
  void start();
  /// Lets in-flight work finish, finalises MPI, joins the thread.
  void stop();

  CommHandle enqueue(std::shared_ptr<Operation> operation);
  void wait(Operation &operation);
  bool isCompleted(Operation &operation);
  std::optional<Clock::time_point> completedAt(const Operation &operation);
  [[noreturn]] void abort(int exitCode);

  int64_t rank() const { return rank_; }
  int64_t size() const { return size_; }
  uint64_t nextId() { return nextId_++; }

private:
  void run();
  bool initialise();
  void begin(Operation &operation);
  void complete(Operation &operation, const std::string &error);
  /// Bounded wait for `operation` failed: message, then abort or throw.
  void timedOut(const Operation &operation, double seconds);

  const CommOptions options_;
  std::thread thread_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  Reductions16 reductions16_;
  int threadLevel_ = MPI_THREAD_SINGLE;
  int64_t rank_ = 0;
  int64_t size_ = 1;
  std::atomic<uint64_t> nextId_{0};

  std::mutex mutex_;
  /// Wakes the thread: new operations, or stop.
  std::condition_variable wake_;
  /// Wakes waiters: an operation completed (or initialisation ended).
  std::condition_variable done_;
  std::deque<std::shared_ptr<Operation>> queue_;
  bool ready_ = false;
  std::string initError_;
  bool stopping_ = false;
};

/// The handle's view of an operation.
class MpiWork final : public CommWork {
public:
  MpiWork(std::shared_ptr<MpiCore> core, std::shared_ptr<Operation> operation)
      : core_(std::move(core)), operation_(std::move(operation)) {}
  bool isCompleted() override { return core_->isCompleted(*operation_); }
  void wait() override { core_->wait(*operation_); }
  std::string describe() const override { return operation_->description; }
  std::optional<Clock::time_point> completedAt() const override {
    return core_->completedAt(*operation_);
  }

private:
  std::shared_ptr<MpiCore> core_;
  std::shared_ptr<Operation> operation_;
};

void MpiCore::start() {
  thread_ = std::thread([this] { run(); });
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return ready_ || !initError_.empty(); });
  if (!initError_.empty()) {
    lock.unlock();
    thread_.join();
    throw CommError("MPI: " + initError_);
  }
}

bool MpiCore::initialise() {
  auto failed = [&](const std::string &why) {
    std::lock_guard<std::mutex> lock(mutex_);
    initError_ = why;
    done_.notify_all();
    return false;
  };
  int provided = MPI_THREAD_SINGLE;
  int code = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  if (code != MPI_SUCCESS)
    return failed("MPI_Init_thread failed: " + mpiErrorText(code));
  // A private communicator: collectives of other libraries in the process
  // cannot interleave with ours.
  code = MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
  if (code != MPI_SUCCESS)
    return failed("MPI_Comm_dup failed: " + mpiErrorText(code));
  // Errors come back as codes (reported by wait()), not as MPI's own abort.
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  reductions16_.create();
  int rank = 0, size = 1;
  MPI_Comm_rank(comm_, &rank);
  MPI_Comm_size(comm_, &size);
  std::lock_guard<std::mutex> lock(mutex_);
  threadLevel_ = provided;
  rank_ = rank;
  size_ = size;
  ready_ = true;
  done_.notify_all();
  return true;
}

void MpiCore::run() {
  if (!initialise())
    return;
  std::vector<std::shared_ptr<Operation>> active;
  std::vector<MPI_Request> requests;
  std::vector<int> indices;
  bool idle = false; // The last test made no progress.
  Clock::time_point stopTime;
  bool stopSeen = false;
  while (true) {
    std::deque<std::shared_ptr<Operation>> fresh;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (active.empty())
        wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      else if (idle)
        // Only new work cuts the sleep short: a stop waits for the
        // in-flight collectives anyway.
        wake_.wait_for(lock, kPollSleep, [&] { return !queue_.empty(); });
      fresh.swap(queue_);
      if (stopping_ && !stopSeen) {
        stopSeen = true;
        stopTime = Clock::now();
      }
      if (stopping_ && fresh.empty() && active.empty())
        break;
    }
    for (std::shared_ptr<Operation> &operation : fresh) {
      begin(*operation);
      if (operation->request != MPI_REQUEST_NULL)
        active.push_back(std::move(operation));
    }
    if (active.empty())
      continue;

    requests.resize(active.size());
    indices.resize(active.size());
    for (size_t i = 0; i < active.size(); ++i)
      requests[i] = active[i]->request;
    int count = 0;
    int code = MPI_Testsome(int(requests.size()), requests.data(), &count,
                            indices.data(), MPI_STATUSES_IGNORE);
    if (code != MPI_SUCCESS) {
      // The error belongs to one of them; without knowing which, fail all
      // (the job cannot go on after a failed collective anyway).
      for (auto &operation : active)
        complete(*operation, mpiErrorText(code));
      active.clear();
      continue;
    }
    idle = count == MPI_UNDEFINED || count == 0;
    if (idle) {
      if (stopSeen && options_.timeoutSeconds > 0 &&
          Clock::now() - stopTime >
              std::chrono::duration<double>(options_.timeoutSeconds)) {
        std::fprintf(
            stderr,
            "%srank %lld: MPI shutdown: collective %s still "
            "unfinished after %g s (a peer rank may have died)\n",
            options_.messagePrefix.c_str(), static_cast<long long>(rank_),
            active.front()->description.c_str(), options_.timeoutSeconds);
        std::fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
        std::_Exit(1);
      }
      continue;
    }
    std::vector<bool> finished(active.size(), false);
    for (int i = 0; i < count; ++i)
      finished[size_t(indices[size_t(i)])] = true;
    std::vector<std::shared_ptr<Operation>> still;
    for (size_t i = 0; i < active.size(); ++i) {
      if (finished[i]) {
        active[i]->request = MPI_REQUEST_NULL;
        complete(*active[i], "");
      } else {
        still.push_back(std::move(active[i]));
      }
    }
    active.swap(still);
  }
  reductions16_.free();
  MPI_Comm_free(&comm_);
  MPI_Finalize();
}

void MpiCore::begin(Operation &operation) {
  Operation &o = operation;
  int code = MPI_SUCCESS;
  MPI_Request *request = &o.request;
  switch (o.kind) {
  case Collective::AllReduce:
    code = MPI_Iallreduce(
        MPI_IN_PLACE, o.tensor.data_ptr(), int(o.tensor.numel()),
        reductionType(o.tensor.scalar_type()),
        reductions16_.select(o.tensor.scalar_type(), o.op), comm_, request);
    break;
  case Collective::ReduceScatter:
    code = MPI_Ireduce_scatter_block(
        o.input.data_ptr(), o.tensor.data_ptr(), int(o.tensor.numel()),
        reductionType(o.tensor.scalar_type()),
        reductions16_.select(o.tensor.scalar_type(), o.op), comm_, request);
    break;
  case Collective::AllGather: {
    // Bytes: gathering moves data without interpreting it (any dtype).
    int bytes = int(o.input.nbytes());
    code = MPI_Iallgather(o.inPlace ? MPI_IN_PLACE : o.input.data_ptr(), bytes,
                          MPI_BYTE, o.tensor.data_ptr(), bytes, MPI_BYTE, comm_,
                          request);
    break;
  }
  case Collective::Broadcast:
    code = MPI_Ibcast(o.tensor.data_ptr(), int(o.tensor.nbytes()), MPI_BYTE,
                      int(o.root), comm_, request);
    break;
  case Collective::Barrier:
    code = MPI_Ibarrier(comm_, request);
    break;
  }
  if (code != MPI_SUCCESS) {
    o.request = MPI_REQUEST_NULL;
    complete(o, mpiErrorText(code));
  }
}

void MpiCore::complete(Operation &operation, const std::string &error) {
  // Averaging happens here, on this thread, so that "complete" always
  // means "the result is final" for isCompleted() as for wait().
  if (error.empty() && operation.op == ReduceOp::Avg &&
      (operation.kind == Collective::AllReduce ||
       operation.kind == Collective::ReduceScatter))
    operation.tensor.div_(size_);
  Clock::time_point now = Clock::now();
  std::lock_guard<std::mutex> lock(mutex_);
  operation.completedAt = now;
  operation.done = true;
  operation.error = error;
  // Drop the tensors: the caller keeps its own references.
  operation.input = at::Tensor();
  done_.notify_all();
}

CommHandle MpiCore::enqueue(std::shared_ptr<Operation> operation) {
  // Counts are C ints in MPI 3.1.
  int64_t elements =
      operation->tensor.defined() ? int64_t(operation->tensor.nbytes()) : 0;
  if (elements > INT_MAX)
    throw CommError(std::string(collectiveName(operation->kind)) + ": " +
                    std::to_string(elements) +
                    " bytes in one collective exceed MPI's count limit; "
                    "split it (e.g. a smaller reduce_bucket_size)");
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_)
      throw CommError(operation->description +
                      ": the communicator is shutting down");
    queue_.push_back(operation);
  }
  wake_.notify_one();
  return CommHandle(
      std::make_shared<MpiWork>(shared_from_this(), std::move(operation)));
}

bool MpiCore::isCompleted(Operation &operation) {
  std::lock_guard<std::mutex> lock(mutex_);
  return operation.done;
}

std::optional<Clock::time_point>
MpiCore::completedAt(const Operation &operation) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!operation.done)
    return std::nullopt;
  return operation.completedAt;
}

void MpiCore::wait(Operation &operation) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto isDone = [&] { return operation.done; };
  double seconds = options_.timeoutSeconds;
  if (seconds <= 0)
    done_.wait(lock, isDone);
  else if (!done_.wait_for(lock, std::chrono::duration<double>(seconds),
                           isDone)) {
    lock.unlock();
    timedOut(operation, seconds);
    lock.lock();
  }
  if (!operation.error.empty())
    throw CommError("rank " + std::to_string(rank_) + ": collective " +
                    operation.description + " failed: " + operation.error);
}

void MpiCore::timedOut(const Operation &operation, double seconds) {
  std::string message = timeoutMessage(rank_, operation.description, seconds);
  if (options_.onTimeout == CommOptions::OnTimeout::Throw)
    throw CommTimeoutError(message);
  std::fprintf(stderr, "%s%s\n", options_.messagePrefix.c_str(),
               message.c_str());
  std::fflush(stderr);
  abort(1);
}

void MpiCore::abort(int exitCode) {
  std::fflush(stdout);
  std::fflush(stderr);
  // MPI_Abort from this thread is allowed only under MPI_THREAD_MULTIPLE;
  // otherwise exiting non-zero makes mpirun end the job just as well.
  if (threadLevel_ == MPI_THREAD_MULTIPLE)
    MPI_Abort(MPI_COMM_WORLD, exitCode);
  std::_Exit(exitCode);
}

void MpiCore::stop() {
  // A last barrier under the timeout: MPI_Finalize waits for every rank
  // without one, so a rank that hangs at the end (or never gets there)
  // would otherwise hang the others forever.
  try {
    auto barrier = std::make_shared<Operation>();
    barrier->kind = Collective::Barrier;
    barrier->id = nextId();
    barrier->description = describeCollective(Collective::Barrier, barrier->id,
                                              at::Tensor(), nullptr) +
                           " before MPI_Finalize";
    enqueue(barrier).wait();
  } catch (const CommError &) {
    // Throw mode: the drain below ends the job if the barrier never ends.
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable())
    thread_.join();
}

//===----------------------------------------------------------------------===//
// MpiCommunicator
//===----------------------------------------------------------------------===//

MpiCommunicator::MpiCommunicator(const CommOptions &options) {
  if (mpiClaimed.exchange(true))
    throw CommError("MPI: a process can initialise MPI only once, and this "
                    "one already did (one MPI communicator per process)");
  core_ = std::make_shared<MpiCore>(options);
  core_->start();
}

MpiCommunicator::~MpiCommunicator() { core_->stop(); }

int64_t MpiCommunicator::rank() const { return core_->rank(); }
int64_t MpiCommunicator::size() const { return core_->size(); }

namespace {

std::shared_ptr<Operation> makeOperation(MpiCore &core, Collective kind,
                                         const at::Tensor &tensor,
                                         const char *op) {
  auto operation = std::make_shared<Operation>();
  operation->kind = kind;
  operation->id = core.nextId();
  operation->tensor = tensor;
  operation->description = describeCollective(kind, operation->id, tensor, op);
  return operation;
}

} // namespace

CommHandle MpiCommunicator::allReduce(const at::Tensor &tensor, ReduceOp op) {
  checkReducible(Collective::AllReduce, "tensor", tensor, op);
  checkOnHost(Collective::AllReduce, "tensor", tensor);
  auto operation =
      makeOperation(*core_, Collective::AllReduce, tensor, reduceOpName(op));
  operation->op = op;
  countAllReduce(tensor.numel());
  return core_->enqueue(std::move(operation));
}

CommHandle MpiCommunicator::reduceScatter(const at::Tensor &output,
                                          const at::Tensor &input,
                                          ReduceOp op) {
  checkReduceScatter(output, input, size(), op);
  checkOnHost(Collective::ReduceScatter, "input", input);
  auto operation =
      makeOperation(*core_, Collective::ReduceScatter, input, reduceOpName(op));
  operation->tensor = output;
  operation->input = input;
  operation->op = op;
  countReduceScatter(input.numel());
  return core_->enqueue(std::move(operation));
}

CommHandle MpiCommunicator::allGather(const at::Tensor &output,
                                      const at::Tensor &input) {
  bool inPlace = checkAllGather(output, input, rank(), size());
  checkOnHost(Collective::AllGather, "input", input);
  auto operation =
      makeOperation(*core_, Collective::AllGather, output, nullptr);
  operation->input = input;
  operation->inPlace = inPlace;
  countAllGather(output.numel());
  return core_->enqueue(std::move(operation));
}

CommHandle MpiCommunicator::broadcast(const at::Tensor &tensor, int64_t root) {
  checkBuffer(Collective::Broadcast, "tensor", tensor);
  checkOnHost(Collective::Broadcast, "tensor", tensor);
  checkRoot(root, size());
  auto operation =
      makeOperation(*core_, Collective::Broadcast, tensor, nullptr);
  operation->root = root;
  operation->description += " from rank " + std::to_string(root);
  countBroadcast(tensor.numel());
  return core_->enqueue(std::move(operation));
}

CommHandle MpiCommunicator::barrier() {
  return core_->enqueue(
      makeOperation(*core_, Collective::Barrier, at::Tensor(), nullptr));
}

void MpiCommunicator::abort(int exitCode) { core_->abort(exitCode); }

} // namespace detail

bool mpiCommunicatorAvailable() { return true; }

std::shared_ptr<Communicator>
createMpiCommunicator(const CommOptions &options) {
  return std::make_shared<detail::MpiCommunicator>(options);
}

} // namespace ds::runtime
