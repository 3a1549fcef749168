// Training state (schema 1.2) end to end without the compiler: the planner
// and writer lay out State buffers, the verifier refuses corrupt ones, a
// hand-built training step (linear layer, MSE, SGD) updates its parameters
// in place exactly as plain loops do, checkpoints round-trip, corrupt ones
// are refused, a SIGKILL during a save never breaks the previous checkpoint,
// and `modelc-run --train` trains, logs, plots and resumes.
#include "TestUtil.h"
#include "modelc/checkpoint.h"
#include "modelc/model.h"
#include "modelc/npy.h"
#include "modelc/runtime.h"

#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

using namespace mc;
using namespace mc::test;
using codegen::Plan;
using codegen::PlanBuffer;
using codegen::PlanStep;
using rt::DType;
using rt::Model;
using rt::Session;
using rt::Status;
using K = rt::OpId;

namespace {

constexpr int kB = 8, kI = 4, kO = 3;
constexpr float kLr = 0.5f;

std::vector<float> initialWeight() { return randomFloats(kO * kI, 21); }

/// One SGD step of y = x W^T with MSE loss, written out as steps:
///   y = x W^T; d = y - t; loss = mean(d * d)            (output 0)
///   gW = (d * 2/(B*O))^T x; W <- W - lr * gW            (Copy into State)
///   optimizer.step <- optimizer.step + 1                 (Add into State)
/// "loss_scale" is State the step only carries (for --train's display).
Plan trainingPlan() {
  Plan p;
  p.entry = "train_step";
  auto buf = [&](std::string name, std::vector<int64_t> shape,
                 fb::BufferKind kind = fb::BufferKind::Arena,
                 DType dtype = DType::F32) {
    PlanBuffer b;
    b.name = std::move(name);
    b.shape = std::move(shape);
    b.kind = kind;
    b.dtype = dtype;
    p.buffers.push_back(b);
    return uint32_t(p.buffers.size() - 1);
  };
  uint32_t x = buf("x", {kB, kI}), t = buf("t", {kB, kO});
  uint32_t w = buf("0.weight", {kO, kI}, fb::BufferKind::State);
  p.buffers[w].data = floatBytes(initialWeight());
  uint32_t stepCount =
      buf("optimizer.step", {}, fb::BufferKind::State, DType::I32);
  p.buffers[stepCount].data = {0, 0, 0, 0};
  uint32_t scale = buf("loss_scale", {}, fb::BufferKind::State);
  p.buffers[scale].data = floatBytes({1.0f});
  uint32_t c = buf("two_over_n", {kB, kO}, fb::BufferKind::Constant);
  p.buffers[c].data = floatBytes(std::vector<float>(kB * kO, 2.0f / (kB * kO)));
  uint32_t lr = buf("lr", {kO, kI}, fb::BufferKind::Constant);
  p.buffers[lr].data = floatBytes(std::vector<float>(kO * kI, kLr));
  uint32_t one = buf("one", {}, fb::BufferKind::Constant, DType::I32);
  p.buffers[one].data = {1, 0, 0, 0};
  uint32_t y = buf("y", {kB, kO}), d = buf("d", {kB, kO}),
           sq = buf("sq", {kB, kO}), loss = buf("loss", {}),
           gy = buf("gy", {kB, kO}), gw = buf("gw", {kO, kI}),
           upd = buf("upd", {kO, kI}), wn = buf("w_new", {kO, kI});
  auto step = [&](K op, std::vector<uint32_t> in, uint32_t out) -> PlanStep & {
    return addStep(p, op, std::move(in), out,
                   "train.py:" + std::to_string(p.steps.size() + 1));
  };
  setBool(step(K::Matmul, {x, w}, y), "transpose_b", true);
  step(K::Sub, {y, t}, d);
  step(K::Mul, {d, d}, sq);
  setInts(step(K::ReduceMean, {sq}, loss), "dims", {0, 1});
  step(K::Mul, {d, c}, gy);
  setBool(step(K::Matmul, {gy, x}, gw), "transpose_a", true);
  step(K::Mul, {gw, lr}, upd);
  step(K::Sub, {w, upd}, wn);
  step(K::Copy, {wn}, w);                   // the global_store
  step(K::Add, {stepCount, one}, stepCount); // in place, into State
  p.inputs = {{"x", x}, {"t", t}};
  p.outputs = {{"loss", loss}};
  return p;
}

Plan plannedTraining() {
  Plan p = trainingPlan();
  Status st = codegen::planMemory(p);
  EXPECT_TRUE(st) << st.message();
  return p;
}

std::vector<uint8_t> trainingArtifact(bool verify = true) {
  std::vector<uint8_t> b;
  codegen::WriteOptions o;
  o.verify = verify;
  Status st = codegen::writeArtifactToBytes(plannedTraining(), &b, o);
  EXPECT_TRUE(st) << st.message();
  return b;
}

Status load(const std::vector<uint8_t> &b, std::unique_ptr<Model> *m) {
  return Model::loadMemory(b.data(), b.size(), "t.mcpk", m);
}

/// Batch k of a fixed synthetic regression problem: t = x Wtrue^T.
void batch(int k, std::vector<float> *x, std::vector<float> *t) {
  *x = randomFloats(kB * kI, 100 + k, -1, 1);
  std::vector<float> wt = randomFloats(kO * kI, 5, -2, 2);
  t->assign(kB * kO, 0);
  for (int i = 0; i < kB; ++i)
    for (int o = 0; o < kO; ++o)
      for (int j = 0; j < kI; ++j)
        (*t)[i * kO + o] += (*x)[i * kI + j] * wt[o * kI + j];
}

/// The same step as plain loops, in double.
double referenceStep(std::vector<double> &w, const std::vector<float> &x,
                     const std::vector<float> &t) {
  std::vector<double> d(kB * kO);
  double loss = 0;
  for (int i = 0; i < kB; ++i)
    for (int o = 0; o < kO; ++o) {
      double y = 0;
      for (int j = 0; j < kI; ++j)
        y += double(x[i * kI + j]) * w[o * kI + j];
      d[i * kO + o] = y - t[i * kO + o];
      loss += d[i * kO + o] * d[i * kO + o];
    }
  std::vector<double> g(kO * kI, 0);
  for (int i = 0; i < kB; ++i)
    for (int o = 0; o < kO; ++o)
      for (int j = 0; j < kI; ++j)
        g[o * kI + j] += d[i * kO + o] * 2.0 / (kB * kO) * x[i * kI + j];
  for (int k = 0; k < kO * kI; ++k)
    w[k] -= double(kLr) * g[k];
  return loss / (kB * kO);
}

void runStep(Session &s, int k, float *loss = nullptr) {
  std::vector<float> x, t;
  batch(k, &x, &t);
  ASSERT_TRUE(s.setInput(0, DType::F32, {kB, kI}, x.data(), x.size() * 4));
  ASSERT_TRUE(s.setInput(1, DType::F32, {kB, kO}, t.data(), t.size() * 4));
  Status st = s.run();
  ASSERT_TRUE(st) << st.message();
  if (loss) {
    const void *p;
    size_t n;
    ASSERT_TRUE(s.output(0, &p, &n));
    ASSERT_EQ(n, 4u);
    *loss = *static_cast<const float *>(p);
  }
}

std::vector<float> weightOf(const Session &s) {
  std::vector<float> w(kO * kI);
  Status st = s.readState("0.weight", w.data(), w.size() * 4);
  EXPECT_TRUE(st) << st.message();
  return w;
}

/// Rewrites a scalar field of a table inside `base` (present: the writer
/// forces defaults) in its copy `b`, and repairs b's table checksum.
template <typename T>
void patchField(std::vector<uint8_t> &b, const std::vector<uint8_t> &base,
                const void *table, uint16_t field, T value) {
  const uint8_t *at =
      reinterpret_cast<const flatbuffers::Table *>(table)->GetAddressOf(field);
  ASSERT_NE(at, nullptr);
  std::memcpy(b.data() + (at - base.data()), &value, sizeof(T));
  uint32_t n = uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16 |
               uint32_t(b[3]) << 24;
  uint32_t crc = uint32_t(::crc32(0, b.data(), uInt(4 + n)));
  for (int i = 0; i < 4; ++i)
    b[b.size() - 16 + i] = uint8_t(crc >> (8 * i));
}

void expectRefused(const std::vector<uint8_t> &b, const std::string &what) {
  std::unique_ptr<Model> m;
  Status st = load(b, &m);
  ASSERT_FALSE(st) << "expected: " << what;
  EXPECT_NE(st.message().find(what), std::string::npos) << st.message();
}

std::string tempDir() {
  char tmpl[] = "/tmp/modelc-train-XXXXXX";
  EXPECT_NE(mkdtemp(tmpl), nullptr);
  return tmpl;
}

void removeDir(const std::string &dir) {
  std::string cmd = "rm -rf '" + dir + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
}

std::vector<std::string> listDir(const std::string &dir) {
  std::vector<std::string> names;
  DIR *d = opendir(dir.c_str());
  while (dirent *e = d ? readdir(d) : nullptr)
    if (e->d_name[0] != '.')
      names.push_back(e->d_name);
  if (d)
    closedir(d);
  return names;
}

} // namespace

