//===- NcclHostTest.cpp - The NCCL channel's host logic, on the CPU -------===//
//
// What the CUDA backend's NCCL channel decides before calling NCCL
// (lib/Runtime/CUDA/NcclTypes.h): the type and reduction of each dtype and
// op, the byte counts, the block checks, the version text, and rank 0's
// unique id reaching every rank through a Rendezvous; and that the backend
// library (loaded with dlopen, as the registry does) hands out its NCCL
// channel and refuses, before touching the GPU, what cannot join. No GPU,
// no communicator: nccl.h's enums and ncclUniqueId here; libnccl only
// through the backend library.
//
//===----------------------------------------------------------------------===//

#include "../../lib/Runtime/CUDA/NcclTypes.h"

#include "../../lib/Runtime/Device/DeviceBackends.h"
#include "TestRendezvous.h"

#include <gtest/gtest.h>

#include <cstring>
#include <dlfcn.h>
#include <thread>

using namespace ds::runtime;
using namespace ds::runtime::nccl;

namespace {

/// The message of what `body` throws ("" if nothing).
template <typename Body> std::string thrown(Body body) {
  try {
    body();
  } catch (const std::runtime_error &e) {
    return e.what();
  }
  return "";
}

TEST(NcclTypes, ReductionTypesOfEachDtype) {
  struct Want {
    at::ScalarType dtype;
    ncclDataType_t type;
  };
  for (Want want : {Want{at::kFloat, ncclFloat32},
                    {at::kDouble, ncclFloat64},
                    {at::kBFloat16, ncclBfloat16},
                    {at::kHalf, ncclFloat16},
                    {at::kInt, ncclInt32},
                    {at::kLong, ncclInt64},
                    {at::kByte, ncclUint8},
                    {at::kChar, ncclInt8}}) {
    SCOPED_TRACE(c10::toString(want.dtype));
    EXPECT_EQ(reductionFor("all-reduce", want.dtype, ChannelOp::Sum).type,
              want.type);
    EXPECT_EQ(reductionFor("all-reduce", want.dtype, ChannelOp::Sum).op,
              ncclSum);
    EXPECT_EQ(reductionFor("all-reduce", want.dtype, ChannelOp::Avg).op,
              ncclAvg);
    EXPECT_EQ(reductionFor("all-reduce", want.dtype, ChannelOp::Max).op,
              ncclMax);
  }
}

TEST(NcclTypes, BoolSumIsALogicalOrAndHasNoAverage) {
  Reduction sum = reductionFor("all-reduce", at::kBool, ChannelOp::Sum);
  EXPECT_EQ(sum.type, ncclUint8);
  EXPECT_EQ(sum.op, ncclMax);
  EXPECT_EQ(reductionFor("all-reduce", at::kBool, ChannelOp::Max).op, ncclMax);
  std::string message =
      thrown([] { reductionFor("reduce-scatter", at::kBool, ChannelOp::Avg); });
  EXPECT_NE(message.find("reduce-scatter"), std::string::npos) << message;
  EXPECT_NE(message.find("Bool"), std::string::npos) << message;
  EXPECT_NE(message.find("avg"), std::string::npos) << message;
}

TEST(NcclTypes, DtypesNcclLacksAreNamed) {
  for (at::ScalarType dtype : {at::kComplexFloat, at::kComplexDouble,
                               at::kShort, at::kFloat8_e4m3fn}) {
    std::string message =
        thrown([&] { reductionFor("all-reduce", dtype, ChannelOp::Sum); });
    EXPECT_NE(message.find("all-reduce"), std::string::npos) << message;
    EXPECT_NE(message.find(c10::toString(dtype)), std::string::npos) << message;
  }
}

TEST(NcclTypes, MovesAreBytes) {
  EXPECT_EQ(byteCount(10, at::kFloat), 40u);
  EXPECT_EQ(byteCount(10, at::kBFloat16), 20u);
  EXPECT_EQ(byteCount(3, at::kComplexDouble), 48u);
  EXPECT_EQ(byteCount(7, at::kBool), 7u);
  EXPECT_EQ(byteCount(0, at::kLong), 0u);
}

TEST(NcclTypes, BlocksAndRoots) {
  EXPECT_NO_THROW(checkBlocks("all-gather", 12, 3, 4));
  std::string message = thrown([] { checkBlocks("all-gather", 12, 4, 4); });
  EXPECT_NE(message.find("all-gather: 12 elements are not 4 blocks of 4"),
            std::string::npos)
      << message;
  EXPECT_NO_THROW(checkRoot("broadcast", 3, 4));
  EXPECT_NE(thrown([] {
              checkRoot("broadcast", 4, 4);
            }).find("root 4 is not a rank of 4"),
            std::string::npos);
  EXPECT_FALSE(thrown([] { checkRoot("broadcast", -1, 4); }).empty());
}

TEST(NcclTypes, VersionText) {
  EXPECT_EQ(versionString(23007), "2.30.7");
  EXPECT_EQ(versionString(21803), "2.18.3");
  EXPECT_EQ(versionString(2804), "2.8.4");
  // The header this test was built with describes itself the same way.
  EXPECT_EQ(versionString(NCCL_VERSION_CODE),
            std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) +
                "." + std::to_string(NCCL_PATCH));
}

ncclUniqueId idFilledWith(uint8_t seed) {
  ncclUniqueId id;
  for (size_t i = 0; i < sizeof id.internal; ++i)
    id.internal[i] = char(seed + i);
  return id;
}

