// The runtime's backend seam: devices by name, kernels per (op, device),
// targets checked before any work, outputs copied into caller memory.
#include "codegen/ArtifactWriter.h"
#include "codegen/MemoryPlanner.h"
#include "modelc/device.h"
#include "modelc/model.h"

#include "TestUtil.h"

#include <gtest/gtest.h>

#include <map>

namespace mc {
namespace {

std::vector<uint8_t> mlpArtifactFor(std::vector<std::string> targets,
                                    uint32_t major = rt::kSchemaVersionMajor) {
  codegen::Plan p = test::mlpPlan();
  p.targets = std::move(targets);
  std::vector<uint8_t> bytes;
  codegen::WriteOptions o;
  o.schemaVersionMajorForTesting = major;
  EXPECT_TRUE(codegen::planMemory(p));
  rt::Status st = codegen::writeArtifactToBytes(p, &bytes, o);
  EXPECT_TRUE(st) << st.message();
  return bytes;
}

TEST(Devices, CpuIsRegisteredAndAutoPicksThePreferredOne) {
  std::vector<std::string> present = rt::availableDevices();
  ASSERT_FALSE(present.empty());
  EXPECT_EQ(present.back(), "cpu");
  std::unique_ptr<rt::Device> d;
  std::string why;
  ASSERT_TRUE(rt::createDevice("auto", &d, &why));
  // The first present in priority order: cuda:0 on a GPU machine, else cpu.
  EXPECT_EQ(d->name(), present.front());
  EXPECT_FALSE(why.empty());
  // An artifact for the CPU runs on the CPU wherever auto is asked.
  ASSERT_TRUE(rt::createDevice("auto", &d, &why, {"cpu"}));
  EXPECT_EQ(d->name(), "cpu");
  EXPECT_TRUE(d->hostAccessible());
  ASSERT_TRUE(rt::createDevice("cpu", &d));
  EXPECT_EQ(d->targets(), std::vector<std::string>{"cpu"});
  // No kind runs target 'tpu': auto says so for each kind present.
  rt::Status st = rt::createDevice("auto", &d, &why, {"tpu"});
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("cpu skipped: the artifact targets tpu"),
            std::string::npos)
      << st.message();
}

TEST(Devices, UnknownOrAbsentDevicesAreNamedInTheError) {
  std::unique_ptr<rt::Device> d;
  rt::Status st = rt::createDevice("tpu", &d);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("unknown device 'tpu'"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("cpu"), std::string::npos) << st.message();
  st = rt::createDevice("cpu:3", &d);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("cpu:3"), std::string::npos) << st.message();
  st = rt::createDevice("cpu:x", &d);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("NAME:N"), std::string::npos) << st.message();
}

TEST(Devices, EveryStepOpHasACpuKernel) {
  for (const rt::OpInfo &info : rt::opTable())
    if (info.isStep)
      EXPECT_NE(rt::findKernel("cpu", info.id), nullptr)
          << "mc." << info.mnemonic << " has no cpu kernel";
  EXPECT_EQ(rt::findKernel("cuda", rt::OpId::Add), nullptr);
}

TEST(Devices, AnArtifactForATargetThisMachineLacksIsRefusedAtLoad) {
  // (Not cuda: a GPU machine runs that.)
  std::vector<uint8_t> bytes = mlpArtifactFor({"tpu"});
  ASSERT_FALSE(bytes.empty());
  std::unique_ptr<rt::Model> model;
  rt::Status st = rt::Model::loadMemory(bytes.data(), bytes.size(),
                                        "mlp.mcpk", &model);
  ASSERT_FALSE(st);
  // Names what the file holds and what the machine offers.
  EXPECT_NE(st.message().find("targets tpu"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("offers: "), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("cpu)"), std::string::npos) << st.message();
  // The same plan for the CPU loads and runs.
  bytes = mlpArtifactFor({"cpu"});
  ASSERT_TRUE(rt::Model::loadMemory(bytes.data(), bytes.size(), "mlp.mcpk",
                                    &model));
}

TEST(Devices, Schema1FilesAreRefusedWithARecompileHint) {
  std::vector<uint8_t> bytes = mlpArtifactFor({"cpu"}, 1);
  std::unique_ptr<rt::Model> model;
  rt::Status st = rt::Model::loadMemory(bytes.data(), bytes.size(),
                                        "old.mcpk", &model);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("recompile the model with modelc >= 0.2.0"),
            std::string::npos)
      << st.message();
}

