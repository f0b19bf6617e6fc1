//===- ds-zero-to-fp32.cpp - Whole fp32 weights from checkpoint shards ----===//
//
// DeepSpeed's zero_to_fp32.py for the checkpoints the runtime writes (any
// ZeRO stage, any world size): consolidateCheckpoint() rebuilds the state
// dict, writeStateDict() writes it. Errors: one line on stderr, exit 1
// (usage errors: exit 2).
//
//===----------------------------------------------------------------------===//

#include "ds/Runtime/Checkpoint.h"

#include <c10/util/Exception.h>

#include <cctype>
#include <cstdio>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

const char *kUsage =
    R"(usage: ds-zero-to-fp32 CHECKPOINT_DIR OUT_DIR [--tag TAG] [--safetensors]
                       [--max-shard-size SIZE]

Rebuilds whole fp32 weights (every parameter and buffer) from a checkpoint
written by ds-run --save-checkpoint or Engine.save_checkpoint, of any ZeRO
stage (0-3) and any world size, and writes them into OUT_DIR. Every file is
first checked against the checkpoint's ds_manifest.json (sizes and XXH64
hashes): a changed, cut or missing file is an error naming it; a checkpoint
without a manifest (DeepSpeed's) is read with a remark.

  CHECKPOINT_DIR        the folder holding `latest` and the tag folders (for
                        a multi-engine plan: one engine's folder, DIR/<engine>)
  OUT_DIR               created if needed
  --tag TAG             the checkpoint to read (default: CHECKPOINT_DIR/latest)
  --safetensors         write model.safetensors instead of pytorch_model.bin
                        (torch.save format)
  --max-shard-size SIZE split the output into shards of at most SIZE bytes
                        (an integer with an optional unit: KB, MB, GB are
                        powers of 1000, KiB, MiB, GiB of 1024) with an index
                        (pytorch_model.bin.index.json or
                        model.safetensors.index.json), named as Hugging Face
                        names them; default: one file
  -h, --help            show this help
)";

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// "10MB" -> 10000000, "1KiB" -> 1024, "500" -> 500.
int64_t parseSize(const std::string &text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit((unsigned char)text[digits]))
    ++digits;
  std::string unit = text.substr(digits);
  for (char &c : unit)
    c = char(std::toupper((unsigned char)c));
  const std::vector<std::pair<std::string, int64_t>> units = {
      {"", 1},
      {"B", 1},
      {"KB", 1000},
      {"MB", 1000000},
      {"GB", 1000000000},
      {"KIB", 1024},
      {"MIB", 1 << 20},
      {"GIB", int64_t(1) << 30}};
  for (const auto &[name, factor] : units)
    if (digits > 0 && digits <= 12 && unit == name) {
      int64_t value = std::stoll(text.substr(0, digits)) * factor;
      if (value > 0)
        return value;
    }
  throw UsageError("--max-shard-size: '" + text +
                   "' is not a positive size (e.g. 5000, 10KB, 2MiB)");
}

struct Options {
  std::vector<std::string> positional;
  std::string tag;
  bool safetensors = false;
  int64_t maxShardBytes = 0;
  bool help = false;
};

Options parseOptions(int argc, char **argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        throw UsageError("option " + arg + " needs a value");
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help")
      options.help = true;
    else if (arg == "--tag")
      options.tag = value();
    else if (arg == "--safetensors")
      options.safetensors = true;
    else if (arg == "--max-shard-size")
      options.maxShardBytes = parseSize(value());
    else if (arg.size() > 1 && arg[0] == '-')
      throw UsageError("unknown option '" + arg + "'");
    else
      options.positional.push_back(arg);
  }
  if (!options.help && options.positional.size() != 2)
    throw UsageError("expected CHECKPOINT_DIR and OUT_DIR, got " +
                     std::to_string(options.positional.size()) +
                     " argument(s)");
  return options;
}

} // namespace

int main(int argc, char **argv) {
  try {
    Options options = parseOptions(argc, argv);
    if (options.help) {
      std::cout << kUsage;
      return 0;
    }
    ds::runtime::ConsolidatedCheckpoint checkpoint =
        ds::runtime::consolidateCheckpoint(options.positional[0], options.tag);
    for (const std::string &remark : checkpoint.remarks)
      std::fprintf(stderr, "ds-zero-to-fp32: remark: %s\n", remark.c_str());
    std::vector<std::string> files =
        ds::runtime::writeStateDict(options.positional[1], checkpoint.tensors,
                                    options.safetensors, options.maxShardBytes);
    std::cout << "ds-zero-to-fp32: " << checkpoint.tensors.size()
              << " tensors from " << checkpoint.path << " (ZeRO stage "
              << checkpoint.stage << ", " << checkpoint.worldSize
              << " rank(s)) ->";
    for (const std::string &file : files)
      std::cout << " " << options.positional[1] << "/" << file;
    std::cout << "\n";
    return 0;
  } catch (const UsageError &error) {
    std::fprintf(stderr, "ds-zero-to-fp32: error: %s (see --help)\n",
                 error.what());
    return 2;
  } catch (const c10::Error &error) {
    std::fprintf(stderr, "ds-zero-to-fp32: error: %s\n",
                 error.what_without_backtrace());
  } catch (const std::exception &error) {
    std::fprintf(stderr, "ds-zero-to-fp32: error: %s\n", error.what());
  }
  return 1;
}
