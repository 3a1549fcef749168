// The CUDA device on a GPU (CTest label gpu; each test skips, saying why,
// where no device is found): memory and copies, the executable that fits
// the GPU, generated kernels launched by the ABI of Launch
// (runtime/schema/mcpk.fbs), and the error for an artifact with no code
// for this GPU.
#include "GpuTestUtil.h"
#include "cuda/Cudnn.h"
#include "cuda/Nccl.h"
#include "modelc/communicator.h"
#include "modelc/model.h"

#include <dlfcn.h>
#include <fstream>
#include <random>

using namespace mc;
using namespace mc::test;

/// What the fake driver's modelcFakeCudaStats returns (FakeCudaDriver.cpp).
struct ModelcFakeCudaStats {
  long launches, kernelsRun, graphLaunches, graphsLive;
};

namespace {

std::string readFile(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f),
                     std::istreambuf_iterator<char>());
}

/// A test input's path: the environment's (test/gpu/run.sh sets them on
/// a machine the tests were carried to), else the build's.
std::string inputPath(const char *env, const char *built) {
  const char *v = std::getenv(env);
  return v && *v ? v : built;
}

const std::string &kernelsPtx() {
  static const std::string text = readFile(
      inputPath("MODELC_TEST_KERNELS_PTX", MODELC_TEST_KERNELS_PTX));
  return text;
}

rt::ExecutableView view(const std::string &format, const std::string &data) {
  rt::ExecutableView v;
  v.target = "cuda";
  v.format = format;
  v.entryPoints = {"add_f32", "copy_via_shared", "div_i32"};
  v.data = reinterpret_cast<const uint8_t *>(data.data());
  v.size = data.size();
  return v;
}

using CudaDevice = CudaTest;

TEST_F(CudaDevice, NamesItselfAndRunsTheCudaTarget) {
  EXPECT_EQ(device->name(), "cuda:0");
  EXPECT_EQ(device->kind(), "cuda");
  EXPECT_EQ(device->targets(), std::vector<std::string>{"cuda"});
  EXPECT_FALSE(device->hostAccessible());
  EXPECT_GE(cuda->ccMajor(), 7);
  EXPECT_GT(cuda->smCount(), 0);
  std::string why;
  std::unique_ptr<rt::Device> d;
  ASSERT_TRUE(rt::createDevice("auto", &d, &why));
  EXPECT_EQ(d->name(), "cuda:0") << "auto prefers the GPU";
  EXPECT_EQ(why, "preferred over cpu");
  std::printf("device: %s, %s\n", device->name().c_str(),
              cuda->gpuText().c_str());
}

TEST_F(CudaDevice, CopiesRoundTripThroughFreshZeroedMemory) {
  // Sizes below, at and above the 64 MiB staging chunk, odd ones included.
  for (size_t n : {size_t(1), size_t(1000), (size_t(4) << 20) + 3,
                   (size_t(64) << 20), (size_t(70) << 20) + 5}) {
    rt::DeviceMemory m;
    ASSERT_TRUE(device->allocate(n, &m)) << n;
    std::vector<uint8_t> back(n, 0xff);
    ASSERT_TRUE(device->copyToHost(back.data(), m.get(), n));
    EXPECT_EQ(std::count(back.begin(), back.end(), 0), std::ptrdiff_t(n))
        << n << " bytes: a new allocation reads as zeros";
    std::vector<uint8_t> data(n);
    std::mt19937 rng{static_cast<unsigned>(n)};
    for (uint8_t &b : data)
      b = uint8_t(rng());
    ASSERT_TRUE(device->copyToDevice(m.get(), data.data(), n));
    // The host's copy may change at once: the device has its own.
    std::vector<uint8_t> expected = data;
    std::fill(data.begin(), data.end(), 0);
    ASSERT_TRUE(device->copyToHost(back.data(), m.get(), n));
    EXPECT_TRUE(back == expected) << n << " bytes";
  }
  // Several copies queued before one wait (inputs before a run).
  std::vector<rt::DeviceMemory> bufs(8);
  std::vector<std::vector<uint8_t>> host(8);
  for (size_t i = 0; i < bufs.size(); ++i) {
    size_t n = (size_t(3) << 20) + i;
    host[i].assign(n, uint8_t(i + 1));
    ASSERT_TRUE(device->allocate(n, &bufs[i]));
    ASSERT_TRUE(device->copyToDevice(bufs[i].get(), host[i].data(), n));
  }
  ASSERT_TRUE(device->synchronize());
  for (size_t i = 0; i < bufs.size(); ++i) {
    std::vector<uint8_t> back(host[i].size());
    ASSERT_TRUE(device->copyToHost(back.data(), bufs[i].get(), back.size()));
    EXPECT_TRUE(back == host[i]) << i;
  }
  rt::DeviceMemory none;
  ASSERT_TRUE(device->allocate(0, &none));
  EXPECT_EQ(none.get(), nullptr);
}

TEST_F(CudaDevice, OutOfMemoryNamesTheBytesAskedAndFree) {
  rt::DeviceMemory m;
  rt::Status st = device->allocate(size_t(1) << 50, &m);
  ASSERT_FALSE(st);
  EXPECT_TRUE(has(st.message(), "cuda:0: cannot allocate 1.0 PiB "
                                "(1125899906842624 bytes)"))
      << st.message();
  EXPECT_TRUE(has(st.message(), "CUDA_ERROR_OUT_OF_MEMORY")) << st.message();
  EXPECT_TRUE(has(st.message(), " free of ")) << st.message();
  // The device still works.
  ASSERT_TRUE(device->allocate(1 << 20, &m));
  ASSERT_TRUE(device->synchronize());
}

