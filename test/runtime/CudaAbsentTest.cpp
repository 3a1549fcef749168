// The CUDA device on a machine without a GPU driver (this one, CI): the
// kind is registered but counts no device, asking for it is an error that
// says why, "auto" falls back to the CPU and says why, and cuBLASLt and
// cuDNN load but refuse a handle, reported rather than crashed on. Where a driver is
// present (the GPU machine) the tests that need its absence skip, saying
// so; test/gpu covers that side.
#include "TestUtil.h"
#include "cuda/CublasLt.h"
#include "cuda/CudaDriver.h"
#include "cuda/Cudnn.h"
#include "modelc/device.h"
#include "modelc/npy.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

using namespace mc;

namespace {

bool driverPresent() {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h)
    dlclose(h);
  return h != nullptr;
}

#define SKIP_IF_DRIVER_PRESENT()                                               \
  if (driverPresent())                                                         \
  GTEST_SKIP() << "libcuda.so.1 is on this machine: this test is about its "   \
                  "absence (test/gpu covers the device)"

const rt::DeviceKind *cudaKind() {
  for (const rt::DeviceKind &k : rt::deviceKinds())
    if (k.name == "cuda")
      return &k;
  return nullptr;
}

bool has(const std::string &text, const std::string &what) {
  return text.find(what) != std::string::npos;
}

TEST(CudaAbsent, TheKindIsRegisteredAboveTheCpu) {
  const rt::DeviceKind *cuda = cudaKind();
  ASSERT_NE(cuda, nullptr);
  EXPECT_GT(cuda->priority, 0); // cpu is 0: auto prefers a GPU
  EXPECT_EQ(cuda->targets, std::vector<std::string>{"cuda"});
  ASSERT_NE(cuda->whyAbsent, nullptr);
  EXPECT_NE(rt::findKernel("cuda", rt::OpId::Matmul), nullptr);
  EXPECT_NE(rt::findKernel("cuda", rt::OpId::Fused), nullptr);
  EXPECT_NE(rt::findKernel("cuda", rt::OpId::Copy), nullptr);
  EXPECT_NE(rt::findKernel("cuda", rt::OpId::Conv2d), nullptr);
}

TEST(CudaAbsent, NoDriverMeansNoDevicesAndErrorsThatSayWhy) {
  SKIP_IF_DRIVER_PRESENT();
  const rt::DeviceKind *cuda = cudaKind();
  ASSERT_NE(cuda, nullptr);
  EXPECT_EQ(cuda->count(), 0);
  EXPECT_EQ(cuda->whyAbsent(), "no CUDA driver: libcuda.so.1 not found");
  EXPECT_EQ(rt::availableDevices(), std::vector<std::string>{"cpu"});
  EXPECT_EQ(rt::offeredTargets(), std::vector<std::string>{"cpu"});
  std::unique_ptr<rt::Device> d;
  for (const char *spec : {"cuda", "cuda:0", "cuda:1"}) {
    rt::Status st = rt::createDevice(spec, &d);
    ASSERT_FALSE(st) << spec;
    EXPECT_EQ(st.message(), "device '" + std::string(spec) +
                                "' is not present (no CUDA driver: "
                                "libcuda.so.1 not found; available: cpu)");
  }
  std::string why;
  ASSERT_TRUE(rt::createDevice("auto", &d, &why));
  EXPECT_EQ(d->name(), "cpu");
  EXPECT_EQ(why, "cuda skipped: no CUDA driver: libcuda.so.1 not found");
}

TEST(CudaAbsent, ADriverLibraryThatIsMissingOrNotADriverIsAnError) {
  rt::cuda::CudaDriver d;
  rt::Status st = rt::cuda::loadDriver("libmodelc-no-such-driver.so.1", &d);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(),
            "no CUDA driver: libmodelc-no-such-driver.so.1 not found");
  // A library that is there but is no driver: the first symbol it lacks.
  st = rt::cuda::loadDriver("libz.so.1", &d);
  ASSERT_FALSE(st);
  EXPECT_TRUE(has(st.message(), "libz.so.1 lacks cuInit")) << st.message();
  EXPECT_EQ(d.init, nullptr); // nothing half-loaded
}