//===--- Planner, writer, verifier ---===//

TEST(State, PlannerLaysOutTheStateRegion) {
  Plan p = trainingPlan();
  std::vector<codegen::LiveRange> ranges;
  ASSERT_TRUE(codegen::computeLiveRanges(p, &ranges));
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    if (p.buffers[i].kind == fb::BufferKind::State) {
      // Not in the arena.
      EXPECT_TRUE(ranges[i].empty()) << p.buffers[i].name;
    }
  }
  ASSERT_TRUE(codegen::planMemory(p));
  // 0.weight (48 B) at 0, optimizer.step (4 B) at 64, loss_scale at 128.
  EXPECT_EQ(p.buffers[2].offset, 0u);
  EXPECT_EQ(p.buffers[3].offset, 64u);
  EXPECT_EQ(p.buffers[4].offset, 128u);
  EXPECT_EQ(p.stateSize, 132u);

  Plan bad = trainingPlan();
  bad.inputs[0].buffer = 2; // a State buffer as an input
  Status st = codegen::planMemory(bad);
  EXPECT_NE(st.message().find("input 'x' is state buffer 2 '0.weight'; inputs "
                              "and outputs must be arena buffers"),
            std::string::npos)
      << st.message();
  bad = trainingPlan();
  bad.steps[8].outputs = {5}; // Copy into a constant
  st = codegen::planMemory(bad);
  EXPECT_NE(st.message().find("step 8 output is constant buffer 5"),
            std::string::npos)
      << st.message();
}

TEST(State, ArtifactRoundTrip) {
  std::vector<uint8_t> b = trainingArtifact();
  ASSERT_FALSE(b.empty());
  const fb::Model *t = fb::GetSizePrefixedModel(b.data());
  EXPECT_EQ(t->schema_version_major(), 2u);
  EXPECT_EQ(t->schema_version_minor(), rt::kSchemaVersionMinor);
  EXPECT_EQ(t->state_size(), 132u);
  EXPECT_EQ(t->state_data_offset() % 64, 0u);
  // Constants: 96 + 48 + 4 bytes at 0, 128, 192; the image follows at 256.
  EXPECT_EQ(t->state_data_offset(), 256u);
  EXPECT_EQ(t->data_size(), 256u + 132u);
  std::unique_ptr<Model> m;
  Status st = load(b, &m);
  ASSERT_TRUE(st) << st.message();
  ASSERT_EQ(m->states().size(), 3u);
  EXPECT_EQ(m->states()[0].name, "0.weight");
  EXPECT_EQ(m->states()[0].shape, (rt::Shape{kO, kI}));
  EXPECT_EQ(m->states()[1].name, "optimizer.step");
  EXPECT_EQ(m->states()[1].dtype, DType::I32);
  EXPECT_EQ(m->states()[2].name, "loss_scale");
  std::unique_ptr<Session> s;
  ASSERT_TRUE(Session::create(*m, &s));
  EXPECT_EQ(weightOf(*s), initialWeight());
  int32_t count = -1;
  ASSERT_TRUE(s->readState("optimizer.step", &count, 4));
  EXPECT_EQ(count, 0);
  st = s->readState("0.weight", &count, 4);
  EXPECT_NE(st.message().find("state '0.weight': expected 48 bytes for "
                              "f32[3, 4], got 4"),
            std::string::npos)
      << st.message();
  st = s->readState("1.bias", &count, 4);
  EXPECT_NE(st.message().find("no state buffer named '1.bias' (known: "
                              "'0.weight', 'optimizer.step', 'loss_scale')"),
            std::string::npos)
      << st.message();
}

