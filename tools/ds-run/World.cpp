//===- World.cpp - This process's rank and the number of ranks ------------===//

#include "World.h"

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace ds::run {

World World::detect() {
  // Refuse to run N copies of a single-rank program under a launcher: each
  // would think it is rank 0 of 1 and write the same outputs.
  for (const char *variable : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char *value = std::getenv(variable);
    if (value && std::atoi(value) > 1)
      throw std::runtime_error(
          std::string("launched with ") + value + " ranks (" + variable +
          "), but this ds-run runs a single rank only (MPI support is not "
          "built yet)");
  }
  return World();
}

void World::sumAcrossRanks(std::vector<double> &values) const {
  (void)values; // One rank: the local sum is the global sum.
}

} // namespace ds::run
