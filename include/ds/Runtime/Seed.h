//===- Seed.h - Reproducible random draws per micro-step --------*- C++ -*-===//
//
// Every training micro-step starts from its own generator seed, a hash of
// (seed, global step, micro-step, rank), so that dropout masks and every
// other draw depend only on where the micro-step is, never on what ran
// before it: two runs of a plan are bitwise equal, and an oracle can
// reproduce a rank's masks by seeding torch the same way.
//
//===----------------------------------------------------------------------===//

#ifndef DS_RUNTIME_SEED_H
#define DS_RUNTIME_SEED_H

#include <cstdint>

namespace ds::runtime {

/// SplitMix64's finaliser (Steele, Lea, Flood 2014), wrapping mod 2^64:
///   x += 0x9E3779B97F4A7C15; x = (x ^ x >> 30) * 0xBF58476D1CE4E5B9;
///   x = (x ^ x >> 27) * 0x94D049BB133111EB; return x ^ x >> 31.
uint64_t splitMix64(uint64_t x);

/// The generator seed of one micro-step:
///   h = splitMix64(seed); h = splitMix64(h ^ globalStep);
///   h = splitMix64(h ^ microStep); return splitMix64(h ^ rank)
/// `globalStep` is the number of optimizer steps taken before this
/// micro-step (DeepSpeed's global_steps), `microStep` its position in the
/// accumulation window (0 .. gradient_accumulation_steps - 1), `rank` the
/// data-parallel rank. The runtime passes it to at::manual_seed (Python:
/// torch.manual_seed accepts the same unsigned 64-bit value).
uint64_t microStepSeed(uint64_t seed, uint64_t globalStep, uint64_t microStep,
                       uint64_t rank);

} // namespace ds::runtime

#endif // DS_RUNTIME_SEED_H
