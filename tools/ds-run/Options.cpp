//===- Options.cpp - ds-run command line ----------------------------------===//
//
// A small hand-written parser: no CLI library is packaged on the build
// machines. Accepts "--flag value" and "--flag=value"; "--" ends options.
//
//===----------------------------------------------------------------------===//

#include "Options.h"

#include <cerrno>
#include <cstdlib>

namespace ds::run {

std::string usageText() {
  return R"(usage: ds-run PLAN --data DATA [--steps N] [--eval] [options]

Trains a plan written by ds-compile on a data file (or, with --eval, runs
its forward only). On W data-parallel ranks, launch it with Open MPI:
  mpirun -n W ds-run PLAN ...      (the plan must be compiled with
                                    ds-compile --world-size W)

  PLAN                  the plan file (JSON, see docs/plan-format.md)
  --data DATA           training data: a torch.save dict or a .safetensors
                        file, one tensor per forward argument keyed by name
                        or by position (in0, in1, ...), shaped [S, B, ...]
  --steps N             optimizer steps to run (each consumes
                        gradient_accumulation_steps micro-steps); default:
                        as many whole steps as the data holds
  --eval                run the plan's eval program (forward only, no
                        updates) and report the loss per step
  --losses OUT.jsonl    also write the loss lines to this file (atomically,
                        when the run ends)
  --save-params OUT.safetensors
                        write the parameters and buffers, keyed by
                        qualified name, when the run ends (atomically)
  --report OUT.json     write the measured memory and communication report
                        of every rank (bytes of parameters, gradients,
                        optimizer state, peak; elements communicated per
                        optimizer step), atomically, when training ends
  --save-checkpoint DIR save a DeepSpeed checkpoint (DIR/global_step<N>/,
                        DIR/latest; multi-engine plans: DIR/<engine>/...)
                        when the run ends, and every --save-every steps
  --save-every N        also save after every N-th optimizer step
  --save-frozen         also save the frozen engines of a multi-engine plan
  --save-16bit DIR      DeepSpeed's save_16bit_model when the run ends: the
                        whole weights in their stored dtype as
                        DIR/pytorch_model.bin (multi-engine plans:
                        DIR/<engine>/pytorch_model.bin); a ZeRO-3 engine
                        whose config does not set stage3_gather_16bit_
                        weights_on_model_save is skipped with a warning
  --save-16bit-file NAME
                        the file name instead of pytorch_model.bin
  --save-16bit-exclude-frozen
                        leave out the parameters that do not train
  --trace FILE.json     write a Chrome / Perfetto trace of the training run
                        per rank, FILE.rank<r>.json: each op by module
                        path, collectives from start to completion, waits,
                        optimizer steps (docs/tracing.md)
  --resume DIR          load DIR's latest checkpoint (parameters, optimizer
                        state, LR schedule, step counters, seed) and go on
                        from its step to --steps, reading the data from
                        where it left off; the ZeRO stage, GAS and shapes
                        must match, another world size is re-sharded
                        (docs/checkpoint.md)
  --device D            where the plan runs: cpu, cuda (= cuda:LOCAL_RANK)
                        or cuda:N; default: the device the plan was
                        compiled for (ds-compile --device). Without a
                        visible GPU, cuda is an error, never the CPU
  --seed S              the seed of dropout masks and every random draw
                        (an integer >= 0); overrides the plan's "seed";
                        default 0
  --unbatched NAME      forward argument NAME is not batched: shaped [S, ...]
                        in the data file, every rank gets it whole
                        (repeatable; must agree with the plan)
  --weights W           initial weights replacing the plan's: a .safetensors
                        file keyed by qualified name, a .pt2 of
                        torch.export.save (known by its content), or a
                        TorchScript archive
  -h, --help            show this help

Output: one JSON line per optimizer step on stdout,
  {"step": 1, "loss": L, "lr": .., "grad_norm": .., "loss_scale": 1.0,
   "skipped": false}
L being the mean over ranks and micro-steps; plans whose forward returns
several losses also get "losses": [...] (one per output) and L is their sum.
--eval lines have "step" and "loss" (and "losses") only. Errors: one line on
stderr, exit code 1.
)";
}

namespace {

class ArgReader {
public:
  ArgReader(int argc, char **argv) : args_(argv + 1, argv + argc) {}

  bool done() const { return next_ >= args_.size(); }
  std::string take() { return args_[next_++]; }

  /// The value of `flag`: after '=' in the same argument, else the next one.
  std::string value(const std::string &flag,
                    const std::optional<std::string> &inlineValue) {
    if (!inlineValue && done())
      throw UsageError("option " + flag + " needs a value");
    std::string text = inlineValue ? *inlineValue : take();
    if (!inlineValue && text.size() > 1 && text[0] == '-')
      throw UsageError("option " + flag + " needs a value, found option '" +
                       text + "'");
    if (text.empty())
      throw UsageError("option " + flag + " needs a non-empty value");
    return text;
  }

private:
  std::vector<std::string> args_;
  size_t next_ = 0;
};

/// A decimal integer >= `min`, else a UsageError saying what was expected.
int64_t integerAtLeast(const std::string &flag, const std::string &text,
                       long long min, const char *expected) {
  errno = 0;
  char *end = nullptr;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || value < min)
    throw UsageError(flag + ": '" + text + "' is not " + expected);
  return value;
}

} // namespace