/// add_f32 (out = a + b over 5 + 37 * batch elements) bound through
/// bindGenerated as a session binds a step at `batch`, with its tensors.
struct AddStep {
  int64_t n = 0;
  HostTensor a, b, out;
  rt::DeviceMemory da, db, dout;
  rt::BoundKernel kernel;

  /// Reads the output back: exactly a + b, element by element.
  void check(CudaTest &t, const std::string &where) {
    t.download(dout.get(), out);
    std::vector<float> fa = a.floats(), fb = b.floats(), fo = out.floats();
    size_t wrong = 0;
    for (size_t i = 0; i < fo.size(); ++i)
      wrong += fo[i] != fa[i] + fb[i];
    EXPECT_EQ(wrong, 0u) << "of " << n << " elements, " << where;
  }
};

std::unique_ptr<AddStep> bindAdd(CudaTest &t, int64_t batch,
                                 uint32_t executable = 0,
                                 uint32_t block = 128) {
  auto s = std::make_unique<AddStep>();
  s->n = 5 + 37 * batch;
  s->a = HostTensor::random(rt::DType::F32, {s->n}, 1);
  s->b = HostTensor::random(rt::DType::F32, {s->n}, 2);
  s->out = HostTensor(rt::DType::F32, {s->n});
  s->da = t.upload(s->a);
  s->db = t.upload(s->b);
  s->dout = t.upload(s->out);
  rt::GeneratedKernel g;
  g.executable = executable;
  g.entry = "add_f32";
  g.launch = rt::LaunchInfo{block, block, 0, 5, 37};
  g.batch = batch;
  rt::OpAttrs none;
  rt::KernelRequest r{rt::OpId::Add,
                      none,
                      {{rt::DType::F32, {s->n}, s->da.get()},
                       {rt::DType::F32, {s->n}, s->db.get()}},
                      {rt::DType::F32, {s->n}, s->dout.get()},
                      *t.device};
  r.generated = &g;
  r.stepIndex = 3;
  r.location = "add.py:4";
  rt::Status st = t.device->bindGenerated(r, &s->kernel);
  EXPECT_TRUE(st) << st.message();
  return st ? std::move(s) : nullptr;
}

/// Binds add_f32 at `batch`, runs it once and checks the result.
void runAdd(CudaTest &t, int64_t batch, uint32_t executable = 0) {
  std::unique_ptr<AddStep> s = bindAdd(t, batch, executable);
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->kernel(nullptr));
  ASSERT_TRUE(t.device->synchronize());
  s->check(t, "batch " + std::to_string(batch));
}

TEST_F(CudaDevice, RunsAGeneratedKernelFromPtx) {
  ASSERT_FALSE(kernelsPtx().empty()) << "kernels.ptx not found";
  rt::Status st = device->loadExecutables({view("cuda-ptx", kernelsPtx())});
  ASSERT_TRUE(st) << st.message();
  EXPECT_EQ(cuda->entryFormat("add_f32"), "cuda-ptx");
  runAdd(*this, 0);   // 5 units: one block
  runAdd(*this, 100); // 3705 units: 29 blocks
  // 3.7 million units: more blocks than the grid cap (4 waves of resident
  // blocks: 8448 of 128 threads on an H100), so threads stride.
  runAdd(*this, 100000);
}

// A channels_last convolution's constant filter is copied once, at bind,
// from KCRS to KRSC (cuDNN's NHWC kernels read it so): every element where
// the permutation puts it, in 4- and 2-byte dtypes; the original is left
// as it was; one copy per constant while a binding holds it. Needs no
// cuDNN, so it runs on the fake driver in CI.
TEST_F(CudaDevice, AChannelsLastFilterIsACopyInKrscOrder) {
  for (rt::DType t : {rt::DType::F32, rt::DType::BF16}) {
    SCOPED_TRACE(rt::dtypeName(t));
    const int64_t K = 3, C = 2, R = 2, S = 3;
    HostTensor w(t, {K, C, R, S});
    std::vector<float> v(w.size());
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = float(i); // exact in bf16 below 256
    w.setFloats(v);
    rt::DeviceMemory dw = upload(w);
    std::shared_ptr<const void> krsc;
    rt::Status st =
        rt::cuda::channelsLastFilter(*cuda, {t, w.shape, dw.get()}, &krsc);
    ASSERT_TRUE(st) << st.message();
    ASSERT_NE(krsc.get(), nullptr);
    ASSERT_NE(krsc.get(), static_cast<const void *>(dw.get()));
    HostTensor got(t, {K, R, S, C}), same(t, w.shape);
    download(const_cast<void *>(krsc.get()), got);
    download(dw.get(), same);
    std::vector<float> g = got.floats();
    for (int64_t k = 0; k < K; ++k)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t r = 0; r < R; ++r)
          for (int64_t x = 0; x < S; ++x)
            EXPECT_EQ(g[size_t(((k * R + r) * S + x) * C + c)],
                      v[size_t(((k * C + c) * R + r) * S + x)])
                << "k " << k << " c " << c << " r " << r << " s " << x;
    EXPECT_EQ(same.floats(), v) << "the KCRS weight is unchanged";
    // Another binding of the same constant (a second batch size, another
    // session) shares the copy while one holds it; a different shape of
    // the same bytes does not.
    std::shared_ptr<const void> again, other;
    ASSERT_TRUE(
        rt::cuda::channelsLastFilter(*cuda, {t, w.shape, dw.get()}, &again));
    EXPECT_EQ(again.get(), krsc.get());
    ASSERT_TRUE(rt::cuda::channelsLastFilter(*cuda, {t, {K, C, S, R}, dw.get()},
                                             &other));
    EXPECT_NE(other.get(), krsc.get());
  }
  std::shared_ptr<const void> none;
  rt::Status st = rt::cuda::channelsLastFilter(
      *cuda, {rt::DType::I32, {4, 3, 1, 1}, nullptr}, &none);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("i32[4, 3, 1, 1]"), std::string::npos)
      << st.message();
}

