//===- NcclChannel.h - The CUDA backend's collective channel ----*- C++ -*-===//
//
// A ds::runtime::Channel over one NCCL communicator (NcclChannel.cpp),
// built into libDSRuntimeCUDA.so when cmake/DSCuda.cmake finds the PyTorch
// wheel's NCCL (DS_HAVE_NCCL); CudaDevice.cpp hands it out as the backend's
// createChannel.
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_RUNTIME_CUDA_NCCLCHANNEL_H
#define DS_LIB_RUNTIME_CUDA_NCCLCHANNEL_H

#include "ds/Runtime/Device.h"

#include <memory>
#include <string>

namespace ds::runtime {

/// This rank's end of an NCCL channel on `device` (a cuda device) among the
/// ranks of `rendezvous`: rank 0 makes the unique id and broadcasts it under
/// `key`; every rank joins (ncclCommInitRank, blocking until all have).
/// Throws std::runtime_error naming what failed.
std::unique_ptr<Channel> createNcclChannel(Device &device,
                                           Rendezvous &rendezvous,
                                           const std::string &key);

} // namespace ds::runtime

#endif // DS_LIB_RUNTIME_CUDA_NCCLCHANNEL_H
