//===- GradientBuffers.cpp - Flat per-engine gradient storage -------------===//

#include "ds/Runtime/GradientBuffers.h"

#include "ds/Runtime/DTypes.h"
#include "ds/Runtime/RuntimeError.h"

#include <ATen/ATen.h>

namespace ds::runtime {

void FlatLayout::add(int64_t stateIndex, std::vector<int64_t> shape) {
  stateIndices.push_back(stateIndex);
  offsets.push_back(numel);
  numel += plan::staticNumel(shape).value_or(0);
  shapes.push_back(std::move(shape));
}

at::Tensor FlatLayout::allocate() const {
  return at::zeros({numel}, at::TensorOptions().dtype(dtype));
}

std::vector<at::Tensor> FlatLayout::views(const at::Tensor &flat) const {
  std::vector<at::Tensor> result;
  result.reserve(shapes.size());
  for (size_t i = 0; i < shapes.size(); ++i) {
    int64_t numel = plan::staticNumel(shapes[i]).value_or(0);
    result.push_back(flat.narrow(0, offsets[i], numel).view(shapes[i]));
  }
  return result;
}

GradientBuffers::GradientBuffers(const plan::Plan &plan,
                                 const std::vector<bool> &trainable)
    : engines_(plan.engines.size()), where_(plan.state.size(), {-1, -1}) {
  for (size_t i = 0; i < plan.state.size(); ++i) {
    if (i >= trainable.size() || !trainable[i])
      continue;
    const plan::StateDesc &desc = plan.state[i];
    for (size_t e = 0; e < plan.engines.size(); ++e) {
      if (plan.engines[e].name != desc.engine)
        continue;
      FlatLayout &layout = engines_[e].layout;
      at::ScalarType dtype = toScalarType(desc.dtype);
      if (layout.stateIndices.empty())
        layout.dtype = dtype;
      else if (layout.dtype != dtype)
        throw RuntimeError("engine \"" + plan.engines[e].name +
                           "\" mixes " + scalarTypeName(layout.dtype) + " and " +
                           scalarTypeName(dtype) +
                           " trainable parameters (\"" + desc.name +
                           "\"); one flat buffer holds one dtype");
      where_[i] = {int64_t(e), int64_t(layout.stateIndices.size())};
      layout.add(int64_t(i), desc.shape);
    }
  }
  for (EngineBuffers &engine : engines_) {
    if (engine.layout.stateIndices.empty())
      continue;
    engine.flat = engine.layout.allocate();
    engine.views = engine.layout.views(engine.flat);
  }
}

bool GradientBuffers::has(int64_t stateIndex) const {
  return stateIndex >= 0 && stateIndex < int64_t(where_.size()) &&
         where_[stateIndex].first >= 0;
}

at::Tensor GradientBuffers::grad(int64_t stateIndex) const {
  if (!has(stateIndex))
    return at::Tensor();
  auto [engine, position] = where_[stateIndex];
  return engines_[engine].views[position];
}

void GradientBuffers::accumulate(int64_t stateIndex, const at::Tensor &value) {
  at::Tensor target = grad(stateIndex);
  if (!target.defined())
    throw RuntimeError("state entry " + std::to_string(stateIndex) +
                       " has no gradient buffer");
  if (!value.defined() || !at::isFloatingType(value.scalar_type()) ||
      value.sizes() != target.sizes())
    throw RuntimeError(
        "the gradient must be a floating-point tensor shaped like the "
        "parameter (" + scalarTypeName(target.scalar_type()) + " " +
        plan::formatShape(target.sizes().vec()) + "), got " +
        (value.defined() ? describeTensor(value) : std::string("undefined")));
  // add_ converts a lower-precision gradient to the buffer's dtype.
  target.add_(value);
}

void GradientBuffers::zero(size_t engine) {
  if (engines_[engine].flat.defined())
    engines_[engine].flat.zero_();
}

int64_t GradientBuffers::bytes() const {
  int64_t total = 0;
  for (const EngineBuffers &engine : engines_)
    if (engine.flat.defined())
      total += int64_t(engine.flat.nbytes());
  return total;
}

} // namespace ds::runtime
