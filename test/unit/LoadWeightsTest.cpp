// codegen::loadWeights (`modelc compile --weights CKPT.mcst`): a checkpoint's
// tensors replace the model's globals by name; what does not fit is an error
// naming it, what is missing or extra a warning naming it.
#include "codegen/Compile.h"
#include "frontend/jit/Trace.h"
#include "modelc/checkpoint.h"

#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <string>
#include <unistd.h>
#include <vector>

namespace {

using namespace mlir;
using mc::rt::CheckpointEntry;
using mc::rt::DType;

const char* kModel = R"mlir(
ml_program.global private @w(dense<0.5> : tensor<2x3xf32>) : tensor<2x3xf32>
ml_program.global private @b(dense<0.25> : tensor<2xf32>) : tensor<2xf32>
ml_program.global private @n(dense<7> : tensor<i64>) : tensor<i64>
func.func @forward(%x: tensor<4x3xf32>) -> tensor<4x2xf32> {
  %w = ml_program.global_load_const @w : tensor<2x3xf32>
  %y = mc.matmul %x, %w transpose_b : tensor<4x3xf32>, tensor<2x3xf32> -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}
)mlir";

struct Loaded {
  bool ok = false;
  std::string diagnostics;
  std::vector<float> w;
  int64_t n = 0;
};

/// Writes `entries` as a checkpoint, loads it into kModel, and returns the
/// result, the diagnostics and the values of @w and @n after.
Loaded load(const std::vector<CheckpointEntry>& entries) {
  std::string path =
      ::testing::TempDir() + "/weights." + std::to_string(::getpid()) + ".mcst";
  EXPECT_TRUE(mc::rt::writeCheckpointFile(path, entries, "{}"));
  mc::rt::Checkpoint ckpt;
  EXPECT_TRUE(mc::rt::readCheckpointFile(path, &ckpt));
  std::unique_ptr<MLIRContext> ctx = mc::jit::createContext();
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kModel, ctx.get());
  EXPECT_TRUE(module);
  Loaded r;
  {
    ScopedDiagnosticHandler capture(ctx.get(), [&](Diagnostic& d) {
      r.diagnostics += d.str() + "\n";
      return success();
    });
    r.ok = succeeded(mc::codegen::loadWeights(*module, ckpt, path));
  }
  for (auto g : module->getOps<ml_program::GlobalOp>()) {
    auto value = llvm::cast<DenseElementsAttr>(*g.getValue());
    if (g.getSymName() == "w")
      for (float v : value.getValues<float>())
        r.w.push_back(v);
    if (g.getSymName() == "n")
      r.n = *value.getValues<int64_t>().begin();
  }
  return r;
}

CheckpointEntry entry(const std::string& name, DType t,
                      std::vector<int64_t> shape, const void* data,
                      uint64_t bytes) {
  CheckpointEntry e;
  e.name = name;
  e.dtype = t;
  e.shape = std::move(shape);
  e.data = static_cast<const uint8_t*>(data);
  e.byteSize = bytes;
  return e;
}

TEST(LoadWeights, CheckpointValuesReplaceTheGlobalsByName) {
  std::vector<float> w = {1, 2, 3, 4, 5, 6}, b = {-1, -2}, m(6, 9.0f);
  int64_t n = 42;
  Loaded r = load({entry("w", DType::F32, {2, 3}, w.data(), 24),
                   entry("b", DType::F32, {2}, b.data(), 8),
                   entry("n", DType::I64, {}, &n, 8),
                   // The optimizer's state is no weight: left out quietly.
                   entry("w.exp_avg", DType::F32, {2, 3}, m.data(), 24),
                   entry("optimizer.step", DType::I64, {}, &n, 8)});
  EXPECT_TRUE(r.ok) << r.diagnostics;
  EXPECT_EQ(r.diagnostics, "");
  EXPECT_EQ(r.w, w);
  EXPECT_EQ(r.n, 42);
}

TEST(LoadWeights, MissingAndUnknownTensorsAreWarningsNamingThem) {
  std::vector<float> w = {1, 2, 3, 4, 5, 6}, v(4, 1.0f);
  Loaded r = load({entry("w", DType::F32, {2, 3}, w.data(), 24),
                   entry("head.weight", DType::F32, {4}, v.data(), 16)});
  EXPECT_TRUE(r.ok) << r.diagnostics;
  EXPECT_EQ(r.w, w);
  EXPECT_NE(r.diagnostics.find(
                "--weights: 1 of the model's 2 weights are not in the "
                "checkpoint and keep the model file's values (frozen while "
                "training?): b"),
            std::string::npos)
      << r.diagnostics;
  EXPECT_NE(r.diagnostics.find("--weights: 1 of the checkpoint's 2 tensors "
                               "name no weight of the model and are left "
                               "out: head.weight"),
            std::string::npos)
      << r.diagnostics;
}

TEST(LoadWeights, ATypeOrShapeThatDiffersIsAnErrorNamingTheWeight) {
  std::vector<float> w(8, 1.0f);
  Loaded r = load({entry("w", DType::F32, {2, 4}, w.data(), 32)});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.diagnostics.find("holds 'w' as f32[2, 4], but the model's is "
                               "f32[2, 3] (a checkpoint of another model, or "
                               "of another size?)"),
            std::string::npos)
      << r.diagnostics;
  std::vector<int32_t> n32 = {7};
  r = load({entry("n", DType::I32, {}, n32.data(), 4)});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.diagnostics.find("holds 'n' as i32[], but the model's is i64[]"),
            std::string::npos)
      << r.diagnostics;
}

TEST(LoadWeights, ACheckpointOfNoneOfTheWeightsIsAnError) {
  std::vector<float> e(15, 1.0f);
  Loaded r = load({entry("emb", DType::F32, {5, 3}, e.data(), 60)});
  EXPECT_FALSE(r.ok);
  // (@n, an integer, is no weight: not listed.)
  EXPECT_NE(r.diagnostics.find("holds none of the model's weights (the "
                               "model's: w b; the checkpoint's: emb)"),
            std::string::npos)
      << r.diagnostics;
}

} // namespace
