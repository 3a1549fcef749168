// The pass pipelines, registered in one place. The order is fixed here and
// explained next to it.
#include "passes/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void mc::buildCompilePipeline(OpPassManager& pm,
                              const CompilePipelineOptions& options) {
  // 1. Inline helper functions: codegen lowers one straight-line function.
  pm.addPass(createInlinerPass());
  // 2. Canonicalize (folders: x+0, x*1, cast/transpose/reshape chains), then
  //    CSE so a value computed twice is computed once; canonicalize again
  //    since CSE exposes new chains.
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createSymbolDCEPass());
  // 3. Last, the contract: what reaches codegen has static shapes,
  //    supported types and a kernel for every op on the target.
  VerifyContractPassOptions contract;
  contract.target = options.target;
  contract.entry = options.entry;
  pm.addPass(createVerifyContractPass(contract));
}

namespace {
struct CompilePipelineCLOptions
    : public PassPipelineOptions<CompilePipelineCLOptions> {
  Option<std::string> target{*this, "target",
                             llvm::cl::desc("codegen target (cpu)"),
                             llvm::cl::init("cpu")};
  Option<std::string> entry{*this, "entry",
                            llvm::cl::desc("entry function name"),
                            llvm::cl::init("")};
};
} // namespace

void mc::registerAllPasses() {
  registerMCPasses();
  PassPipelineRegistration<CompilePipelineCLOptions>(
      "mc-compile-pipeline",
      "inline, canonicalize, cse and check the codegen contract",
      [](OpPassManager& pm, const CompilePipelineCLOptions& cl) {
        CompilePipelineOptions options;
        options.target = cl.target;
        options.entry = cl.entry;
        buildCompilePipeline(pm, options);
      });
}
