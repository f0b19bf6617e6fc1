//===- DataFileTarget.cpp - Fuzzes the data and weights file readers ------===//
//
// The input is one file: a torch.save pickle archive or a .safetensors file
// (the first byte's low bit picks the extension the reader sees, as ds-run
// picks the reader by it). Read as ds-run reads data files: the stacked
// dict and the list of per-micro-step dicts.
//
//===----------------------------------------------------------------------===//

#include "../ExpectedErrors.h"
#include "../FuzzInput.h"
#include "ds/TensorIO/DataFile.h"
#include "ds/TensorIO/RuntimeError.h"

#include <c10/util/Exception.h>

using namespace ds::runtime;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  const char *name = (data[0] & 1) ? "data.safetensors" : "data.pt";
  std::string_view bytes(reinterpret_cast<const char *>(data + 1), size - 1);
  DS_FUZZ_GUARD(
      {
        std::string path =
            ds::fuzz::writeFile(ds::fuzz::freshScratchFolder(), name, bytes);
        if (!readMicroStepDicts(path))
          readTensorFile(path);
      },
      DS_FUZZ_ACCEPT(RuntimeError) DS_FUZZ_ACCEPT(c10::Error))
  return 0;
}
