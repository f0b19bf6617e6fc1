//===- World.cpp - This process's rank and the number of ranks ------------===//
//
// The launcher and the communicators are the runtime's RankGroup
// (include/ds/Runtime/Launch.h); here: ds-run's share of cores, its fault
// hook, and the loss sums.
//
//===----------------------------------------------------------------------===//

#include "World.h"

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

namespace ds::run {

namespace {

const char *env(const char *name) {
  const char *value = std::getenv(name);
  return value && *value ? value : nullptr;
}

World::Fault parseFault() {
  World::Fault fault;
  const char *text = env("DS_TEST_FAULT");
  if (!text)
    return fault;
  char mode[16] = {0};
  long long rank = -1, step = -1;
  char tail = 0;
  if (std::sscanf(text, "%15[a-z]:%lld:%lld%c", mode, &rank, &step, &tail) !=
          3 ||
      rank < 0 || step < 1 ||
      (std::string(mode) != "exit" && std::string(mode) != "hang" &&
       std::string(mode) != "kill"))
    throw std::runtime_error(std::string("DS_TEST_FAULT: '") + text +
                             "' is not MODE:RANK:STEP (MODE exit, hang or "
                             "kill; RANK >= 0; STEP >= 1)");
  fault.mode = mode;
  fault.rank = rank;
  fault.step = step;
  return fault;
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
  if (fault.mode.empty() || fault.rank != rank || fault.step != step)
    return;
  std::fprintf(stderr, "ds-run: DS_TEST_FAULT: rank %lld: %s at step %lld\n",
               static_cast<long long>(rank), fault.mode.c_str(),
               static_cast<long long>(step));
  std::fflush(stderr);
  std::fflush(stdout);
  if (fault.mode == "exit")
    std::_Exit(3);
  if (fault.mode == "kill")
    std::raise(SIGKILL);
  while (true) // hang: a rank that stops answering
    pause();
}

} // namespace ds::run