TEST(Devices, CopyOutputGivesTheOutputPointerBytesAndChecksTheSize) {
  std::vector<uint8_t> bytes = mlpArtifactFor({"cpu"});
  std::unique_ptr<rt::Model> model;
  ASSERT_TRUE(rt::Model::loadMemory(bytes.data(), bytes.size(), "mlp",
                                    &model));
  std::unique_ptr<rt::Device> device;
  ASSERT_TRUE(rt::createDevice("cpu", &device));
  std::unique_ptr<rt::Session> s;
  ASSERT_TRUE(rt::Session::create(*model, std::move(device), &s));
  EXPECT_EQ(s->device().name(), "cpu");
  std::vector<float> x = test::mlpInput();
  ASSERT_TRUE(s->setInput(0, rt::DType::F32, {test::kBatch, test::kIn},
                          x.data(), x.size() * sizeof(float)));
  ASSERT_TRUE(s->run());
  const rt::TensorInfo &info = model->outputs()[0];
  std::vector<float> copied(info.byteSize / sizeof(float));
  ASSERT_TRUE(s->copyOutput(0, copied.data(), info.byteSize));
  const void *ptr = nullptr;
  size_t n = 0;
  ASSERT_TRUE(s->output(0, &ptr, &n));
  ASSERT_EQ(n, info.byteSize);
  EXPECT_EQ(std::memcmp(ptr, copied.data(), n), 0);
  test::MlpResult ref = test::mlpReference(x);
  EXPECT_LT(test::relError(copied.data(), ref.probs), 1e-5);
  rt::Status st = s->copyOutput(0, copied.data(), info.byteSize - 4);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("probs"), std::string::npos) << st.message();
}

/// The CPU device, recording what Session::run asks of runSteps.
class RecordingDevice final : public rt::Device {
public:
  /// `kind`: the kernels it runs (another kind registers its own).
  explicit RecordingDevice(std::string kind = "cpu") : kind_(std::move(kind)) {
    EXPECT_TRUE(rt::createDevice("cpu", &cpu_));
  }
  std::string name() const override { return "recording"; }
  std::string kind() const override { return kind_; }
  std::vector<std::string> targets() const override { return {"cpu"}; }
  bool hostAccessible() const override { return true; }
  rt::Status allocate(size_t n, rt::DeviceMemory *out) override {
    return cpu_->allocate(n, out);
  }
  rt::Status copyToDevice(void *d, const void *s, size_t n) override {
    return cpu_->copyToDevice(d, s, n);
  }
  rt::Status copyToHost(void *d, const void *s, size_t n) override {
    return cpu_->copyToHost(d, s, n);
  }
  rt::Status synchronize() override { return cpu_->synchronize(); }
  rt::Status runSteps(uint64_t key,
                      const std::function<rt::Status()> &runAll) override {
    keys->push_back(key);
    return runAll();
  }
  std::shared_ptr<std::vector<uint64_t>> keys =
      std::make_shared<std::vector<uint64_t>>();

private:
  std::string kind_;
  std::unique_ptr<rt::Device> cpu_;
};

void setBatchInputs(rt::Session &s, int64_t batch) {
  std::vector<float> x = test::randomFloats(size_t(batch) * test::kDIn, 5);
  std::vector<float> y = test::randomFloats(size_t(batch) * test::kDHidden, 6);
  ASSERT_TRUE(s.setInput(0, rt::DType::F32, {batch, test::kDIn}, x.data(),
                         x.size() * 4));
  ASSERT_TRUE(s.setInput(1, rt::DType::F32, {batch, test::kDHidden},
                         y.data(), y.size() * 4));
}

