//===- ConfigTarget.cpp - Fuzzes the DeepSpeed config reader --------------===//
//
// The input is a config's JSON text. The first byte, when it is not JSON
// text, picks the parse context (world size, micro-batch known or not,
// --mixed-precision), so that "auto" and the batch-size checks are reached.
//
//===----------------------------------------------------------------------===//

#include "../ExpectedErrors.h"
#include "../FuzzInput.h"
#include "ds/Config/Config.h"

using namespace ds::config;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ParseContext context;
  if (size > 0 && data[0] >= 0x80) {
    uint8_t pick = data[0];
    context.worldSize = 1 + (pick & 3);
    if (pick & 4)
      context.dataMicroBatch = context.worldSize * (1 + ((pick >> 3) & 3));
    if (pick & 32)
      context.mixedPrecision = (pick & 64) ? DType::BFloat16 : DType::Float16;
    ++data;
    --size;
  }
  std::string text(reinterpret_cast<const char *>(data), size);
  DS_FUZZ_GUARD(
      {
        std::string folder = ds::fuzz::freshScratchFolder();
        ConfigNotes notes;
        ordered_json json = parseJsonText(text, "config.json", &notes);
        parseSessionConfig(json, context, folder);
      },
      DS_FUZZ_ACCEPT(ConfigError))
  return 0;
}
