// modelc-opt: mlir-opt with the mc dialect and modelc's passes.
#include "codegen/Target.h"
#include "ir/MCDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char** argv) {
  mlir::registerTransformsPasses();
  mc::registerAllPasses();
  mc::codegen::registerTargets();
  mlir::DialectRegistry registry;
  registry.insert<mc::MCDialect, mlir::func::FuncDialect,
                  mlir::ml_program::MLProgramDialect>();
  mlir::func::registerInlinerExtension(registry);
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "modelc optimizer driver (mc dialect)\n", registry));
}