TEST_F(CudaDevice, DynamicSharedMemoryAbove48KiBIsAskedFor) {
  ASSERT_TRUE(device->loadExecutables({view("cuda-ptx", kernelsPtx())}));
  HostTensor in = HostTensor::random(rt::DType::F32, {4096}, 3);
  HostTensor out(rt::DType::F32, {4096});
  rt::DeviceMemory din = upload(in), dout;
  ASSERT_TRUE(device->allocate(out.bytes.size(), &dout));
  rt::GeneratedKernel g;
  g.entry = "copy_via_shared";
  // 64 KiB per block: more than the default 48 KiB limit.
  g.launch = rt::LaunchInfo{256, 256, 64 << 10, 4096, 0};
  rt::OpAttrs none;
  rt::KernelRequest r{rt::OpId::Copy, none,
                      {{rt::DType::F32, {4096}, din.get()}},
                      {rt::DType::F32, {4096}, dout.get()}, *device};
  r.generated = &g;
  rt::BoundKernel k;
  rt::Status st = device->bindGenerated(r, &k);
  ASSERT_TRUE(st) << st.message();
  ASSERT_TRUE(k(nullptr));
  ASSERT_TRUE(device->synchronize());
  download(dout.get(), out);
  EXPECT_TRUE(out.bytes == in.bytes);
  // More than any GPU gives: refused when bound, naming the GPU.
  g.launch.sharedBytes = 1 << 20;
  st = device->bindGenerated(r, &k);
  ASSERT_FALSE(st);
  EXPECT_TRUE(has(st.message(), "bytes of shared memory per block"))
      << st.message();
}

TEST_F(CudaDevice, PicksTheCubinOfItsArchitectureElsePtx) {
  std::string dir = inputPath("MODELC_TEST_CUBIN_DIR", MODELC_TEST_CUBIN_DIR);
  std::string sm80 = readFile(dir + "/kernels_sm80.cubin");
  std::string sm90 = readFile(dir + "/kernels_sm90.cubin");
  if (sm80.empty() || sm90.empty())
    GTEST_SKIP() << "no cubins in " << dir
                 << " (ptxas missing when the tests were built)";
  // As the compiler writes them: sm_80, sm_90, PTX for newer GPUs.
  ASSERT_TRUE(device->loadExecutables({view("cuda-cubin-sm_80", sm80),
                                       view("cuda-cubin-sm_90", sm90),
                                       view("cuda-ptx", kernelsPtx())}));
  // sm_80 runs on 8.x (8.0, 8.6, 8.9), sm_90 on 9.0 only, PTX elsewhere.
  std::string expected = cuda->ccMajor() == 8   ? "cuda-cubin-sm_80"
                         : cuda->ccMajor() == 9 ? "cuda-cubin-sm_90"
                                                : "cuda-ptx";
  EXPECT_EQ(cuda->entryFormat("add_f32"), expected) << cuda->gpuText();
  EXPECT_EQ(cuda->entryFormat("copy_via_shared"), expected);
  // A step names any of the three executables: the entry runs from the
  // one chosen.
  runAdd(*this, 10, /*executable=*/2);
  runAdd(*this, 10, /*executable=*/0);
}

TEST_F(CudaDevice, ACubinTheDriverRefusesFallsBackToThePtx) {
  // A cubin for this GPU's architecture that the driver cannot load (as a
  // driver older than the ptxas that made it refuses one): its entries run
  // from the artifact's PTX instead of failing the session.
  std::string junk(64, '\0');
  std::string sm = "cuda-cubin-sm_" + std::to_string(cuda->ccMajor()) +
                   std::to_string(cuda->ccMinor());
  ASSERT_TRUE(device->loadExecutables(
      {view(sm, junk), view("cuda-ptx", kernelsPtx())}));
  EXPECT_EQ(cuda->entryFormat("add_f32"), "cuda-ptx");
  runAdd(*this, 10, /*executable=*/0);
}

TEST_F(CudaDevice, AnArtifactWithNoCodeForThisGpuIsRefusedBeforeAnyWork) {
  std::string junk(64, '\0');
  std::string newPtx = ".version 9.0\n.target sm_999\n.address_size 64\n";
  rt::Status st = device->loadExecutables(
      {view("cuda-cubin-sm_10", junk), view("cuda-cubin-sm_999a", junk),
       view("cuda-ptx", newPtx)});
  ASSERT_FALSE(st);
  std::string sm = "sm_" + std::to_string(cuda->ccMajor()) +
                   std::to_string(cuda->ccMinor());
  const std::string &m = st.message();
  EXPECT_TRUE(has(m, "no CUDA code in the artifact runs on cuda:0")) << m;
  EXPECT_TRUE(has(m, cuda->gpuText())) << m; // its name and sm_XY
  EXPECT_TRUE(has(m, "cuda-cubin-sm_10, cuda-cubin-sm_999a, cuda-ptx "
                     "(.target sm_999)"))
      << m;
  EXPECT_TRUE(has(m, "has none for " + sm)) << m;

  // Through a session: refused at creation, naming the file, before any
  // allocation or binding (this plan's steps have no cuda kernels at all).
  codegen::Plan p = mlpPlan();
  p.targets = {"cuda"};
  codegen::PlanExecutable e;
  e.target = "cuda";
  e.format = "cuda-cubin-sm_10";
  e.entryPoints = {"fused_0"};
  e.data.assign(64, 0);
  p.executables.push_back(e);
  ASSERT_TRUE(codegen::planMemory(p));
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(codegen::writeArtifactToBytes(p, &bytes));
  std::unique_ptr<rt::Model> model;
  st = rt::Model::loadMemory(bytes.data(), bytes.size(), "mlp.mcpk", &model);
  ASSERT_TRUE(st) << st.message();
  std::unique_ptr<rt::Session> s;
  st = rt::Session::create(*model, std::move(device), &s);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message().rfind("mlp.mcpk: no CUDA code in the artifact runs "
                               "on cuda:0",
                               0),
            0u)
      << st.message();
  EXPECT_TRUE(has(st.message(), "entry 'fused_0' has none for " + sm))
      << st.message();
}

