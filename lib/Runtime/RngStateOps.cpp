//===- RngStateOps.cpp - The `ds` operators: save and restore the RNG -----===//
//
// Operators of the runtime's own `ds` namespace, which plans call as they
// call ATen's (the OperatorResolver finds them in the c10 dispatcher):
//
//   ds::get_rng_state() -> Tensor          torch.get_rng_state()
//   ds::set_rng_state(Tensor state) -> ()  torch.set_rng_state(state)
//
// on the default generator of the device the calling program runs on
// (RunDevice.h: the CPU's 5056-byte Mersenne Twister state, CUDA's 16-byte
// Philox seed and offset), the one the random operators draw from and the
// trainer seeds per micro-step. Activation checkpointing replays a
// segment's dropout masks with them (the compiler's ds.rng_state_get and
// ds.rng_state_set).
//
//===----------------------------------------------------------------------===//

#include "RunDevice.h"

#include <ATen/Context.h>

#include <torch/library.h>

#include <mutex>

namespace {

at::Generator runGenerator() {
  return at::globalContext().defaultGenerator(
      ds::runtime::detail::currentRunDevice());
}

at::Tensor getRngState() {
  at::Generator generator = runGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

void setRngState(const at::Tensor &state) {
  at::Generator generator = runGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

} // namespace

TORCH_LIBRARY(ds, m) {
  m.def("get_rng_state() -> Tensor", getRngState);
  m.def("set_rng_state(Tensor state) -> ()", setRngState);
}

/// Referenced by the link line of every binary that links DSRuntime
/// (lib/Runtime/CMakeLists.txt), so that the linker keeps this file, whose
/// registration nothing else refers to, out of the static library.
extern "C" void dsRuntimeRngStateOps() {}