// The contract a device that records runs (CUDA graphs) relies on: one key
// per binding, the same on every run at that batch, another at another
// batch; 0 while profiling.
TEST(Devices, RunStepsKeysNameOneBindingEach) {
  codegen::Plan p = test::batchMlpPlan(0, /*dynamic=*/true);
  ASSERT_TRUE(codegen::planMemory(p));
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(codegen::writeArtifactToBytes(p, &bytes));
  std::unique_ptr<rt::Model> model;
  ASSERT_TRUE(rt::Model::loadMemory(bytes.data(), bytes.size(), "dyn.mcpk",
                                    &model));
  auto device = std::make_unique<RecordingDevice>();
  std::shared_ptr<std::vector<uint64_t>> keys = device->keys;
  std::unique_ptr<rt::Session> s;
  ASSERT_TRUE(rt::Session::create(*model, std::move(device), &s));
  for (int64_t batch : {7, 7, 9, 7}) {
    setBatchInputs(*s, batch);
    ASSERT_TRUE(s->run());
  }
  ASSERT_EQ(keys->size(), 4u);
  EXPECT_NE((*keys)[0], 0u);
  EXPECT_EQ((*keys)[0], (*keys)[1]);
  EXPECT_NE((*keys)[0], (*keys)[2]);
  EXPECT_NE((*keys)[2], 0u);
  EXPECT_EQ((*keys)[0], (*keys)[3]); // batch 7's binding is still cached
}