/// What the fake driver counted, when it is the driver loaded.
struct FakeStats {
  long launches = 0, kernelsRun = 0, graphLaunches = 0, graphsLive = 0;
};
bool fakeStats(FakeStats *out) {
  const char *path = std::getenv("MODELC_CUDA_DRIVER");
  if (!path || !*path)
    return false;
  void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (!h)
    return false;
  // Called through its own type (FakeCudaDriver.cpp's, declared above):
  // a call through another struct of the same layout is undefined
  // (UBSan's -fsanitize=function reports it).
  auto f = reinterpret_cast<ModelcFakeCudaStats (*)()>(
      dlsym(h, "modelcFakeCudaStats"));
  if (f) {
    ModelcFakeCudaStats s = f();
    *out = {s.launches, s.kernelsRun, s.graphLaunches, s.graphsLive};
  }
  dlclose(h);
  return f != nullptr;
}

// Device::runSteps: a key's first run as is, its second recorded as a CUDA
// graph and launched, later ones replayed; the graph reads the buffers'
// current contents. Key 0 records nothing; a step list that cannot be
// recorded runs step by step, with a note.
TEST_F(CudaDevice, RecordsTheSecondRunOfAKeyAsAGraphAndReplaysIt) {
  ASSERT_TRUE(device->loadExecutables({view("cuda-ptx", kernelsPtx())}));
  std::unique_ptr<AddStep> add = bindAdd(*this, 10, 0, /*block=*/64);
  ASSERT_TRUE(add);
  rt::BoundKernel &k = add->kernel;
  // Two launches per run (the same step twice).
  auto runAll = [&]() -> rt::Status {
    MC_RETURN_IF_ERROR(k(nullptr));
    return k(nullptr);
  };
  FakeStats before, after;
  bool fake = fakeStats(&before);
  for (unsigned run = 0; run < 4; ++run) {
    add->a = HostTensor::random(rt::DType::F32, {add->n}, 10 + run);
    ASSERT_TRUE(device->copyToDevice(add->da.get(), add->a.bytes.data(),
                                     add->a.bytes.size())); // new inputs
    rt::Status st = device->runSteps(42, runAll);
    ASSERT_TRUE(st) << st.message();
    ASSERT_TRUE(device->synchronize());
    add->check(*this, "run " + std::to_string(run));
  }
  EXPECT_EQ(cuda->graphCount(), 1u);
  if (fake && fakeStats(&after)) {
    // Run 1: 2 launches; run 2: 2 launches recorded, one graph launch;
    // runs 3 and 4: one graph launch each. 8 kernels ran.
    EXPECT_EQ(after.launches - before.launches, 4);
    EXPECT_EQ(after.graphLaunches - before.graphLaunches, 3);
    EXPECT_EQ(after.kernelsRun - before.kernelsRun, 8);
  }
  // Key 0 (profiling): as is, never recorded.
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(device->runSteps(0, runAll));
  EXPECT_EQ(cuda->graphCount(), 1u);
  // A step list that waits for the stream cannot be recorded: its second
  // run says so once and runs as is, and so do the later ones.
  auto waits = [&]() -> rt::Status {
    MC_RETURN_IF_ERROR(k(nullptr));
    return device->synchronize();
  };
  ASSERT_TRUE(device->runSteps(43, waits));
  testing::internal::CaptureStderr();
  rt::Status st = device->runSteps(43, waits);
  st = st ? device->runSteps(43, waits) : st;
  std::string notes = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(st) << st.message();
  EXPECT_TRUE(has(notes, "modelc: cuda:0: running the steps one by one, not "
                         "as a CUDA graph"))
      << notes;
  EXPECT_EQ(cuda->graphCount(), 1u);
  ASSERT_TRUE(device->synchronize());
  add->check(*this, "a step list run as is");
  add.reset();
  if (fakeStats(&after)) {
    device.reset(); // its graphs go with it
    fakeStats(&after);
    EXPECT_EQ(after.graphsLive, 0);
  }
}

/// x f32[B, 8] -> copy -> t -> copy -> out, for the cuda target; B in
/// [1, 16] with `dynamic`, else 4.
std::unique_ptr<rt::Model> copiesModel(bool dynamic) {
  codegen::Plan p;
  p.entry = "copies";
  p.targets = {"cuda"};
  int64_t rows = dynamic ? 16 : 4;
  if (dynamic)
    p.batch = codegen::PlanBatch{1, 16, 8};
  auto buf = [&](std::string name) {
    codegen::PlanBuffer b;
    b.name = std::move(name);
    b.shape = {rows, 8};
    if (dynamic)
      b.batchScale = {1, 0};
    p.buffers.push_back(b);
    return uint32_t(p.buffers.size() - 1);
  };
  uint32_t x = buf("x"), t = buf("t"), out = buf("out");
  addStep(p, rt::OpId::Copy, {x}, t, "copies.py:1");
  addStep(p, rt::OpId::Copy, {t}, out, "copies.py:2");
  p.inputs = {{"x", x}};
  p.outputs = {{"out", out}};
  std::vector<uint8_t> bytes;
  EXPECT_TRUE(codegen::planMemory(p));
  EXPECT_TRUE(codegen::writeArtifactToBytes(p, &bytes));
  static std::vector<std::vector<uint8_t>> keep; // the model reads it
  keep.push_back(bytes);
  std::unique_ptr<rt::Model> model;
  rt::Status st = rt::Model::loadMemory(keep.back().data(), keep.back().size(),
                                        "copies.mcpk", &model);
  EXPECT_TRUE(st) << st.message();
  return model;
}

