// The cuDNN graphs the CUDA device builds, planned with no GPU: cuDNN 9.8
// and up makes a plan for a GPU described by its device properties
// (test/gpu/Inputs/{a100,h100}.cudnn-device.json), running its own graph
// validation, its heuristic for that architecture and each engine's
// support checks, everything but the execution. So a graph cuDNN would
// refuse on an A100 or H100 fails here, in CI, not first on a GPU: the
// convolutions (plain and with bias and relu fused) and the fused
// attention graph on both (the attention engines compile with NVRTC and
// stop at loading, which needs a driver). Needs cuDNN's libraries (the toolkit's
// /usr/local/cuda/lib64 here), not a driver; skips, saying why, without
// them.
#include "ConvCases.h"
#include "cuda/CudaDriver.h"
#include "cuda/Cudnn.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>
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

/// How a convolution's tensors are stored (ConvProblem's two flags).
struct Layout {
  const char *name;
  bool channelsLast, filterChannelsLast;
};
/// The device's three: NCHW; channels_last with the weight as given (not
/// a constant); channels_last with a constant weight copied to KRSC.
const Layout kLayouts[] = {
    {"NCHW", false, false}, {"NHWC", true, false}, {"NHWC, KRSC", true, true}};

rt::cuda::ConvProblem problem(const ConvCase &c, DType dtype, bool bias,
                              bool relu, const Layout &layout = kLayouts[0]) {
  rt::cuda::ConvProblem p;
  p.channelsLast = layout.channelsLast;
  p.filterChannelsLast = layout.filterChannelsLast;
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

/// Plans every case as the device would bind it, in each layout: each
/// dtype alone, and f16 and bf16 with the bias and relu fused (the regions
/// the cuda target keeps whole).
void planAll(const rt::cuda::Cudnn &dnn, const char *device,
             const DeviceProperties &props) {
  PlanTarget target{nullptr, props.get()};
  for (const Layout &layout : kLayouts)
    for (const ConvCase &c : kCases)
      for (DType dtype : {DType::F32, DType::F16, DType::BF16})
        for (int fused = 0; fused < (dtype == DType::F32 ? 1 : 3); ++fused) {
          bool bias = fused >= 1, relu = fused == 2;
          PlanInfo info;
          rt::Status st = rt::cuda::planConv(
              dnn, target, problem(c, dtype, bias, relu, layout), &info);
          EXPECT_TRUE(st) << device << ": " << st.message();
          if (!st)
            continue;
          EXPECT_GE(info.engine, 0);
          std::printf("  %-5s %-10s %-36s %-4s %-10s engine %3lld (%s list, "
                      "%lld tried) workspace %lld%s\n",
                      device, layout.name, c.name, rt::dtypeName(dtype),
                      relu   ? "+bias,relu"
                      : bias ? "+bias"
                             : "",
                      (long long)info.engine, info.heuristic.c_str(),
                      (long long)info.tried, (long long)info.workspace,
                      info.compiledOnly ? ", compiled, not loaded" : "");
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

// Why the cuda target runs convolutions channels_last: for ResNet-50's
// layers at the GPU benchmark's batch (128), cuDNN's plans for NCHW
// tensors ask for a workspace as large as the activations (the engine
// transposes them to NHWC and back at every call), for NHWC activations
// with a KCRS filter one of the filter's size (it transposes the filter),
// and for NHWC with KRSC almost none: checked for bf16 on the A100 and
// H100. f32 (TF32) is printed: its NHWC plans drop the workspace on the
// H100, while the A100's keep one as large (its engines' own, the same
// with NCHW).
TEST_F(CudnnPlan, ChannelsLastPlansReadResNetsTensorsWhereTheyLie) {
  // clang-format off
  const ConvCase layers[] = {
      {"ResNet-50 3x3, 64 ch, 56x56", {128, 64, 56, 56}, {64, 64, 3, 3},
       {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
      {"ResNet-50 1x1, 256 -> 64, 56x56", {128, 256, 56, 56}, {64, 256, 1, 1},
       {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
      {"ResNet-50 3x3 stride 2, 256 ch", {128, 256, 28, 28}, {256, 256, 3, 3},
       {2, 2}, {1, 1, 1, 1}, {1, 1}, 1},
  };
  // clang-format on
  std::printf("  %-5s %-4s %-32s %14s %14s %14s\n", "gpu", "type", "layer",
              "NCHW", "NHWC", "NHWC, KRSC");
  for (const char *device : kDevices) {
    DeviceProperties props;
    ASSERT_NO_FATAL_FAILURE(load(device, &props));
    for (DType dtype : {DType::BF16, DType::F32})
      for (const ConvCase &c : layers) {
        int64_t ws[3] = {};
        for (int l = 0; l < 3; ++l) {
          PlanInfo info;
          rt::Status st = rt::cuda::planConv(
              *dnn, PlanTarget{nullptr, props.get()},
              problem(c, dtype, false, false, kLayouts[l]), &info);
          ASSERT_TRUE(st) << st.message();
          ws[l] = info.workspace;
        }
        std::printf("  %-5s %-4s %-32s %14lld %14lld %14lld\n", device,
                    rt::dtypeName(dtype), c.name, (long long)ws[0],
                    (long long)ws[1], (long long)ws[2]);
        int64_t xBytes = rt::numElements(c.x) * int64_t(rt::dtypeSize(dtype));
        int64_t wBytes = rt::numElements(c.w) * int64_t(rt::dtypeSize(dtype));
        if (dtype != DType::BF16)
          continue; // f32's plans vary (see the comment above)
        EXPECT_GE(ws[0], xBytes / 2) << device << " " << c.name;
        EXPECT_LT(ws[2], wBytes) << device << " " << c.name;
      }
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

// Identical graphs share a plan while one lives: a model with 12 identical
// attention layers compiles one (cuDNN's runtime compilation is about half
// a second each), not 12. Anything that changes the graph, the target or
// the TF32 choice plans anew.
TEST_F(CudnnPlan, IdenticalGraphsShareALivePlan) {
  DeviceProperties a100, h100;
  ASSERT_NO_FATAL_FAILURE(load("a100", &a100));
  ASSERT_NO_FATAL_FAILURE(load("h100", &h100));
  const ConvCase &c = kCases[1];
  auto plan = [&](const DeviceProperties &props,
                  const rt::cuda::ConvProblem &p,
                  std::shared_ptr<const void> *keep) {
    PlanInfo info;
    rt::Status st = rt::cuda::planConv(*dnn, PlanTarget{nullptr, props.get()},
                                       p, &info, keep);
    EXPECT_TRUE(st) << st.message();
    return info;
  };
  rt::cuda::ConvProblem p = problem(c, DType::F16, true, true);
  std::shared_ptr<const void> first;
  PlanInfo fresh = plan(a100, p, &first);
  EXPECT_FALSE(fresh.cached);
  PlanInfo again = plan(a100, p, nullptr);
  EXPECT_TRUE(again.cached);
  EXPECT_EQ(again.engine, fresh.engine);
  EXPECT_EQ(again.workspace, fresh.workspace);
  EXPECT_EQ(again.heuristic, fresh.heuristic);
  // Another GPU, another graph (padding, the bias's alignment, no relu).
  EXPECT_FALSE(plan(h100, p, nullptr).cached);
  rt::cuda::ConvProblem padded = p;
  padded.params.padBottom += 1;
  padded.y[2] += 1;
  EXPECT_FALSE(plan(a100, padded, nullptr).cached);
  alignas(16) static const char bias[32] = {};
  rt::cuda::ConvProblem shifted = p;
  shifted.bias = bias + 2;
  EXPECT_FALSE(plan(a100, shifted, nullptr).cached);
  EXPECT_FALSE(plan(a100, problem(c, DType::F16, true, false), nullptr).cached);
  // TF32 off is another plan for f32 (its engines may not use tensor
  // cores).
  rt::cuda::ConvProblem f32 = problem(c, DType::F32, false, false);
  std::shared_ptr<const void> f32Plan;
  EXPECT_FALSE(plan(a100, f32, &f32Plan).cached);
  ::setenv("MODELC_CUDA_TF32", "0", 1);
  EXPECT_FALSE(plan(a100, f32, nullptr).cached);
  ::unsetenv("MODELC_CUDA_TF32");
  EXPECT_TRUE(plan(a100, f32, nullptr).cached);
  // Once no one holds it, the plan is gone: planned again.
  first.reset();
  EXPECT_FALSE(plan(a100, p, nullptr).cached);
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

namespace {

std::vector<int64_t> packed(const rt::Shape &s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t i = s.size() - 1; i-- > 0;)
    st[i] = st[i + 1] * s[i + 1];
  return st;
}

/// Q, V, O packed; KT the transposed view of a packed K [b, h, skv, d]
/// (its head dim contiguous, as the device always has it: the cuda target
/// rewrites a k stored [.., d, skv]; with such a KT, cuDNN 9.19's
/// heuristic crashes for the H100 here, SIGSEGV in
/// libcudnn_engines_runtime_compiled, where it should refuse).
rt::cuda::AttentionProblem attention(DType dtype, int64_t b, int64_t h,
                                     int64_t s, int64_t d, bool bias) {
  rt::cuda::AttentionProblem p;
  p.dtype = dtype;
  p.b = b, p.h = h, p.sq = s, p.skv = s, p.d = d, p.dv = d;
  p.qStrides = packed({b, h, s, d});
  p.vStrides = p.qStrides;
  p.oStrides = p.qStrides;
  p.ktStrides = {h * s * d, s * d, 1, d};
  p.scale = 1.0f / 8;
  if (bias) {
    p.hasBias = true;
    p.biasType = dtype;
    p.biasDims = {1, 1, s, s}; // a mask shared by the batch and the heads
    p.biasStrides = {0, 0, s, 1};
  }
  return p;
}

/// planAttention in a child process, so that a crash inside cuDNN is
/// this case's failure, naming it, and not the end of the suite: cuDNN
/// 9.19 with the stub driver did crash (SIGSEGV in its heuristic) on
/// graphs that read k stored [.., d, s], which the device no longer
/// builds, and later in the same process on others.
rt::Status planInChild(const rt::cuda::Cudnn &dnn, const DeviceProperties &props,
                       const rt::cuda::AttentionProblem &p, PlanInfo *info) {
  int fds[2];
  if (pipe(fds) != 0)
    return rt::Status::error("pipe failed");
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    PlanInfo got;
    rt::Status st = rt::cuda::planAttention(
        dnn, PlanTarget{nullptr, props.get()}, p, &got);
    std::string out =
        st ? "ok " + std::to_string(got.engine) + " " +
                 std::to_string(got.tried) + " " +
                 std::to_string(int(got.compiledOnly)) + " " + got.heuristic
           : "error " + st.message();
    ssize_t n = write(fds[1], out.data(), out.size());
    (void)n;
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;)
    out.append(buf, size_t(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status))
    return rt::Status::error("the planning process died (signal " +
                             std::to_string(WTERMSIG(status)) + ")");
  if (out.rfind("ok ", 0) != 0)
    return rt::Status::error(out.size() > 6 ? out.substr(6) : out);
  std::istringstream in(out.substr(3));
  int compiled = 0;
  in >> info->engine >> info->tried >> compiled >> info->heuristic;
  info->compiledOnly = compiled != 0;
  return rt::Status::ok();
}

struct AttentionCase {
  const char *name;
  int64_t b, h, s, d;
  int bias; // 0 none, 1 a [1, 1, s, s] mask, 2 a [b, 1, 1, s] mask
};

const AttentionCase kAttention[] = {
    {"a padding mask per sequence", 4, 4, 64, 32, 2},
    {"the benchmark's encoder", 32, 12, 512, 64, 0},
    {"GPT-2 with its causal mask", 1, 12, 128, 64, 1},
    {"head dim 128", 2, 8, 256, 128, 0},
};

TEST_F(CudnnPlan, AttentionGraphsHaveAFusedEngineOnA100AndH100) {
  // The fused attention engines are compiled at plan time (NVRTC) and
  // loaded with the driver: CTest gives them the toolkit's stub libcuda,
  // where loading fails after everything else passed (compiledOnly).
  if (!dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD) &&
      !dlopen("libcuda.so.1", RTLD_NOW))
    GTEST_SKIP() << "no libcuda.so.1 to load cuDNN's runtime-compiled "
                    "engines with (CTest puts the toolkit's stub on "
                    "LD_LIBRARY_PATH)";
  for (const char *device : kDevices) {
    SCOPED_TRACE(device);
    DeviceProperties props;
    ASSERT_NO_FATAL_FAILURE(load(device, &props));
    for (const AttentionCase &c : kAttention)
      for (DType dtype : {DType::BF16, DType::F16}) {
        rt::cuda::AttentionProblem p =
            attention(dtype, c.b, c.h, c.s, c.d, c.bias == 1);
        if (c.bias == 2) {
          p.hasBias = true;
          p.biasType = dtype;
          p.biasDims = {c.b, 1, 1, c.s};
          p.biasStrides = {c.s, 0, 0, 1};
        }
        PlanInfo info;
        rt::Status st = planInChild(*dnn, props, p, &info);
        EXPECT_TRUE(st) << c.name << ": " << st.message();
        if (!st)
          continue;
        EXPECT_GE(info.engine, 0);
        std::printf("  %-5s %-30s %-4s engine %3lld (%s list, %lld tried)%s\n",
                    device, c.name, rt::dtypeName(dtype),
                    (long long)info.engine, info.heuristic.c_str(),
                    (long long)info.tried,
                    info.compiledOnly ? ", compiled, not loaded (no driver)"
                                      : "");
      }
  }
}

TEST_F(CudnnPlan, F32AttentionIsRefusedNamingIt) {
  DeviceProperties props;
  ASSERT_NO_FATAL_FAILURE(load("h100", &props));
  PlanInfo info;
  rt::Status st = rt::cuda::planAttention(
      *dnn, PlanTarget{nullptr, props.get()},
      attention(DType::F32, 1, 2, 16, 8, false), &info);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("f32 attention q [1, 2, 16, 8]"),
            std::string::npos)
      << st.message();
}

/// Attention regions as mc-fuse leaves them under --amp=bf16 (the plans
/// of test/onnx's transformer and the GPT-2 example, at the benchmark's
/// sizes): matched by rt::matchAttentionRegion, turned into cuDNN's
/// problem by attentionProblemOf, and planned, as the device binds them.
TEST_F(CudnnPlan, AttentionRegionsAsTheDeviceBindsThem) {
  if (!dlopen("libcuda.so.1", RTLD_NOW))
    GTEST_SKIP() << "no libcuda.so.1 (see AttentionGraphsHaveAFusedEngine)";
  DeviceProperties a100, h100;
  ASSERT_NO_FATAL_FAILURE(load("a100", &a100));
  ASSERT_NO_FATAL_FAILURE(load("h100", &h100));
  using rt::OpAttr;
  using rt::OpId;
  const DType bf = DType::BF16, f32 = DType::F32;
  alignas(16) static char data[16] = {};
  struct Region {
    const char *name;
    std::vector<rt::RegionOp> body;
    std::vector<rt::ConstTensor> inputs;
    rt::Shape out;
  };
  std::vector<Region> regions;
  {
    // GPT-2: q k^T (transpose_b), cast, + causal mask [s, s] broadcast
    // over batch and heads, softmax, cast, p v. Inputs q, k, mask, v.
    int64_t b = 4, h = 12, s = 512, d = 64;
    Region r{"GPT-2 block (b 4, s 512)", {}, {}, {b, h, s, d}};
    r.inputs = {{bf, {b, h, s, d}, data}, {bf, {b, h, s, d}, data},
                {f32, {s, s}, data}, {bf, {b, h, s, d}, data}};
    r.body = {
        {OpId::Matmul, {OpAttr::boolean("transpose_b", true)}, {0, 1}, bf,
         {b, h, s, s}},
        {OpId::Cast, {}, {4}, f32, {b, h, s, s}},
        {OpId::BroadcastInDim, {OpAttr::list("dims", {2, 3})}, {2}, f32,
         {b, h, s, s}},
        {OpId::Add, {}, {5, 6}, f32, {b, h, s, s}},
        {OpId::Softmax, {OpAttr::integer("axis", 3)}, {7}, f32, {b, h, s, s}},
        {OpId::Cast, {}, {8}, bf, {b, h, s, s}},
        {OpId::Matmul, {}, {9, 3}, bf, {b, h, s, d}}};
    regions.push_back(std::move(r));
  }
  {
    // The transformer encoder: [batch * heads, s, d], no mask; a scale
    // by a splat f32 (q / sqrt(d)); k as the cuda target leaves it (its
    // transpose to [.., d, s] permuted to [.., s, d], read with
    // transpose_b).
    int64_t bh = 32 * 12, s = 512, d = 64;
    Region r{"encoder (32 x 12 heads, s 512)", {}, {}, {bh, s, d}};
    r.inputs = {{f32, {}, data}, {bf, {bh, s, d}, data},
                {bf, {bh, s, d}, data}, {bf, {bh, s, d}, data}};
    r.body = {{OpId::Matmul, {OpAttr::boolean("transpose_b", true)}, {1, 2},
               bf, {bh, s, s}},
              {OpId::Cast, {}, {4}, f32, {bh, s, s}},
              {OpId::BroadcastInDim, {OpAttr::list("dims", {})}, {0}, f32,
               {bh, s, s}},
              {OpId::Div, {}, {5, 6}, f32, {bh, s, s}},
              {OpId::Softmax, {OpAttr::integer("axis", 2)}, {7}, f32,
               {bh, s, s}},
              {OpId::Cast, {}, {8}, bf, {bh, s, s}},
              {OpId::Matmul, {}, {9, 3}, bf, {bh, s, d}}};
    regions.push_back(std::move(r));
  }
  for (const Region &r : regions) {
    SCOPED_TRACE(r.name);
    rt::AttentionRegion m =
        rt::matchAttentionRegion(r.body, r.inputs, bf, r.out);
    ASSERT_TRUE(m.ok) << m.why;
    rt::cuda::AttentionProblem p;
    rt::Status st = rt::cuda::attentionProblemOf(
        m, r.inputs, {bf, r.out, data}, 0.125f, &p);
    ASSERT_TRUE(st) << st.message();
    for (const DeviceProperties *props : {&a100, &h100}) {
      PlanInfo info;
      st = planInChild(*dnn, *props, p, &info);
      EXPECT_TRUE(st) << st.message();
      std::printf("  %s  %-32s engine %lld%s\n",
                  props == &a100 ? "a100" : "h100", r.name,
                  (long long)info.engine,
                  info.compiledOnly ? ", compiled, not loaded (no driver)"
                                    : "");
    }
  }
}

} // namespace
