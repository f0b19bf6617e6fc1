//===- ds-compile.cpp - TorchScript model + DeepSpeed config -> plan ------===//
//
// The compiler driver: a command line over ds::compiler::compile (the same
// pipeline the Python package runs), then writes the plan that ds-run
// executes.
//
//===----------------------------------------------------------------------===//

#include "ds/Compiler/Compile.h"
#include "ds/Plan/PlanFormat.h"
#include "ds/Plan/Report.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;

// --help lists these, not the options LLVM's libraries register.
static cl::OptionCategory toolCategory("ds-compile options");

static cl::opt<std::string> modelPath(cl::Positional, cl::desc("<model.pt>"),
                                      cl::Required, cl::cat(toolCategory));
static cl::list<std::string>
    configs("config",
            cl::desc("DeepSpeed config (JSON); or, once per engine, "
                     "NAME=FILE: the engine of submodule NAME (as Accelerate "
                     "names its DeepSpeed plugins)"),
            cl::value_desc("CFG.json"), cl::OneOrMore, cl::cat(toolCategory));
static cl::list<std::string>
    overrides("set",
              cl::desc("Set a config key (repeatable): a dotted path such "
                       "as optimizer.params.lr, or engines.NAME.PATH for one "
                       "engine; replaces \"auto\" (docs/config.md)"),
              cl::value_desc("KEY=VALUE"), cl::cat(toolCategory));
static cl::opt<std::string> mixedPrecision(
    "mixed-precision",
    cl::desc("What \"auto\" in bf16.enabled / fp16.enabled means: bf16, "
             "fp16 or no (the default)"),
    cl::value_desc("bf16|fp16|no"), cl::cat(toolCategory));
static cl::list<std::string> exampleInputs(
    "example-inputs",
    cl::desc("Data file whose shapes the plan is specialised on; repeat it, "
             "or give a list of per-micro-step dicts, for one forward and "
             "backward per distinct shape (the first: the plan's batch "
             "size)"),
    cl::value_desc("DATA"), cl::OneOrMore, cl::cat(toolCategory));
static cl::opt<unsigned> worldSize("world-size",
                                   cl::desc("Data-parallel ranks"), cl::init(1),
                                   cl::cat(toolCategory));
static cl::list<std::string> unbatched("unbatched",
                                       cl::desc("Forward argument that is not "
                                                "batched"),
                                       cl::value_desc("NAME"),
                                       cl::cat(toolCategory));
static cl::opt<std::string>
    device("device",
           cl::desc("The device the plan is compiled for: cpu (the default) "
                    "or cuda (that device's autocast lists and generator "
                    "state; recorded as the plan's device)"),
           cl::value_desc("cpu|cuda"), cl::init("cpu"), cl::cat(toolCategory));
static cl::opt<std::string> outputPath("o", cl::desc("Plan file to write"),
                                       cl::value_desc("PLAN"), cl::Required,
                                       cl::cat(toolCategory));
static cl::opt<std::string>
    dumpIR("dump-ir", cl::desc("Also write the final IR to this file"),
           cl::value_desc("FILE"), cl::cat(toolCategory));

static cl::opt<bool>
    printRemarks("remarks",
                 cl::desc("Print the passes' decisions to stderr: each "
                          "engine's precision (which ops run in which "
                          "dtype), its buckets' communication dtypes, leaf "
                          "modules"),
                 cl::cat(toolCategory));

static cl::opt<std::string> reportPath(
    "report",
    cl::desc("Also write the predicted memory and communication report "
             "(JSON, docs/runtime.md \"Reports\") and print its summary"),
    cl::value_desc("FILE.json"), cl::cat(toolCategory));

static int fail(const std::string &message) {
  llvm::WithColor::error(llvm::errs(), "ds-compile") << message << "\n";
  return 1;
}

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  cl::HideUnrelatedOptions(toolCategory);
  cl::ParseCommandLineOptions(argc, argv,
                              "TorchScript model + DeepSpeed config -> plan\n");

  if (device != "cpu" && device != "cuda") {
    llvm::WithColor::error(llvm::errs(), "ds-compile")
        << "--device must be cpu or cuda, got '" << device << "'\n";
    return 2;
  }

  ds::compiler::CompileOptions options;
  options.modelPath = modelPath;
  options.device = device;
  // One plain file, or NAME=FILE per engine (a file whose own name holds
  // '=' still reads as a file).
  if (configs.size() == 1 && (configs.front().find('=') == std::string::npos ||
                              llvm::sys::fs::exists(configs.front())))
    options.configPath = configs.front();
  else
    options.engineConfigFiles = configs;
  options.mixedPrecision = mixedPrecision;
  options.configOverrides = overrides;
  options.exampleInputsPaths = exampleInputs;
  options.worldSize = worldSize;
  options.unbatched = unbatched;
  options.keepFinalIR = !dumpIR.empty();
  std::string error;
  auto result = ds::compiler::compile(options, error);
  if (!result)
    return fail(error);
  for (const std::string &warning : result->warnings)
    llvm::WithColor::warning(llvm::errs(), "ds-compile") << warning << "\n";
  if (printRemarks)
    for (const std::string &remark : result->remarks)
      llvm::WithColor::remark(llvm::errs(), "ds-compile") << remark << "\n";

  if (!dumpIR.empty()) {
    std::error_code ec;
    llvm::raw_fd_ostream out(dumpIR, ec);
    if (ec)
      return fail("cannot write " + dumpIR + ": " + ec.message());
    out << *result->findIR("final") << "\n";
  }
  try {
    ds::plan::writePlan(result->plan, outputPath);
    if (!reportPath.empty()) {
      // The JSON for tools, a summary for people ("<= N" where a figure
      // rests on bounds of data-dependent sizes).
      ds::plan::Report report = ds::plan::predictReport(result->plan);
      ds::plan::writeReport(report, reportPath);
      llvm::outs() << ds::plan::reportToText(report);
    }
  } catch (const std::exception &e) {
    return fail(e.what());
  }
  return 0;
}