TEST(State, StreamedFileIsByteForByteTheImageInMemory) {
  // writeArtifact streams the file from the plan's buffers (constants and
  // the state image, gaps zeroed) without building it in memory; it must
  // be the same bytes as writeArtifactToBytes, even with the State
  // buffers' offsets out of buffer order.
  codegen::Plan p = plannedTraining();
  p.buffers[4].offset = 0;   // loss_scale, 4 bytes
  p.buffers[2].offset = 64;  // 0.weight, 48 bytes
  p.buffers[3].offset = 128; // optimizer.step, 4 bytes
  std::vector<uint8_t> image;
  Status st = codegen::writeArtifactToBytes(p, &image);
  ASSERT_TRUE(st) << st.message();
  char dir[] = "/tmp/modelc-stream-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string path = std::string(dir) + "/t.mcpk";
  st = codegen::writeArtifact(p, path);
  ASSERT_TRUE(st) << st.message();
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> file((std::istreambuf_iterator<char>(in)),
                            std::istreambuf_iterator<char>());
  EXPECT_EQ(file, image);
  std::unique_ptr<Model> m;
  st = Model::loadFile(path, &m);
  ASSERT_TRUE(st) << st.message();
  std::unique_ptr<Session> s;
  ASSERT_TRUE(Session::create(*m, &s));
  EXPECT_EQ(weightOf(*s), initialWeight());
  // State buffers that overlap are a planning bug the streamed file names
  // (no file is left behind).
  p.buffers[3].offset = 96;
  std::string bad = std::string(dir) + "/bad.mcpk";
  st = codegen::writeArtifact(p, bad);
  EXPECT_NE(st.message().find("artifact writer: buffers 2 and 3 overlap in "
                              "the data section (a planning bug)"),
            std::string::npos)
      << st.message();
  EXPECT_NE(access(bad.c_str(), F_OK), 0);
  unlink(path.c_str());
  rmdir(dir);
}

TEST(State, CorruptStateIsRefused) {
  std::vector<uint8_t> good = trainingArtifact();
  const fb::Model *t = fb::GetSizePrefixedModel(good.data());
  const fb::Buffer *w = t->buffers()->Get(2);
  {
    std::vector<uint8_t> b = good;
    patchField<uint64_t>(b, good, w, fb::Buffer::VT_OFFSET, 128);
    expectRefused(b, "buffer 2 '0.weight': bytes [128, +48) exceed the "
                     "state_size 132");
  }
  {
    std::vector<uint8_t> b = good;
    patchField<uint64_t>(b, good, t, fb::Model::VT_STATE_DATA_OFFSET, 288);
    expectRefused(b, "state_data_offset 288 is not 64-byte aligned");
  }
  {
    std::vector<uint8_t> b = good;
    patchField<uint64_t>(b, good, t, fb::Model::VT_STATE_DATA_OFFSET, 320);
    expectRefused(b, "state image [320, +132) (state_data_offset, state_size) "
                     "is not inside the data section of 388 bytes");
  }
  {
    std::vector<uint8_t> b = good;
    patchField<uint64_t>(b, good, t, fb::Model::VT_STATE_SIZE, 1000);
    expectRefused(b, "is not inside the data section");
  }
  {
    // An Arena buffer turned into State lands outside the small region.
    std::vector<uint8_t> b = good;
    patchField<uint8_t>(b, good, t->buffers()->Get(0), fb::Buffer::VT_KIND, 2);
    expectRefused(b, "buffer 0 'x'");
  }
  auto unchecked = [](const Plan &p) {
    std::vector<uint8_t> b;
    codegen::WriteOptions o;
    o.verify = false;
    EXPECT_TRUE(codegen::writeArtifactToBytes(p, &b, o));
    return b;
  };
  Plan p = plannedTraining();
  p.buffers[4].name = "0.weight";
  expectRefused(unchecked(p), "buffer 4 '0.weight': State buffer name "
                              "'0.weight' is used by buffer 2 too");
  p = plannedTraining();
  p.buffers[3].name = "";
  expectRefused(unchecked(p), "buffer 3: a State buffer needs a name");
  p = plannedTraining();
  p.outputs[0].buffer = 4;
  expectRefused(unchecked(p), "output 0 'loss': buffer 4 'loss_scale' f32[] is "
                              "a State buffer; inputs and outputs must be "
                              "Arena buffers");
  p = plannedTraining();
  p.steps[5].outputs = {2}; // MatMul straight into the weight
  expectRefused(unchecked(p), "step 5 (mc.matmul at train.py:6): output 0 (buffer "
                              "2 '0.weight' f32[3, 4]) is a State buffer; only "
                              "Copy and elementwise kinds may write state");
  // Two State buffers of 128 bytes, 64 apart: a Copy between them
  // partly overlaps.
  p = plannedTraining();
  for (int i : {3, 4}) {
    p.buffers[i].dtype = DType::F32;
    p.buffers[i].shape = {32};
    p.buffers[i].data = std::vector<uint8_t>(128, 0);
  }
  p.buffers[4].offset = 0;
  p.buffers[3].offset = 64;
  p.stateSize = 192;
  p.steps[9].op = K::Copy;
  p.steps[9].inputs = {4};
  p.steps[9].outputs = {3};
  expectRefused(unchecked(p), "output buffer 3 'optimizer.step' f32[32] "
                              "overlaps input buffer 4 'loss_scale' f32[32] "
                              "in the state region");
  // The writer itself refuses state bytes outside the region.
  p = plannedTraining();
  p.buffers[4].offset = 192;
  std::vector<uint8_t> b;
  Status st = codegen::writeArtifactToBytes(p, &b);
  EXPECT_NE(st.message().find("state buffer 4 'loss_scale' at [192, +4) lies "
                              "outside the state region of 132 bytes"),
            std::string::npos)
      << st.message();
}

