// The tracer: what jit::trace records, saving/loading, and its errors.
#include "frontend/jit/Trace.h"

#include "frontend/TraceHook.h"

#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>

using namespace mc;

namespace {

std::shared_ptr<nn::Sequential> makeMlp() {
  manualSeed(7);
  return std::make_shared<nn::Sequential>(
      std::initializer_list<std::shared_ptr<nn::Module>>{
          std::make_shared<nn::Linear>(6, 5), std::make_shared<nn::ReLU>(),
          std::make_shared<nn::Linear>(5, 3), std::make_shared<nn::Softmax>(1)});
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(Tracer, RecordsNamedParametersAndExplicitBroadcasts) {
  auto mlp = makeMlp();
  jit::TracedModule tm = jit::trace(*mlp, Tensor::randn({4, 6}));
  std::string text = tm.str();
  EXPECT_TRUE(contains(text, "ml_program.global private @\"0.weight\"("))
      << text;
  EXPECT_TRUE(contains(text, "@\"2.bias\"")) << text;
  EXPECT_TRUE(contains(text, "func.func @forward(%arg0: tensor<4x6xf32> "
                             "{mc.name = \"x\"}) -> (tensor<4x3xf32> "
                             "{mc.name = \"out\"})"))
      << text;
  EXPECT_TRUE(contains(text, "mc.matmul %arg0, %") && contains(text, "transpose_b"))
      << text;
  // The bias add broadcasts [5] to [4, 5] explicitly.
  EXPECT_TRUE(contains(text, "mc.broadcast_in_dim %")) << text;
  EXPECT_TRUE(contains(text, "dims = [1] : (tensor<5xf32>) -> tensor<4x5xf32>"))
      << text;
  EXPECT_TRUE(contains(text, "mc.softmax")) << text;
}

/// A BatchNorm2d in training mode, traced with its buffers: they become
/// globals tagged mc.buffer, made mutable, read with global_load and
/// stored (the running update) after everything else; the module's own
/// buffers keep their values (the update belongs to the traced step).
TEST(Tracer, TrainingBatchNormStoresItsRunningStatistics) {
  nn::BatchNorm2d bn(2);
  bn.train();
  jit::TraceOptions options;
  options.buffers = bn.namedBuffers();
  jit::TracedModule tm = jit::traceFunction(
      [&](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{bn(in[0])};
      },
      {Tensor::randn({3, 2, 2, 2})}, bn.namedParameters(), {{"", &bn}},
      options);
  std::string text = tm.str();
  for (const char* name : {"running_mean", "running_var"}) {
    std::string n = name;
    EXPECT_TRUE(contains(text, "ml_program.global private mutable @" + n +
                                   "(dense<"))
        << text;
    EXPECT_TRUE(contains(text, "ml_program.global_load @" + n)) << text;
    EXPECT_TRUE(contains(text, "ml_program.global_store @" + n)) << text;
  }
  EXPECT_TRUE(contains(text, "{mc.buffer}")) << text;
  EXPECT_FALSE(contains(text, "global_load_const @running")) << text;
  // Stores come last, after the batch_norm that reads the statistics.
  EXPECT_LT(text.find("mc.batch_norm"), text.find("global_store")) << text;
  EXPECT_EQ(bn.runningMean.toVector(), std::vector<float>(2, 0.0f));
  EXPECT_EQ(bn.runningVar.toVector(), std::vector<float>(2, 1.0f));
}

TEST(Tracer, ParameterValuesAreKept) {
  auto mlp = makeMlp();
  jit::TracedModule tm = jit::trace(*mlp, Tensor::randn({1, 6}));
  // Every parameter becomes one global named after it, holding exactly its
  // values (bit for bit: f32 in, f32 out) and its shape.
  std::map<std::string, Tensor> params;
  for (auto& [name, p] : mlp->namedParameters())
    params.emplace(name, p);
  ASSERT_EQ(params.size(), 4u);
  size_t globals = 0;
  for (auto global : tm.module().getOps<mlir::ml_program::GlobalOp>()) {
    ++globals;
    std::string name = global.getSymName().str();
    auto it = params.find(name);
    ASSERT_NE(it, params.end()) << "a global for no parameter: " << name;
    auto value =
        llvm::dyn_cast_or_null<mlir::DenseElementsAttr>(global.getValueAttr());
    ASSERT_TRUE(value) << name;
    std::vector<int64_t> shape(value.getType().getShape().begin(),
                               value.getType().getShape().end());
    EXPECT_EQ(shape, it->second.shape()) << name;
    std::vector<float> got(value.getValues<float>().begin(),
                           value.getValues<float>().end());
    std::vector<float> want = it->second.toVector();
    ASSERT_EQ(got.size(), want.size()) << name;
    // Random initial values, so a global filled with zeros, the wrong
    // parameter's values or a transposed copy all fail here.
    EXPECT_EQ(got, want) << name;
  }
  EXPECT_EQ(globals, params.size());
}

TEST(Tracer, OpsAreLocatedByModulePath) {
  auto mlp = makeMlp();
  std::string dir = ::testing::TempDir();
  jit::TracedModule tm = jit::trace(*mlp, Tensor::randn({2, 6}));
  tm.save(dir + "/loc.mlir");
  std::ifstream in(dir + "/loc.mlir");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_TRUE(contains(text, "loc(\"0 (Linear)\")")) << text;
  EXPECT_TRUE(contains(text, "loc(\"3 (Softmax)\")")) << text;
}

TEST(Tracer, CapturesLiteralsAsConstants) {
  Tensor w = Tensor::fromVector({1, 2, 3}, {3});
  jit::TracedModule tm = jit::traceFunction(
      [&](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{in[0] * 2.0 + w};
      },
      {Tensor::randn({2, 3})}, {{"w", w}});
  std::string text = tm.str();
  EXPECT_TRUE(contains(text, "mc.constant dense<2.000000e+00> : tensor<f32>"))
      << text;
  EXPECT_TRUE(contains(text, "ml_program.global private @w(dense<[1.000000e+00, "
                             "2.000000e+00, 3.000000e+00]>"))
      << text;
}

TEST(Tracer, SharedParameterIsOneGlobal) {
  Tensor w = Tensor::randn({3, 3});
  jit::TracedModule tm = jit::traceFunction(
      [&](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{matmul(matmul(in[0], w), w)};
      },
      {Tensor::randn({2, 3})}, {{"w", w}, {"alias", w}});
  std::string text = tm.str();
  EXPECT_TRUE(contains(text, "@w(")) << text;
  EXPECT_FALSE(contains(text, "@alias")) << text;
}

TEST(Tracer, SavesAndLoadsTextAndBytecode) {
  auto mlp = makeMlp();
  jit::TracedModule tm = jit::trace(*mlp, Tensor::randn({4, 6}));
  std::string dir = ::testing::TempDir();
  tm.save(dir + "/m.mlir");
  tm.save(dir + "/m.mlirbc", /*bytecode=*/true);
  std::string original = tm.str();
  EXPECT_EQ(jit::TracedModule::load(dir + "/m.mlir").str(), original);
  EXPECT_EQ(jit::TracedModule::load(dir + "/m.mlirbc").str(), original);
}

TEST(Tracer, LoadReportsFileLineColumn) {
  std::string path = ::testing::TempDir() + "/bad.mlir";
  {
    std::ofstream out(path);
    out << "func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
        << "  %0 = mc.relu %x : tensor<4xf32\n"
        << "}\n";
  }
  try {
    jit::TracedModule::load(path);
    FAIL() << "expected a parse error";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "bad.mlir:2:33: error: expected '>' in tensor type"))
        << e.what();
  }
  EXPECT_THROW(jit::TracedModule::load(path + ".missing"), Error);
}