// MODELC_PROFILE times steps with the device's StepTimer (the host clock on
// the CPU), runs with key 0, and prints the table when the session ends.
TEST(Devices, ProfiledRunsUseTheStepTimerAndRecordNothing) {
  std::vector<uint8_t> bytes = mlpArtifactFor({"cpu"});
  std::unique_ptr<rt::Model> model;
  ASSERT_TRUE(rt::Model::loadMemory(bytes.data(), bytes.size(), "mlp.mcpk",
                                    &model));
  auto device = std::make_unique<RecordingDevice>();
  std::shared_ptr<std::vector<uint64_t>> keys = device->keys;
  setenv("MODELC_PROFILE", "1", 1);
  std::unique_ptr<rt::Session> s;
  rt::Status created = rt::Session::create(*model, std::move(device), &s);
  unsetenv("MODELC_PROFILE");
  ASSERT_TRUE(created) << created.message();
  std::vector<float> x = test::mlpInput();
  ASSERT_TRUE(s->setInput(0, rt::DType::F32, {test::kBatch, test::kIn},
                          x.data(), x.size() * sizeof(float)));
  ASSERT_TRUE(s->run());
  ASSERT_TRUE(s->run());
  EXPECT_EQ(*keys, (std::vector<uint64_t>{0, 0}));
  testing::internal::CaptureStderr();
  s.reset();
  std::string table = testing::internal::GetCapturedStderr();
  // The first run (cold memory, oneDNN's kernel generation) is left out.
  EXPECT_NE(table.find("profile: mlp.mcpk: 1 runs, "), std::string::npos)
      << table;
  EXPECT_NE(table.find("the first run at each batch size left out (1)"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("matmul"), std::string::npos) << table;

  // A session made with MODELC_PROFILE=`value` that runs once: its table.
  auto profiledOnce = [&](const char *value) -> std::string {
    setenv("MODELC_PROFILE", value, 1);
    rt::Status made = rt::Session::create(*model, &s);
    unsetenv("MODELC_PROFILE");
    EXPECT_TRUE(made) << made.message();
    if (!made)
      return "";
    EXPECT_TRUE(s->setInput(0, rt::DType::F32, {test::kBatch, test::kIn},
                            x.data(), x.size() * sizeof(float)));
    EXPECT_TRUE(s->run());
    testing::internal::CaptureStderr();
    s.reset();
    return testing::internal::GetCapturedStderr();
  };

  // A session that ran once reports that run, saying what it includes.
  table = profiledOnce("1");
  EXPECT_NE(table.find("profile: mlp.mcpk: 1 runs, "), std::string::npos)
      << table;
  EXPECT_NE(table.find("first runs only: cold memory and one-time setup "
                       "included"),
            std::string::npos)
      << table;

  // MODELC_PROFILE=all lists every step in plan order.
  table = profiledOnce("all");
  size_t list = table.find("  every step, in order:\n");
  ASSERT_NE(list, std::string::npos) << table;
  size_t steps = model->table().steps()->size(), at = list;
  for (size_t i = 0; i < steps; ++i) {
    char head[32];
    std::snprintf(head, sizeof head, "\n  %5zu ", i);
    size_t next = table.find(head, at);
    ASSERT_NE(next, std::string::npos) << "step " << i << " in\n" << table;
    at = next + 1;
  }
}

// What each step's kernel was handed of the run-time bounds (ValueBound),
// by the bound-probe kind's kernels: the CPU's, recording the request.
struct BoundsSeen {
  std::vector<const rt::ValueBound *> inputs;
  rt::ValueBound *output = nullptr;
};
std::map<uint32_t, BoundsSeen> &boundsSeen() {
  static std::map<uint32_t, BoundsSeen> seen;
  return seen;
}
rt::Status probeKernel(const rt::KernelRequest &r, rt::BoundKernel *out,
                       size_t *workspaceBytes) {
  BoundsSeen &b = boundsSeen()[r.stepIndex];
  for (size_t i = 0; i < r.inputs.size(); ++i)
    b.inputs.push_back(r.inputBound(i));
  b.output = r.outputBound;
  return rt::findKernel("cpu", r.op)(r, out, workspaceBytes);
}

// The Session hands each step the bound slot of the one step that wrote
// each input (the slot a reader trusts), none for a graph input, a
// constant or a buffer no step writes (an alias), and its own slot.
TEST(Devices, EachStepSeesTheBoundSlotOfTheStepThatWroteItsInput) {
  using O = rt::OpId;
  for (O op : {O::Matmul, O::BroadcastInDim, O::Add, O::Relu, O::Softmax,
               O::ReduceMean, O::ReduceMax})
    rt::registerKernel("bound-probe", op, probeKernel);
  std::vector<uint8_t> bytes = mlpArtifactFor({"cpu"});
  std::unique_ptr<rt::Model> model;
  ASSERT_TRUE(
      rt::Model::loadMemory(bytes.data(), bytes.size(), "mlp.mcpk", &model));
  boundsSeen().clear();
  std::unique_ptr<rt::Session> s;
  rt::Status made = rt::Session::create(
      *model, std::make_unique<RecordingDevice>("bound-probe"), &s);
  ASSERT_TRUE(made) << made.message();
  std::map<uint32_t, BoundsSeen> seen = boundsSeen();
  // mlpPlan: 0 h = x @ w, 1 bb = broadcast(b), 2 h2 = h + bb,
  // 3 h3 = relu(h2), 4 softmax(h3), 5 reduce_mean(h3), 6 reduce_max of an
  // alias of h3.
  ASSERT_EQ(seen.size(), 7u);
  for (auto &[step, b] : seen) {
    EXPECT_NE(b.output, nullptr) << "step " << step;
    for (auto &[other, c] : seen) {
      if (other != step) {
        EXPECT_NE(b.output, c.output) << "steps " << step << ", " << other;
      }
    }
  }
  using V = std::vector<const rt::ValueBound *>;
  EXPECT_EQ(seen[0].inputs, (V{nullptr, nullptr})) << "graph input, constant";
  EXPECT_EQ(seen[1].inputs, (V{nullptr})) << "a constant";
  EXPECT_EQ(seen[2].inputs, (V{seen[0].output, seen[1].output}));
  EXPECT_EQ(seen[3].inputs, (V{seen[2].output}));
  EXPECT_EQ(seen[4].inputs, (V{seen[3].output}));
  EXPECT_EQ(seen[5].inputs, (V{seen[3].output}));
  EXPECT_EQ(seen[6].inputs, (V{nullptr})) << "an alias no step writes";
  // And the run still computes the CPU's answer.
  std::vector<float> x = test::mlpInput();
  ASSERT_TRUE(s->setInput(0, rt::DType::F32, {test::kBatch, test::kIn},
                          x.data(), x.size() * sizeof(float)));
  ASSERT_TRUE(s->run());
  std::vector<float> probs(size_t(test::kBatch) * test::kHidden);
  ASSERT_TRUE(s->copyOutput(0, probs.data(), probs.size() * sizeof(float)));
  EXPECT_LT(test::relError(probs.data(), test::mlpReference(x).probs), 1e-5);
}

} // namespace
} // namespace mc
