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
#include "ds/TensorIO/Safetensors.h"

#include <ATen/core/Tensor.h>

#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

namespace ds::runtime {

/// The weights kind of a file given without one (ds-run --weights): "pt2"
/// for a zip whose archive_format says so (by content), "safetensors" for a
/// .safetensors name, else "torchscript".
std::string weightsKindOf(const std::string &path);

class StateStore {
public:
  /// Empty tensors until one of the load functions runs. `plan` must outlive
  /// the store.
  /// Every tensor loaded is placed on `device`.
  explicit StateStore(const plan::Plan &plan,
                      c10::Device device = c10::Device(c10::kCPU));
  c10::Device device() const { return device_; }

  /// Parameters (named_parameters) and buffers (named_buffers) of a
  /// TorchScript archive. Throws RuntimeError on any mismatch.
  /// `keepMissingBuffers` (after an earlier load): buffers the file lacks
  /// keep their values, as non-persistent buffers (Llama's rotary inv_freq)
  /// are left out of state dicts; keptBuffers() lists them.
  void loadTorchScript(const std::string &path,
                       bool keepMissingBuffers = false);
  /// Every state entry from a .safetensors file keyed by qualified name.
  void loadSafetensors(const std::string &path,
                       bool keepMissingBuffers = false);
  /// Parameters and buffers (by is_param) of a .pt2 written by
  /// torch.export.save, read in place from its zip: the weights and the
  /// non-persistent buffers among its constants. Of tied names, those the
  /// plan lacks are dropped when the plan has another.
  void loadPt2(const std::string &path, bool keepMissingBuffers = false);
  /// One of the above: `kind` is "torchscript", "safetensors" or "pt2".
  void load(const std::string &kind, const std::string &path,
            bool keepMissingBuffers = false);
  /// Checks `tensors` against the plan and takes them. `source` names them
  /// in errors. Entries whose kind is unknown (safetensors) match either.
  void install(const NamedTensors &params, const NamedTensors &buffers,
               const NamedTensors &unkinded, const std::string &source,
               bool keepMissingBuffers = false);
  /// The buffers the last load kept because its file lacked them.
  const std::vector<std::string> &keptBuffers() const { return keptBuffers_; }

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

  /// ZeRO stage 3: entry `index` (a parameter of a sharded bucket) is no
  /// longer held whole: this rank keeps only its block, elsewhere.
  /// tensor(index) is undefined and read(index) a RuntimeError until
  /// attach() gives it a view of the gathered bucket; `home` names the
  /// bucket in that error ("bucket 0 of engine \"model\""). Later loads
  /// pass the whole new value to `store` (which keeps the rank's block of
  /// it), and copy it into the attached view, if any.
  void shard(int64_t index, std::string home,
             std::function<void(const at::Tensor &whole)> store);
  /// The bucket was gathered: entry `index` is `view` (a view of it) until
  /// detach().
  void attach(int64_t index, const at::Tensor &view);
  /// The bucket was released: the entry is unavailable again.
  void detach(int64_t index);
  /// Whether entry `index` was given to shard().
  bool sharded(int64_t index) const { return !homes_[size_t(index)].empty(); }
  /// What a `state` op reads: tensor(index), or a RuntimeError naming the
  /// parameter and its bucket when it is sharded and not gathered.
  const at::Tensor &read(int64_t index) const;
  /// Bytes of all state tensors held now (a sharded entry counts only while
  /// attached: a view of its gathered bucket).
  int64_t bytes() const;
  /// (name, tensor) in plan order, for saving. RuntimeError when an entry
  /// is sharded and not gathered (ZeRO stage 3): Engine::gatherState()
  /// gathers every parameter whole, collectively.
  NamedTensors named() const;

private:
  const plan::Plan &plan_;
  c10::Device device_;
  std::vector<at::Tensor> tensors_;
  std::vector<bool> bound_;
  /// Stage 3: where each sharded entry lives ("" for the others), and what
  /// takes a later load of it.
  std::vector<std::string> homes_;
  std::vector<std::function<void(const at::Tensor &)>> stores_;
  std::unordered_map<std::string, int64_t> index_;
  bool loaded_ = false;
  std::vector<std::string> keptBuffers_;
};

} // namespace ds::runtime

#endif // DS_RUNTIME_STATESTORE_H