TEST(State, TableFuzzWithFixedChecksumNeverCrashes) {
  // Every bit of the table flipped, the checksum repaired: whatever still
  // loads runs (and updates its state) without touching memory outside its
  // buffers (run this under ASan).
  std::vector<uint8_t> good = trainingArtifact();
  uint32_t n = uint32_t(good[0]) | uint32_t(good[1]) << 8 |
               uint32_t(good[2]) << 16 | uint32_t(good[3]) << 24;
  int loaded = 0;
  for (size_t i = 4; i < 4 + n; ++i)
    for (int bit = 0; bit < 8; ++bit) {
      std::vector<uint8_t> b = good;
      b[i] ^= uint8_t(1 << bit);
      uint32_t crc = uint32_t(::crc32(0, b.data(), uInt(4 + n)));
      for (int k = 0; k < 4; ++k)
        b[b.size() - 16 + k] = uint8_t(crc >> (8 * k));
      std::unique_ptr<Model> m;
      if (!load(b, &m) || m->table().arena_size() > (1u << 20) ||
          m->stateSize() > (1u << 20))
        continue;
      ++loaded;
      std::unique_ptr<Session> s;
      Status created = Session::create(*m, &s);
      ASSERT_TRUE(created) << created.message();
      for (size_t k = 0; k < m->inputs().size(); ++k) {
        const rt::TensorInfo &info = m->inputs()[k];
        std::vector<uint8_t> zeros(info.byteSize);
        ASSERT_TRUE(
            s->setInput(k, info.dtype, info.shape, zeros.data(), zeros.size()));
      }
      (void)s->run();
      (void)s->run();
    }
  EXPECT_GT(loaded, 0);
}

//===--- Running a training step ---===//

TEST(Training, ParametersAfterStepsMatchPlainLoops) {
  std::unique_ptr<Model> m;
  ASSERT_TRUE(load(trainingArtifact(), &m));
  std::unique_ptr<Session> s;
  ASSERT_TRUE(Session::create(*m, &s));
  std::vector<float> w0 = initialWeight();
  std::vector<double> ref(w0.begin(), w0.end());
  const int kSteps = 25;
  float first = 0, last = 0;
  for (int k = 0; k < kSteps; ++k) {
    float loss;
    ASSERT_NO_FATAL_FAILURE(runStep(*s, k, &loss));
    std::vector<float> x, t;
    batch(k, &x, &t);
    double refLoss = referenceStep(ref, x, t);
    EXPECT_NEAR(loss, refLoss, 1e-5 * std::max(1.0, refLoss)) << "step " << k;
    (k == 0 ? first : last) = loss;
  }
  std::vector<float> refF(ref.begin(), ref.end());
  std::vector<float> w = weightOf(*s);
  EXPECT_LT(relError(w.data(), refF), 1e-5);
  EXPECT_LT(last, first * 0.2f); // it learns: 25 steps cut the loss 5x
  int32_t count = 0;
  ASSERT_TRUE(s->readState("optimizer.step", &count, 4));
  EXPECT_EQ(count, kSteps);

  // Another session starts from the artifact's initial state.
  std::unique_ptr<Session> s2;
  ASSERT_TRUE(Session::create(*m, &s2));
  EXPECT_EQ(weightOf(*s2), w0);
  s->resetState();
  EXPECT_EQ(weightOf(*s), w0);
  // writeState is what the next step reads.
  std::vector<float> zeros(kO * kI, 0);
  ASSERT_TRUE(s->writeState("0.weight", zeros.data(), 48));
  float loss;
  ASSERT_NO_FATAL_FAILURE(runStep(*s, 0, &loss));
  std::vector<double> fromZero(kO * kI, 0);
  std::vector<float> x, t;
  batch(0, &x, &t);
  EXPECT_NEAR(loss, referenceStep(fromZero, x, t), 1e-5);
}

//===--- Checkpoints ---===//

TEST(Checkpoint, SaveLoadRoundTripThroughTheCApi) {
  std::vector<uint8_t> bytes = trainingArtifact();
  mc_model_t *model = nullptr;
  ASSERT_EQ(mc_model_load_memory(bytes.data(), bytes.size(), "t.mcpk", &model),
            nullptr);
  ASSERT_EQ(mc_model_num_state(model), 3u);
  mc_tensor_info_t info;
  ASSERT_EQ(mc_model_state_info(model, 0, &info), nullptr);
  EXPECT_STREQ(info.name, "0.weight");
  EXPECT_EQ(info.dtype, MC_DTYPE_F32);
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.dims[0], kO);
  EXPECT_EQ(info.byte_size, 48u);
  mc_status_t err = mc_model_state_info(model, 3, &info);
  ASSERT_NE(err, nullptr);
  EXPECT_NE(std::string(mc_status_message(err)).find("state index 3"),
            std::string::npos);
  mc_status_free(err);

  mc_session_t *a = nullptr, *b = nullptr;
  ASSERT_EQ(mc_session_create(model, &a), nullptr);
  ASSERT_EQ(mc_session_create(model, &b), nullptr);
  for (int k = 0; k < 3; ++k) {
    std::vector<float> x, t;
    batch(k, &x, &t);
    int64_t dx[] = {kB, kI}, dt[] = {kB, kO};
    ASSERT_EQ(mc_session_set_input(a, 0, MC_DTYPE_F32, 2, dx, x.data(), 128),
              nullptr);
    ASSERT_EQ(mc_session_set_input(a, 1, MC_DTYPE_F32, 2, dt, t.data(), 96),
              nullptr);
    ASSERT_EQ(mc_session_run(a), nullptr);
  }
  std::string dir = tempDir(), path = dir + "/c.mcst";
  const char *meta = "{\"epoch\":1,\"step_in_epoch\":3}";
  ASSERT_EQ(mc_session_save_checkpoint(a, path.c_str(), meta), nullptr);
  EXPECT_EQ(listDir(dir), std::vector<std::string>{"c.mcst"}); // no temp left
  char *got = nullptr;
  err = mc_session_load_checkpoint(b, path.c_str(), &got);
  ASSERT_EQ(err, nullptr) << mc_status_message(err);
  EXPECT_STREQ(got, meta);
  mc_string_free(got);
  std::vector<float> wa(12), wb(12);
  ASSERT_EQ(mc_session_read_state(a, "0.weight", wa.data(), 48), nullptr);
  ASSERT_EQ(mc_session_read_state(b, "0.weight", wb.data(), 48), nullptr);
  EXPECT_EQ(wa, wb);
  EXPECT_NE(wa, initialWeight());
  int32_t count = 0;
  ASSERT_EQ(mc_session_read_state(b, "optimizer.step", &count, 4), nullptr);
  EXPECT_EQ(count, 3);
  count = 41;
  ASSERT_EQ(mc_session_write_state(b, "optimizer.step", &count, 4), nullptr);
  count = 0;
  ASSERT_EQ(mc_session_read_state(b, "optimizer.step", &count, 4), nullptr);
  EXPECT_EQ(count, 41);
  err = mc_session_write_state(b, "nope", &count, 4);
  ASSERT_NE(err, nullptr);
  mc_status_free(err);
  // NULL metadata saves none; NULL out skips it.
  ASSERT_EQ(mc_session_save_checkpoint(b, path.c_str(), nullptr), nullptr);
  ASSERT_EQ(mc_session_load_checkpoint(a, path.c_str(), nullptr), nullptr);
  ASSERT_EQ(mc_session_read_state(a, "optimizer.step", &count, 4), nullptr);
  EXPECT_EQ(count, 41);
  mc_session_free(a);
  mc_session_free(b);
  mc_model_free(model);
  removeDir(dir);
}

