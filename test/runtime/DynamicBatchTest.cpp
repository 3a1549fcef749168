// A dynamic batch (schema 2.1): one artifact with batch bounds [1, 64] runs
// batch 1, 7, 32 and 64 and matches both a plain-loop reference and the same
// plan compiled statically at that batch, bit for bit; the session refuses a
// batch outside the bounds and inputs that disagree, naming them; the
// verifier refuses each malformed dynamic table with its own message; the C
// API reports the bounds and the shapes of a run.
#include "TestUtil.h"
#include "modelc/model.h"
#include "modelc/runtime.h"

#include <gtest/gtest.h>
#include <memory>

using namespace mc;
using namespace mc::test;
using codegen::Plan;
using codegen::PlanStep;
using rt::DType;
using rt::Model;
using rt::Session;
using rt::Shape;
using rt::Status;
using K = rt::OpId;

namespace {

struct Outputs {
  std::vector<float> probs, colmean, total;
};

Outputs reference(int64_t batch, const std::vector<float> &x,
                  const std::vector<float> &y) {
  std::vector<float> w = randomFloats(kDIn * kDHidden, 31),
                     b = randomFloats(kDHidden, 32);
  Outputs r;
  std::vector<double> h(size_t(batch) * kDHidden), colsum(kDHidden, 0.0);
  double total = 0;
  for (int64_t i = 0; i < batch; ++i) {
    double mx = -INFINITY, sum = 0;
    for (int j = 0; j < kDHidden; ++j) {
      double s = double(b[j]) + y[i * kDHidden + j];
      for (int k = 0; k < kDIn; ++k)
        s += double(x[i * kDIn + k]) * w[k * kDHidden + j];
      h[i * kDHidden + j] = s < 0 ? 0 : s;
      mx = std::max(mx, h[i * kDHidden + j]);
      colsum[j] += h[i * kDHidden + j];
    }
    for (int j = 0; j < kDHidden; ++j)
      sum += std::exp(h[i * kDHidden + j] - mx);
    for (int j = 0; j < kDHidden; ++j) {
      double p = std::exp(h[i * kDHidden + j] - mx) / sum;
      r.probs.push_back(float(p));
      total += p;
    }
  }
  for (int j = 0; j < kDHidden; ++j)
    r.colmean.push_back(float(colsum[j] / double(batch)));
  r.total.push_back(float(total));
  return r;
}

std::vector<uint8_t> artifact(const Plan &plan) {
  Plan p = plan;
  std::vector<uint8_t> bytes;
  EXPECT_TRUE(codegen::planMemory(p));
  Status st = codegen::writeArtifactToBytes(p, &bytes);
  EXPECT_TRUE(st) << st.message();
  return bytes;
}

std::unique_ptr<Model> load(const std::vector<uint8_t> &bytes) {
  std::unique_ptr<Model> m;
  Status st = Model::loadMemory(bytes.data(), bytes.size(), "dyn.mcpk", &m);
  EXPECT_TRUE(st) << st.message();
  return m;
}

/// Sets x and y at `batch` (fresh values per batch), runs, and returns
/// every output read back at the session's batch.
Outputs runAt(Session &s, int64_t batch, std::vector<float> *xOut = nullptr,
              std::vector<float> *yOut = nullptr) {
  std::vector<float> x =
      randomFloats(size_t(batch) * kDIn, 40 + unsigned(batch), -2, 2);
  std::vector<float> y =
      randomFloats(size_t(batch) * kDHidden, 140 + unsigned(batch));
  Outputs o;
  Status st = s.setInput(0, DType::F32, {batch, kDIn}, x.data(), x.size() * 4);
  EXPECT_TRUE(st) << st.message();
  st = s.setInput(1, DType::F32, {batch, kDHidden}, y.data(), y.size() * 4);
  EXPECT_TRUE(st) << st.message();
  st = s.run();
  EXPECT_TRUE(st) << st.message();
  for (size_t i = 0; i < 3; ++i) {
    Shape shape;
    EXPECT_TRUE(s.outputShape(i, &shape));
    std::vector<float> v(size_t(rt::numElements(shape)));
    st = s.copyOutput(i, v.data(), v.size() * 4);
    EXPECT_TRUE(st) << st.message();
    (i == 0 ? o.probs : i == 1 ? o.colmean : o.total) = std::move(v);
  }
  if (xOut)
    *xOut = x;
  if (yOut)
    *yOut = y;
  return o;
}

Status loadUnchecked(const Plan &plan) {
  Plan p = plan;
  EXPECT_TRUE(codegen::planMemory(p));
  std::vector<uint8_t> b = writeUnchecked(p);
  EXPECT_FALSE(b.empty());
  std::unique_ptr<Model> m;
  return Model::loadMemory(b.data(), b.size(), "dyn.mcpk", &m);
}

void expectRefused(const Plan &plan, const std::string &what) {
  Status st = loadUnchecked(plan);
  ASSERT_FALSE(st) << "expected: " << what;
  EXPECT_NE(st.message().find(what), std::string::npos) << st.message();
}

uint32_t bufferNamed(const Plan &p, const std::string &name) {
  for (size_t i = 0; i < p.buffers.size(); ++i)
    if (p.buffers[i].name == name)
      return uint32_t(i);
  ADD_FAILURE() << "no buffer " << name;
  return 0;
}

} // namespace

