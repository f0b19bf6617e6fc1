//===- World.cpp - This process's rank and the number of ranks ------------===//
//
// The launcher and the communicators are the runtime's RankGroup
// (include/ds/Runtime/Launch.h); here: ds-run's share of cores, its fault
// hook (DS_TEST_FAULT; the runtime's points: lib/Runtime/FaultPoints.h), and
// the loss sums.
//
//===----------------------------------------------------------------------===//

#include "World.h"

#include "ds/Runtime/FaultPoints.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace ds::run {

namespace {

const char *env(const char *name) {
  const char *value = std::getenv(name);
  return value && *value ? value : nullptr;
}

/// A whole decimal integer (no sign, no trailing text); -1 otherwise.
long long wholeNumber(const std::string &text) {
  if (text.empty() || text.size() > 18 ||
      text.find_first_not_of("0123456789") != std::string::npos)
    return -1;
  return std::stoll(text);
}

World::Fault parseFault() {
  World::Fault fault;
  const char *text = env("DS_TEST_FAULT");
  if (!text)
    return fault;
  std::vector<std::string> fields;
  std::string field;
  for (const char *c = text;; ++c) {
    if (*c == ':' || !*c) {
      fields.push_back(field);
      field.clear();
      if (!*c)
        break;
    } else {
      field += *c;
    }
  }
  const std::string quoted = std::string("DS_TEST_FAULT: '") + text + "'";
  auto malformed = [&]() {
    return std::runtime_error(
        quoted + " is not MODE:RANK:STEP[:POINT[:N]] (MODE exit, hang or "
                 "kill; RANK >= 0; STEP >= 1; POINT step, allgather or "
                 "optimizer; N >= 1)");
  };
  if (fields.size() < 3 || fields.size() > 5)
    throw malformed();
  fault.mode = fields[0];
  fault.rank = wholeNumber(fields[1]);
  fault.step = wholeNumber(fields[2]);
  if ((fault.mode != "exit" && fault.mode != "hang" && fault.mode != "kill") ||
      fault.rank < 0 || fault.step < 1)
    throw malformed();
  if (fields.size() >= 4) {
    fault.point = fields[3];
    if (fault.point != "step" && !runtime::parseFaultPoint(fault.point))
      throw std::runtime_error(quoted + ": unknown fault point '" +
                               fault.point +
                               "' (POINT is step, allgather or optimizer)");
  }
  if (fields.size() == 5) {
    fault.occurrence = wholeNumber(fields[4]);
    if (fault.occurrence < 1)
      throw malformed();
    if (fault.point == "step" && fault.occurrence != 1)
      throw std::runtime_error(quoted +
                               ": a step begins once (N counts allgather "
                               "and optimizer points only)");
  }
  return fault;
}

/// The fault itself: a crash, a SIGKILL or a rank that stops answering.
[[noreturn]] void fire(const std::string &mode, int64_t rank, int64_t step,
                       const std::string &where) {
  std::fprintf(stderr, "ds-run: DS_TEST_FAULT: rank %lld: %s at step %lld%s\n",
               static_cast<long long>(rank), mode.c_str(),
               static_cast<long long>(step), where.c_str());
  std::fflush(stderr);
  std::fflush(stdout);
  if (mode == "exit")
    std::_Exit(3);
  if (mode == "kill")
    std::raise(SIGKILL);
  while (true) // hang: a rank that stops answering
    pause();
}

/// Ranks sharing the cores: LibTorch would otherwise start one thread per
/// core in every rank and oversubscribe them.
void divideCores(int64_t local) {
  if (local <= 1 || env("OMP_NUM_THREADS"))
    return;
  int64_t cores = std::max<unsigned>(1, std::thread::hardware_concurrency());
  at::set_num_threads(int(std::max<int64_t>(1, cores / local)));
}

} // namespace

World World::detect() {
  World world;
  world.fault = parseFault();
  runtime::CommOptions options = runtime::CommOptions::fromEnvironment();
  options.messagePrefix = "ds-run: error: ";
  world.group = runtime::RankGroup::join(options);
  world.rank = world.group->rank();
  world.size = world.group->size();
  if (world.group->launch().kind != runtime::LaunchInfo::Kind::Store)
    world.comm = world.group->hostCommunicator();
  divideCores(world.group->launch().localSize);
  return world;
}

std::shared_ptr<runtime::Communicator>
World::connect(const std::shared_ptr<runtime::Device> &device) {
  comm = group->communicator(device);
  return comm;
}

void World::sumAcrossRanks(std::vector<double> &values) const {
  if (size <= 1 || !comm || values.empty())
    return;
  at::Tensor sums = at::tensor(values, at::kDouble);
  comm->allReduce(sums, runtime::ReduceOp::Sum).wait();
  const double *data = sums.data_ptr<double>();
  std::copy(data, data + values.size(), values.begin());
}

void World::abortIfOthersRun(int exitCode) const {
  if (size <= 1 || !comm)
    return;
  // An error every rank hits (a plan that does not fit) would make every
  // rank abort at once, and mpirun then garbles its report. Rank 0 goes
  // first; the others follow unless mpirun has ended them by then.
  if (rank != 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  comm->abort(exitCode);
}

void World::beginStep(int64_t step) const {
  runtime::noteTrainingStep(step);
  faultPoint(step);
}

void World::faultPoint(int64_t step) const {
  if (fault.mode.empty() || fault.rank != rank)
    return;
  if (fault.point == "step") {
    if (fault.step == step)
      fire(fault.mode, rank, step, "");
    return;
  }
  // The runtime's points: armed for step STEP only.
  if (fault.step != step) {
    runtime::disarmFaultPoints();
    return;
  }
  runtime::armFaultPoint(
      *runtime::parseFaultPoint(fault.point), fault.occurrence,
      [mode = fault.mode, rank = rank, step](runtime::FaultPoint point,
                                             int64_t occurrence) {
        fire(mode, rank, step,
             std::string(" (") + runtime::faultPointName(point) + " #" +
                 std::to_string(occurrence) + ")");
      });
}

} // namespace ds::run
