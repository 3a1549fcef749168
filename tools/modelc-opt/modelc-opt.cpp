// modelc-opt: mlir-opt with the mc dialect and modelc's passes.
#include "codegen/Target.h"
#include "ir/MCDialect.h"
#include "ir/SourceLimits.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char** argv) {
  mlir::registerTransformsPasses();
  mc::registerAllPasses();
  mc::codegen::registerTargets();
  mlir::DialectRegistry registry;
  registry.insert<mc::MCDialect, mlir::func::FuncDialect,
                  mlir::ml_program::MLProgramDialect>();
  mlir::func::registerInlinerExtension(registry);
  auto [input, output] = mlir::registerAndParseCLIOptions(
      argc, argv, "modelc optimizer driver (mc dialect)\n", registry);
  // The input's limits (regular file, size, nesting) before MLIR opens and
  // parses it: a FIFO would hang the open, deep nesting overflow the stack.
  if (input != "-") {
    std::string error;
    if (!mc::loadMlirSource(input, &error)) {
      llvm::errs() << "modelc-opt: error: " << error << "\n";
      return 1;
    }
  }
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, input, output, registry));
}