TEST(DynamicBatch, ModelReportsBoundsAndSymbolicSignature) {
  std::unique_ptr<Model> m = load(artifact(batchMlpPlan(0, true)));
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->dynamicBatch());
  rt::BatchBounds b = m->batch();
  EXPECT_EQ(b.min, 1);
  EXPECT_EQ(b.max, 64);
  EXPECT_EQ(b.opt, 32);
  const rt::TensorInfo &x = m->inputs()[0];
  EXPECT_EQ(x.shape, (Shape{64, kDIn})); // stored at max
  EXPECT_EQ(x.batchScale, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(x.shapeAt(7), (Shape{7, kDIn}));
  EXPECT_EQ(x.byteSizeAt(7), size_t(7 * kDIn * 4));
  EXPECT_EQ(x.typeString(), "f32[?, 8]");
  EXPECT_FALSE(m->outputs()[1].dynamic()); // colmean: reduced over the batch
  std::unique_ptr<Model> s = load(artifact(batchMlpPlan(4, false)));
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->dynamicBatch());
  EXPECT_EQ(s->batch().max, 0);
  EXPECT_EQ(s->inputs()[0].typeString(), "f32[4, 8]");
}

// Every batch in the bounds, in an order that revisits cached bindings and
// evicts one (5 sizes > 4 cached): the dynamic artifact's outputs equal the
// static artifact's at that batch bit for bit, and the reference within f32
// tolerance; the mean over the batch divides by the runtime batch.
TEST(DynamicBatch, RunsEveryBatchLikeTheStaticPlan) {
  std::unique_ptr<Model> dyn = load(artifact(batchMlpPlan(0, true)));
  ASSERT_TRUE(dyn);
  std::unique_ptr<Session> s;
  ASSERT_TRUE(Session::create(*dyn, &s));
  EXPECT_EQ(s->batch(), kDynOpt); // bound at opt before any run
  for (int64_t batch : {1, 7, 32, 64, 7, 2, 1, 64}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    std::vector<float> x, y;
    Outputs got = runAt(*s, batch, &x, &y);
    EXPECT_EQ(s->batch(), batch);
    ASSERT_EQ(got.probs.size(), size_t(batch * kDHidden));
    Outputs ref = reference(batch, x, y);
    EXPECT_LT(relErr(got.probs, {ref.probs.begin(), ref.probs.end()}), 1e-5);
    EXPECT_LT(relErr(got.colmean, {ref.colmean.begin(), ref.colmean.end()}),
              1e-5);
    ASSERT_EQ(got.total.size(), 1u);
    EXPECT_NEAR(got.total[0], float(batch), 1e-4 * batch); // rows sum to 1

    std::unique_ptr<Model> fixed = load(artifact(batchMlpPlan(batch, false)));
    ASSERT_TRUE(fixed);
    std::unique_ptr<Session> ss;
    ASSERT_TRUE(Session::create(*fixed, &ss));
    Outputs want = runAt(*ss, batch);
    EXPECT_EQ(got.probs, want.probs);
    EXPECT_EQ(got.colmean, want.colmean);
    EXPECT_EQ(got.total, want.total);
  }
}

