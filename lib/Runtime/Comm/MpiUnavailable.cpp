//===- MpiUnavailable.cpp - The MPI backend of a build without MPI --------===//
//
// Compiled instead of MpiCommunicator.cpp when CMake finds no MPI, so that
// callers link either way and learn at run time why multi-rank runs fail.
//
//===----------------------------------------------------------------------===//

#include "ds/Runtime/Communicator.h"

namespace ds::runtime {

bool mpiCommunicatorAvailable() { return false; }

std::shared_ptr<Communicator> createMpiCommunicator(const CommOptions &) {
  throw CommError("this build has no MPI support (CMake found no MPI "
                  "library; install libopenmpi-dev and reconfigure)");
}

} // namespace ds::runtime