TEST(Tracer, ErrorsInsideTheTracedFunctionPropagate) {
  EXPECT_THROW(jit::traceFunction(
                   [](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{in[0] + Tensor::zeros({5})};
                   },
                   {Tensor::zeros({2, 3})}, {}),
               Error);
  // The hook is cleared: a stale one would make eager code record into a
  // destroyed tracer (and the next trace refuse to start, "a trace is
  // already active").
  EXPECT_EQ(activeTraceHook(), nullptr);
  EXPECT_NO_THROW((void)(Tensor::zeros({2}) + Tensor::zeros({2})));
  jit::TracedModule next = jit::traceFunction(
      [](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{neg(in[0])};
      },
      {Tensor::zeros({2})}, {});
  EXPECT_EQ(activeTraceHook(), nullptr);
  // Only the new function's op: nothing left over from the failed trace or
  // the eager add in between.
  std::string text = next.str();
  EXPECT_TRUE(contains(text, "mc.neg")) << text;
  EXPECT_FALSE(contains(text, "mc.add")) << text;
}

// A hook that counts what it records: eager ops reach the active hook, and
// only it (what makes the check above on activeTraceHook() meaningful).
struct CountingHook : TraceHook {
  int records = 0;
  void record(const OpRecord&) override { ++records; }
};

