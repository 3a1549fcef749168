// modelc's passes and pipelines: declarations and registration.
#ifndef MODELC_PASSES_PASSES_H
#define MODELC_PASSES_PASSES_H

#include "ir/MCDialect.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

#include <string>

namespace mc {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// Options of the compile pipeline (see Pipelines.cpp for the order).
struct CompilePipelineOptions {
  std::string target = "cpu";
  std::string entry;
};

/// Appends the inference compile pipeline: inline, canonicalize, cse,
/// contract check.
void buildCompilePipeline(mlir::OpPassManager& pm,
                          const CompilePipelineOptions& options);

/// Registers every mc pass and the `mc-compile-pipeline` pipeline.
void registerAllPasses();

/// Finds the entry function: `name` when given, else the only public
/// func.func. Emits an error on the module and returns null otherwise.
mlir::Operation* findEntryFunction(mlir::ModuleOp module, llvm::StringRef name);

} // namespace mc

#endif // MODELC_PASSES_PASSES_H
