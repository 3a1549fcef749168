// The CUDA device's own kernels against the CPU kernels (CTest label gpu;
// skipped, saying why, without a device): cuBLASLt matmuls in f32 (TF32
// and not), bf16 and f16 with transposes and batches; matmul + bias +
// relu/tanh-gelu regions through cuBLASLt's epilogues, and the regions it
// refuses; a whole session with its CUDA graph replayed, and profiled.
#include "GpuTestUtil.h"
#include "modelc/model.h"

using namespace mc;
using namespace mc::test;
using rt::DType;
using rt::OpId;

namespace {

struct MatmulCase {
  rt::Shape batch; // leading dims
  int64_t m, k, n;
  bool ta, tb;
};

rt::Shape operandShape(const MatmulCase &c, int64_t rows, int64_t cols,
                       bool transposed) {
  rt::Shape s = c.batch;
  s.push_back(transposed ? cols : rows);
  s.push_back(transposed ? rows : cols);
  return s;
}

std::string caseText(DType t, const MatmulCase &c) {
  return std::string(rt::dtypeName(t)) + " batch " +
         rt::shapeString(c.batch) + " M " + std::to_string(c.m) + " K " +
         std::to_string(c.k) + " N " + std::to_string(c.n) +
         (c.ta ? " transpose_a" : "") + (c.tb ? " transpose_b" : "");
}

const MatmulCase kCases[] = {
    {{}, 64, 48, 80, false, false}, {{}, 33, 17, 65, true, false},
    {{2, 3}, 16, 40, 24, false, true}, {{5}, 7, 9, 11, true, true},
    {{}, 1, 256, 1, false, false},     {{4}, 128, 64, 96, false, false},
};

using CudaKernels = CudaTest;

/// The cuda Matmul of `c` against the CPU kernel on the same inputs.
void checkMatmul(CudaTest &t, DType dtype, const MatmulCase &c,
                 int mantissaBits, double tol) {
  SCOPED_TRACE(caseText(dtype, c));
  HostTensor a =
      HostTensor::random(dtype, operandShape(c, c.m, c.k, c.ta), 7, mantissaBits);
  HostTensor b =
      HostTensor::random(dtype, operandShape(c, c.k, c.n, c.tb), 8, mantissaBits);
  rt::Shape outShape = c.batch;
  outShape.push_back(c.m);
  outShape.push_back(c.n);
  HostTensor ref(dtype, outShape), out(dtype, outShape);
  ASSERT_TRUE(rt::matmul(a.view(), b.view(), c.ta, c.tb, ref.mut()));
  rt::DeviceMemory da = t.upload(a), db = t.upload(b), dout;
  ASSERT_TRUE(t.device->allocate(out.bytes.size(), &dout));
  rt::OpAttrs attrs{rt::OpAttr::boolean("transpose_a", c.ta),
                    rt::OpAttr::boolean("transpose_b", c.tb)};
  rt::KernelRequest r{OpId::Matmul,
                      attrs,
                      {{dtype, a.shape, da.get()}, {dtype, b.shape, db.get()}},
                      {dtype, outShape, dout.get()},
                      *t.device};
  rt::Status st = t.bindAndRun(*t.device, r);
  ASSERT_TRUE(st) << st.message();
  t.download(dout.get(), out);
  double err = relErr(out.floats(), ref.doubles());
  EXPECT_LT(err, tol);
  std::printf("  %-50s rel_err %.2e (tol %.0e)\n", caseText(dtype, c).c_str(),
              err, tol);
}

// f32 on TF32 tensor cores (the default). Inputs hold 10 mantissa bits, so
// TF32 takes them exactly and what differs from the CPU is the order of the
// f32 sums: an error in the layouts, the leading dimensions or the batch
// strides is of order 1, far above the tolerance.
TEST_F(CudaKernels, MatmulF32Tf32MatchesTheCpu) {
  for (const MatmulCase &c : kCases)
    checkMatmul(*this, DType::F32, c, 10, tolerance(DType::F32));
}

// Full f32 inputs with TF32 off (MODELC_CUDA_TF32=0): f32 products too.
TEST_F(CudaKernels, MatmulF32WithoutTf32MatchesTheCpuToF32Tolerance) {
  ScopedEnv noTf32("MODELC_CUDA_TF32", "0");
  for (const MatmulCase &c : kCases)
    checkMatmul(*this, DType::F32, c, 23, 1e-5);
}

TEST_F(CudaKernels, MatmulBf16MatchesTheCpu) {
  for (const MatmulCase &c : kCases)
    checkMatmul(*this, DType::BF16, c, 23, tolerance(DType::BF16));
}

TEST_F(CudaKernels, MatmulF16MatchesTheCpu) {
  for (const MatmulCase &c : kCases)
    checkMatmul(*this, DType::F16, c, 23, tolerance(DType::F16));
}

TEST_F(CudaKernels, MatmulWithKZeroIsZeros) {
  HostTensor ones(DType::F32, {3, 5});
  ones.setFloats(std::vector<float>(15, 1.0f));
  rt::DeviceMemory dout = upload(ones), da, db;
  rt::OpAttrs none;
  rt::KernelRequest r{OpId::Matmul,
                      none,
                      {{DType::F32, {3, 0}, da.get()},
                       {DType::F32, {0, 5}, db.get()}},
                      {DType::F32, {3, 5}, dout.get()},
                      *device};
  ASSERT_TRUE(bindAndRun(*device, r));
  download(dout.get(), ones);
  EXPECT_EQ(ones.floats(), std::vector<float>(15, 0.0f));
}

/// A fused step's body: matmul(0, 1) [M, N] (reshaped to `out` when it
/// differs), broadcast of input 2 along the last dim, add, then `act`.
std::vector<rt::RegionOp> epilogueBody(DType t, rt::Shape mm, rt::Shape out,
                                       OpId act, bool tanh) {
  std::vector<rt::RegionOp> body;
  auto add = [&](OpId op, std::vector<uint32_t> operands, rt::Shape shape,
                 rt::OpAttrs attrs = {}) {
    body.push_back(rt::RegionOp{op, std::move(attrs), std::move(operands), t,
                                std::move(shape)});
    return uint32_t(3 + body.size() - 1);
  };
  uint32_t v = add(OpId::Matmul, {0, 1}, mm);
  if (mm != out)
    v = add(OpId::Reshape, {v}, out);
  uint32_t bias =
      add(OpId::BroadcastInDim, {2}, out,
          {rt::OpAttr::list("dims", {int64_t(out.size()) - 1})});
  v = add(OpId::Add, {v, bias}, out);
  if (act != OpId::Copy)
    add(act, {v}, out,
        {rt::OpAttr::boolean("tanh_approximation", tanh)});
  return body;
}

/// The cuda Fused kernel of `body` against the CPU's fused kernel.
void checkEpilogue(CudaTest &t, DType dtype, rt::Shape aShape,
                   rt::Shape wShape, rt::Shape mm, rt::Shape out, OpId act,
                   bool tanh, double tol) {
  SCOPED_TRACE(std::string(rt::dtypeName(dtype)) + " " + rt::opName(act));
  std::vector<rt::RegionOp> body = epilogueBody(dtype, mm, out, act, tanh);
  int bits = dtype == DType::F32 ? 10 : 23; // exact in TF32, see above
  HostTensor a = HostTensor::random(dtype, aShape, 11, bits);
  HostTensor w = HostTensor::random(dtype, wShape, 12, bits);
  HostTensor bias = HostTensor::random(dtype, {out.back()}, 13, bits);
  HostTensor ref(dtype, out), got(dtype, out);
  rt::OpAttrs none;
  std::unique_ptr<rt::Device> cpu;
  ASSERT_TRUE(rt::createDevice("cpu", &cpu));
  rt::KernelRequest cpuReq{OpId::Fused, none,
                           {a.view(), w.view(), bias.view()}, ref.mut(),
                           *cpu, &body};
  ASSERT_TRUE(t.bindAndRun(*cpu, cpuReq));
  rt::DeviceMemory da = t.upload(a), dw = t.upload(w), db = t.upload(bias),
                   dout;
  ASSERT_TRUE(t.device->allocate(got.bytes.size(), &dout));
  rt::KernelRequest r{OpId::Fused,
                      none,
                      {{dtype, a.shape, da.get()},
                       {dtype, w.shape, dw.get()},
                       {dtype, bias.shape, db.get()}},
                      {dtype, out, dout.get()},
                      *t.device,
                      &body};
  rt::Status st = t.bindAndRun(*t.device, r);
  ASSERT_TRUE(st) << st.message();
  t.download(dout.get(), got);
  double err = relErr(got.floats(), ref.doubles());
  EXPECT_LT(err, tol);
  std::printf("  fused %s %s: rel_err %.2e (tol %.0e)\n",
              rt::dtypeName(dtype), rt::opName(act), err, tol);
}

TEST_F(CudaKernels, MatmulBiasReluRegionMatchesTheCpu) {
  for (DType t : {DType::F32, DType::BF16, DType::F16}) {
    checkEpilogue(*this, t, {64, 32}, {32, 48}, {64, 48}, {64, 48},
                  OpId::Relu, false, tolerance(t));
    // Batched and reshaped: [2, 8, 16] x [2, 16, 24] -> [16, 24].
    checkEpilogue(*this, t, {2, 8, 16}, {2, 16, 24}, {2, 8, 24}, {16, 24},
                  OpId::Relu, false, tolerance(t));
    // The bias alone.
    checkEpilogue(*this, t, {20, 12}, {12, 36}, {20, 36}, {20, 36},
                  OpId::Copy, false, tolerance(t));
  }
}

TEST_F(CudaKernels, MatmulBiasTanhGeluRegionMatchesTheCpu) {
  // The tanh form on both sides. cuBLASLt may evaluate tanh with a fast
  // approximation (the GPU's tanh.approx.f32 is good to about 2^-11
  // relative), which adds up to about 2.5e-4 of |x| to each gelu(x): f32
  // gets 1e-3 here rather than 5e-4; bf16 keeps its 1e-2.
  checkEpilogue(*this, DType::F32, {32, 64}, {64, 40}, {32, 40}, {32, 40},
                OpId::Gelu, true, 1e-3);
  checkEpilogue(*this, DType::BF16, {32, 64}, {64, 40}, {32, 40}, {32, 40},
                OpId::Gelu, true, tolerance(DType::BF16));
}

TEST_F(CudaKernels, OtherRegionsAreRefusedNamingTheOp) {
  rt::DeviceMemory dummy;
  ASSERT_TRUE(device->allocate(1 << 16, &dummy));
  void *p = dummy.get();
  rt::OpAttrs none;
  auto refuse = [&](std::vector<rt::RegionOp> body, const std::string &why) {
    rt::KernelRequest r{OpId::Fused,
                        none,
                        {{DType::F32, {8, 4}, p},
                         {DType::F32, {4, 6}, p},
                         {DType::F32, {6}, p}},
                        {DType::F32, {8, 6}, p},
                        *device,
                        &body};
    rt::BoundKernel k;
    size_t bytes = 0;
    rt::Status st = rt::findKernel("cuda", OpId::Fused)(r, &k, &bytes);
    ASSERT_FALSE(st) << why;
    EXPECT_TRUE(has(st.message(), why)) << st.message();
    EXPECT_TRUE(has(st.message(), "the compiler generates a kernel"))
        << st.message();
  };
  // The exact gelu: cuBLASLt has only the tanh form.
  refuse(epilogueBody(DType::F32, {8, 6}, {8, 6}, OpId::Gelu, false),
         "gelu in its exact (erf) form");
  // An activation cuBLASLt does not have.
  refuse(epilogueBody(DType::F32, {8, 6}, {8, 6}, OpId::Sigmoid, false),
         "body op 3 is mc.sigmoid");
  // Not led by a matmul.
  std::vector<rt::RegionOp> body{
      {OpId::Add, {}, {0, 0}, DType::F32, {8, 4}}};
  refuse(body, "body op 0 is mc.add");
}

/// relu(x @ w1 + b1) @ w2^T, copied out: a fused step, a matmul (with
/// transpose_b) and a copy, for the device named by `targets`.
codegen::Plan mlpOnLibraryKernels(const std::string &target) {
  codegen::Plan p;
  p.entry = "lib_mlp";
  p.targets = {target};
  auto buf = [&](std::string name, rt::Shape shape,
                 fb::BufferKind kind = fb::BufferKind::Arena,
                 unsigned seed = 0) {
    codegen::PlanBuffer b;
    b.name = std::move(name);
    b.shape = std::move(shape);
    b.kind = kind;
    if (kind == fb::BufferKind::Constant)
      b.data = floatBytes(randomFloats(size_t(rt::numElements(b.shape)), seed));
    p.buffers.push_back(b);
    return uint32_t(p.buffers.size() - 1);
  };
  uint32_t x = buf("x", {32, 24});
  uint32_t w1 = buf("w1", {24, 40}, fb::BufferKind::Constant, 21);
  uint32_t b1 = buf("b1", {40}, fb::BufferKind::Constant, 22);
  uint32_t w2 = buf("w2", {16, 40}, fb::BufferKind::Constant, 23);
  uint32_t h = buf("h", {32, 40}), y = buf("y", {32, 16});
  uint32_t out = buf("out", {32, 16});
  codegen::PlanStep &f = addStep(p, OpId::Fused, {x, w1, b1}, h, "lib.py:1");
  auto op = [&](OpId id, std::vector<uint32_t> operands, rt::OpAttrs attrs) {
    codegen::PlanRegionOp r;
    r.op = id;
    r.operands = std::move(operands);
    r.attrs = std::move(attrs);
    r.shape = {32, 40};
    f.body.push_back(std::move(r));
  };
  op(OpId::Matmul, {0, 1}, {});
  op(OpId::BroadcastInDim, {2}, {rt::OpAttr::list("dims", {1})});
  op(OpId::Add, {3, 4}, {});
  op(OpId::Relu, {5}, {});
  setBool(addStep(p, OpId::Matmul, {h, w2}, y, "lib.py:2"), "transpose_b",
          true);
  addStep(p, OpId::Copy, {y}, out, "lib.py:3");
  p.inputs = {{"x", x}};
  p.outputs = {{"out", out}};
  return p;
}

std::unique_ptr<rt::Model> load(const codegen::Plan &plan,
                                const std::string &name) {
  codegen::Plan p = plan;
  std::vector<uint8_t> bytes;
  std::unique_ptr<rt::Model> model;
  EXPECT_TRUE(codegen::planMemory(p));
  rt::Status st = codegen::writeArtifactToBytes(p, &bytes);
  EXPECT_TRUE(st) << st.message();
  st = rt::Model::loadMemory(bytes.data(), bytes.size(), name, &model);
  EXPECT_TRUE(st) << st.message();
  return model;
}

std::vector<float> runOnce(rt::Session &s, const std::vector<float> &x) {
  std::vector<float> out(32 * 16);
  rt::Status st = s.setInput(0, DType::F32, {32, 24}, x.data(), x.size() * 4);
  EXPECT_TRUE(st) << st.message();
  st = s.run();
  EXPECT_TRUE(st) << st.message();
  st = s.copyOutput(0, out.data(), out.size() * 4);
  EXPECT_TRUE(st) << st.message();
  return out;
}

// A session on the GPU: run 1 as is, run 2 recorded as a CUDA graph, runs
// 3 and 4 replayed; each with new inputs, each equal to the CPU's result.
TEST_F(CudaKernels, ASessionReplaysItsStepsAsACudaGraph) {
  ScopedEnv noTf32("MODELC_CUDA_TF32", "0"); // f32 tolerance end to end
  std::unique_ptr<rt::Model> onCpu = load(mlpOnLibraryKernels("cpu"), "cpu");
  std::unique_ptr<rt::Model> onGpu = load(mlpOnLibraryKernels("cuda"), "gpu");
  ASSERT_TRUE(onCpu && onGpu);
  std::unique_ptr<rt::Session> cpuSession, gpuSession;
  ASSERT_TRUE(rt::Session::create(*onCpu, &cpuSession));
  rt::cuda::CudaDevice *cd = cuda;
  rt::Status st = rt::Session::create(*onGpu, std::move(device), &gpuSession);
  ASSERT_TRUE(st) << st.message();
  EXPECT_EQ(gpuSession->device().name(), "cuda:0");
  testing::internal::CaptureStderr();
  for (unsigned run = 0; run < 4; ++run) {
    std::vector<float> x = randomFloats(32 * 24, 100 + run);
    std::vector<float> ref = runOnce(*cpuSession, x);
    std::vector<float> got = runOnce(*gpuSession, x);
    EXPECT_LT(relErr(got, std::vector<double>(ref.begin(), ref.end())), 1e-5)
        << "run " << run;
  }
  std::string notes = testing::internal::GetCapturedStderr();
  EXPECT_EQ(notes, "") << "every step can be recorded";
  EXPECT_EQ(cd->graphCount(), 1u);
  // Outputs are read with copyOutput; a pointer into GPU memory is refused.
  const void *ptr = nullptr;
  st = gpuSession->output(0, &ptr, nullptr);
  ASSERT_FALSE(st);
  EXPECT_TRUE(has(st.message(), "use copyOutput")) << st.message();
}

// MODELC_PROFILE on the GPU: steps timed with events, nothing recorded.
TEST_F(CudaKernels, AProfiledSessionTimesStepsWithEvents) {
  std::unique_ptr<rt::Model> onGpu = load(mlpOnLibraryKernels("cuda"), "gpu");
  ASSERT_TRUE(onGpu);
  rt::cuda::CudaDevice *cd = cuda;
  std::unique_ptr<rt::Session> s;
  {
    ScopedEnv profile("MODELC_PROFILE", "1");
    ASSERT_TRUE(rt::Session::create(*onGpu, std::move(device), &s));
  }
  std::vector<float> x = randomFloats(32 * 24, 5);
  for (int i = 0; i < 3; ++i)
    runOnce(*s, x);
  EXPECT_EQ(cd->graphCount(), 0u);
  testing::internal::CaptureStderr();
  s.reset();
  std::string table = testing::internal::GetCapturedStderr();
  // 3 runs, the first left out.
  EXPECT_TRUE(has(table, "profile: gpu: 2 runs")) << table;
  for (const char *op : {"fused", "matmul", "copy"})
    EXPECT_TRUE(has(table, op)) << op << "\n" << table;
  std::printf("%s", table.c_str());
}

} // namespace
