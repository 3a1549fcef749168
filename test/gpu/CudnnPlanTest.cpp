// The cuDNN graphs the CUDA device builds, planned with no GPU: cuDNN 9.8
// and up makes a plan for a GPU described by its device properties
// (test/gpu/Inputs/{a100,h100}.cudnn-device.json), running its own graph
// validation, its heuristic for that architecture and each engine's
// support checks, everything but the execution. So a graph cuDNN would
// refuse on an A100 or H100 fails here, in CI, not first on a GPU. Needs
// cuDNN's libraries (the toolkit's /usr/local/cuda/lib64 here), not a
// driver; skips, saying why, without them.
#include "ConvCases.h"
#include "cuda/CudaDriver.h"
#include "cuda/Cudnn.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

using namespace mc;
using namespace mc::test;
using rt::DType;
using rt::cuda::DeviceProperties;
using rt::cuda::PlanInfo;
using rt::cuda::PlanTarget;

namespace {

std::string readFile(const std::string &path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

const char *const kDevices[] = {"a100", "h100"};

class CudnnPlan : public ::testing::Test {
protected:
  void SetUp() override {
    rt::Status st = rt::cuda::loadCudnn(&dnn);
    if (!st)
      GTEST_SKIP() << "no cuDNN to plan with: " << st.message();
    if (dnn->version < 90800)
      GTEST_SKIP() << "cuDNN " << dnn->version
                   << " cannot plan without a device (9.8 and up)";
  }
  /// The device properties of test/gpu/Inputs/NAME.cudnn-device.json.
  void load(const std::string &name, DeviceProperties *props) {
    std::string json = readFile(std::string(MODELC_TEST_GPU_INPUTS) + "/" +
                                name + ".cudnn-device.json");
    ASSERT_FALSE(json.empty()) << name;
    rt::Status st = DeviceProperties::fromJson(*dnn, json, props);
    ASSERT_TRUE(st) << name << ": " << st.message();
  }
  const rt::cuda::Cudnn *dnn = nullptr;
};

rt::cuda::ConvProblem problem(const ConvCase &c, DType dtype, bool bias,
                              bool relu) {
  rt::cuda::ConvProblem p;
  p.dtype = dtype;
  p.x = c.x;
  p.w = c.w;
  p.y = outShape(c);
  p.params = convParams(c);
  alignas(16) static const char someBias[16] = {};
  p.bias = bias ? someBias : nullptr; // only its presence and alignment count
  p.relu = relu;
  return p;
}

/// Plans every case as the device would bind it: each dtype alone, and
/// f16 and bf16 with the bias and relu fused (the regions the cuda target
/// keeps whole).
void planAll(const rt::cuda::Cudnn &dnn, const char *device,
             const DeviceProperties &props) {
  PlanTarget target{nullptr, props.get()};
  for (const ConvCase &c : kCases)
    for (DType dtype : {DType::F32, DType::F16, DType::BF16})
      for (int fused = 0; fused < (dtype == DType::F32 ? 1 : 3); ++fused) {
        bool bias = fused >= 1, relu = fused == 2;
        PlanInfo info;
        rt::Status st = rt::cuda::planConv(
            dnn, target, problem(c, dtype, bias, relu), &info);
        EXPECT_TRUE(st) << device << ": " << st.message();
        if (!st)
          continue;
        EXPECT_GE(info.engine, 0);
        std::printf("  %-5s %-36s %-4s %-10s engine %3lld (%s list, %lld "
                    "tried) workspace %lld\n",
                    device, c.name, rt::dtypeName(dtype),
                    relu ? "+bias,relu" : bias ? "+bias" : "",
                    (long long)info.engine, info.heuristic.c_str(),
                    (long long)info.tried, (long long)info.workspace);
      }
}

TEST_F(CudnnPlan, EveryConvolutionTheDeviceBindsHasAPlanOnA100AndH100) {
  for (const char *device : kDevices) {
    SCOPED_TRACE(device);
    DeviceProperties props;
    ASSERT_NO_FATAL_FAILURE(load(device, &props));
    planAll(*dnn, device, props);
  }
}

TEST_F(CudnnPlan, F32WithoutTf32HasAPlanWithoutTensorCores) {
  ::setenv("MODELC_CUDA_TF32", "0", 1);
  for (const char *device : kDevices) {
    SCOPED_TRACE(device);
    DeviceProperties props;
    ASSERT_NO_FATAL_FAILURE(load(device, &props));
    for (const ConvCase &c : kCases) {
      PlanInfo info;
      rt::Status st =
          rt::cuda::planConv(*dnn, PlanTarget{nullptr, props.get()},
                             problem(c, DType::F32, false, false), &info);
      EXPECT_TRUE(st) << c.name << ": " << st.message();
    }
  }
  ::unsetenv("MODELC_CUDA_TF32");
}

TEST_F(CudnnPlan, AGraphCudnnRefusesIsAnErrorNamingTheProblem) {
  DeviceProperties props;
  ASSERT_NO_FATAL_FAILURE(load("h100", &props));
  // w's input channels (5) divide neither x's 8 channels nor give groups.
  ConvCase bad{"bad", {1, 8, 8, 8}, {4, 5, 3, 3}, {1, 1}, {1, 1, 1, 1},
               {1, 1}, 1};
  rt::cuda::ConvProblem p;
  p.dtype = DType::F16;
  p.x = bad.x;
  p.w = bad.w;
  p.y = {1, 4, 8, 8};
  p.params = convParams(bad);
  PlanInfo info;
  rt::Status st =
      rt::cuda::planConv(*dnn, PlanTarget{nullptr, props.get()}, p, &info);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("conv2d f16 [1, 8, 8, 8] * [4, 5, 3, 3]"),
            std::string::npos)
      << st.message();
}

TEST_F(CudnnPlan, DevicePropertiesThatAreNotCudnnsJsonAreRefused) {
  DeviceProperties props;
  rt::Status st = DeviceProperties::fromJson(*dnn, "{\"warpSize\": 32}",
                                             &props);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("cuDNN device properties from JSON"),
            std::string::npos)
      << st.message();
}

} // namespace