TEST(DynamicBatch, OutputBytesFollowTheBatch) {
  std::unique_ptr<Model> m = load(artifact(batchMlpPlan(0, true)));
  ASSERT_TRUE(m);
  std::unique_ptr<Session> s;
  ASSERT_TRUE(Session::create(*m, &s));
  runAt(*s, 7);
  const void *data = nullptr;
  size_t bytes = 0;
  ASSERT_TRUE(s->output(0, &data, &bytes));
  EXPECT_EQ(bytes, size_t(7 * kDHidden * 4));
  ASSERT_TRUE(s->output(1, &data, &bytes));
  EXPECT_EQ(bytes, size_t(kDHidden * 4));
  std::vector<float> big(64 * kDHidden);
  Status st = s->copyOutput(0, big.data(), big.size() * 4);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(), "output 'probs': expected a 448-byte buffer for "
                          "f32[7, 16], got 4096");
}

TEST(DynamicBatch, InputsOutsideTheBoundsOrDisagreeingAreRefused) {
  std::unique_ptr<Model> m = load(artifact(batchMlpPlan(0, true)));
  ASSERT_TRUE(m);
  std::unique_ptr<Session> s;
  ASSERT_TRUE(Session::create(*m, &s));
  std::vector<float> x(65 * kDIn), y(65 * kDHidden);
  Status st = s->setInput(0, DType::F32, {65, kDIn}, x.data(), 65 * kDIn * 4);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(), "input 'x': dimension 0 is the batch, which must be "
                          "in [1, 64]; got 65");
  st = s->setInput(0, DType::F32, {0, kDIn}, x.data(), 0);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(), "input 'x': dimension 0 is the batch, which must be "
                          "in [1, 64]; got 0");
  st = s->setInput(0, DType::F32, {7, 9}, x.data(), 7 * 9 * 4);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(), "input 'x': expected f32[?, 8], got f32[7, 9]");
  st = s->setInput(0, DType::F32, {7}, x.data(), 7 * 4);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(), "input 'x': expected f32[?, 8], got f32[7]");
  st = s->setInput(0, DType::F32, {7, kDIn}, x.data(), 8 * kDIn * 4);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(),
            "input 'x': expected 224 bytes for f32[7, 8], got 256");
  ASSERT_TRUE(s->setInput(0, DType::F32, {7, kDIn}, x.data(), 7 * kDIn * 4));
  ASSERT_TRUE(
      s->setInput(1, DType::F32, {8, kDHidden}, y.data(), 8 * kDHidden * 4));
  st = s->run();
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(), "inputs 'x' (batch 7) and 'y' (batch 8) disagree on "
                          "the batch size");
  // Agreeing again, it runs.
  ASSERT_TRUE(
      s->setInput(1, DType::F32, {7, kDHidden}, y.data(), 7 * kDHidden * 4));
  st = s->run();
  EXPECT_TRUE(st) << st.message();
}

// One negative test per verifier rule of the dynamic batch.
TEST(DynamicBatch, VerifierRefusesBadBounds) {
  for (codegen::PlanBatch b :
       {codegen::PlanBatch{0, 64, 32}, codegen::PlanBatch{8, 64, 4},
        codegen::PlanBatch{1, 64, 65}}) {
    Plan p = batchMlpPlan(0, true);
    p.batch = b;
    expectRefused(p, "batch bounds min " + std::to_string(b.min) + ", opt " +
                         std::to_string(b.opt) +
                         ", max 64 are invalid: need "
                         "1 <= min <= opt <= max <= 2147483647");
  }
  Plan big = batchMlpPlan(0, true);
  big.batch = {1, int64_t(1) << 31, 1};
  expectRefused(big, "max 2147483648 are invalid");
}

TEST(DynamicBatch, VerifierRefusesAScaledConstant) {
  Plan p = batchMlpPlan(0, true);
  uint32_t b = bufferNamed(p, "b");
  p.buffers[b].batchScale = {1};
  p.buffers[b].shape = {64};
  p.buffers[b].data = floatBytes(randomFloats(64, 1));
  expectRefused(p, "buffer " + std::to_string(b) +
                       " 'b': a Constant buffer has batch_scale [1]; only "
                       "Arena buffers may depend on the batch");
}