TEST(Checkpoint, CorruptOrMismatchedCheckpointsAreRefused) {
  std::unique_ptr<Model> m;
  ASSERT_TRUE(load(trainingArtifact(), &m));
  std::unique_ptr<Session> s;
  ASSERT_TRUE(Session::create(*m, &s));
  ASSERT_NO_FATAL_FAILURE(runStep(*s, 0));
  std::string dir = tempDir(), path = dir + "/c.mcst";
  ASSERT_TRUE(s->saveCheckpoint(path, "{\"step\":1}"));
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> good((std::istreambuf_iterator<char>(in)),
                            std::istreambuf_iterator<char>());
  ASSERT_GT(good.size(), 100u);
  auto writeFile = [&](const std::vector<uint8_t> &b) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char *>(b.data()), std::streamsize(b.size()));
  };
  std::unique_ptr<Session> fresh;
  ASSERT_TRUE(Session::create(*m, &fresh));
  auto expectLoadFails = [&](const std::string &what) {
    Status st = fresh->loadCheckpoint(path, nullptr);
    ASSERT_FALSE(st) << what;
    EXPECT_NE(st.message().find(what), std::string::npos) << st.message();
    EXPECT_EQ(weightOf(*fresh), initialWeight()); // untouched on error
  };
  // Every single-byte change and every truncation is refused.
  for (size_t i = 0; i < good.size(); ++i) {
    std::vector<uint8_t> b = good;
    b[i] ^= 0x5a;
    writeFile(b);
    ASSERT_FALSE(fresh->loadCheckpoint(path, nullptr)) << "byte " << i;
  }
  for (size_t n = 0; n < good.size(); n += 7) {
    writeFile(std::vector<uint8_t>(good.begin(), good.begin() + n));
    ASSERT_FALSE(fresh->loadCheckpoint(path, nullptr)) << "length " << n;
  }
  std::vector<uint8_t> b = good;
  b[good.size() / 2] ^= 1;
  writeFile(b);
  expectLoadFails("checkpoint checksum mismatch");
  writeFile(std::vector<uint8_t>(good.begin(), good.end() - 5));
  expectLoadFails("trailer magic is missing");
  b = good;
  b[0] = 'X';
  writeFile(b);
  expectLoadFails("not a modelc checkpoint");

  // Well-formed checkpoints that do not fit the model.
  std::vector<float> w(kO * kI, 1.0f), w2(2 * kI, 1.0f);
  int32_t count = 7;
  float scale = 1;
  auto entry = [](std::string name, DType t, rt::Shape shape, const void *p) {
    rt::CheckpointEntry e{std::move(name), t, shape,
                          static_cast<const uint8_t *>(p), 0};
    e.byteSize = uint64_t(rt::numElements(shape)) * rt::dtypeSize(t);
    return e;
  };
  auto ok = [&] {
    return std::vector<rt::CheckpointEntry>{
        entry("0.weight", DType::F32, {kO, kI}, w.data()),
        entry("optimizer.step", DType::I32, {}, &count),
        entry("loss_scale", DType::F32, {}, &scale)};
  };
  std::vector<rt::CheckpointEntry> e = ok();
  e[0] = entry("0.weight", DType::F32, {2, kI}, w2.data());
  ASSERT_TRUE(rt::writeCheckpointFile(path, e, ""));
  expectLoadFails("state '0.weight' is f32[2, 4] in the checkpoint but "
                  "f32[3, 4] in the model");
  e = ok();
  e[1] = entry("optimizer.step", DType::I64, {}, w.data());
  ASSERT_TRUE(rt::writeCheckpointFile(path, e, ""));
  expectLoadFails("state 'optimizer.step' is i64[] in the checkpoint but "
                  "i32[] in the model");
  e = ok();
  e.pop_back();
  ASSERT_TRUE(rt::writeCheckpointFile(path, e, ""));
  expectLoadFails("the checkpoint has no state 'loss_scale'");
  e = ok();
  e.push_back(entry("1.bias", DType::F32, {kO}, w.data()));
  ASSERT_TRUE(rt::writeCheckpointFile(path, e, ""));
  expectLoadFails("the checkpoint has state '1.bias', which the model does "
                  "not have");
  // And the well-formed, fitting one loads.
  ASSERT_TRUE(rt::writeCheckpointFile(path, ok(), "m"));
  std::string meta;
  ASSERT_TRUE(fresh->loadCheckpoint(path, &meta));
  EXPECT_EQ(meta, "m");
  EXPECT_EQ(weightOf(*fresh), w);
  removeDir(dir);
}

