// What the compiler-side fuzz targets (MlirFuzz.cpp, OnnxFuzz.cpp) check
// once a module is parsed or imported.
#ifndef MODELC_TEST_FUZZ_COMPILECHECK_H
#define MODELC_TEST_FUZZ_COMPILECHECK_H

#include "codegen/Compile.h"
#include "modelc/model.h"

#include "mlir/IR/Diagnostics.h"

#include <cstdlib>
#include <memory>
#include <string>

namespace mc::fuzz {

/// Compiles MODULE for the cpu target to artifact bytes, in memory, as
/// `modelc compile` does. A failure with a diagnostic is fine; aborts (a
/// finding) where the artifact writer's own check refuses what the
/// compiler made, or the runtime refuses to load what it wrote.
inline void compileAndCheck(mlir::ModuleOp module) {
  bool writerBug = false;
  mlir::ScopedDiagnosticHandler handler(
      module->getContext(), [&](mlir::Diagnostic &d) {
        if (d.str().find("produced an invalid artifact") != std::string::npos)
          writerBug = true;
        return mlir::success();
      });
  codegen::CompileOptions options; // the cpu target, as `modelc compile`
  auto artifact = codegen::compileToArtifact(module, options);
  if (writerBug)
    std::abort();
  if (mlir::failed(artifact))
    return;
  std::unique_ptr<rt::Model> model;
  if (!rt::Model::loadMemory(artifact->data(), artifact->size(), "fuzz.mcpk",
                             &model))
    std::abort();
}

} // namespace mc::fuzz

#endif // MODELC_TEST_FUZZ_COMPILECHECK_H