TEST(DynamicBatch, VerifierRefusesAShapeOtherThanScaleTimesMax) {
  Plan p = batchMlpPlan(0, true);
  uint32_t h = bufferNamed(p, "h");
  p.buffers[h].shape = {32, kDHidden};
  expectRefused(p, "'h': dimension 0 is 1 * batch, so its stored size must be "
                   "1 * 64 (the batch's max), but shape [32, 16] has 32");
  Plan q = batchMlpPlan(0, true);
  q.buffers[bufferNamed(q, "h")].batchScale = {1};
  expectRefused(q, "'h': batch_scale [1] has 1 entries, expected 2");
  Plan r = batchMlpPlan(0, true);
  r.buffers[bufferNamed(r, "h")].batchScale = {-1, 0};
  expectRefused(r, "'h': batch_scale [-1, 0]: entry 0 is -1, expected >= 0");
}

TEST(DynamicBatch, VerifierRefusesASignatureScaleMismatch) {
  // The writer copies each buffer's scale into its signature, so edit the
  // table: output 'probs' says [2, 0] while its buffer says [1, 0].
  std::vector<uint8_t> bytes = artifact(batchMlpPlan(0, true));
  ASSERT_FALSE(bytes.empty());
  const fb::Model *m = fb::GetSizePrefixedModel(bytes.data());
  const auto *scale = m->outputs()->Get(0)->batch_scale();
  ASSERT_TRUE(scale && scale->size() == 2);
  const_cast<int64_t *>(scale->data())[0] = 2; // little-endian, as stored
  fixTableCrc(bytes);
  std::unique_ptr<Model> model;
  Status st = Model::loadMemory(bytes.data(), bytes.size(), "dyn.mcpk", &model);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("output 0 'probs': signature batch_scale [2, 0] "
                              "differs from its buffer "),
            std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("'s batch_scale [1, 0]"), std::string::npos)
      << st.message();
}

TEST(DynamicBatch, VerifierRefusesAnInputOfScaleTwo) {
  Plan p = batchMlpPlan(0, true);
  // x is [2B, 8]: its rows must be a multiple of the batch, which an input
  // cannot say.
  uint32_t x = bufferNamed(p, "x");
  p.buffers[x].batchScale = {2, 0};
  p.buffers[x].shape = {128, kDIn};
  expectRefused(p, "input 0 'x': dimension 0 has batch scale 2; an input's "
                   "dim is static (0) or the batch itself (1)");
}

TEST(DynamicBatch, VerifierRefusesAScaleWithoutBounds) {
  Plan p = batchMlpPlan(0, true);
  p.batch = {};
  expectRefused(p, "'x': batch_scale [1, 0] makes a dim dynamic, but the "
                   "model has no batch bounds (Model.batch)");
}

TEST(DynamicBatch, VerifierRefusesBoundsWithoutABatchInput) {
  Plan p = batchMlpPlan(64, false); // static shapes
  p.batch = {1, 64, 32};
  expectRefused(p, "the model has batch bounds [1, 64] but no input has a "
                   "batch dimension");
}

// A step valid at the max but not at the min: a slice of fixed limits over
// the batch dim. The message says at which batch it fails.
TEST(DynamicBatch, VerifierChecksStepsAtTheLowerBoundToo) {
  Plan p = batchMlpPlan(0, true);
  p.batch = {4, 64, 32};
  uint32_t probs = bufferNamed(p, "probs");
  codegen::PlanBuffer first;
  first.name = "first";
  first.shape = {64, kDHidden};
  first.batchScale = {1, 0};
  p.buffers.push_back(first);
  uint32_t f = uint32_t(p.buffers.size() - 1);
  PlanStep &sl = addStep(p, K::Slice, {probs}, f, "dyn.py:9");
  setInts(sl, "start", {0, 0});
  setInts(sl, "limit", {64, kDHidden});
  setInts(sl, "strides", {1, 1});
  p.outputs.push_back({"first", f});
  expectRefused(p, "(mc.slice at dyn.py:9) at batch 4 (the lower bound of "
                   "[4, 64]): output buffer");
}