TEST(NcclUniqueId, RankZerosIdReachesEveryRank) {
  constexpr int64_t size = 4;
  test::Board board;
  std::vector<ncclUniqueId> got(size);
  std::vector<int> made(size, 0);
  std::vector<std::string> errors(size);
  std::vector<std::thread> threads;
  for (int64_t rank = size - 1; rank >= 0; --rank) // Rank 0 last.
    threads.emplace_back([&, rank] {
      test::ThreadRendezvous rendezvous(board, rank, size);
      try {
        got[rank] = exchangeUniqueId(rendezvous, "nccl/0", [&] {
          ++made[rank];
          return idFilledWith(uint8_t(17 + rank));
        });
      } catch (const std::exception &e) {
        errors[rank] = e.what();
      }
    });
  for (std::thread &thread : threads)
    thread.join();
  ncclUniqueId want = idFilledWith(17);
  for (int64_t rank = 0; rank < size; ++rank) {
    SCOPED_TRACE(rank);
    EXPECT_EQ(errors[rank], "");
    EXPECT_EQ(made[rank], rank == 0 ? 1 : 0);
    EXPECT_EQ(std::memcmp(&got[rank], &want, sizeof want), 0);
  }
  EXPECT_EQ(board.calls, size);
  EXPECT_EQ(board.values.at("nccl/0").size(), sizeof(ncclUniqueId));
}

TEST(NcclUniqueId, RankZerosFailureEndsTheOthersAtOnce) {
  test::Board board;
  std::string rank1;
  std::thread other([&] {
    test::ThreadRendezvous rendezvous(board, 1, 2,
                                      std::chrono::milliseconds(20000));
    rank1 = thrown([&] {
      exchangeUniqueId(rendezvous, "nccl/1", [] { return idFilledWith(1); });
    });
  });
  test::ThreadRendezvous rendezvous(board, 0, 2);
  std::string rank0 = thrown([&] {
    exchangeUniqueId(rendezvous, "nccl/1", []() -> ncclUniqueId {
      throw std::runtime_error("ncclGetUniqueId: no network");
    });
  });
  other.join();
  EXPECT_EQ(rank0, "ncclGetUniqueId: no network");
  EXPECT_NE(rank1.find("rank 0 of threads (2) could not make NCCL's unique id"),
            std::string::npos)
      << rank1;
}

/// Answers every broadcast with `reply`.
class FixedRendezvous final : public Rendezvous {
public:
  FixedRendezvous(int64_t rank, std::vector<uint8_t> reply)
      : rank_(rank), reply_(std::move(reply)) {}
  int64_t rank() const override { return rank_; }
  int64_t size() const override { return 2; }
  int64_t localRank() const override { return rank_; }
  int64_t localSize() const override { return 2; }
  std::string describe() const override { return "fixed"; }
  std::vector<uint8_t> broadcast(const std::string &,
                                 const std::vector<uint8_t> &) override {
    return reply_;
  }

private:
  int64_t rank_;
  std::vector<uint8_t> reply_;
};

TEST(NcclUniqueId, AnIdOfAnotherSizeIsRefused) {
  FixedRendezvous rendezvous(1, std::vector<uint8_t>(64, 7));
  std::string message = thrown([&] {
    exchangeUniqueId(rendezvous, "nccl/2", [] { return idFilledWith(0); });
  });
  EXPECT_NE(message.find("'nccl/2': fixed gave 64 bytes for NCCL's unique "
                         "id, not 128"),
            std::string::npos)
      << message;
}

/// A device of the cuda backend that no GPU backs: only device() works.
class PretendDevice final : public Device {
public:
  explicit PretendDevice(c10::Device where) : where_(where) {}
  std::string backendName() const override { return "cuda"; }
  c10::Device device() const override { return where_; }
  std::string describe() const override { return "pretend"; }
  at::Tensor hostStaging(at::IntArrayRef, at::ScalarType) override {
    throw std::logic_error("pretend device");
  }
  at::Tensor copyFromHost(const at::Tensor &, const c10::Stream &) override {
    throw std::logic_error("pretend device");
  }
  c10::Stream stream(StreamRole) override {
    throw std::logic_error("pretend device");
  }
  at::Generator generator() override {
    throw std::logic_error("pretend device");
  }
  std::unique_ptr<Event> createEvent(bool) override {
    throw std::logic_error("pretend device");
  }
  void synchronize() override { throw std::logic_error("pretend device"); }

private:
  c10::Device where_;
};

TEST(NcclBackend, TheCudaLibraryHandsOutItsChannel) {
  void *library = dlopen(DS_CUDA_BACKEND_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(library, nullptr) << dlerror();
  auto entry = reinterpret_cast<DsDeviceBackendEntry>(
      dlsym(library, "dsDeviceBackend_cuda"));
  ASSERT_NE(entry, nullptr) << dlerror();
  DeviceBackend backend;
  const char *refusal = entry(&backend);
  ASSERT_EQ(refusal, nullptr) << refusal;
  ASSERT_TRUE(bool(backend.createChannel))
      << "built with NCCL, yet the cuda backend has no createChannel";

  // Refused before any CUDA or NCCL call (there is no GPU here).
  test::Board board;
  test::ThreadRendezvous rendezvous(board, 0, 2);
  PretendDevice cpu(c10::Device(c10::kCPU));
  std::string message =
      thrown([&] { backend.createChannel(cpu, rendezvous, "nccl/cpu"); });
  EXPECT_NE(message.find("NCCL needs a cuda device"), std::string::npos)
      << message;
  test::ThreadRendezvous stray(board, 5, 2);
  PretendDevice gpu(c10::Device(c10::kCUDA, 0));
  message = thrown([&] { backend.createChannel(gpu, stray, "nccl/stray"); });
  EXPECT_NE(message.find("rank 5 of 2 is not a rank NCCL can join"),
            std::string::npos)
      << message;
  EXPECT_EQ(board.calls, 0) << "nothing may reach the rendezvous";
  // The library stays loaded: LibTorch's CUDA half does not unload.
}

} // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
