//===- CheckpointRanks.cpp - What the ranks of a save or load exchange ----===//

#include "CheckpointRanks.h"

#include "ds/Runtime/Communicator.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>

namespace ds::runtime::detail {

std::vector<std::string> gatherText(Communicator *communicator,
                                    const std::string &mine) {
  const int64_t worldSize = communicator ? communicator->size() : 1;
  if (worldSize <= 1)
    return {mine};
  // The lengths first, then every text padded to the longest.
  at::Tensor lengths = at::zeros({worldSize}, at::kLong);
  at::Tensor length = at::full({1}, int64_t(mine.size()), at::kLong);
  communicator->allGather(lengths, length).wait();
  const int64_t *sizes = lengths.data_ptr<int64_t>();
  const int64_t longest = *std::max_element(sizes, sizes + worldSize);
  std::vector<std::string> texts(static_cast<size_t>(worldSize));
  if (longest == 0)
    return texts;
  at::Tensor all = at::zeros({worldSize * longest}, at::kByte);
  at::Tensor own = at::zeros({longest}, at::kByte);
  std::memcpy(own.data_ptr<uint8_t>(), mine.data(), mine.size());
  communicator->allGather(all, own).wait();
  const char *bytes = reinterpret_cast<const char *>(all.data_ptr<uint8_t>());
  for (int64_t r = 0; r < worldSize; ++r)
    texts[size_t(r)].assign(bytes + r * longest, size_t(sizes[r]));
  return texts;
}

std::string firstError(Communicator *communicator, const std::string &mine) {
  std::vector<std::string> errors = gatherText(communicator, mine);
  if (!mine.empty())
    return mine;
  for (size_t r = 0; r < errors.size(); ++r)
    if (!errors[r].empty())
      return "on rank " + std::to_string(r) + ": " + errors[r];
  return "";
}

} // namespace ds::runtime::detail