Options parseOptions(int argc, char **argv) {
  Options options;
  ArgReader args(argc, argv);
  bool optionsEnded = false;
  auto setPlan = [&](const std::string &path) {
    if (!options.planPath.empty())
      throw UsageError("unexpected argument '" + path +
                       "' (the plan is already '" + options.planPath + "')");
    options.planPath = path;
  };

  while (!args.done()) {
    std::string arg = args.take();
    if (optionsEnded || arg.empty() || arg[0] != '-' || arg == "-") {
      setPlan(arg);
      continue;
    }
    if (arg == "--") {
      optionsEnded = true;
      continue;
    }
    std::string flag = arg;
    std::optional<std::string> inlineValue;
    if (size_t eq = arg.find('='); eq != std::string::npos && arg[1] == '-') {
      flag = arg.substr(0, eq);
      inlineValue = arg.substr(eq + 1);
    }
    auto noValue = [&] {
      if (inlineValue)
        throw UsageError("option " + flag + " takes no value");
    };

    if (flag == "-h" || flag == "--help") {
      noValue();
      options.help = true;
    } else if (flag == "--eval") {
      noValue();
      options.eval = true;
    } else if (flag == "--data") {
      options.dataPath = args.value(flag, inlineValue);
    } else if (flag == "--steps") {
      options.steps = integerAtLeast(flag, args.value(flag, inlineValue), 1,
                                     "a positive integer");
    } else if (flag == "--device") {
      options.device = args.value(flag, inlineValue);
    } else if (flag == "--seed") {
      options.seed = integerAtLeast(flag, args.value(flag, inlineValue), 0,
                                    "an integer >= 0");
    } else if (flag == "--save-params") {
      options.saveParamsPath = args.value(flag, inlineValue);
    } else if (flag == "--save-checkpoint") {
      options.saveCheckpointDir = args.value(flag, inlineValue);
    } else if (flag == "--save-every") {
      options.saveEvery = integerAtLeast(flag, args.value(flag, inlineValue), 1,
                                         "a positive integer");
    } else if (flag == "--save-frozen") {
      noValue();
      options.saveFrozen = true;
    } else if (flag == "--save-16bit") {
      options.save16BitDir = args.value(flag, inlineValue);
    } else if (flag == "--save-16bit-file") {
      options.save16BitFile = args.value(flag, inlineValue);
    } else if (flag == "--save-16bit-exclude-frozen") {
      noValue();
      options.save16BitExcludeFrozen = true;
    } else if (flag == "--resume") {
      options.resumeDir = args.value(flag, inlineValue);
    } else if (flag == "--trace") {
      options.tracePath = args.value(flag, inlineValue);
    } else if (flag == "--report") {
      options.reportPath = args.value(flag, inlineValue);
    } else if (flag == "--losses") {
      options.lossesPath = args.value(flag, inlineValue);
    } else if (flag == "--unbatched") {
      options.unbatched.push_back(args.value(flag, inlineValue));
    } else if (flag == "--weights") {
      options.weightsPath = args.value(flag, inlineValue);
    } else {
      throw UsageError("unknown option '" + flag + "'");
    }
  }

  if (options.help)
    return options;
  if (options.planPath.empty())
    throw UsageError("missing the plan file (ds-run PLAN --data DATA ...)");
  if (options.dataPath.empty())
    throw UsageError("missing required option --data");
  if (options.eval && !options.tracePath.empty())
    throw UsageError("--trace traces a training run; it cannot be "
                     "combined with --eval");
  if (options.eval && !options.reportPath.empty())
    throw UsageError("--report measures a training run; it cannot be "
                     "combined with --eval");
  if (options.saveCheckpointDir.empty() &&
      (options.saveEvery || options.saveFrozen))
    throw UsageError(
        std::string(options.saveEvery ? "--save-every" : "--save-frozen") +
        " needs --save-checkpoint DIR");
  if (options.save16BitDir.empty() &&
      (options.save16BitFile || options.save16BitExcludeFrozen))
    throw UsageError(std::string(options.save16BitFile
                                     ? "--save-16bit-file"
                                     : "--save-16bit-exclude-frozen") +
                     " needs --save-16bit DIR");
  if (options.eval &&
      !(options.saveCheckpointDir.empty() && options.resumeDir.empty()))
    throw UsageError("--save-checkpoint and --resume belong to training; "
                     "they cannot be combined with --eval");
  if (options.eval && !options.save16BitDir.empty())
    throw UsageError("--save-16bit saves a training run's weights; it cannot "
                     "be combined with --eval");
  return options;
}

} // namespace ds::run