void runCopies(rt::Session &s, int64_t batch, unsigned seed) {
  std::vector<float> x = randomFloats(size_t(batch) * 8, seed), out(x.size());
  rt::Status st =
      s.setInput(0, rt::DType::F32, {batch, 8}, x.data(), x.size() * 4);
  ASSERT_TRUE(st) << st.message();
  st = s.run();
  ASSERT_TRUE(st) << st.message();
  st = s.copyOutput(0, out.data(), out.size() * 4);
  ASSERT_TRUE(st) << st.message();
  EXPECT_EQ(out, x) << "batch " << batch << ", seed " << seed;
}

// Session on the GPU end to end, on steps every driver runs (copies): the
// inputs staged in, each batch bound once, a binding's second run recorded
// as a graph and replayed after, outputs copied back.
TEST_F(CudaDevice, ASessionRunsAndReplaysItsStepsAtEachBatch) {
  std::unique_ptr<rt::Model> model = copiesModel(/*dynamic=*/true);
  ASSERT_TRUE(model);
  rt::cuda::CudaDevice *cd = cuda;
  std::unique_ptr<rt::Session> s;
  rt::Status st = rt::Session::create(*model, std::move(device), &s);
  ASSERT_TRUE(st) << st.message();
  unsigned seed = 0;
  for (int64_t batch : {3, 3, 3, 16, 5, 3, 16, 16})
    runCopies(*s, batch, ++seed);
  EXPECT_EQ(s->batch(), 16);
  EXPECT_EQ(cd->graphCount(), 2u); // batches 3 and 16 ran twice or more
  std::vector<float> back(16 * 8);
  ASSERT_TRUE(s->copyOutput(0, back.data(), back.size() * 4));
}

TEST_F(CudaDevice, AProfiledSessionTimesItsStepsOnTheDevice) {
  std::unique_ptr<rt::Model> model = copiesModel(/*dynamic=*/false);
  ASSERT_TRUE(model);
  rt::cuda::CudaDevice *cd = cuda;
  std::unique_ptr<rt::Session> s;
  {
    ScopedEnv profile("MODELC_PROFILE", "1");
    ASSERT_TRUE(rt::Session::create(*model, std::move(device), &s));
  }
  for (unsigned i = 0; i < 3; ++i)
    runCopies(*s, 4, i);
  EXPECT_EQ(cd->graphCount(), 0u) << "profiled runs are not recorded";
  testing::internal::CaptureStderr();
  s.reset();
  std::string table = testing::internal::GetCapturedStderr();
  // 3 runs, the first left out.
  EXPECT_TRUE(has(table, "profile: copies.mcpk: 2 runs")) << table;
  EXPECT_TRUE(has(table, "copy")) << table;
}

/// kernels.ptx's div_i32 (a / b over 5 + 37 * batch i32 elements, a zero
/// divisor recorded in its error record) as a session would bind step
/// `stepIndex`, on device memory a, b and out.
struct DivStep {
  rt::GeneratedKernel g;
  rt::OpAttrs none;
  rt::KernelRequest r;
  DivStep(rt::Device &device, int64_t batch, void *a, void *b, void *out,
          uint32_t stepIndex, std::string location)
      : r{rt::OpId::Div,
          none,
          {{rt::DType::I32, {5 + 37 * batch}, a},
           {rt::DType::I32, {5 + 37 * batch}, b}},
          {rt::DType::I32, {5 + 37 * batch}, out},
          device} {
    g.entry = "div_i32";
    g.launch = rt::LaunchInfo{32, 32, 0, 5, 37};
    g.launch.errorRecord = true;
    g.batch = batch;
    r.generated = &g;
    r.stepIndex = stepIndex;
    r.location = std::move(location);
  }
  DivStep(const DivStep &) = delete;
};

/// Uploads i32 values.
rt::DeviceMemory uploadInts(CudaTest &t, const std::vector<int32_t> &v) {
  rt::DeviceMemory m;
  EXPECT_TRUE(t.device->allocate(v.size() * 4, &m));
  EXPECT_TRUE(t.device->copyToDevice(m.get(), v.data(), v.size() * 4));
  return m;
}