TEST(Tracer, HookSeesEagerOpsOnlyWhileInstalled) {
  CountingHook hook;
  setActiveTraceHook(&hook);
  (void)(Tensor::zeros({2}) + Tensor::zeros({2}));
  setActiveTraceHook(nullptr);
  (void)(Tensor::zeros({2}) + Tensor::zeros({2}));
  EXPECT_EQ(hook.records, 1) << "recorded while installed, not after";
}

} // namespace

namespace {

// A dynamic batch: the inputs' leading dim and every dim that follows it
// become `?`, the function gets its bounds, and what would bake one batch
// size in is refused with the op and the sizes.
TEST(Tracer, DynamicBatchMakesTheBatchSymbolic) {
  auto mlp = makeMlp();
  jit::TraceOptions options;
  options.dynamicBatch = jit::DynamicBatch{1, 64, 32};
  jit::TracedModule tm = jit::trace(*mlp, Tensor::randn({4, 6}), options);
  std::string text = tm.str();
  EXPECT_TRUE(contains(text, "func.func @forward(%arg0: tensor<?x6xf32> "
                             "{mc.name = \"x\"}) -> (tensor<?x3xf32> "
                             "{mc.name = \"out\"}) attributes {mc.batch = "
                             "array<i64: 1, 64, 32>}"))
      << text;
  EXPECT_TRUE(contains(text, "dims = [1] : (tensor<5xf32>) -> tensor<?x5xf32>"))
      << text;
  EXPECT_FALSE(contains(text, "4x")) << text;
}

// A [B, S, E] -> [B * S, E] flatten: a multiple of the batch, carried by
// the type's #mc.batch encoding, and back.
TEST(Tracer, DynamicBatchKeepsMultiplesOfTheBatch) {
  jit::TraceOptions options;
  options.dynamicBatch = jit::DynamicBatch{1, 16, 0};
  jit::TracedModule tm = jit::traceFunction(
      [](const std::vector<Tensor>& in) {
        Tensor flat = reshape(in[0], {-1, 3});
        return std::vector<Tensor>{reshape(relu(flat), {-1, 2, 3})};
      },
      {Tensor::randn({4, 2, 3})}, {}, {}, options);
  std::string text = tm.str();
  EXPECT_TRUE(contains(text, "(tensor<?x2x3xf32>) -> tensor<?x3xf32, "
                             "#mc.batch<[2]>>"))
      << text;
  EXPECT_TRUE(contains(text, "mc.relu %0 : tensor<?x3xf32, #mc.batch<[2]>>"))
      << text;
  EXPECT_TRUE(contains(text, "(tensor<?x3xf32, #mc.batch<[2]>>) -> "
                             "tensor<?x2x3xf32>"))
      << text;
}

TEST(Tracer, DynamicBatchKeepsWholeBatchSlicesAndReductions) {
  jit::TraceOptions options;
  options.dynamicBatch = jit::DynamicBatch{2, 16, 0};
  jit::TracedModule tm = jit::traceFunction(
      [](const std::vector<Tensor>& in) {
        Tensor s = slice(in[0], {0, 1}, {in[0].shape()[0], 3}, {1, 1});
        return std::vector<Tensor>{mean(s, {0}), sum(in[0], {1})};
      },
      {Tensor::randn({5, 4})}, {}, {}, options);
  std::string text = tm.str();
  EXPECT_TRUE(contains(text, "limit = [-1, 4]")) << text;
  EXPECT_TRUE(contains(text, "-> tensor<?x3xf32>")) << text;
  EXPECT_TRUE(contains(text, "(tensor<?x3xf32>) -> tensor<3xf32>")) << text;
  EXPECT_TRUE(contains(text, "(tensor<?x4xf32>) -> tensor<?xf32>")) << text;
  EXPECT_TRUE(contains(text, "mc.batch = array<i64: 2, 16, 16>")) << text;
}

std::string traceError(const std::function<std::vector<Tensor>(
                           const std::vector<Tensor>&)>& fn,
                       const std::vector<Tensor>& examples,
                       jit::DynamicBatch bounds) {
  jit::TraceOptions options;
  options.dynamicBatch = bounds;
  try {
    jit::traceFunction(fn, examples, {}, {}, options);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Tracer, DynamicBatchRefusesWhatDependsOnTheBatchOtherwise) {
  auto identity = [](const std::vector<Tensor>& in) { return in; };
  EXPECT_EQ(traceError(identity, {Tensor::randn({4, 3})}, {8, 16, 0}),
            "jit::trace: the examples' batch 4 is outside the dynamic batch "
            "bounds [8, 16]");
  EXPECT_EQ(traceError(identity, {Tensor::randn({4, 3})}, {4, 4, 0}),
            "jit::trace: dynamic batch bounds [4, 4] allow one batch size: "
            "compile a static model instead (an ONNX model: --input-shape "
            "NAME=4x...), or widen the bounds");
  EXPECT_EQ(traceError(identity, {Tensor::randn({4, 3})}, {5, 16, 2}),
            "jit::trace: dynamic batch bounds [5, 16] with opt 2 must "
            "satisfy 1 <= min <= opt <= max");
  EXPECT_EQ(traceError(identity,
                       {Tensor::randn({4, 3}), Tensor::randn({5, 3})},
                       {1, 16, 0}),
            "jit::trace: with a dynamic batch, example input 1 "
            "f32[5, 3] has 5 rows, input 0 has 4; every input's leading "
            "dimension is the batch");
  // A size that is neither static nor a multiple of the batch.
  std::string allButOne = traceError(
      [](const std::vector<Tensor>& in) {
        int64_t n = in[0].shape()[0];
        return std::vector<Tensor>{slice(in[0], {0, 0}, {n - 1, 3}, {1, 1})};
      },
      {Tensor::randn({4, 3})}, {1, 16, 0});
  EXPECT_EQ(allButOne,
            "jit::trace: with a dynamic batch, dimension 0 of the result of "
            "mc.slice (op 0 at forward) is 3 at batch 4 and 4 at batch 5: a "
            "dim may depend on the batch only as a multiple of it");
  // A slice that keeps the first two rows bakes a size in.
  std::string rows = traceError(
      [](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{slice(in[0], {1, 0}, {3, 3}, {1, 1})};
      },
      {Tensor::randn({4, 3})}, {1, 16, 0});
  EXPECT_EQ(rows, "jit::trace: with a dynamic batch, mc.slice (op 0 at "
                  "forward) cannot run at every batch size (an op may not "
                  "index, repeat or reverse along the batch, or meet a "
                  "constant of the batch's size): 'mc.slice' op dimension 0 "
                  "of size "
                  "[?] is sliced from 1 to [4] by 1; the batch (?) can only "
                  "be taken whole (start 0, limit -1, stride 1)");
  // Different ops at different batch sizes.
  std::string branch = traceError(
      [](const std::vector<Tensor>& in) {
        Tensor x = in[0];
        return std::vector<Tensor>{x.shape()[0] % 2 ? relu(x) : exp(x)};
      },
      {Tensor::randn({4, 3})}, {1, 16, 0});
  EXPECT_TRUE(contains(branch, "with a dynamic batch, mc.exp (op 0 at "
                               "forward) is not the op the run at the "
                               "other batch size ran at batch 4 and 5"))
      << branch;
}

} // namespace
