//===- NcclTypes.h - The host logic of the NCCL channel ---------*- C++ -*-===//
//
// What NcclChannel.cpp decides before it calls NCCL, as inline functions
// that call no NCCL function: NCCL's type and reduction for a dtype and a
// ChannelOp, the byte counts of the collectives that only move data, the
// block arithmetic of reduce-scatter and all-gather, the version text, and
// the exchange of rank 0's unique id through a Rendezvous. A CPU test
// (unittests/Runtime/NcclHostTest.cpp) checks them without a GPU or
// libnccl; it needs nccl.h only for its enums and ncclUniqueId.
//
// Errors are std::runtime_error naming the collective and what is wrong (the
// backend library does not link the runtime, so not DeviceError).
//
//===----------------------------------------------------------------------===//

#ifndef DS_LIB_RUNTIME_CUDA_NCCLTYPES_H
#define DS_LIB_RUNTIME_CUDA_NCCLTYPES_H

#include "ds/Runtime/Channel.h"

#include <c10/core/ScalarType.h>
#include <nccl.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

// The wheel's nccl.h (nvidia/nccl/include), not an older one of the CUDA
// toolkit: cmake/DSCuda.cmake passes the version of the header it found.
#if !defined(NCCL_VERSION_CODE) || NCCL_VERSION_CODE < NCCL_VERSION(2, 18, 0)
#error "nccl.h is older than NCCL 2.18 (the toolkit's?): the CUDA backend " \
       "needs the PyTorch wheel's (site-packages/nvidia/nccl/include)"
#endif
#ifdef DS_NCCL_HEADER_VERSION_CODE
static_assert(NCCL_VERSION_CODE == DS_NCCL_HEADER_VERSION_CODE,
              "the nccl.h included is not the one cmake/DSCuda.cmake found "
              "(an older copy comes first on the include path)");
#endif

namespace ds::runtime::nccl {

/// "sum", "avg", "max".
inline const char *channelOpName(ChannelOp op) {
  switch (op) {
  case ChannelOp::Sum:
    return "sum";
  case ChannelOp::Avg:
    return "avg";
  case ChannelOp::Max:
    return "max";
  }
  return "unknown";
}

/// NCCL's element type and reduction for a reduce of `dtype` by `op`.
struct Reduction {
  ncclDataType_t type;
  ncclRedOp_t op;
};

/// The reduction NCCL runs for `collective` ("all-reduce") on `dtype` with
/// `op`. bool travels as uint8: its sum is a logical or (NCCL's max, as in
/// PyTorch's ProcessGroupNCCL) and it has no average. Throws naming the
/// collective, the dtype and the op for what NCCL lacks.
inline Reduction reductionFor(const char *collective, at::ScalarType dtype,
                              ChannelOp op) {
  auto fail = [&](const std::string &why) -> Reduction {
    throw std::runtime_error(std::string("nccl channel: ") + collective +
                             " of " + c10::toString(dtype) + " by " +
                             channelOpName(op) + ": " + why);
  };
  ncclRedOp_t ncclOp;
  if (op == ChannelOp::Sum)
    ncclOp = ncclSum;
  else if (op == ChannelOp::Avg)
    ncclOp = ncclAvg;
  else if (op == ChannelOp::Max)
    ncclOp = ncclMax;
  else
    return fail("NCCL has no such reduction");
  switch (dtype) {
  case at::kFloat:
    return {ncclFloat32, ncclOp};
  case at::kDouble:
    return {ncclFloat64, ncclOp};
  case at::kBFloat16:
    return {ncclBfloat16, ncclOp};
  case at::kHalf:
    return {ncclFloat16, ncclOp};
  case at::kInt:
    return {ncclInt32, ncclOp};
  case at::kLong:
    return {ncclInt64, ncclOp};
  case at::kByte:
    return {ncclUint8, ncclOp};
  case at::kChar:
    return {ncclInt8, ncclOp};
  case at::kBool:
    if (op == ChannelOp::Avg)
      return fail("bool has no average");
    return {ncclUint8, ncclMax};
  default:
    return fail("NCCL reduces float32, float64, bfloat16, float16, int32, "
                "int64, uint8, int8 and bool only");
  }
}

/// NCCL's byte count for a tensor of `numel` elements of `dtype`: all-gather
/// and broadcast move bytes (ncclUint8), so that they take any dtype.
inline size_t byteCount(int64_t numel, at::ScalarType dtype) {
  return size_t(numel) * c10::elementSize(dtype);
}

/// Throws unless `whole` holds `size` blocks of `block` elements: the
/// input of reduce-scatter, the output of all-gather.
inline void checkBlocks(const char *collective, int64_t whole, int64_t block,
                        int64_t size) {
  if (whole != block * size)
    throw std::runtime_error(std::string("nccl channel: ") + collective + ": " +
                             std::to_string(whole) + " elements are not " +
                             std::to_string(size) + " blocks of " +
                             std::to_string(block));
}

/// Throws unless 0 <= root < size.
inline void checkRoot(const char *collective, int64_t root, int64_t size) {
  if (root < 0 || root >= size)
    throw std::runtime_error(std::string("nccl channel: ") + collective +
                             ": root " + std::to_string(root) +
                             " is not a rank of " + std::to_string(size));
}

/// ncclGetVersion's code as text: 23007 -> "2.30.7" (NCCL 2.9 and later;
/// earlier ones: 2804 -> "2.8.4").
inline std::string versionString(int code) {
  int major = code >= 10000 ? code / 10000 : code / 1000;
  int minor = code >= 10000 ? code / 100 % 100 : code / 100 % 10;
  int patch = code % 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." +
         std::to_string(patch);
}

/// Rank 0's unique id on every rank of `rendezvous`, under `key`: rank 0
/// calls makeId() (ncclGetUniqueId) and broadcasts its 128 bytes. When
/// makeId() throws, rank 0 broadcasts no bytes, so that the other ranks fail
/// at once naming rank 0 instead of waiting out the rendezvous's timeout,
/// and rethrows.
template <typename MakeId>
ncclUniqueId exchangeUniqueId(Rendezvous &rendezvous, const std::string &key,
                              MakeId makeId) {
  std::vector<uint8_t> mine;
  if (rendezvous.rank() == 0) {
    ncclUniqueId id;
    try {
      id = makeId();
    } catch (...) {
      rendezvous.broadcast(key, {});
      throw;
    }
    mine.resize(sizeof id);
    std::memcpy(mine.data(), &id, sizeof id);
  }
  std::vector<uint8_t> bytes = rendezvous.broadcast(key, mine);
  if (bytes.empty() && rendezvous.rank() != 0)
    throw std::runtime_error("nccl channel '" + key + "': rank 0 of " +
                             rendezvous.describe() +
                             " could not make NCCL's unique id (see its "
                             "error)");
  if (bytes.size() != sizeof(ncclUniqueId))
    throw std::runtime_error(
        "nccl channel '" + key + "': " + rendezvous.describe() + " gave " +
        std::to_string(bytes.size()) + " bytes for NCCL's unique id, not " +
        std::to_string(sizeof(ncclUniqueId)));
  ncclUniqueId id;
  std::memcpy(&id, bytes.data(), sizeof id);
  return id;
}

} // namespace ds::runtime::nccl

#endif // DS_LIB_RUNTIME_CUDA_NCCLTYPES_H
