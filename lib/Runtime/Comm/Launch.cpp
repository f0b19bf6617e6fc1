//===- Launch.cpp - The launcher's environment variables ------------------===//

#include "ds/Runtime/Launch.h"

#include <cerrno>
#include <cstdlib>
#include <optional>

namespace ds::runtime {

namespace {

const char *env(const char *name) {
  const char *value = std::getenv(name);
  return value && *value ? value : nullptr;
}

/// The integer in variable `name`, nullopt when unset. Throws CommError
/// when it is not an integer >= `minimum`.
std::optional<int64_t> integerVariable(const char *name, int64_t minimum) {
  const char *text = env(name);
  if (!text)
    return std::nullopt;
  errno = 0;
  char *end = nullptr;
  long long value = std::strtoll(text, &end, 10);
  if (*end != '\0' || errno == ERANGE || value < minimum)
    throw CommError(std::string(name) + "='" + text +
                    "' is not an integer >= " + std::to_string(minimum));
  return value;
}

/// The local rank an MPI launcher gives: Open MPI's, MPICH's (and Intel
/// MPI's), Slurm's.
std::optional<int64_t> localRankVariable() {
  for (const char *name :
       {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
    if (std::optional<int64_t> value = integerVariable(name, 0))
      return value;
  return std::nullopt;
}

int64_t requiredInteger(const char *name, int64_t minimum, const char *why) {
  if (std::optional<int64_t> value = integerVariable(name, minimum))
    return *value;
  throw CommError(std::string(name) + " is not set, but " + why);
}

} // namespace

LaunchInfo LaunchInfo::fromEnvironment() {
  LaunchInfo launch;
  // torchrun's workers first: started under mpirun or srun, they inherit
  // the agent's MPI variables, which are not theirs.
  bool store = env("TORCHELASTIC_USE_AGENT_STORE") ||
               (env("RANK") && env("WORLD_SIZE") && env("MASTER_ADDR"));
  if (!store &&
      (env("OMPI_COMM_WORLD_SIZE") || env("PMIX_RANK") || env("PMI_SIZE"))) {
    launch.kind = Kind::Mpi;
    // MPI itself says rank and size; these are what the launcher told.
    launch.rank = integerVariable("OMPI_COMM_WORLD_RANK", 0).value_or(0);
    launch.size = integerVariable("OMPI_COMM_WORLD_SIZE", 1).value_or(1);
    launch.localRank = localRankVariable().value_or(0);
    launch.localSize =
        integerVariable("OMPI_COMM_WORLD_LOCAL_SIZE", 1).value_or(1);
    return launch;
  }
  if (!env("WORLD_SIZE") && !env("RANK"))
    return launch;
  const char *why = "the launcher set RANK or WORLD_SIZE (torchrun's "
                    "variables: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)";
  launch.kind = Kind::Store;
  launch.size = requiredInteger("WORLD_SIZE", 1, why);
  launch.rank = requiredInteger("RANK", 0, why);
  if (launch.rank >= launch.size)
    throw CommError("RANK=" + std::to_string(launch.rank) +
                    " is not below WORLD_SIZE=" + std::to_string(launch.size));
  launch.localRank = integerVariable("LOCAL_RANK", 0).value_or(launch.rank);
  launch.localSize =
      integerVariable("LOCAL_WORLD_SIZE", 1).value_or(launch.size);
  if (launch.size > 1) {
    const char *addr = env("MASTER_ADDR");
    if (!addr)
      throw CommError(std::string("MASTER_ADDR is not set, but ") + why);
    launch.masterAddr = addr;
    launch.masterPort = requiredInteger("MASTER_PORT", 1, why);
    if (launch.masterPort > 65535)
      throw CommError("MASTER_PORT=" + std::to_string(launch.masterPort) +
                      " is not a TCP port");
  }
  const char *agent = env("TORCHELASTIC_USE_AGENT_STORE");
  launch.agentStore = agent && std::string(agent) == "True";
  launch.restartCount =
      integerVariable("TORCHELASTIC_RESTART_COUNT", 0).value_or(0);
  return launch;
}

std::string LaunchInfo::describe() const {
  switch (kind) {
  case Kind::None:
    return "no launcher (one rank)";
  case Kind::Mpi:
    return "mpirun";
  case Kind::Store: {
    std::string store = masterAddr + ":" + std::to_string(masterPort);
    if (agentStore)
      return "torchrun (agent store " + store + ")";
    return "RANK/WORLD_SIZE (store " + store + ", served by rank 0)";
  }
  }
  return "?";
}

} // namespace ds::runtime
