//===- EngineCheckpoint.cpp - save_checkpoint, load_checkpoint, 16-bit ----===//
//
// The ranks' side of a checkpoint: which folders, which rank writes which
// file, and the agreement steps that make a save all-or-nothing and a load
// all-or-nothing. A save writes into DIR/.<tag>.partial; once every rank
// reports its files written, rank 0 writes the manifest of every rank's
// file sizes and hashes (ds_manifest.json) into it, renames the staging
// folder to DIR/<tag> and only then writes DIR/latest (a multi-engine plan:
// each engine's folder, then the top-level DIR/latest last). A load first
// checks the files against their manifest, then reads and checks everything
// on every rank, agrees, then copies.
//
//===----------------------------------------------------------------------===//

#include "ds/Runtime/Engine.h"

#include "CheckpointEngine.h"
#include "CheckpointFiles.h"
#include "CheckpointManifest.h"
#include "CheckpointRanks.h"
#include "Trainer.h"

#include "ds/Runtime/Communicator.h"
#include "ds/Runtime/StateStore.h"
#include "ds/TensorIO/RuntimeError.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>

namespace ds::runtime {

using detail::EngineContext;

namespace {

/// The folder of plan engine `engine`'s checkpoints: DIR for a one-engine
/// plan (DeepSpeed's layout), DIR/<engine> for several.
std::string engineFolder(const plan::Plan &plan, const std::string &dir,
                         size_t engine) {
  if (plan.engines.size() == 1)
    return dir;
  return dir + "/" + plan.engines[engine].name;
}

/// Whether save_16bit_model skips the engine: ZeRO stage 3 (trainable or
/// frozen, both sharded) without stage3_gather_16bit_weights_on_model_save.
bool skips16Bit(const plan::EngineDesc &desc) {
  return desc.partition && desc.partition->stage == 3 &&
         !desc.gather16BitWeightsOnModelSave;
}

/// Whether `name` is a parameter the engine trains (in its flat partition
/// and the engine has an optimizer).
bool trainsParam(const plan::EngineDesc &desc, const std::string &name) {
  if (!desc.optimizer || !desc.partition)
    return false;
  for (const plan::FlatParamDesc &param : desc.partition->params)
    if (param.name == name)
      return true;
  return false;
}

/// Why save_16bit_model left out `skipped` (engine names).
std::string skipMessage(const std::vector<std::string> &skipped,
                        bool savedOthers) {
  const bool several = skipped.size() > 1;
  std::string names;
  for (const std::string &name : skipped)
    names += (names.empty() ? "\"" : ", \"") + name + "\"";
  return std::string("save_16bit_model: engine") + (several ? "s " : " ") +
         names +
         (several ? " are ZeRO stage 3 and their configs do not set "
                  : " is ZeRO stage 3 and its config does not set ") +
         "zero_optimization.stage3_gather_16bit_weights_on_model_save: " +
         (savedOthers ? "not saved (the other engines are)" : "nothing saved") +
         " (ds-zero-to-fp32 rebuilds the weights from a checkpoint)";
}

} // namespace

void Engine::requireCheckpointPoint(const char *call) const {
  requireTrain(call);
  if (phase_ != Phase::Idle ||
      microSteps_ % trainer_->gradientAccumulationSteps() != 0)
    throw RuntimeError(origin_ + ": " + call +
                       ": call it between optimizer steps (after the step() "
                       "that ends an accumulation window, before the next "
                       "forward()); micro-step " +
                       std::to_string(microSteps_) + " is inside a window");
}

std::string Engine::saveCheckpoint(const std::string &dir,
                                   const std::string &tagArg,
                                   const SaveCheckpointOptions &options) {
  requireCheckpointPoint("save_checkpoint");
  const std::string tag =
      tagArg.empty() ? "global_step" + std::to_string(globalSteps_) : tagArg;
  detail::checkTag(tag);
  detail::RunCounters counters{globalSteps_, microSteps_, seed()};
  std::vector<size_t> saved;
  for (size_t e = 0; e < plan_->engines.size(); ++e)
    if (plan_->engines[e].optimizer || options.includeFrozen)
      saved.push_back(e);

  // Each step: every rank does its part, then all agree before the next. An
  // error on any rank becomes every rank's (naming its file); the staging
  // folders go (what a full disk holds is freed); `latest` stays.
  auto agreed = [&](const std::function<void()> &part, bool publishing) {
    std::string error;
    try {
      part();
    } catch (const std::exception &caught) {
      error = caught.what();
    }
    error = detail::firstError(communicator_.get(), error);
    if (error.empty())
      return;
    if (rank_ == 0)
      for (size_t e : saved) {
        try {
          detail::removeTree(
              detail::stagingFolder(engineFolder(*plan_, dir, e), tag));
        } catch (const std::exception &) {
          // Best effort: the next save of the tag removes it too.
        }
      }
    throw RuntimeError("save_checkpoint " + dir + "/" + tag + ": " + error +
                       (publishing ? ""
                                   : "; nothing was published (`latest` "
                                     "still names the previous checkpoint)"));
  };
  // Rank 0 prepares and publishes the folders of the saved engines.
  auto eachFolder = [&](const std::function<void(const std::string &)> &body) {
    if (rank_ == 0)
      for (size_t e : saved)
        body(engineFolder(*plan_, dir, e));
  };
  agreed(
      [&] {
        eachFolder([&](const std::string &folder) {
          detail::makeDirectories(folder);
          std::string staging = detail::stagingFolder(folder, tag);
          detail::removeTree(staging);
          detail::makeDirectories(staging);
        });
      },
      false);
  // This rank's files: detail::digestLine()s, for the manifests.
  std::string digests;
  // One engine at a time, each ending in an agreement: building the optim
  // states is a collective (the ranks gather DeepSpeed's partitions), so a
  // rank whose write failed must not leave the others alone in the next
  // engine's gather. Every rank reaches the same collectives in the same
  // order: the engine's gather, then the agreement on its files.
  for (size_t e : saved)
    agreed(
        [&] {
          EngineContext context{*plan_,
                                e,
                                *state_,
                                trainer_.get(),
                                rank_,
                                worldSize(),
                                communicator_.get()};
          std::string staging =
              detail::stagingFolder(engineFolder(*plan_, dir, e), tag);
          auto write = [&](const std::string &name, const c10::IValue &value) {
            digests += detail::digestLine(
                e, name,
                detail::writeTorchFile(staging + "/" + name, value, rank_));
          };
          const int64_t stage = context.stage();
          // First the optim states (the collective), which every rank must
          // reach before any can fail on a file.
          c10::IValue optimStates;
          if (context.trains() && stage >= 1)
            optimStates = detail::buildOptimStates(context, counters);
          if (stage == 3 || rank_ == 0)
            write(detail::modelStatesFile(stage, rank_),
                  detail::buildModelStates(context, counters));
          if (context.trains() && stage >= 1)
            write(detail::optimStatesFile(rank_,
                                          context.desc().precision &&
                                              context.desc().precision->mode ==
                                                  plan::PrecisionMode::BF16),
                  optimStates);
        },
        false);
  // Every rank's digests reach rank 0, which writes each engine's manifest
  // into its staging folder: published with the folder, so that a published
  // folder always has its complete manifest.
  std::vector<std::string> allDigests =
      detail::gatherText(communicator_.get(), digests);
  agreed(
      [&] {
        if (rank_ == 0) {
          std::map<size_t, detail::Manifest> manifests;
          for (size_t r = 0; r < allDigests.size(); ++r)
            detail::addDigestLines(manifests, allDigests[r],
                                   "rank " + std::to_string(r));
          for (const auto &entry : manifests)
            if (std::find(saved.begin(), saved.end(), entry.first) ==
                saved.end())
              throw RuntimeError("internal error: file digests for engine " +
                                 std::to_string(entry.first) +
                                 ", which this save does not write");
          for (size_t e : saved)
            detail::writeManifest(
                detail::stagingFolder(engineFolder(*plan_, dir, e), tag),
                manifests[e]);
        }
      },
      false);
  agreed(
      [&] {
        eachFolder([&](const std::string &folder) {
          detail::publishFolder(detail::stagingFolder(folder, tag),
                                folder + "/" + tag);
          detail::writeLatest(folder, tag);
        });
        // Last: the tag every engine's folder holds complete.
        if (rank_ == 0 && plan_->engines.size() > 1)
          detail::writeLatest(dir, tag);
      },
      true);
  return tag;
}

std::string Engine::loadCheckpoint(const std::string &dir,
                                   const std::string &tagArg) {
  requireCheckpointPoint("load_checkpoint");
  std::string tag;
  std::vector<std::string> folders(plan_->engines.size());
  std::string error;
  std::string remarks;
  // First the folders, each checked against its manifest before anything
  // reads it: the ranks split the hashing, and agree.
  try {
    tag = tagArg.empty() ? detail::readLatest(dir) : tagArg;
    detail::checkTag(tag);
    for (size_t e = 0; e < plan_->engines.size(); ++e) {
      EngineContext context{*plan_,         e,     *state_,
                            trainer_.get(), rank_, worldSize()};
      std::string folder = engineFolder(*plan_, dir, e) + "/" + tag;
      // Frozen engines are saved only on request.
      if (!context.trains() && !detail::isDirectory(folder))
        continue;
      if (!detail::isDirectory(folder))
        throw RuntimeError("cannot load checkpoint " + folder +
                           ": no such folder" +
                           (plan_->engines.size() > 1
                                ? " (engine \"" + plan_->engines[e].name + "\")"
                                : std::string()));
      std::string remark = detail::verifyFolder(folder, rank_, worldSize());
      if (!remark.empty())
        remarks += "remark: load_checkpoint: " + remark + "\n";
      folders[e] = folder;
    }
  } catch (const std::exception &caught) {
    error = caught.what();
  }
  error = detail::firstError(communicator_.get(), error);
  if (!error.empty())
    throw RuntimeError(error);
  if (rank_ == 0 && !remarks.empty()) {
    std::fputs(remarks.c_str(), stderr);
    std::fflush(stderr);
  }

  std::vector<detail::LoadedEngine> loaded(plan_->engines.size());
  std::vector<bool> present(plan_->engines.size(), false);
  try {
    for (size_t e = 0; e < plan_->engines.size(); ++e) {
      if (folders[e].empty())
        continue;
      EngineContext context{*plan_,         e,     *state_,
                            trainer_.get(), rank_, worldSize()};
      loaded[e] = detail::readEngineCheckpoint(context, folders[e]);
      present[e] = true;
    }
  } catch (const std::exception &caught) {
    error = caught.what();
  }
  // As above: every rank names the file at fault ("on rank R: ...").
  error = detail::firstError(communicator_.get(), error);
  if (!error.empty())
    throw RuntimeError(error);

  const detail::LoadedEngine *counters = nullptr;
  for (size_t e = 0; e < plan_->engines.size(); ++e) {
    if (!present[e])
      continue;
    detail::applyEngineCheckpoint(
        EngineContext{*plan_, e, *state_, trainer_.get(), rank_, worldSize()},
        loaded[e]);
    if (!counters && plan_->engines[e].optimizer)
      counters = &loaded[e];
  }
  if (counters) {
    globalSteps_ = counters->counters.globalSteps;
    microSteps_ = counters->counters.microSteps;
    if (counters->seedSaved)
      trainer_->setSeed(counters->counters.seed);
  }
  // Several engines: one folder per engine below DIR, each DIR/<engine>/<tag>.
  return plan_->engines.size() > 1 ? dir : dir + "/" + tag;
}

bool Engine::save16bitModel(const std::string &dir, const std::string &filename,
                            bool excludeFrozen, std::string *message) {
  if (filename.empty() || filename.find('/') != std::string::npos)
    throw RuntimeError("save_16bit_model: '" + filename +
                       "' is not a file name");
  // Per plan engine, as DeepSpeed's save_16bit_model is per engine.
  std::vector<size_t> saved;
  std::vector<std::string> skipped;
  for (size_t e = 0; e < plan_->engines.size(); ++e) {
    if (skips16Bit(plan_->engines[e]))
      skipped.push_back(plan_->engines[e].name);
    else
      saved.push_back(e);
  }
  if (!saved.empty()) {
    // Stage 3: a collective (each rank holds its shards only).
    std::map<std::string, at::Tensor> whole;
    for (auto &[name, tensor] : gatherState())
      whole.emplace(name, tensor);
    std::string error;
    if (rank_ == 0) {
      try {
        for (size_t e : saved) {
          EngineContext context{*plan_,         e,     *state_,
                                trainer_.get(), rank_, worldSize()};
          NamedTensors named;
          for (int64_t index : context.stateIndices()) {
            const plan::StateDesc &state = plan_->state[size_t(index)];
            if (excludeFrozen && state.kind != plan::StateKind::Buffer &&
                !trainsParam(context.desc(), state.name))
              continue;
            named.emplace_back(context.localName(state.name),
                               whole.at(state.name));
          }
          const std::string folder = engineFolder(*plan_, dir, e);
          detail::makeDirectories(folder);
          writeTorchStateDict(folder + "/" + filename, named);
        }
      } catch (const std::exception &caught) {
        error = caught.what();
      }
    }
    // Every rank reports rank 0's error ("on rank 0: cannot write ...").
    error = detail::firstError(communicator_.get(), error);
    if (!error.empty())
      throw RuntimeError("save_16bit_model: " + error);
  }
  if (skipped.empty())
    return true;
  if (message)
    *message = skipMessage(skipped, !saved.empty());
  return false;
}

} // namespace ds::runtime
