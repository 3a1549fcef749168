// End to end: eager results == trace -> compile -> .mcpk -> runtime results.
// Eager mode and the CPU runtime run the same kernels, so compiled f32
// outputs are expected within 1e-5 relative error (the f32 bar of
// ARCHITECTURE.md); in practice they are bit-identical unless the pipeline
// reorders arithmetic.
#include "codegen/ArtifactWriter.h"
#include "codegen/Compile.h"
#include "frontend/jit/Trace.h"
#include "modelc/runtime.h"

#include "mlir/IR/BuiltinOps.h"

#include "RuntimeHarness.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

using namespace mc;

namespace {

using test::runArtifact;
using test::take;

std::vector<uint8_t> compile(jit::TracedModule& tm) {
  auto bytes = codegen::compileToArtifact(tm.module(), {});
  EXPECT_TRUE(mlir::succeeded(bytes));
  return mlir::succeeded(bytes) ? *bytes : std::vector<uint8_t>{};
}

void expectClose(const Tensor& compiled, const Tensor& eager, double tol) {
  ASSERT_EQ(compiled.shape(), eager.shape());
  ASSERT_EQ(compiled.dtype(), eager.dtype());
  double err = relativeError(compiled, eager);
  EXPECT_FALSE(std::isnan(err));
  EXPECT_LE(err, tol) << "compiled " << compiled.describe();
}

std::shared_ptr<nn::Sequential> makeMlp(int64_t in, int64_t hidden,
                                        int64_t out) {
  return std::make_shared<nn::Sequential>(
      std::initializer_list<std::shared_ptr<nn::Module>>{
          std::make_shared<nn::Linear>(in, hidden),
          std::make_shared<nn::ReLU>(),
          std::make_shared<nn::Linear>(hidden, hidden),
          std::make_shared<nn::Tanh>(),
          std::make_shared<nn::Linear>(hidden, out),
          std::make_shared<nn::Softmax>(1)});
}

class MlpEndToEnd : public ::testing::TestWithParam<int64_t> {};

TEST_P(MlpEndToEnd, CompiledEqualsEager) {
  manualSeed(123);
  auto mlp = makeMlp(64, 128, 10);
  Tensor x = Tensor::randn({GetParam(), 64});
  Tensor eager = (*mlp)(x);
  jit::TracedModule tm = jit::trace(*mlp, x);
  std::vector<Tensor> out = runArtifact(compile(tm), {x});
  ASSERT_EQ(out.size(), 1u);
  expectClose(out[0], eager, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Batches, MlpEndToEnd,
                         ::testing::Values(1, 3, 8, 64));

TEST(EndToEnd, ThroughTextAndBytecodeFiles) {
  manualSeed(5);
  auto mlp = makeMlp(16, 32, 4);
  Tensor x = Tensor::randn({5, 16});
  Tensor eager = (*mlp)(x);
  std::string dir = ::testing::TempDir();
  jit::trace(*mlp, x).save(dir + "/e2e.mlir");
  jit::trace(*mlp, x).save(dir + "/e2e.mlirbc", true);
  for (const char* name : {"/e2e.mlir", "/e2e.mlirbc"}) {
    jit::TracedModule loaded = jit::TracedModule::load(dir + name);
    std::vector<Tensor> out = runArtifact(compile(loaded), {x});
    ASSERT_EQ(out.size(), 1u);
    expectClose(out[0], eager, 1e-5);
  }
}

/// Every op of the dialect in one function, several inputs and outputs,
/// an output that is an input and one that is a view.
TEST(EndToEnd, EveryOpMultipleInputsAndOutputs) {
  manualSeed(9);
  Tensor w = Tensor::randn({2, 5, 3});
  auto fn = [&](const std::vector<Tensor>& in) {
    const Tensor& a = in[0]; // [2, 4, 5]
    const Tensor& b = in[1]; // [4, 5]
    Tensor pos = exp(a) + 0.5;
    Tensor t = sub(log(pos), sqrt(pos)) / (sigmoid(a) + 1.0);
    t = maximum(t, neg(tanh(a)) * b); // broadcast b over the batch
    Tensor m = matmul(t, w);          // [2, 4, 3]
    Tensor mt = matmul(t, transpose(t, {0, 2, 1}), false, false); // [2,4,4]
    Tensor r = relu(m) + mean(m, {2}, true) - amax(m, {1}, true);
    Tensor s = softmax(sum(mt, {0}), 1); // [4, 4]
    Tensor c = cast(cast(r, DType::BF16), DType::F32);
    Tensor flat = reshape(c, {2, 12});
    return std::vector<Tensor>{flat, s, a, reshape(b, {20})};
  };
  std::vector<Tensor> inputs = {Tensor::randn({2, 4, 5}),
                                Tensor::randn({4, 5})};
  std::vector<Tensor> eager = fn(inputs);
  jit::TracedModule tm = jit::traceFunction(fn, inputs, {{"w", w}});
  std::vector<Tensor> out = runArtifact(compile(tm), inputs);
  ASSERT_EQ(out.size(), eager.size());
  for (size_t i = 0; i < out.size(); ++i)
    expectClose(out[i], eager[i], 1e-5);
}

/// mc-split-reductions (on for cuda; forced on here for the CPU, whose
/// kernels run the rewritten graph): every kind of split (rows then the
/// batch's columns, one trailing run, one long dim reshaped, the last dim
/// kept, keepdim, bf16 summed in f32) against eager's one reduction. Max
/// and min are the same values; sums and means differ by rounding.
TEST(EndToEnd, SplitReductionsMatchOneReduction) {
  manualSeed(21);
  auto fn = [](const std::vector<Tensor>& in) {
    const Tensor& a = in[0]; // [32, 1024]: one row of 32768 per output
    const Tensor& b = in[1]; // [8, 16, 32, 32]: a batch norm's statistics
    const Tensor& c = in[2]; // [20000]: one long dim
    const Tensor& d = in[3]; // [4096, 10]: the last dim kept
    return std::vector<Tensor>{
        sum(a, {0, 1}),
        mean(a, {0, 1}, true),
        amax(a, {0, 1}),
        amin(a, {1, 0}),
        mean(b, {0, 2, 3}, true),
        sum(b, {0, 2, 3}),
        amax(c, {0}),
        sum(c, {0}),
        sum(d, {0}),
        amin(d, {0}, true),
        cast(sum(cast(a, DType::BF16), {0, 1}), DType::F32),
    };
  };
  std::vector<Tensor> inputs = {
      Tensor::uniform({32, 1024}, 0.5f, 1.5f),
      Tensor::randn({8, 16, 32, 32}),
      Tensor::uniform({20000}, -1.0f, 3.0f),
      Tensor::uniform({4096, 10}, 0.0f, 2.0f),
  };
  std::vector<Tensor> eager = fn(inputs);
  size_t reductions[2] = {0, 0};
  for (bool split : {false, true}) {
    jit::TracedModule tm = jit::traceFunction(fn, inputs, {});
    codegen::CompileOptions options;
    options.splitReductions = split;
    ASSERT_TRUE(mlir::succeeded(
        codegen::runCompilePipeline(tm.module(), options)));
    tm.module().walk([&](mlir::Operation* op) {
      if (op->getName().getStringRef().starts_with("mc.reduce_"))
        ++reductions[split];
    });
    auto plan = codegen::buildPlan(tm.module(), options);
    ASSERT_TRUE(mlir::succeeded(plan));
    std::vector<uint8_t> bytes;
    ASSERT_TRUE(bool(codegen::writeArtifactToBytes(*plan, &bytes)));
    std::vector<Tensor> out = runArtifact(bytes, inputs);
    ASSERT_EQ(out.size(), eager.size());
    for (size_t i = 0; i < out.size(); ++i) {
      SCOPED_TRACE("output " + std::to_string(i) +
                   (split ? " (split)" : " (one reduction)"));
      bool exact = i == 2 || i == 3 || i == 6 || i == 9;
      // bf16's sum: eager rounds once to bf16 too, from an f32 total.
      double tol = exact ? 0.0 : i == 10 ? 1.0 / 128 : 1e-5;
      expectClose(out[i], eager[i], tol);
    }
  }
  // Every reduction split (the bf16 sum's and the 20000-long one's twice).
  EXPECT_GE(reductions[1], 2 * reductions[0]) << reductions[0];
}

/// A real compiled artifact with any single byte flipped is refused at load
/// (every byte is covered by a CRC, the identifier or a zero-padding check)
/// — never run with corrupt weights, never a crash.
TEST(EndToEnd, EveryCorruptedByteOfARealArtifactIsRefused) {
  manualSeed(3);
  auto mlp = makeMlp(8, 8, 3);
  jit::TracedModule tm = jit::trace(*mlp, Tensor::randn({2, 8}));
  std::vector<uint8_t> good = compile(tm);
  ASSERT_FALSE(good.empty());
  mc_model_t* model = nullptr;
  ASSERT_EQ(take(mc_model_load_memory(good.data(), good.size(), "good",
                                      &model)),
            "");
  mc_model_free(model);
  size_t accepted = 0;
  for (size_t i = 0; i < good.size(); ++i) {
    std::vector<uint8_t> bad = good;
    bad[i] ^= 0x5a;
    model = nullptr;
    std::string err =
        take(mc_model_load_memory(bad.data(), bad.size(), "bad", &model));
    if (err.empty()) {
      ++accepted;
      ADD_FAILURE() << "byte " << i << " of " << good.size()
                    << " flipped and the artifact still loaded";
      mc_model_free(model);
    }
    if (accepted > 5)
      break;
  }
}

} // namespace
