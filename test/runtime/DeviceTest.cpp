// The runtime's backend seam: devices by name, kernels per (op, device),
// targets checked before any work, outputs copied into caller memory.
#include "codegen/ArtifactWriter.h"
#include "codegen/MemoryPlanner.h"
#include "modelc/device.h"
#include "modelc/model.h"

#include "TestUtil.h"

#include <gtest/gtest.h>

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

TEST(Devices, CpuIsRegisteredAndAutoPicksItHere) {
  std::vector<std::string> present = rt::availableDevices();
  ASSERT_FALSE(present.empty());
  EXPECT_EQ(present.back(), "cpu");
  std::unique_ptr<rt::Device> d;
  ASSERT_TRUE(rt::createDevice("auto", &d));
  // No other device kind is built into this runtime yet.
  EXPECT_EQ(d->name(), "cpu");
  EXPECT_TRUE(d->hostAccessible());
  ASSERT_TRUE(rt::createDevice("cpu", &d));
  EXPECT_EQ(d->targets(), std::vector<std::string>{"cpu"});
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
  std::vector<uint8_t> bytes = mlpArtifactFor({"cuda"});
  ASSERT_FALSE(bytes.empty());
  std::unique_ptr<rt::Model> model;
  rt::Status st = rt::Model::loadMemory(bytes.data(), bytes.size(),
                                        "mlp.mcpk", &model);
  ASSERT_FALSE(st);
  // Names what the file holds and what the machine offers.
  EXPECT_NE(st.message().find("targets cuda"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("offers: cpu"), std::string::npos)
      << st.message();
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

} // namespace
} // namespace mc