TEST(CudaAbsent, CublasLtLoadsButItsHandleNeedsADriver) {
  const rt::cuda::CublasLt *lt = nullptr;
  rt::Status st = rt::cuda::loadCublasLt(&lt);
  if (!st)
    GTEST_SKIP() << "no cuBLASLt on this machine: " << st.message();
  ASSERT_NE(lt, nullptr);
  EXPECT_GE(lt->version, 130000u) << "CUDA 13's cuBLASLt";
  SKIP_IF_DRIVER_PRESENT();
  cublasLtHandle_t h = nullptr;
  st = rt::cuda::createCublasLtHandle(*lt, &h);
  ASSERT_FALSE(st);
  EXPECT_EQ(h, nullptr);
  // TOOLCHAIN.md: cublasLtCreate returns 1 without a driver.
  EXPECT_TRUE(has(st.message(),
                  "cublasLtCreate failed: CUBLAS_STATUS_NOT_INITIALIZED"))
      << st.message();
}

TEST(CudaAbsent, CudnnLoadsButItsHandleNeedsADriver) {
  const rt::cuda::Cudnn *dnn = nullptr;
  rt::Status st = rt::cuda::loadCudnn(&dnn);
  if (!st)
    GTEST_SKIP() << "no cuDNN on this machine: " << st.message();
  ASSERT_NE(dnn, nullptr);
  EXPECT_GE(dnn->version, 90000u) << "cuDNN 9's graph API";
  SKIP_IF_DRIVER_PRESENT();
  cudnnHandle_t h = nullptr;
  st = rt::cuda::createCudnnHandle(*dnn, &h);
  ASSERT_FALSE(st);
  EXPECT_EQ(h, nullptr);
  // TOOLCHAIN.md: cudnnCreate returns 1001 without a driver.
  EXPECT_TRUE(has(st.message(), "cudnnCreate failed: "
                                "CUDNN_STATUS_NOT_INITIALIZED (1001)"))
      << st.message();
}

TEST(CudaAbsent, OpeningALibraryNamesWhereItLooked) {
  std::string error;
  EXPECT_EQ(rt::cuda::openLibrary({"libmodelc-nothing.so.7"}, &error),
            nullptr);
  EXPECT_TRUE(has(error, "libmodelc-nothing.so.7 not found")) << error;
  EXPECT_TRUE(has(error, "/usr/local/cuda/lib64")) << error;
}

TEST(CudaAbsent, ModelcRunFallsBackToTheCpuAndSaysWhy) {
  SKIP_IF_DRIVER_PRESENT();
  char tmpl[] = "/tmp/modelc-cuda-absent-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string dir = tmpl, model = dir + "/mlp.mcpk";
  codegen::Plan p = test::mlpPlan();
  ASSERT_TRUE(codegen::planMemory(p));
  ASSERT_TRUE(codegen::writeArtifact(p, model));
  std::vector<float> x = test::mlpInput();
  ASSERT_TRUE(rt::writeNpy(dir + "/x.npy", rt::DType::F32,
                           {test::kBatch, test::kIn}, x.data()));
  test::ProcessResult r = test::runProcess(
      {MODELC_RUN_PATH, model, "--input", "x=" + dir + "/x.npy", "--device",
       "auto"},
      dir);
  ASSERT_TRUE(r.exited());
  EXPECT_EQ(r.code(), 0) << r.err;
  EXPECT_TRUE(has(r.err, "modelc-run: running on cpu (--device auto; cuda "
                         "skipped: no CUDA driver: libcuda.so.1 not found)"))
      << r.err;
  EXPECT_TRUE(has(r.out, "probs f32[4, 16]")) << r.out;
  r = test::runProcess({MODELC_RUN_PATH, model, "--input",
                        "x=" + dir + "/x.npy", "--device", "cuda"},
                       dir);
  ASSERT_TRUE(r.exited()) << "killed by signal " << WTERMSIG(r.status);
  EXPECT_EQ(r.code(), 1);
  EXPECT_EQ(r.err, "modelc-run: error: device 'cuda' is not present (no CUDA "
                   "driver: libcuda.so.1 not found; available: cpu)\n");
  ASSERT_EQ(std::system(("rm -rf '" + dir + "'").c_str()), 0);
}

} // namespace
