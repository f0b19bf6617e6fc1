//===- StateStore.h - Parameters and buffers of a plan ----------*- C++ -*-===//
//
// Owns one tensor per entry of the plan's `state`, in the plan's order, and
// fills them from a weights file whose names, kinds, shapes and dtypes must
// match the plan exactly. Programs read state through `state` ops (no copy)
// and replace buffers through `set_state` (copied into the storage, so that
// every reader sees the new value).
//
//===----------------------------------------------------------------------===//

#ifndef DS_RUNTIME_STATESTORE_H
#define DS_RUNTIME_STATESTORE_H

#include "ds/Plan/Plan.h"
#include "ds/Runtime/Safetensors.h"

#include <ATen/core/Tensor.h>

#include <string>
#include <unordered_map>
#include <vector>

namespace ds::runtime {

class StateStore {
public:
  /// Empty tensors until one of the load functions runs. `plan` must outlive
  /// the store.
  explicit StateStore(const plan::Plan &plan);

  /// Parameters (named_parameters) and buffers (named_buffers) of a
  /// TorchScript archive. Throws RuntimeError on any mismatch.
  void loadTorchScript(const std::string &path);
  /// Every state entry from a .safetensors file keyed by qualified name.
  void loadSafetensors(const std::string &path);
  /// Either of the above: `kind` is "torchscript" or "safetensors".
  void load(const std::string &kind, const std::string &path);
  /// Checks `tensors` against the plan and takes them. `source` names them
  /// in errors. Entries whose kind is unknown (safetensors) match either.
  void install(const NamedTensors &params, const NamedTensors &buffers,
               const NamedTensors &unkinded, const std::string &source);

  bool loaded() const { return loaded_; }
  size_t size() const { return tensors_.size(); }
  /// Position in the plan's `state`, or -1.
  int64_t indexOf(const std::string &name) const;
  const plan::StateDesc &desc(int64_t index) const;
  const at::Tensor &tensor(int64_t index) const { return tensors_[index]; }
  /// Copies `value` into the storage of entry `index` (set_state). Throws
  /// RuntimeError if its dtype or shape differs from the plan's.
  void assign(int64_t index, const at::Tensor &value);
  /// Moves entry `index` into `storage` (same dtype and shape; a view of a
  /// ZeRO engine's flat parameter buffer): its current value is copied in,
  /// and from then on the entry is that view. Later loads copy into it
  /// instead of replacing it, so every holder of the flat buffer sees them.
  void bind(int64_t index, const at::Tensor &storage);
  /// Whether entry `index` lives in storage given to bind().
  bool bound(int64_t index) const { return bound_[size_t(index)]; }
  /// Bytes of all state tensors.
  int64_t bytes() const;
  /// (name, tensor) in plan order, for saving.
  NamedTensors named() const;

private:
  const plan::Plan &plan_;
  std::vector<at::Tensor> tensors_;
  std::vector<bool> bound_;
  std::unordered_map<std::string, int64_t> index_;
  bool loaded_ = false;
};

} // namespace ds::runtime

#endif // DS_RUNTIME_STATESTORE_H