TEST(Checkpoint, KillDuringSaveLeavesThePreviousCheckpointLoadable) {
  std::unique_ptr<Model> m;
  ASSERT_TRUE(load(trainingArtifact(), &m));
  std::unique_ptr<Session> s;
  ASSERT_TRUE(Session::create(*m, &s));
  std::string dir = tempDir(), path = dir + "/checkpoint.mcst";
  // Generation g: every weight g, the counter g, metadata "g". A loaded
  // checkpoint must be one whole generation.
  auto setGeneration = [&](Session &session, int32_t g) {
    std::vector<float> w(kO * kI, float(g));
    ASSERT_TRUE(session.writeState("0.weight", w.data(), 48));
    ASSERT_TRUE(session.writeState("optimizer.step", &g, 4));
  };
  ASSERT_NO_FATAL_FAILURE(setGeneration(*s, 0));
  ASSERT_TRUE(s->saveCheckpoint(path, "0"));
  int killedMidSave = 0, lastGeneration = 0;
  const int kKills = 6;
  for (int kill = 0; kill < kKills; ++kill) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // The child: save generations forever, each save slowed down so the
      // kill lands inside one (between writes, or between fsync and
      // rename). Only async-signal-safe-enough work: no BLAS, no gtest.
      setenv("MODELC_TEST_CHECKPOINT_SLOW", "20", 1);
      for (int32_t g = lastGeneration + 1;; ++g) {
        std::vector<float> w(kO * kI, float(g));
        if (!s->writeState("0.weight", w.data(), 48) ||
            !s->writeState("optimizer.step", &g, 4) ||
            !s->saveCheckpoint(path, std::to_string(g)))
          _exit(3);
      }
    }
    usleep(useconds_t(60000 + 37000 * kill)); // a few saves in, then mid-save
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the child exited with " << status;
    // A temporary file left behind means the kill landed mid-save.
    bool tmpLeft = false;
    for (const std::string &name : listDir(dir))
      if (name.rfind("checkpoint.mcst.tmp.", 0) == 0) {
        tmpLeft = true;
        unlink((dir + "/" + name).c_str());
      }
    killedMidSave += tmpLeft;
    std::unique_ptr<Session> fresh;
    ASSERT_TRUE(Session::create(*m, &fresh));
    std::string meta;
    Status st = fresh->loadCheckpoint(path, &meta);
    ASSERT_TRUE(st) << "after kill " << kill << ": " << st.message();
    int32_t g = -1;
    ASSERT_TRUE(fresh->readState("optimizer.step", &g, 4));
    EXPECT_EQ(meta, std::to_string(g));
    EXPECT_EQ(weightOf(*fresh), std::vector<float>(kO * kI, float(g)));
    EXPECT_GE(g, lastGeneration); // saves only move forward
    lastGeneration = g;
  }
  // The child spends almost all its time inside saves: most kills land
  // there (the test would prove little otherwise).
  EXPECT_GE(killedMidSave, kKills / 2);
  EXPECT_GT(lastGeneration, 0);
  removeDir(dir);
}

//===--- modelc-run --train ---===//

namespace {

using Result = ProcessResult;

class Train : public ::testing::Test {
protected:
  void SetUp() override {
    dir = tempDir();
    model = dir + "/train.mcpk";
    ASSERT_TRUE(codegen::writeArtifact(plannedTraining(), model));
    // 67 samples: 8 steps of 8 per epoch, 3 dropped.
    writeData(67, "x.npy", "t.npy");
  }
  void TearDown() override { removeDir(dir); }

  void writeData(int n, const std::string &xName, const std::string &tName) {
    std::vector<float> x = randomFloats(size_t(n) * kI, 77, -1, 1), t(n * kO);
    std::vector<float> wt = randomFloats(kO * kI, 5, -2, 2);
    for (int i = 0; i < n; ++i)
      for (int o = 0; o < kO; ++o)
        for (int j = 0; j < kI; ++j)
          t[i * kO + o] += x[i * kI + j] * wt[o * kI + j];
    ASSERT_TRUE(rt::writeNpy(dir + "/" + xName, DType::F32, {n, kI}, x.data()));
    ASSERT_TRUE(rt::writeNpy(dir + "/" + tName, DType::F32, {n, kO}, t.data()));
  }

  Result run(std::vector<std::string> args) {
    args.insert(args.begin(), MODELC_RUN_PATH);
    return runProcess(std::move(args), dir);
  }

