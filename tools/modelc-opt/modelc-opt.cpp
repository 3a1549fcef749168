// modelc-opt: mlir-opt with the mc dialect and modelc's passes.
#include "codegen/Target.h"
#include "ir/MCDialect.h"
#include "ir/SourceLimits.h"
#include "modelc/fileio.h"
#include "passes/Passes.h"

#include "mlir/Bytecode/BytecodeReader.h"
#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/SourceMgr.h"
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
  mlir::MlirOptMainConfig config = mlir::MlirOptMainConfig::createFromCLOptions();
  // Listings read no input: mlir-opt's own driver prints them.
  if (config.shouldShowDialects() || config.shouldListPasses())
    return mlir::asMainReturnCode(
        mlir::MlirOptMain(argc, argv, input, output, registry));
  // The input through modelc's limits (regular file, size, nesting), for
  // standard input too, before MLIR parses it: a FIFO would hang the open,
  // deep nesting overflow the parser's stack.
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> buffer = mc::loadMlirSource(input, &error);
  if (!buffer) {
    llvm::errs() << "modelc-opt: error: " << error << "\n";
    return 1;
  }
  // Bytecode is read first in a context of our own, through the guarded
  // reader (mc::guardBytecodeReader: attribute cycles, unchecked builtin
  // types), which MlirOptMain's own parse cannot use: a file it refuses
  // stops here, with its diagnostics. Bytecode can also nest attributes
  // (parsed without recursion, but printed and walked with it): they are
  // measured on this parse.
  if (mlir::isBytecode(buffer->getMemBufferRef())) {
    mlir::MLIRContext scratch(registry);
    scratch.allowUnregisteredDialects(config.shouldAllowUnregisteredDialects());
    std::string diagnostics;
    llvm::raw_string_ostream diagnosticStream(diagnostics);
    llvm::SourceMgr noSources; // bytecode locations have no source line
    mlir::SourceMgrDiagnosticHandler handler(noSources, &scratch,
                                             diagnosticStream);
    mlir::Block block;
    mlir::ParserConfig parserConfig(&scratch, /*verifyAfterParse=*/false);
    mc::guardBytecodeReader(parserConfig, buffer->getBuffer());
    if (mlir::failed(mlir::readBytecodeFile(buffer->getMemBufferRef(), &block,
                                            parserConfig))) {
      llvm::errs() << diagnostics;
      return 1;
    }
    for (mlir::Operation &op : block)
        if (auto where = mc::findExcessAttributeNesting(&op)) {
          llvm::errs() << "modelc-opt: error: "
                       << (input == "-" ? std::string("<stdin>") : input)
                       << ": nesting deeper than " << mc::kMaxMlirNesting
                       << " in " << *where << "\n";
          return 1;
        }
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  if (mlir::failed(mlir::MlirOptMain(os, std::move(buffer), registry, config)))
    return 1;
  os.flush();
  // Whole or not at all: a full disk leaves the old file and no partial one.
  if (output == "-") {
    llvm::outs() << text;
    llvm::outs().flush();
    if (llvm::outs().has_error()) {
      std::string why = llvm::outs().error().message();
      llvm::outs().clear_error();
      llvm::errs() << "modelc-opt: error: cannot write to standard output: "
                   << why << "\n";
      return 1;
    }
    return 0;
  }
  mc::rt::Status st =
      mc::rt::writeFileAtomically(output, text.data(), text.size());
  if (!st) {
    llvm::errs() << "modelc-opt: error: " << st.message() << "\n";
    return 1;
  }
  return 0;
}
