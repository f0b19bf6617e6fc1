//===- PlanTarget.cpp - Fuzzes the plan reader and validator --------------===//
//
// The input is a plan file's text, read with readPlan as ds-run reads it.
//
//===----------------------------------------------------------------------===//

#include "../ExpectedErrors.h"
#include "../FuzzInput.h"
#include "ds/Plan/PlanError.h"
#include "ds/Plan/PlanFormat.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  DS_FUZZ_GUARD(
      {
        std::string folder = ds::fuzz::freshScratchFolder();
        std::string path = ds::fuzz::writeFile(
            folder, "model.plan",
            std::string_view(reinterpret_cast<const char *>(data), size));
        ds::plan::readPlan(path);
      },
      DS_FUZZ_ACCEPT(ds::plan::PlanError))
  return 0;
}
