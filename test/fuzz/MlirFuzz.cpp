// libFuzzer target: .mlir text or .mlirbc bytecode through what
// `modelc compile IN.mlir -o OUT.mcpk` runs, in memory: modelc's pre-scans
// (ir/SourceLimits.h), MLIR's parser and verifier, the attribute check of
// bytecode, then the cpu compile pipeline to artifact bytes. The first byte
// picks the format: even, the rest is text; odd, the rest is bytecode (the
// 4-byte magic is put in front where a mutation took it away, so mutants
// still reach the bytecode reader). Any error is fine; a crash, a sanitizer
// report, or an artifact the runtime's verifier refuses is a finding. Seeds:
// test/fuzz/corpus/mlir (`0` + text, `1` + bytecode). Run by scripts/fuzz.
#include "CompileCheck.h"
#include "frontend/jit/Trace.h"
#include "ir/SourceLimits.h"

#include "mlir/Bytecode/BytecodeReader.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

#include <cstdint>
#include <cstring>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  bool bytecode = data[0] & 1;
  llvm::StringRef rest(reinterpret_cast<const char *>(data + 1), size - 1);
  std::string bytes = bytecode && !rest.starts_with("ML\xefR")
                          ? "ML\xefR" + rest.str()
                          : rest.str();
  // Page-aligned like the mapped file the tool reads: bytecode sections may
  // ask for alignment (and the pre-scan pads them by address, as MLIR does).
  auto buffer = llvm::WritableMemoryBuffer::getNewUninitMemBuffer(
      bytes.size(), "fuzz.mlir", llvm::Align(4096));
  std::memcpy(buffer->getBufferStart(), bytes.data(), bytes.size());
  std::string error;
  llvm::StringRef text(buffer->getBufferStart(), buffer->getBufferSize());
  if (!mc::checkMlirSource(text, "fuzz.mlir", &error))
    return 0;

  auto context = mc::jit::createContext();
  context->disableMultithreading(); // no thread pool per input
  mlir::ScopedDiagnosticHandler silent(
      context.get(), [](mlir::Diagnostic &) { return mlir::success(); });
  mlir::ParserConfig parserConfig(context.get());
  mc::guardBytecodeReader(parserConfig, text);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(buffer), llvm::SMLoc());
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, parserConfig);
  if (!module)
    return 0;
  if (bytecode && mc::findExcessAttributeNesting(*module))
    return 0;
  mc::fuzz::compileAndCheck(*module);
  return 0;
}
