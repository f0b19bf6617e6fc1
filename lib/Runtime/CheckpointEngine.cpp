//===- CheckpointEngine.cpp - One plan engine's checkpoint files ----------===//
//
// What saving and loading share: the engine's slice of the plan
// (EngineContext) and the optimizer's buffers by torch.optim's names. The
// dicts are built in CheckpointSave.cpp and read in CheckpointLoad.cpp.
//
//===----------------------------------------------------------------------===//

#include "CheckpointEngine.h"

#include "CheckpointFiles.h"
#include "Trainer.h"

#include "ds/Runtime/Optimizer.h"
#include "ds/Runtime/StateStore.h"
#include "ds/TensorIO/RuntimeError.h"

#include <ATen/ATen.h>

namespace ds::runtime::detail {

/// The optimizer's state buffers by torch.optim's key names.
std::vector<std::pair<const char *, at::Tensor *>>
optimizerBuffers(Optimizer &optimizer) {
  std::vector<std::pair<const char *, at::Tensor *>> buffers;
  if (optimizer.desc().type == plan::OptimizerType::SGD) {
    if (optimizer.mutableExpAvg().defined())
      buffers.emplace_back("momentum_buffer", &optimizer.mutableExpAvg());
    return buffers;
  }
  buffers.emplace_back("exp_avg", &optimizer.mutableExpAvg());
  buffers.emplace_back("exp_avg_sq", &optimizer.mutableExpAvgSq());
  return buffers;
}

/// Stage 0: one view of `flat` per trainable parameter, as the partition
/// places them.
std::vector<at::Tensor> parameterViews(const EngineContext &context,
                                       const at::Tensor &flat) {
  std::vector<at::Tensor> views;
  for (const plan::FlatParamDesc &param : context.desc().partition->params) {
    const plan::StateDesc *state = context.plan.findState(param.name);
    int64_t numel = plan::staticNumel(state->shape).value_or(0);
    views.push_back(flat.narrow(0, param.offset, numel).view(state->shape));
  }
  return views;
}

//===----------------------------------------------------------------------===//
// EngineContext
//===----------------------------------------------------------------------===//

bool EngineContext::trains() const {
  return trainer && desc().optimizer && desc().partition &&
         trainer->engine(engine).trains();
}

ZeroEngineState &EngineContext::zeroState() const {
  return trainer->engine(engine);
}

UpdateProgress &EngineContext::progress() const {
  return *zeroState().progress();
}

const LossScaler *EngineContext::lossScaler() const {
  const UpdateProgress *progress =
      trainer ? trainer->engine(engine).progress() : nullptr;
  return progress ? progress->lossScaler() : nullptr;
}

int64_t EngineContext::stage() const {
  return desc().partition ? desc().partition->stage : 0;
}

std::vector<int64_t> EngineContext::stateIndices() const {
  std::vector<int64_t> indices;
  const bool single = plan.engines.size() == 1;
  for (size_t i = 0; i < plan.state.size(); ++i)
    if (single || plan.state[i].engine == desc().name)
      indices.push_back(int64_t(i));
  return indices;
}

std::string EngineContext::localName(const std::string &qualified) const {
  const std::string &module = desc().module;
  if (!module.empty() && qualified.size() > module.size() &&
      qualified.compare(0, module.size(), module) == 0 &&
      qualified[module.size()] == '.')
    return qualified.substr(module.size() + 1);
  return qualified;
}

} // namespace ds::runtime::detail
