//===- TestUtil.h - Helpers for the plan and runtime unit tests -*- C++ -*-===//
//
// Shared by the gtest suites of the plan library, the tensor files and the
// runtime: temporary directories, the checked-in fixtures (unittests/
// fixtures: plans/ hand-written plans, data/ torch.save files) and builders
// of hand-written plans. Needs only DSPlanFormat, not LibTorch.
//
//===----------------------------------------------------------------------===//

#ifndef DS_UNITTESTS_TESTUTIL_TESTUTIL_H
#define DS_UNITTESTS_TESTUTIL_TESTUTIL_H

#include "ds/Plan/Plan.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ds::test {

/// A fresh directory under $TMPDIR, removed with its contents at the end of
/// the test.
class TempDir {
public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;

  const std::string &path() const { return path_; }
  std::string file(const std::string &name) const { return path_ + "/" + name; }

private:
  std::string path_;
};

/// unittests/fixtures/<relative> in the source tree.
std::string fixture(const std::string &relative);
std::string readText(const std::string &path);
void writeText(const std::string &path, const std::string &text);
/// Names of the entries of `dir` (no "." or "..").
std::vector<std::string> listDir(const std::string &dir);

/// The checked-in plan plans/<name>, parsed but not validated.
plan::ordered_json planJson(const std::string &name);

/// A plan variant of `json` (a plan JSON with eval and train programs) for
/// micro-batches of `rows` rows instead of its own: the same programs, the
/// inputs' values resized and every other value's shape left unknown.
plan::ordered_json batchVariant(const plan::ordered_json &json, int64_t rows);

/// Builds programs for tests: values are appended with fresh ids.
class ProgramBuilder {
public:
  plan::ValueId tensor(plan::DType dtype, std::vector<int64_t> shape);
  plan::ValueId scalar(plan::ValueType type);
  plan::ValueId list(plan::ValueType elem);
  plan::Op &add(plan::Op op);
  /// A call with module info filled in, for error messages.
  plan::Op &call(const std::string &name, std::vector<plan::ValueId> args,
                 std::vector<plan::ValueId> results,
                 std::vector<plan::ValueId> free = {});

  plan::Program program;
};

/// A one-engine plan with the given inputs (batched, micro-batch from the
/// first input's first dimension), no state, and `program` as eval with one
/// "loss" output per result.
plan::Plan makePlan(std::vector<plan::InputDesc> inputs, plan::Program program);

/// ZeRO stage 3 choices of partitionEngine.
struct Stage3Options {
  /// Parameters of at most this many elements go to persistent buckets
  /// (stage3_param_persistence_threshold); 0: none.
  int64_t persistentNumel = 0;
  /// stage3_max_reuse_distance large: a bucket the forward gathers stays
  /// gathered into the backward. false (distance 0): released at the end
  /// of the forward's use and gathered again in the backward.
  bool keepForBackward = false;
};

/// What -ds-zero-partition does, for hand-written plans: lays out engine
/// `engine`'s trainable parameters in plan state order with `gap` padding
/// elements after each, cuts [0, end) into buckets of `bucketElements`
/// rounded up to a multiple of the plan's world_size (the last one padded
/// to a multiple), sets the engine's partition at ZeRO `stage`, and
/// rewrites programs.step for every trainable engine (reductions, waits,
/// optimizer_step, gathers) and, for stages 2-3, places the engine's
/// reduce_scatters in programs.train after the last grad op that writes
/// into each bucket, with their waits at the end of the backward. The
/// engine must have an optimizer.
///
/// Stage 3 keeps parameters whole inside buckets (a bucket closes when the
/// next parameter would take it past `bucketElements`, or when the
/// parameter's persistence differs), marks the persistent ones, and places
/// the sharded buckets' gathers as the contract says (DeepSpeed's
/// behaviour): in programs.train every sharded bucket is all_gather'ed at
/// the start of the forward (a prefetch), waited right before the first op
/// that reads one of its parameters, and released right after the op that
/// frees the last value read from it; the same again in the backward
/// (unless `keepForBackward`); a bucket no op of a part reads is gathered,
/// waited and released at its start. programs.eval gathers the buckets it
/// reads the same way. programs.step gathers the persistent buckets.
void partitionEngine(plan::Plan &plan, const std::string &engine, int64_t stage,
                     int64_t bucketElements, int64_t gap = 0,
                     const Stage3Options &stage3 = {});

/// `json` (a train plan) for `worldSize` ranks with its first engine
/// partitioned by partitionEngine; validated.
plan::Plan zeroPlan(plan::ordered_json json, int64_t worldSize, int64_t stage,
                    int64_t bucketElements, int64_t gap = 0,
                    const Stage3Options &stage3 = {});

/// plans/linear_mse_train.json (as `json`) whose backward also computes
/// dloss/dx = g_y fc.weight (unused; values %15, %16 after
/// mse_loss_backward), so that the backward reads a parameter: at ZeRO
/// stage 3 it gathers fc.weight's bucket again.
plan::ordered_json withBackwardWeightRead(plan::ordered_json json);

/// The default AdamW of the hand-written train plan with `changes` (plan
/// field names: "type", "lr", "momentum", ...) applied.
plan::ordered_json optimizerJson(const plan::ordered_json &changes = {});

} // namespace ds::test

/// Expects `statement` to throw `type` whose what() contains `text`.
#define EXPECT_THROW_WITH(statement, type, text)                               \
  do {                                                                         \
    try {                                                                      \
      statement;                                                               \
      ADD_FAILURE() << "expected " #type " containing: " << (text);            \
    } catch (const type &error) {                                              \
      EXPECT_NE(std::string(error.what()).find(text), std::string::npos)       \
          << "message: " << error.what()                                       \
          << "\nexpected to contain: " << (text);                              \
    }                                                                          \
  } while (0)

#endif // DS_UNITTESTS_TESTUTIL_TESTUTIL_H