// A kernel that can fail (kernels.ptx's div_i32: an integer division, a
// zero divisor recorded in its error record, modelc/error_record.h): the
// device copies the records back at the end of each run (inside the CUDA
// graph once one is recorded) and synchronize() reports the lowest failing
// element with the CPU kernel's own message, naming the step; the records
// are then zeroed, so the next good run passes.
TEST_F(CudaDevice, AKernelsErrorRecordIsTheCpusErrorAfterTheRun) {
  ASSERT_TRUE(device->loadExecutables({view("cuda-ptx", kernelsPtx())}));
  const int64_t batch = 2, n = 5 + 37 * batch;
  std::vector<int32_t> a(n), b(n);
  for (int64_t i = 0; i < n; ++i) {
    a[size_t(i)] = int32_t(i * 7 - 200);
    b[size_t(i)] = int32_t(i % 5) - 2 ? int32_t(i % 5) - 2 : 3; // -2..2, no 0
  }
  a[1] = INT32_MIN;
  b[1] = -1; // wraps, as on the CPU
  rt::DeviceMemory da = uploadInts(*this, a), db = uploadInts(*this, b),
                   dout = uploadInts(*this, std::vector<int32_t>(n));
  DivStep div(*device, batch, da.get(), db.get(), dout.get(), 6, "div.py:2");
  const rt::KernelRequest &r = div.r;
  rt::OpAttrs none;
  rt::BoundKernel k;
  rt::Status st = device->bindGenerated(r, &k);
  ASSERT_TRUE(st) << st.message();

  // The CPU's kernel on the same values: its result, or its error.
  auto cpu = [&](const std::vector<int32_t> &divisors,
                 std::vector<int32_t> *out) {
    std::unique_ptr<rt::Device> host;
    EXPECT_TRUE(rt::createDevice("cpu", &host));
    out->assign(size_t(n), 0);
    rt::KernelRequest c{rt::OpId::Div,
                        none,
                        {{rt::DType::I32, {n}, a.data()},
                         {rt::DType::I32, {n}, divisors.data()}},
                        {rt::DType::I32, {n}, out->data()},
                        *host};
    rt::BoundKernel bound;
    size_t scratch = 0;
    rt::Status s = rt::findKernel("cpu", rt::OpId::Div)(c, &bound, &scratch);
    return s ? bound(nullptr) : s;
  };
  auto run = [&](const std::vector<int32_t> &divisors) {
    EXPECT_TRUE(device->copyToDevice(db.get(), divisors.data(), n * 4));
    rt::Status s = device->runSteps(7, [&] { return k(nullptr); });
    return s ? device->synchronize() : s;
  };
  std::vector<int32_t> zeros = b;
  zeros[40] = 0;
  zeros[9] = 0;
  std::vector<int32_t> late = b;
  late[70] = 0;
  // Run 1 as is, run 2 recorded as a graph, runs 3 to 5 replayed.
  int runs = 0;
  for (const std::vector<int32_t> *divisors : {&b, &zeros, &late, &b, &zeros}) {
    ++runs;
    std::vector<int32_t> want;
    rt::Status onCpu = cpu(*divisors, &want);
    rt::Status onGpu = run(*divisors);
    if (onCpu) {
      ASSERT_TRUE(onGpu) << "run " << runs << ": " << onGpu.message();
      std::vector<int32_t> got(static_cast<size_t>(n));
      ASSERT_TRUE(device->copyToHost(got.data(), dout.get(), n * 4));
      EXPECT_EQ(got, want) << "run " << runs;
      continue;
    }
    ASSERT_FALSE(onGpu) << "run " << runs << " should fail: "
                        << onCpu.message();
    EXPECT_EQ(onGpu.message(),
              "cuda:0: step 6 (mc.div at div.py:2): " + onCpu.message() +
                  " (found by the step's kernel on the GPU; the steps after "
                  "it ran anyway, so this run's outputs and any state it "
                  "updated are not valid)")
        << "run " << runs;
  }
  EXPECT_EQ(cuda->graphCount(), 1u);
  // A binding a session drops gives its record back: binding the step
  // again and again (a server cycling through batch sizes) takes no more.
  EXPECT_EQ(cuda->errorRecordSlots(), 1u);
  for (int i = 0; i < 300; ++i) {
    rt::BoundKernel again;
    ASSERT_TRUE(device->bindGenerated(r, &again));
  }
  EXPECT_EQ(cuda->errorRecordSlots(), 2u); // k's, and the one reused
  ASSERT_FALSE(run(zeros)) << "the first kernel still reports";
  ASSERT_TRUE(run(b));
}

// The same error through an artifact and a Session: Launch.error_record
// written and read back (schema 2.4), the record bound by the session, the
// error the CPU gives for the same file and values, prefixed by the file
// and the device.
TEST_F(CudaDevice, ASessionReportsAKernelsErrorRecordAsTheCpuDoes) {
  codegen::Plan p;
  p.entry = "divide";
  p.targets = {"cpu", "cuda"};
  auto buf = [&](std::string name) {
    codegen::PlanBuffer b;
    b.name = std::move(name);
    b.dtype = rt::DType::I32;
    b.shape = {5}; // div_i32 divides 5 + 37 * batch elements; batch 0
    p.buffers.push_back(b);
    return uint32_t(p.buffers.size() - 1);
  };
  uint32_t a = buf("a"), b = buf("b"), q = buf("q");
  codegen::PlanStep &step = addStep(p, rt::OpId::Div, {a, b}, q, "div.py:3");
  step.executable = 0;
  step.entry = "div_i32";
  step.launch = rt::LaunchInfo{32, 32, 0, 5, 0};
  step.launch.errorRecord = true;
  codegen::PlanExecutable exe;
  exe.target = "cuda";
  exe.format = "cuda-ptx";
  exe.entryPoints = {"div_i32"};
  exe.data.assign(kernelsPtx().begin(), kernelsPtx().end());
  p.executables.push_back(std::move(exe));
  p.inputs = {{"a", a}, {"b", b}};
  p.outputs = {{"q", q}};
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(codegen::planMemory(p));
  ASSERT_TRUE(codegen::writeArtifactToBytes(p, &bytes));
  std::unique_ptr<rt::Model> model;
  rt::Status st =
      rt::Model::loadMemory(bytes.data(), bytes.size(), "div.mcpk", &model);
  ASSERT_TRUE(st) << st.message();
  std::unique_ptr<rt::Device> host;
  ASSERT_TRUE(rt::createDevice("cpu", &host));
  std::unique_ptr<rt::Session> gpu, cpu;
  st = rt::Session::create(*model, std::move(device), &gpu);
  ASSERT_TRUE(st) << st.message();
  ASSERT_TRUE(rt::Session::create(*model, std::move(host), &cpu));
  std::vector<int32_t> x = {7, -7, 9, INT32_MIN, 100};
  for (std::vector<int32_t> y : {std::vector<int32_t>{2, 2, -4, -1, 3},
                                 std::vector<int32_t>{2, 0, 1, 0, 3},
                                 std::vector<int32_t>{1, 1, 1, 1, 0}}) {
    std::vector<int32_t> got(5), want(5);
    rt::Status runs[2];
    rt::Session *sessions[2] = {cpu.get(), gpu.get()};
    for (int k = 0; k < 2; ++k) {
      ASSERT_TRUE(sessions[k]->setInput(0, rt::DType::I32, {5}, x.data(), 20));
      ASSERT_TRUE(sessions[k]->setInput(1, rt::DType::I32, {5}, y.data(), 20));
      runs[k] = sessions[k]->run();
      if (runs[k]) {
        ASSERT_TRUE(sessions[k]->copyOutput(0, k ? got.data() : want.data(),
                                            20));
      }
    }
    if (runs[0]) {
      ASSERT_TRUE(runs[1]) << runs[1].message();
      EXPECT_EQ(got, want);
      continue;
    }
    // "div.mcpk: step 0 (mc.div at div.py:3): div: ..." on the CPU.
    std::string cpuText = runs[0].message();
    std::string prefix = "div.mcpk: step 0 (mc.div at div.py:3): ";
    ASSERT_EQ(cpuText.rfind(prefix, 0), 0u) << cpuText;
    ASSERT_FALSE(runs[1]);
    EXPECT_EQ(runs[1].message(),
              "div.mcpk: cuda:0: step 0 (mc.div at div.py:3): " +
                  cpuText.substr(prefix.size()) +
                  " (found by the step's kernel on the GPU; the steps after "
                  "it ran anyway, so this run's outputs and any state it "
                  "updated are not valid)");
  }
}

