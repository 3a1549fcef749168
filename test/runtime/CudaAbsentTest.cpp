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
#include "cuda/Nccl.h"
#include "modelc/communicator.h"
#include "modelc/device.h"
#include "modelc/npy.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

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

// NCCL without a GPU: libnccl loads and makes a unique id (neither needs a
// device), and a torchrun-style launch of two ranks hands rank 0's id to
// rank 1 over the TCP bootstrap, byte for byte. The NCCL communicator
// proper (ncclCommInitRank) needs a GPU: test/gpu/NcclTest.cpp.
TEST(CudaAbsent, NcclIdReachesEveryRankOverTheTcpBootstrap) {
  rt::cuda::NcclApi api;
  rt::Status loaded = rt::cuda::loadNccl("", &api);
  if (!loaded)
    GTEST_SKIP() << "no libnccl here: " << loaded.message();
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ::getsockname(s, reinterpret_cast<sockaddr *>(&a), &len);
  ::close(s);
  std::unique_ptr<rt::Communicator> comms[2];
  rt::Status status[2];
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      rt::LaunchVars v;
      v.present = true;
      v.rank = r;
      v.worldSize = 2;
      v.masterAddr = "127.0.0.1";
      v.masterPort = ntohs(a.sin_port);
      status[r] = rt::makeNcclCommunicator(
          r, 2, 10,
          [v](std::string *id) { return rt::tcpBroadcast(v, 10, id); },
          &comms[r]);
    });
  for (std::thread &t : ranks)
    t.join();
  for (int r = 0; r < 2; ++r)
    ASSERT_TRUE(status[r]) << "rank " << r << ": " << status[r].message();
  auto *n0 = static_cast<rt::cuda::NcclCommunicator *>(comms[0].get());
  auto *n1 = static_cast<rt::cuda::NcclCommunicator *>(comms[1].get());
  EXPECT_EQ(n0->name(), "nccl");
  EXPECT_EQ(n1->rank(), 1);
  EXPECT_EQ(n1->size(), 2);
  EXPECT_EQ(std::memcmp(n0->uniqueId().internal, n1->uniqueId().internal,
                        rt::cuda::nccl::kUniqueIdBytes),
            0);
  // Not on a device yet: a collective says so.
  float x = 1;
  rt::Status st = comms[0]->start(&x, 1, rt::DType::F32, rt::ReduceOp::Sum,
                                  "test");
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("not on a CUDA device"), std::string::npos)
      << st.message();
  std::printf("  NCCL %s: unique id handed to rank 1\n",
              rt::cuda::ncclVersionText(api.version).c_str());
}
