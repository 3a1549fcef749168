// libFuzzer target: the ONNX importer, then the cpu compile pipeline, as
// `modelc compile IN.onnx -o OUT.mcpk` runs them (in memory past the
// import). The importer reads a path, so each input is written to a file in
// a directory of this process's own (under $TMPDIR, else /tmp), reused for
// every input. An mc::Error from the importer or a failed compile is fine;
// a crash, a sanitizer report, another exception (the tool would terminate)
// or an artifact the runtime's verifier refuses is a finding. Seeds:
// test/fuzz/corpus/onnx. Run by scripts/fuzz.
#include "CompileCheck.h"
#include "frontend/Tensor.h"
#include "frontend/onnx/OnnxImporter.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

namespace {

/// The model file all inputs of this process go through (never destroyed:
/// the exit handler that removes it runs after static destructors).
const std::string &modelPath() {
  static const std::string *path = [] {
    const char *tmp = std::getenv("TMPDIR");
    std::string dir =
        std::string(tmp && *tmp ? tmp : "/tmp") + "/modelc-fuzz-onnx-XXXXXX";
    if (!mkdtemp(dir.data()))
      std::abort();
    std::atexit([] {
      std::remove(modelPath().c_str());
      ::rmdir(modelPath().substr(0, modelPath().rfind('/')).c_str());
    });
    return new std::string(dir + "/model.onnx");
  }();
  return *path;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string &path = modelPath();
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(data, 1, size, f) != size || std::fclose(f) != 0)
    std::abort(); // the harness, not the importer
  std::optional<mc::jit::TracedModule> imported;
  try {
    imported.emplace(mc::importOnnx(path));
  } catch (const mc::Error &) {
    return 0;
  }
  mc::fuzz::compileAndCheck(imported->module());
  return 0;
}
