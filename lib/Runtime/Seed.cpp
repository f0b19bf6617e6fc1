//===- Seed.cpp - Reproducible random draws per micro-step ----------------===//

#include "ds/Runtime/Seed.h"

namespace ds::runtime {

uint64_t splitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

uint64_t microStepSeed(uint64_t seed, uint64_t globalStep, uint64_t microStep,
                       uint64_t rank) {
  uint64_t h = splitMix64(seed);
  h = splitMix64(h ^ globalStep);
  h = splitMix64(h ^ microStep);
  return splitMix64(h ^ rank);
}

} // namespace ds::runtime
