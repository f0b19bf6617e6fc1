//===- CompileBindings.cpp - _dsopt.compile ---------------------------------===//
//
// The native half of dsopt.compile, in the extension module _dsopt_compile:
// the only part of dsopt that links the compiler (MLIR and LLVM). _dsopt (the
// runtime part, Module.cpp) re-exports its compile() when the module is
// there; the runtime-only build has no _dsopt_compile, and dsopt.compile
// then says so. The Plan objects returned are _dsopt's type (pybind11 shares
// registered types between modules built with the same pybind11).
//
//===----------------------------------------------------------------------===//

#include "Errors.h"
#include "PyPlan.h"

#include "ds/Compiler/Compile.h"
#include "ds/Import/Import.h"
#include "ds/Plan/PlanFormat.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"

#include <pybind11/stl.h>

namespace py = pybind11;

namespace dsopt {

namespace {

PyPlan compilePlan(const std::string &modelPath, const std::string &configPath,
                   const std::string &configJson,
                   const std::string &configBaseDir,
                   const std::string &configSourceName,
                   const std::string &exampleInputsPath, unsigned worldSize,
                   const std::vector<std::string> &unbatched, bool keepIR,
                   const std::string &mixedPrecision,
                   const std::vector<std::string> &configOverrides,
                   const std::string &device) {
  if (device != "cpu" && device != "cuda")
    throw py::value_error("device must be 'cpu' or 'cuda', got '" + device +
                          "'");
  ds::compiler::CompileOptions options;
  options.modelPath = modelPath;
  options.configPath = configPath;
  options.configJson = configJson;
  options.configBaseDir = configBaseDir;
  options.configSourceName = configSourceName;
  options.exampleInputsPaths = {exampleInputsPath};
  options.worldSize = worldSize;
  options.unbatched = unbatched;
  options.keepIR = keepIR;
  options.mixedPrecision = mixedPrecision;
  options.configOverrides = configOverrides;
  options.device = device;
  options.producer = "dsopt";
  std::string error;
  std::optional<ds::compiler::CompileResult> result;
  {
    // Importing and the passes take seconds; other Python threads may run.
    py::gil_scoped_release release;
    result = ds::compiler::compile(options, error);
  }
  if (!result)
    throw CompileFailure(error);
  // What the runtime would refuse on load is better refused here.
  ds::plan::validatePlan(result->plan, "<compiled plan>");
  return PyPlan{std::move(result->plan), "<compiled plan>", "",
                std::move(result->irAfterPass), std::move(result->warnings)};
}

/// The imported IR of a model (no passes), as text: what `ds-import` prints.
/// `grow_examples` false types dynamic dims by the per-operator rules alone
/// (ImportOptions::growExamples), for the check that compares the two.
std::string importIR(const std::string &modelPath,
                     const std::string &exampleInputsPath,
                     const std::vector<std::string> &unbatched,
                     bool growExamples) {
  mlir::MLIRContext context;
  context.printOpOnDiagnostic(false);
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
    llvm::raw_string_ostream os(diagnostics);
    os << d.getLocation() << ": " << d << "\n";
    return mlir::success();
  });
  mlir::ds::ImportOptions options;
  options.modelPath = modelPath;
  options.exampleInputsPath = exampleInputsPath;
  options.unbatched = unbatched;
  options.growExamples = growExamples;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  {
    py::gil_scoped_release release;
    try {
      module = mlir::ds::importModel(&context, options);
    } catch (const std::exception &e) {
      throw CompileFailure(std::string("internal error while importing: ") +
                           e.what());
    }
  }
  if (!module)
    throw CompileFailure(diagnostics.empty() ? "import failed" : diagnostics);
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os);
  return text;
}

} // namespace

void bindCompile(py::module_ &m) {
  m.def("import_ir", &importIR, py::arg("model_path"),
        py::arg("example_inputs_path"),
        py::arg("unbatched") = std::vector<std::string>(),
        py::arg("grow_examples") = true);
  m.def("compile", &compilePlan, py::arg("model_path"), py::arg("config_path"),
        py::arg("config_json"), py::arg("config_base_dir"),
        py::arg("config_source_name"), py::arg("example_inputs_path"),
        py::arg("world_size"), py::arg("unbatched"), py::arg("keep_ir"),
        py::arg("mixed_precision") = "",
        py::arg("config_overrides") = std::vector<std::string>(),
        py::arg("device") = "cpu");
}

} // namespace dsopt

PYBIND11_MODULE(_dsopt_compile, m) {
  m.doc() = "dsopt's compiler (import, passes, plan emission; links MLIR): "
            "compile() is re-exported by dsopt._dsopt";
  dsopt::bindCompile(m);
}
