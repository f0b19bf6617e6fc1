//===- GradientBuffers.cpp - Flat per-engine gradient storage -------------===//

#include "ds/Runtime/GradientBuffers.h"

#include "ds/TensorIO/DTypes.h"
#include "ds/TensorIO/RuntimeError.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace ds::runtime {

void FlatLayout::add(int64_t stateIndex, std::vector<int64_t> shape) {
  place(stateIndex, std::move(shape), numel);
}

void FlatLayout::place(int64_t stateIndex, std::vector<int64_t> shape,
                       int64_t offset) {
  stateIndices.push_back(stateIndex);
  offsets.push_back(offset);
  numel = std::max(numel, offset + plan::staticNumel(shape).value_or(0));
  shapes.push_back(std::move(shape));
}

at::Tensor FlatLayout::allocate() const {
  return at::zeros({numel}, at::TensorOptions().dtype(dtype).device(device));
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
                                 std::vector<FlatLayout> layouts,
                                 const std::vector<bool> &allocateNow)
    : engines_(plan.engines.size()), where_(plan.state.size(), {-1, -1}) {
  for (size_t e = 0; e < engines_.size() && e < layouts.size(); ++e) {
    EngineBuffers &engine = engines_[e];
    engine.layout = std::move(layouts[e]);
    const FlatLayout &layout = engine.layout;
    for (size_t k = 0; k < layout.stateIndices.size(); ++k) {
      int64_t index = layout.stateIndices[k];
      if (index >= 0 && index < int64_t(where_.size()))
        where_[size_t(index)] = {int64_t(e), int64_t(k)};
    }
    if (e < allocateNow.size() && allocateNow[e])
      allocate(e);
  }
}

bool GradientBuffers::has(int64_t stateIndex) const {
  return engineOf(stateIndex) >= 0;
}

int64_t GradientBuffers::engineOf(int64_t stateIndex) const {
  if (stateIndex < 0 || stateIndex >= int64_t(where_.size()))
    return -1;
  return where_[size_t(stateIndex)].first;
}

at::Tensor GradientBuffers::grad(int64_t stateIndex) const {
  if (!has(stateIndex))
    return at::Tensor();
  auto [engine, position] = where_[size_t(stateIndex)];
  const EngineBuffers &buffers = engines_[size_t(engine)];
  if (!buffers.flat.defined())
    return at::Tensor();
  return buffers.views[size_t(position)];
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
        "parameter (" +
        scalarTypeName(target.scalar_type()) + " " +
        plan::formatShape(target.sizes().vec()) + "), got " +
        (value.defined() ? describeTensor(value) : std::string("undefined")));
  // add_ converts a lower-precision gradient to the buffer's dtype.
  target.add_(value);
}

void GradientBuffers::allocate(size_t engine) {
  EngineBuffers &buffers = engines_[engine];
  if (buffers.flat.defined() || buffers.layout.numel == 0)
    return;
  buffers.flat = buffers.layout.allocate();
  buffers.views = buffers.layout.views(buffers.flat);
}

void GradientBuffers::release(size_t engine) {
  engines_[engine].views.clear();
  engines_[engine].flat = at::Tensor();
}

void GradientBuffers::zero(size_t engine) {
  if (engines_[engine].flat.defined())
    engines_[engine].flat.zero_();
}

int64_t GradientBuffers::bytes(size_t engine) const {
  const FlatLayout &layout = engines_[engine].layout;
  return layout.numel * int64_t(c10::elementSize(layout.dtype));
}

int64_t GradientBuffers::bytes() const {
  int64_t total = 0;
  for (const EngineBuffers &engine : engines_)
    if (engine.flat.defined())
      total += int64_t(engine.flat.nbytes());
  return total;
}

} // namespace ds::runtime
