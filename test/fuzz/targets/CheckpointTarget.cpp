//===- CheckpointTarget.cpp - Fuzzes the checkpoint readers ---------------===//
//
// The input is a checkpoint folder packed as records (FuzzInput.h): `latest`
// and the tag folder's files (model and optimizer states, ds_manifest.json).
// Read twice: as ds-zero-to-fp32 reads it (the manifest check, then every
// rank's shards), and through the readers --resume applies before it
// matches the files against the plan (the manifest, the model states'
// stage, precision and frozen shapes, the optimizer states of each stage).
//
//===----------------------------------------------------------------------===//

#include "../ExpectedErrors.h"
#include "../FuzzInput.h"
#include "CheckpointFiles.h"
#include "CheckpointManifest.h"
#include "ds/Runtime/Checkpoint.h"
#include "ds/TensorIO/RuntimeError.h"

#include <c10/util/Exception.h>

using namespace ds::runtime;
using namespace ds::runtime::detail;

namespace {

bool endsWith(const std::string &text, std::string_view tail) {
  return text.size() >= tail.size() &&
         text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

/// What readEngineCheckpoint reads from one file before the plan matters.
void readAsResumeWould(const std::string &folder, const std::string &name) {
  std::string path = folder + "/" + name;
  if (endsWith(name, "model_states.pt")) {
    DictView model(readTorchFile(path), path);
    savedZeroStage(model, 0);
    savedTrainable(model);
    savedPrecision(model);
    frozenParamShapes(model);
  } else if (endsWith(name, "optim_states.pt")) {
    for (int64_t stage = 1; stage <= 3; ++stage) {
      try {
        readOptimStates(path, stage);
      } catch (const RuntimeError &) {
      }
    }
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::vector<ds::fuzz::Record> records = ds::fuzz::splitRecords(data, size);
  std::string folder = ds::fuzz::freshScratchFolder();
  for (const auto &[name, bytes] : records)
    ds::fuzz::writeFile(folder, name, bytes);
  DS_FUZZ_GUARD(consolidateCheckpoint(folder),
                DS_FUZZ_ACCEPT(RuntimeError) DS_FUZZ_ACCEPT(c10::Error))
  for (const auto &record : records) {
    const std::string &name = record.first;
    size_t slash = name.find('/');
    if (slash == std::string::npos)
      continue;
    std::string tagFolder = folder + "/" + name.substr(0, slash);
    DS_FUZZ_GUARD(
        {
          if (name.substr(slash + 1) == kManifestFile)
            verifyFolder(tagFolder);
          else
            readAsResumeWould(tagFolder, name.substr(slash + 1));
        },
        DS_FUZZ_ACCEPT(RuntimeError) DS_FUZZ_ACCEPT(c10::Error))
  }
  return 0;
}