  std::vector<std::string> trainArgs(std::vector<std::string> extra) {
    std::vector<std::string> a{"--train",        model,
                               "--data",         "x=" + dir + "/x.npy",
                               "--data",         "t=" + dir + "/t.npy",
                               "--batch",        "8"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }

  void expectError(const Result &r, const std::string &what) {
    EXPECT_EQ(r.code(), 1) << r.err;
    EXPECT_NE(r.err.find("modelc-run: error: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(what), std::string::npos)
        << "expected: " << what << "\nstderr: " << r.err;
  }

  /// The weights saved in a checkpoint file.
  std::vector<float> savedWeight(const std::string &path) {
    rt::Checkpoint c;
    Status st = rt::readCheckpointFile(path, &c);
    EXPECT_TRUE(st) << st.message();
    for (const rt::CheckpointEntry &e : c.entries)
      if (e.name == "0.weight") {
        std::vector<float> w(kO * kI);
        std::memcpy(w.data(), e.data, 48);
        return w;
      }
    return {};
  }

  std::string dir, model;
};

/// Rows of the CSV after the header, as (step, epoch, loss).
std::vector<std::tuple<long, long, double>> csvRows(const std::string &text) {
  std::vector<std::tuple<long, long, double>> rows;
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    long step = 0, epoch = 0;
    double loss = 0;
    if (std::sscanf(line.c_str(), "%ld,%ld,%lf", &step, &epoch, &loss) == 3)
      rows.emplace_back(step, epoch, loss);
  }
  return rows;
}

} // namespace

TEST_F(Train, TrainsLogsPlotsAndCheckpoints) {
  Result r = run(trainArgs({"--epochs", "5", "--shuffle", "3", "--checkpoint",
                            dir + "/ck", "--log-csv", dir + "/log.csv",
                            "--plot", dir + "/loss.svg"}));
  ASSERT_EQ(r.code(), 0) << r.err;
  EXPECT_NE(r.err.find("67 samples in batches of 8: 8 steps per epoch; the "
                       "last 3 sample(s)"),
            std::string::npos)
      << r.err;
  // Not a TTY: one progress line per epoch, with the samples it trained on
  // (a static artifact drops the 3 that do not fill a batch) and the loss
  // scale state.
  EXPECT_NE(r.err.find("epoch 1/5  step 8/8  samples 64/67  loss "),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("epoch 5/5  step 8/8  samples 64/67  loss "),
            std::string::npos);
  EXPECT_NE(r.err.find("loss_scale 1  "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("samples/s"), std::string::npos);
  EXPECT_NE(r.out.find("trained 5 epoch(s) of 8 steps (batch 8, 67 samples): "
                       "40 steps in all"),
            std::string::npos)
      << r.out;
  std::string csv = slurp(dir + "/log.csv");
  EXPECT_EQ(csv.rfind("step,epoch,loss,loss_scale\n1,1,", 0), 0u) << csv;
  auto rows = csvRows(csv);
  ASSERT_EQ(rows.size(), 40u);
  EXPECT_EQ(std::get<0>(rows.back()), 40);
  EXPECT_EQ(std::get<1>(rows.back()), 5);
  double first = 0, last = 0;
  for (int i = 0; i < 8; ++i) {
    first += std::get<2>(rows[i]);
    last += std::get<2>(rows[32 + i]);
  }
  EXPECT_LT(last, first * 0.1) << "the loss must fall: epoch 1 mean "
                               << first / 8 << ", epoch 5 mean " << last / 8;
  std::string svg = slurp(dir + "/loss.svg");
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_EQ(std::count(svg.begin(), svg.end(), '\n') > 20, true);
  for (const char *s : {"<polyline", ">step</text>", ">loss",
                        "training loss: train.mcpk", "moving average"})
    EXPECT_NE(svg.find(s), std::string::npos) << s;
  // The checkpoint is the final state, with the position in its metadata.
  rt::Checkpoint c;
  ASSERT_TRUE(rt::readCheckpointFile(dir + "/ck/checkpoint.mcst", &c));
  EXPECT_NE(c.metadata.find("\"epoch\":4,\"step_in_epoch\":8,"
                            "\"global_step\":40,\"shuffle_seed\":3"),
            std::string::npos)
      << c.metadata;
  EXPECT_EQ(listDir(dir + "/ck"), std::vector<std::string>{"checkpoint.mcst"});
}

TEST_F(Train, ResumeContinuesExactlyWhereTheCheckpointLeftOff) {
  // One uninterrupted run of 4 epochs...
  Result r = run(trainArgs({"--epochs", "4", "--shuffle", "9", "--checkpoint",
                            dir + "/a", "--quiet"}));
  ASSERT_EQ(r.code(), 0) << r.err;
  EXPECT_EQ(r.err, ""); // --quiet
  // ...and one stopped after 2 epochs plus 3 steps (checkpoints every 3
  // steps), then resumed to 4 epochs.
  r = run(trainArgs({"--epochs", "2", "--shuffle", "9", "--checkpoint",
                     dir + "/b", "--checkpoint-every", "3", "--log-csv",
                     dir + "/b.csv"}));
  ASSERT_EQ(r.code(), 0) << r.err;
  rt::Checkpoint c;
  ASSERT_TRUE(rt::readCheckpointFile(dir + "/b/checkpoint.mcst", &c));
  EXPECT_NE(c.metadata.find("\"global_step\":16"), std::string::npos)
      << c.metadata; // the end of training is saved too
  // Pretend the run went on to step 18 before it died: extra CSV rows that
  // the resumed run must replace.
  {
    std::ofstream f(dir + "/b.csv", std::ios::app);
    f << "17,3,0.5,1\n18,3,0.5,1\n";
  }
  r = run(trainArgs({"--epochs", "4", "--checkpoint", dir + "/b",
                     "--checkpoint-every", "3", "--resume", "--log-csv",
                     dir + "/b.csv", "--plot", dir + "/b.svg"}));
  ASSERT_EQ(r.code(), 0) << r.err;
  EXPECT_NE(r.err.find("resuming with the checkpoint's --shuffle 9"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("resumed from " + dir +
                       "/b/checkpoint.mcst: epoch 3, step 0, global step 16"),
            std::string::npos)
      << r.err;
  // Same batches in the same order: bit-identical weights.
  std::vector<float> wa = savedWeight(dir + "/a/checkpoint.mcst");
  std::vector<float> wb = savedWeight(dir + "/b/checkpoint.mcst");
  ASSERT_EQ(wa.size(), size_t(kO * kI));
  EXPECT_EQ(wa, wb);
  auto rows = csvRows(slurp(dir + "/b.csv"));
  ASSERT_EQ(rows.size(), 32u);
  for (size_t i = 0; i < rows.size(); ++i)
    EXPECT_EQ(std::get<0>(rows[i]), long(i + 1));
  EXPECT_NE(std::get<2>(rows[17]), 0.5); // step 18 was run again

  // Resuming with other batches is refused.
  r = run({"--train", model, "--data", "x=" + dir + "/x.npy", "--data",
           "t=" + dir + "/t.npy", "--batch", "8", "--epochs", "5",
           "--checkpoint", dir + "/a", "--resume", "--shuffle", "4"});
  expectError(r, "the checkpoint was written with --shuffle 9; resuming with "
                 "other shuffling would not continue the same run");
}

TEST_F(Train, MidEpochCheckpointResumesMidEpoch) {
  // Steps 1..5 of epoch 1 saved (every 5 steps); the last save (step 8) is
  // replaced by the step-5 one to simulate a crash after step 5.
  Result r = run(trainArgs({"--epochs", "2", "--checkpoint", dir + "/full",
                            "--quiet"}));
  ASSERT_EQ(r.code(), 0) << r.err;
  std::unique_ptr<Model> m;
  ASSERT_TRUE(load(trainingArtifact(), &m));
  std::unique_ptr<Session> s;
  ASSERT_TRUE(Session::create(*m, &s));
  // The first 5 batches, in order (no shuffle): rows 0..39.
  rt::NpyArray x, t;
  ASSERT_TRUE(rt::readNpy(dir + "/x.npy", &x));
  ASSERT_TRUE(rt::readNpy(dir + "/t.npy", &t));
  for (int k = 0; k < 5; ++k) {
    ASSERT_TRUE(s->setInput(0, DType::F32, {kB, kI},
                            x.data.data() + k * kB * kI * 4, kB * kI * 4));
    ASSERT_TRUE(s->setInput(1, DType::F32, {kB, kO},
                            t.data.data() + k * kB * kO * 4, kB * kO * 4));
    ASSERT_TRUE(s->run());
  }
  ASSERT_EQ(mkdir((dir + "/mid").c_str(), 0755), 0);
  ASSERT_TRUE(s->saveCheckpoint(
      dir + "/mid/checkpoint.mcst",
      "{\"format\":\"modelc-train\",\"epoch\":0,\"step_in_epoch\":5,"
      "\"global_step\":5,\"shuffle_seed\":null,\"batch\":8,\"samples\":67,"
      "\"steps_per_epoch\":8}"));
  r = run(trainArgs({"--epochs", "2", "--checkpoint", dir + "/mid",
                     "--resume", "--log-csv", dir + "/mid.csv"}));
  ASSERT_EQ(r.code(), 0) << r.err;
  EXPECT_NE(r.err.find("epoch 1, step 5, global step 5"), std::string::npos)
      << r.err;
  auto rows = csvRows(slurp(dir + "/mid.csv"));
  ASSERT_EQ(rows.size(), 11u); // steps 6..16
  EXPECT_EQ(std::get<0>(rows.front()), 6);
  EXPECT_EQ(savedWeight(dir + "/mid/checkpoint.mcst"),
            savedWeight(dir + "/full/checkpoint.mcst"));
}

TEST_F(Train, BadInputsExitOneNamingTheProblem) {
  expectError(run(trainArgs({"--epochs", "1", "--batch", "4"})),
              "input 'x' is f32[8, 4]: its leading (batch) dimension is 8, "
              "but --batch is 4");
  writeData(50, "x50.npy", "t50.npy");
  expectError(run({"--train", model, "--data", "x=" + dir + "/x.npy", "--data",
                   "t=" + dir + "/t50.npy", "--batch", "8", "--epochs", "1"}),
              "--data files disagree on the number of samples: " + dir +
                  "/x.npy has 67, " + dir + "/t50.npy has 50");
  expectError(run({"--train", model, "--data", "x=" + dir + "/t.npy", "--data",
                   "t=" + dir + "/t.npy", "--batch", "8", "--epochs", "1"}),
              "input 'x' needs f32[N, 4] (N samples of f32[4]), got "
              "f32[67, 3]");
  expectError(run({"--train", model, "--data", "x=" + dir + "/x.npy",
                   "--batch", "8", "--epochs", "1"}),
              "input 't' (f32[8, 3]) has no data; pass --data t=FILE.npy");
  expectError(run(trainArgs({"--epochs", "1", "--data", "y=a.npy"})),
              "no input named 'y' (known: 'x', 't')");
  expectError(run(trainArgs({"--epochs", "0"})),
              "--epochs needs a positive integer, got '0'");
  expectError(run(trainArgs({})), "--train needs --epochs E");
  expectError(run(trainArgs({"--epochs", "1", "--resume"})),
              "--resume needs --checkpoint DIR");
  expectError(run(trainArgs({"--epochs", "1", "--bogus"})),
              "unknown option '--bogus'");
  writeData(5, "x5.npy", "t5.npy");
  expectError(run({"--train", model, "--data", "x=" + dir + "/x5.npy", "--data",
                   "t=" + dir + "/t5.npy", "--batch", "8", "--epochs", "1"}),
              "the data has 5 samples, fewer than one batch of 8");
  // A corrupt checkpoint is an error, not a fresh start.
  ASSERT_EQ(mkdir((dir + "/bad").c_str(), 0755), 0);
  {
    std::ofstream f(dir + "/bad/checkpoint.mcst");
    f << std::string(100, 'g');
  }
  expectError(run(trainArgs({"--epochs", "1", "--checkpoint", dir + "/bad",
                             "--resume"})),
              "not a modelc checkpoint");
  // An inference artifact has no loss of one element.
  std::string mlp = dir + "/mlp.mcpk";
  Plan p = mlpPlan();
  ASSERT_TRUE(codegen::planMemory(p));
  ASSERT_TRUE(codegen::writeArtifact(p, mlp));
  expectError(run({"--train", mlp, "--data", "x=" + dir + "/x.npy", "--batch",
                   "4", "--epochs", "1"}),
              "output 0 'probs' is f32[4, 16]; --train needs output 0 to be "
              "the loss, one float element");
}

TEST_F(Train, PersistentNonFiniteLossStops) {
  // Every target NaN: 13 steps per epoch, so the 100th step is in epoch 8.
  int n = 104;
  std::vector<float> x = randomFloats(size_t(n) * kI, 1), t(n * kO, NAN);
  ASSERT_TRUE(rt::writeNpy(dir + "/xn.npy", DType::F32, {n, kI}, x.data()));
  ASSERT_TRUE(rt::writeNpy(dir + "/tn.npy", DType::F32, {n, kO}, t.data()));
  Result r = run({"--train", model, "--data", "x=" + dir + "/xn.npy", "--data",
                  "t=" + dir + "/tn.npy", "--batch", "8", "--epochs", "20",
                  "--log-csv", dir + "/n.csv"});
  expectError(r, "the loss was non-finite for 100 consecutive steps (steps 1 "
                 "to 100); stopping");
  EXPECT_NE(r.err.find("warning: step 1 (epoch 1, step 1/13): the loss is nan"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(csvRows(slurp(dir + "/n.csv")).size(), 100u);
}