// With MODELC_CUDA_SYNC=1 the device waits after each step and reads the
// records then: the run stops at the failing step, as on the CPU, and the
// session names the step as for any step's error.
TEST_F(CudaDevice, WithSyncEachStepAKernelsErrorStopsTheRunAtItsStep) {
  std::unique_ptr<rt::Device> synced;
  {
    ScopedEnv sync("MODELC_CUDA_SYNC", "1");
    rt::Status st = rt::cuda::CudaDevice::create(0, &synced);
    ASSERT_TRUE(st) << st.message();
  }
  ASSERT_TRUE(synced->loadExecutables({view("cuda-ptx", kernelsPtx())}));
  std::vector<int32_t> a = {7, -7, 9, 1, 100}, b = {2, 0, 0, 1, 3};
  rt::DeviceMemory da, db, dout;
  for (auto [m, v] : {std::pair{&da, &a}, std::pair{&db, &b},
                      std::pair{&dout, &a}}) {
    ASSERT_TRUE(synced->allocate(20, m));
    ASSERT_TRUE(synced->copyToDevice(m->get(), v->data(), 20));
  }
  DivStep div(*synced, 0, da.get(), db.get(), dout.get(), 2, "");
  rt::BoundKernel k;
  ASSERT_TRUE(synced->bindGenerated(div.r, &k));
  rt::Status st = k(nullptr);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(), "cuda:0: div: integer division by zero at element "
                          "1 (found by the step's kernel on the GPU)");
  // The records were zeroed: the next good run passes.
  b = {1, 1, 1, 1, 1};
  ASSERT_TRUE(synced->copyToDevice(db.get(), b.data(), 20));
  st = k(nullptr);
  EXPECT_TRUE(st) << st.message();
  EXPECT_TRUE(synced->synchronize());
}

TEST_F(CudaDevice, ALaunchOfAnUnknownEntryIsABindError) {
  ASSERT_TRUE(device->loadExecutables({view("cuda-ptx", kernelsPtx())}));
  rt::GeneratedKernel g;
  g.entry = "nope";
  g.launch = rt::LaunchInfo{128, 128, 0, 1, 0};
  rt::OpAttrs none;
  rt::KernelRequest r{rt::OpId::Copy, none, {}, {rt::DType::F32, {1},
                      nullptr}, *device};
  r.generated = &g;
  rt::BoundKernel k;
  rt::Status st = device->bindGenerated(r, &k);
  ASSERT_FALSE(st);
  EXPECT_TRUE(has(st.message(), "entry 'nope'")) << st.message();
}

