//===- CommChecks.h - Argument checks shared by the backends ----*- C++ -*-===//
//
// Every backend refuses the same bad arguments with the same messages, on
// the calling thread, before anything is queued: a collective that one rank
// refuses must not be half-started on the others' behalf. Private to
// lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_RUNTIME_COMM_COMMCHECKS_H
#define DS_LIB_RUNTIME_COMM_COMMCHECKS_H

#include "ds/Runtime/Communicator.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

namespace ds::runtime::detail {

enum class Collective {
  AllReduce,
  ReduceScatter,
  AllGather,
  Broadcast,
  Barrier
};

/// "allReduce", "reduceScatter", ...
const char *collectiveName(Collective kind);

/// A defined, contiguous tensor; `role` ("tensor", "input", "output") names
/// it in the message. Throws CommError. Which devices a backend takes is
/// the backend's check (checkOnHost for the MPI backend).
void checkBuffer(Collective kind, const char *role, const at::Tensor &tensor);
/// A tensor on the CPU: backends that move host memory (MPI).
void checkOnHost(Collective kind, const char *role, const at::Tensor &tensor);
/// checkBuffer plus a dtype that `op` can reduce (Avg: floating point).
void checkReducible(Collective kind, const char *role, const at::Tensor &tensor,
                    ReduceOp op);
/// Block sizes, dtypes and one device of a reduce-scatter over `size`
/// ranks; input and output must not overlap.
void checkReduceScatter(const at::Tensor &output, const at::Tensor &input,
                        int64_t size, ReduceOp op);
/// Block sizes, dtypes and one device of an all-gather. Returns true for the
/// in-place
/// form (input is rank `rank`'s block of output); any other overlap is an
/// error.
bool checkAllGather(const at::Tensor &output, const at::Tensor &input,
                    int64_t rank, int64_t size);
void checkRoot(int64_t root, int64_t size);

/// "allReduce #3 (avg, 1024 x float32)".
std::string describeCollective(Collective kind, uint64_t id,
                               const at::Tensor &tensor, const char *op);

/// "rank R: collective X timed out after N s (a peer rank may have died)".
std::string timeoutMessage(int64_t rank, const std::string &collective,
                           double seconds);

} // namespace ds::runtime::detail

#endif // DS_LIB_RUNTIME_COMM_COMMCHECKS_H