// The all-reduce step pair of one rank (pack, self communicator, scale by
// the runtime's own kernel) on a device, then on a new device after the
// first is gone. The scale kernel's module belongs to the device's
// context: it used to be cached per ordinal for the life of the process,
// so the second device launched a function of a context that had reset
// (CUDA_ERROR_INVALID_HANDLE; the fake driver resets its context, as the
// real one does, when the last reference goes).
TEST_F(CudaDevice, CollectiveStepsRunOnEachNewDeviceOfAProcess) {
  device.reset(); // the fixture's device holds the context
  cuda = nullptr;
  rt::setCurrentCommunicator(rt::makeSelfCommunicator());
  HostTensor g0 = HostTensor::random(rt::DType::F32, {3, 5}, 1);
  HostTensor g1 = HostTensor::random(rt::DType::F32, {7}, 2);
  rt::Shape bucket{int64_t(g0.size() + g1.size())};
  std::vector<float> want = g0.floats();
  for (float v : g1.floats())
    want.push_back(v);
  for (float &v : want)
    v *= 0.5f;
  for (int round = 0; round < 2; ++round) {
    std::unique_ptr<rt::Device> dev;
    rt::Status st = rt::createDevice("cuda", &dev);
    ASSERT_TRUE(st) << st.message();
    {
      rt::DeviceMemory d0, d1, db, dout;
      size_t bytes = size_t(rt::numElements(bucket)) * 4;
      ASSERT_TRUE(dev->allocate(g0.bytes.size(), &d0));
      ASSERT_TRUE(dev->allocate(g1.bytes.size(), &d1));
      ASSERT_TRUE(dev->allocate(bytes, &db));
      ASSERT_TRUE(dev->allocate(bytes, &dout));
      ASSERT_TRUE(dev->copyToDevice(d0.get(), g0.bytes.data(), g0.bytes.size()));
      ASSERT_TRUE(dev->copyToDevice(d1.get(), g1.bytes.data(), g1.bytes.size()));
      rt::KernelRequest start{rt::OpId::AllReduceStart,
                              {rt::OpAttr::integer("ranks", 1)},
                              {{rt::DType::F32, g0.shape, d0.get()},
                               {rt::DType::F32, g1.shape, d1.get()}},
                              {rt::DType::F32, bucket, db.get()},
                              *dev};
      rt::KernelRequest wait{rt::OpId::AllReduceWait,
                             {rt::OpAttr::real("scale", 0.5)},
                             {{rt::DType::F32, bucket, db.get()}},
                             {rt::DType::F32, bucket, dout.get()},
                             *dev};
      st = bindAndRun(*dev, start);
      ASSERT_TRUE(st) << "round " << round << ": " << st.message();
      st = bindAndRun(*dev, wait);
      ASSERT_TRUE(st) << "round " << round << ": " << st.message();
      HostTensor out(rt::DType::F32, bucket);
      ASSERT_TRUE(dev->copyToHost(out.bytes.data(), dout.get(), bytes));
      EXPECT_EQ(out.floats(), want) << "round " << round;
    }
  }
  rt::setCurrentCommunicator(nullptr);
}

/// A stand-in for libnccl (its entry points as NcclApi holds them) that
/// counts what the communicator asks of it.
struct FakeNccl {
  static int inits, destroys, aborts;
  static bool failInit;
  static rt::cuda::NcclApi api() {
    rt::cuda::NcclApi a;
    a.commInitRank = [](rt::cuda::nccl::Comm *c, int, rt::cuda::nccl::UniqueId,
                        int) {
      ++inits;
      if (failInit)
        return rt::cuda::nccl::Result(2); // ncclSystemError
      *c = reinterpret_cast<rt::cuda::nccl::Comm>(&inits);
      return rt::cuda::nccl::kSuccess;
    };
    a.commDestroy = [](rt::cuda::nccl::Comm) {
      ++destroys;
      return rt::cuda::nccl::kSuccess;
    };
    a.commAbort = [](rt::cuda::nccl::Comm) {
      ++aborts;
      return rt::cuda::nccl::kSuccess;
    };
    return a;
  }
};
int FakeNccl::inits = 0, FakeNccl::destroys = 0, FakeNccl::aborts = 0;
bool FakeNccl::failInit = false;

// The process's NCCL communicator outlives the session whose device it is
// on (modelc-run --train drops the session, then the communicator): the
// device, as it goes, destroys the NCCL communicator and frees the stream
// and events it made in the device's context. The communicator used to
// reach the freed device from its destructor.
TEST_F(CudaDevice, AnNcclCommunicatorIsReleasedByItsDeviceWhenTheDeviceGoesFirst) {
  for (bool deviceFirst : {true, false}) {
    FakeNccl::inits = FakeNccl::destroys = FakeNccl::aborts = 0;
    std::unique_ptr<rt::Device> dev;
    rt::Status st = rt::createDevice("cuda", &dev);
    ASSERT_TRUE(st) << st.message();
    auto comm = std::make_unique<rt::cuda::NcclCommunicator>(
        FakeNccl::api(), 0, 1, rt::cuda::nccl::UniqueId{});
    st = comm->attach(static_cast<rt::cuda::CudaDevice &>(*dev));
    ASSERT_TRUE(st) << st.message();
    EXPECT_EQ(FakeNccl::inits, 1);
    if (deviceFirst) {
      dev.reset();
      EXPECT_EQ(FakeNccl::destroys, 1) << "released by the device";
      float x = 1;
      st = comm->start(&x, 1, rt::DType::F32, rt::ReduceOp::Sum, "a bucket");
      ASSERT_FALSE(st);
      EXPECT_TRUE(has(st.message(), "its device cuda:0 is gone"))
          << st.message();
      comm.reset();
    } else {
      comm.reset();
      EXPECT_EQ(FakeNccl::destroys, 1) << "released by its destructor";
      dev.reset();
    }
    EXPECT_EQ(FakeNccl::destroys, 1) << "once, whatever goes first";
    EXPECT_EQ(FakeNccl::aborts, 0);
  }
  // An attach that fails (ncclCommInitRank) leaves the communicator on no
  // device, not half attached: the next attach creates it.
  FakeNccl::inits = FakeNccl::destroys = 0;
  FakeNccl::failInit = true;
  auto comm = std::make_unique<rt::cuda::NcclCommunicator>(
      FakeNccl::api(), 0, 1, rt::cuda::nccl::UniqueId{});
  rt::Status st = comm->attach(*cuda);
  FakeNccl::failInit = false;
  ASSERT_FALSE(st);
  EXPECT_TRUE(has(st.message(), "ncclCommInitRank")) << st.message();
  st = comm->attach(*cuda);
  ASSERT_TRUE(st) << st.message();
  EXPECT_EQ(FakeNccl::inits, 2);
  comm.reset();
  EXPECT_EQ(FakeNccl::destroys, 1);
}

} // namespace
