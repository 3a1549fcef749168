// Every kind of kernel the CUDA target generates, run on lavapipe and
// compared with the CPU runtime's kernel for the same step: the same
// gpu-dialect function (codegen/cuda/KernelGen.cpp) that the artifact gets
// through NVVM, lowered through SPIR-V instead (docs/cuda.md, "Checking
// kernels on lavapipe"). bf16 has no SPIR-V type; its kernels are the f32
// ones with other loads and stores, checked by ptxas and on a GPU.
#include "KernelCheck.h"
#include "VulkanRunner.h"

#include "codegen/Plan.h"
#include "codegen/cuda/KernelGen.h"
#include "modelc/device.h"
#include "modelc/kernels.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

namespace {

using mc::codegen::Plan;
using mc::codegen::PlanBuffer;
using mc::codegen::PlanRegionOp;
using mc::codegen::PlanStep;
using mc::rt::DType;
using mc::rt::OpAttr;
using mc::rt::OpAttrs;
using mc::rt::OpId;
using Shape = std::vector<int64_t>;

OpAttr ints(const char* name, std::vector<int64_t> v) {
  OpAttr a;
  a.name = name;
  a.kind = mc::rt::AttrKind::Ints;
  a.ints = std::move(v);
  return a;
}
OpAttr integer(const char* name, int64_t v) {
  OpAttr a;
  a.name = name;
  a.kind = mc::rt::AttrKind::Int;
  a.i = v;
  return a;
}
OpAttr real(const char* name, double v) {
  OpAttr a;
  a.name = name;
  a.kind = mc::rt::AttrKind::Float;
  a.f = v;
  return a;
}
OpAttr flag(const char* name) {
  OpAttr a;
  a.name = name;
  a.kind = mc::rt::AttrKind::Bool;
  a.i = 1;
  return a;
}

/// One step over fresh buffers: inputs, then the output.
struct Case {
  Plan plan;
  int64_t batch = 0; // the session's batch for a dynamic plan
  /// Inputs that must be positive (log, sqrt, pow's base).
  bool positive = false;
};

uint32_t addBuffer(Plan& p, DType t, Shape shape, Shape scale = {}) {
  PlanBuffer b;
  b.name = "b" + std::to_string(p.buffers.size());
  b.dtype = t;
  b.shape = std::move(shape);
  b.batchScale = std::move(scale);
  p.buffers.push_back(std::move(b));
  return uint32_t(p.buffers.size() - 1);
}

Case stepCase(OpId op, std::vector<std::pair<DType, Shape>> ins,
              std::pair<DType, Shape> out, std::vector<OpAttr> attrs = {}) {
  Case c;
  PlanStep s;
  s.op = op;
  s.attrs = OpAttrs(std::move(attrs));
  for (auto& [t, sh] : ins)
    s.inputs.push_back(addBuffer(c.plan, t, sh));
  s.outputs.push_back(addBuffer(c.plan, out.first, out.second));
  c.plan.steps.push_back(std::move(s));
  return c;
}

PlanRegionOp regionOp(OpId op, std::vector<uint32_t> operands, DType t,
                      Shape shape, std::vector<OpAttr> attrs = {}) {
  PlanRegionOp r;
  r.op = op;
  r.operands = std::move(operands);
  r.dtype = t;
  r.shape = std::move(shape);
  r.attrs = OpAttrs(std::move(attrs));
  return r;
}

class KernelCheck : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    std::string why;
    runner_ = mc::gputest::VulkanRunner::create(&why).release();
    whyNot_ = new std::string(why);
  }
  static void TearDownTestSuite() {
    delete runner_;
    runner_ = nullptr;
    delete whyNot_;
  }

  /// Runs the case's step on lavapipe and with the CPU kernel (on
  /// `inputs`, an empty one random) into *r; false when it could not run.
  bool run(const Case& c, mc::gputest::StepCheck* r,
           const std::vector<std::vector<uint8_t>>* inputs = nullptr,
           const std::vector<int>* inPlace = nullptr) {
    std::string error;
    bool ran = mc::gputest::checkStep(c.plan, 0, c.batch, c.positive,
                                      *runner_, r, &error, inputs, inPlace);
    EXPECT_TRUE(ran) << error;
    EXPECT_TRUE(r->skipped.empty()) << r->skipped;
    return ran && r->skipped.empty();
  }

  /// Runs the case's step both ways; compares. With `inPlace`, the
  /// generated kernel writes output k into input inPlace[k]'s buffer.
  void check(const Case& c, double tol = 1e-5,
             const std::vector<int>* inPlace = nullptr) {
    if (!runner_)
      GTEST_SKIP() << "no Vulkan device: " << *whyNot_;
    mc::gputest::StepCheck r;
    if (!run(c, &r, nullptr, inPlace))
      return;
    ASSERT_GT(r.elements, 0u);
    EXPECT_LE(r.worst, tol) << "at element " << r.worstAt << " of "
                            << r.elements << ": cpu " << r.cpu
                            << ", lavapipe " << r.lavapipe;
    if (tol == 0) // bit for bit: no f16 or bf16 element one ulp off either
      EXPECT_EQ(r.oneUlp, 0u);
  }

  /// Runs the case's step on `inputs` both ways: the CPU kernel must fail
  /// with `cpuError` (its tile's element made the region's) and the
  /// kernel's error record must give the same message; with `cpuError`
  /// empty, neither fails and the results agree exactly.
  void checkError(const Case& c, const std::vector<std::vector<uint8_t>>& inputs,
                  const std::string& cpuError) {
    if (!runner_)
      GTEST_SKIP() << "no Vulkan device: " << *whyNot_;
    mc::gputest::StepCheck r;
    if (!run(c, &r, &inputs))
      return;
    EXPECT_EQ(r.cpuError, cpuError);
    EXPECT_EQ(r.deviceError, cpuError);
    if (cpuError.empty()) {
      EXPECT_EQ(r.worst, 0) << "at element " << r.worstAt << ": cpu " << r.cpu
                            << ", lavapipe " << r.lavapipe;
      EXPECT_EQ(r.oneUlp, 0u);
    }
  }

  static mc::gputest::VulkanRunner* runner_;
  static std::string* whyNot_;
};

template <typename T> std::vector<uint8_t> bytesOf(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}
mc::gputest::VulkanRunner* KernelCheck::runner_ = nullptr;
std::string* KernelCheck::whyNot_ = nullptr;

const DType F = DType::F32;

TEST_F(KernelCheck, UnaryOpsMatchTheCpu) {
  for (OpId op : {OpId::Neg, OpId::Exp, OpId::Tanh, OpId::Sigmoid, OpId::Relu,
                  OpId::Abs, OpId::Erf, OpId::Gelu, OpId::Hardswish, OpId::Sin,
                  OpId::Cos, OpId::Atan, OpId::Sinh, OpId::Cosh, OpId::Asinh,
                  // NaN on both sides outside [-1, 1] (inputs are in
                  // [-3, 3]), atanh's poles aside.
                  OpId::Asin, OpId::Acos, OpId::Atanh}) {
    SCOPED_TRACE(mc::rt::opName(op));
    check(stepCase(op, {{F, {5, 77}}}, {F, {5, 77}}), 2e-5);
  }
  SCOPED_TRACE("gelu tanh");
  check(stepCase(OpId::Gelu, {{F, {300}}}, {F, {300}},
                 {flag("tanh_approximation")}),
        2e-5);
}

TEST_F(KernelCheck, OpsOfPositiveInputsMatchTheCpu) {
  // acosh on [0.1, 3): NaN below 1 on both sides. tan on [0.1, 3) passes
  // pi/2, where its values are large and steep: checked relative to them.
  for (OpId op : {OpId::Log, OpId::Sqrt, OpId::Acosh, OpId::Tan}) {
    SCOPED_TRACE(mc::rt::opName(op));
    Case c = stepCase(op, {{F, {257}}}, {F, {257}});
    c.positive = true;
    check(c, 2e-5);
  }
  Case pow = stepCase(OpId::Pow, {{F, {99}}, {F, {99}}}, {F, {99}});
  pow.positive = true;
  check(pow, 1e-4);
}

// pow's C cases on both sides (the CPU's std::pow, CUDA's __nv_powf; on
// lavapipe the harness's PowFAsC, since GLSL's Pow is undefined below 0
// and at 0): negative bases with odd, even and fractional powers, zeros
// (signed) to positive, zero and negative powers, 1 and -1 to infinite
// and NaN powers, infinities, NaNs, and random signed pairs.
TEST_F(KernelCheck, PowOfSpecialValuesIsCs) {
  if (!runner_)
    GTEST_SKIP() << "no Vulkan device: " << *whyNot_;
  const float inf = INFINITY, nan = NAN;
  std::vector<std::pair<float, float>> xy = {
      {-2, 3},    {-2, 2},    {-2, 0.5f},  {-8, 1.0f / 3}, {0, 0},
      {-0.0f, 3}, {-0.0f, -3}, {0, -1},    {-0.0f, -2},    {0, 2.5f},
      {1, nan},   {1, inf},   {-1, inf},  {-1, -inf},     {nan, 0},
      {nan, 2.5f}, {2.5f, nan}, {inf, -2}, {-inf, 3},      {-inf, 2.5f},
      {-inf, -3}, {0.5f, inf}, {2, -inf},  {3, 7},         {-1.5f, -5},
      {1e-20f, 2.5f}, {7, -0.0f}};
  std::mt19937 gen(4);
  std::uniform_real_distribution<float> u(-4, 4);
  while (xy.size() < 200)
    xy.push_back({u(gen), std::round(u(gen) * 2) / 2}); // integer and halves
  std::vector<float> x, y;
  for (auto [a, b] : xy) {
    x.push_back(a);
    y.push_back(b);
  }
  Case c = stepCase(OpId::Pow, {{F, {int64_t(x.size())}}, {F, {int64_t(x.size())}}},
                    {F, {int64_t(x.size())}});
  std::vector<std::vector<uint8_t>> inputs = {bytesOf(x), bytesOf(y)};
  mc::gputest::StepCheck r;
  if (!run(c, &r, &inputs))
    return;
  EXPECT_LE(r.worst, 1e-5) << "at element " << r.worstAt << " (pow("
                           << x[r.worstAt] << ", " << y[r.worstAt]
                           << ")): cpu " << r.cpu << ", lavapipe "
                           << r.lavapipe;
}

TEST_F(KernelCheck, BinaryOpsMatchTheCpu) {
  for (OpId op : {OpId::Add, OpId::Sub, OpId::Mul, OpId::Div, OpId::Maximum,
                  OpId::Minimum}) {
    SCOPED_TRACE(mc::rt::opName(op));
    check(stepCase(op, {{F, {3, 4, 50}}, {F, {3, 4, 50}}}, {F, {3, 4, 50}}));
  }
  check(stepCase(OpId::Add, {{DType::I32, {1000}}, {DType::I32, {1000}}},
                 {DType::I32, {1000}}), 0);
  check(stepCase(OpId::Maximum, {{DType::I64, {100}}, {DType::I64, {100}}},
                 {DType::I64, {100}}), 0);
  check(stepCase(OpId::Clamp, {{F, {640}}}, {F, {640}},
                 {real("min", -0.5), real("max", 1.25)}), 0);
}

TEST_F(KernelCheck, CastsCompareAndSelectMatchTheCpu) {
  check(stepCase(OpId::Cast, {{F, {333}}}, {DType::I32, {333}}), 0);
  check(stepCase(OpId::Cast, {{DType::I64, {333}}}, {F, {333}}), 0);
  check(stepCase(OpId::Cast, {{F, {333}}}, {DType::F16, {333}}), 0);
  check(stepCase(OpId::Cast, {{DType::F16, {333}}}, {F, {333}}), 0);
  check(stepCase(OpId::Compare, {{F, {200}}, {F, {200}}}, {DType::I1, {200}},
                 {integer("direction", 2)}),
        0);
  check(stepCase(OpId::Select, {{DType::I1, {200}}, {F, {200}}, {F, {200}}},
                 {F, {200}}),
        0);
}

TEST_F(KernelCheck, AnF16RegionRoundsLikeTheCpu) {
  check(stepCase(OpId::Mul, {{DType::F16, {4, 64}}, {DType::F16, {4, 64}}},
                 {DType::F16, {4, 64}}),
        0);
}

// bf16 on lavapipe: its bits as i16, widened and rounded (nearest even, a
// NaN kept quiet) by integer ops, as the runtime's floatToBf16; every op of
// a region rounds, so a region must give the CPU's bits exactly.
TEST_F(KernelCheck, Bf16KernelsRoundLikeTheCpu) {
  const DType H = DType::BF16;
  check(stepCase(OpId::Mul, {{H, {4, 64}}, {H, {4, 64}}}, {H, {4, 64}}), 0);
  check(stepCase(OpId::Cast, {{F, {333}}}, {H, {333}}), 0);
  check(stepCase(OpId::Cast, {{H, {333}}}, {F, {333}}), 0);
  Case r = stepCase(OpId::Fused, {{H, {64}}, {H, {6, 64}}}, {H, {6, 64}});
  r.plan.steps[0].body = {
      regionOp(OpId::BroadcastInDim, {0}, H, {6, 64}, {ints("dims", {1})}),
      regionOp(OpId::Add, {1, 2}, H, {6, 64}),
      regionOp(OpId::Tanh, {3}, H, {6, 64}),
  };
  check(r, 1e-2); // tanh's approximations may land one bf16 ulp apart
  check(stepCase(OpId::Softmax, {{H, {8, 300}}}, {H, {8, 300}},
                 {integer("axis", 1)}),
        1e-2);
}

// A region of several outputs (mc-fuse's multi-output, schema 2.7): each
// extra output, of its own type (f32, i1, bf16), is stored with the main
// one, unit by unit; the odd row (37) keeps one element per unit, the even
// one (64) four. Every output is compared (checkStep).
TEST_F(KernelCheck, ARegionsExtraOutputsMatchTheCpu) {
  for (int64_t row : {37, 64}) {
    Case c = stepCase(OpId::Fused, {{F, {5, row}}, {F, {5, row}}},
                      {F, {5, row}});
    PlanStep& s = c.plan.steps[0];
    s.outputs.push_back(addBuffer(c.plan, F, {5, row}));
    s.outputs.push_back(addBuffer(c.plan, DType::I1, {5, row}));
    s.outputs.push_back(addBuffer(c.plan, DType::BF16, {5, row}));
    s.body = {
        regionOp(OpId::Mul, {0, 1}, F, {5, row}),                 // 2
        regionOp(OpId::Compare, {2, 0}, DType::I1, {5, row},
                 {integer("direction", 4)}),                      // 3
        regionOp(OpId::Cast, {2}, DType::BF16, {5, row}),         // 4
        regionOp(OpId::Neg, {2}, F, {5, row}),                    // 5
    };
    s.extraOutputs = {2, 3, 4};
    check(c, 0);
  }
}

// An optimizer's update in place, as writeStoresInPlace plans it: the new
// moment m' = m * g + g and the new parameter p - m' are written into m's
// and p's own buffers, which the kernel also reads. Every unit loads all its
// inputs before it stores, so the results equal the CPU's on separate
// buffers (the harness binds one device buffer for both).
TEST_F(KernelCheck, AMultiOutputRegionRunsInPlaceOnItsInputs) {
  for (int64_t row : {37, 64}) {
    Case c = stepCase(OpId::Fused, {{F, {5, row}}, {F, {5, row}}, {F, {5, row}}},
                      {F, {5, row}});
    PlanStep& s = c.plan.steps[0];
    s.outputs.push_back(addBuffer(c.plan, F, {5, row}));
    s.body = {
        regionOp(OpId::Mul, {0, 1}, F, {5, row}), // 3
        regionOp(OpId::Add, {3, 1}, F, {5, row}), // 4: m'
        regionOp(OpId::Sub, {2, 4}, F, {5, row}), // 5: p'
    };
    s.extraOutputs = {4};
    std::vector<int> inPlace{2, 0}; // p' into p, m' into m
    check(c, 0, &inPlace);
  }
}

TEST_F(KernelCheck, AFusedRegionWithBroadcastsAndAScalarMatchesTheCpu) {
  // relu(x + broadcast(bias)) * s, s a rank-0 input.
  Case c = stepCase(OpId::Fused, {{F, {64}}, {F, {6, 64}}, {F, {}}},
                    {F, {6, 64}});
  c.plan.steps[0].body = {
      regionOp(OpId::BroadcastInDim, {0}, F, {6, 64}, {ints("dims", {1})}),
      regionOp(OpId::Add, {1, 3}, F, {6, 64}),
      regionOp(OpId::Relu, {4}, F, {6, 64}),
      regionOp(OpId::Mul, {5, 2}, F, {6, 64}),
  };
  check(c);
  // A broadcast of a size-1 dim, and a column.
  Case d = stepCase(OpId::Fused, {{F, {5, 1}}, {F, {5, 9}}}, {F, {5, 9}});
  d.plan.steps[0].body = {
      regionOp(OpId::BroadcastInDim, {0}, F, {5, 9}, {ints("dims", {0, 1})}),
      regionOp(OpId::Sub, {1, 2}, F, {5, 9}),
      regionOp(OpId::Exp, {3}, F, {5, 9}),
  };
  check(d, 2e-5);
}

TEST_F(KernelCheck, ALoneBroadcastMatchesTheCpu) {
  check(stepCase(OpId::BroadcastInDim, {{F, {3, 1, 5}}}, {F, {2, 3, 4, 5}},
                 {ints("dims", {1, 2, 3})}),
        0);
}

TEST_F(KernelCheck, IndexKernelsMatchTheCpu) {
  check(stepCase(OpId::Transpose, {{F, {3, 5, 7}}}, {F, {7, 3, 5}},
                 {ints("permutation", {2, 0, 1})}),
        0);
  check(stepCase(OpId::Slice, {{F, {9, 10}}}, {F, {3, 4}},
                 {ints("start", {1, 2}), ints("limit", {8, 10}),
                  ints("strides", {3, 2})}),
        0);
  check(stepCase(OpId::Pad, {{F, {3, 4}}}, {F, {6, 5}},
                 {ints("low", {1, 0}), ints("high", {2, 1}),
                  real("value", -2.5)}),
        0);
  check(stepCase(OpId::Concat, {{F, {2, 3}}, {F, {2, 5}}, {F, {2, 1}}},
                 {F, {2, 9}}, {integer("axis", 1)}),
        0);
  Case g = stepCase(OpId::Gather, {{F, {6, 4}}, {DType::I64, {3}}},
                    {F, {3, 4}}, {integer("axis", 0)});
  std::vector<int64_t> idx = {5, -6, 2};
  auto& ib = g.plan.buffers[g.plan.steps[0].inputs[1]];
  ib.kind = mc::fb::BufferKind::Constant;
  std::vector<uint8_t> bytes(24);
  std::memcpy(bytes.data(), idx.data(), 24);
  ib.data = std::move(bytes);
  check(g, 0);
}

// Kernels that can fail report through their error record
// (modelc/error_record.h) the CPU kernel's own error: the lowest failing
// element, whatever order the threads ran in (a small grid strides).
TEST_F(KernelCheck, IntegerDivisionIsTheCpusAndReportsTheFirstZeroDivisor) {
  for (DType t : {DType::I32, DType::I64}) {
    SCOPED_TRACE(mc::rt::dtypeName(t));
    Case c = stepCase(OpId::Div, {{t, {3000}}, {t, {3000}}}, {t, {3000}});
    std::vector<int64_t> a(3000), b(3000);
    for (int64_t i = 0; i < 3000; ++i) {
      a[i] = i * 7919 % 2001 - 1000;
      b[i] = i % 7 - 3 ? i % 7 - 3 : 5; // -3..3 but 0, so -1 too
    }
    a[4] = t == DType::I32 ? INT32_MIN : INT64_MIN; // / -1 wraps
    b[4] = -1;
    auto as = [&](const std::vector<int64_t>& v) {
      if (t == DType::I64)
        return bytesOf(v);
      return bytesOf(std::vector<int32_t>(v.begin(), v.end()));
    };
    checkError(c, {as(a), as(b)}, "");
    b[2500] = 0;
    b[1234] = 0;
    b[2999] = 0;
    checkError(c, {as(a), as(b)},
               "div: integer division by zero at element 1234");
  }
}

TEST_F(KernelCheck, AnIntegerDivisionInARegionNamesTheRegionsElement) {
  // cast(x / y) to f32, over more elements than one CPU tile.
  const int64_t n = 70000;
  Case c = stepCase(OpId::Fused, {{DType::I32, {n}}, {DType::I32, {n}}},
                    {F, {n}});
  c.plan.steps[0].body = {
      regionOp(OpId::Div, {0, 1}, DType::I32, {n}),
      regionOp(OpId::Cast, {2}, F, {n}),
  };
  std::vector<int32_t> a(n, 100), b(n, 7);
  checkError(c, {bytesOf(a), bytesOf(b)}, "");
  b[65001] = 0;
  b[41234] = 0;
  checkError(c, {bytesOf(a), bytesOf(b)},
             "div: integer division by zero at element 41234");
}

TEST_F(KernelCheck, AGatherByComputedIndicesReportsOneOutOfRange) {
  // Indices no graph input holds (the graph computes them): the kernel
  // checks them and clamps.
  Case c = stepCase(OpId::Gather, {{F, {6, 4}}, {DType::I64, {2, 5}}},
                    {F, {2, 5, 4}}, {integer("axis", 0)});
  std::vector<int64_t> ok = {0, 5, -6, -1, 3, 2, 2, 4, 1, 0};
  checkError(c, {{}, bytesOf(ok)}, "");
  std::vector<int64_t> bad = ok;
  bad[7] = -7;
  bad[3] = 6;
  checkError(c, {{}, bytesOf(bad)},
             "gather: index 6 (at position 3 of the indices) is out of range "
             "for an axis of size 6");
  // A value past 32 bits, in i32 indices and along an inner axis.
  Case d = stepCase(OpId::Gather, {{F, {3, 9}}, {DType::I32, {4}}},
                    {F, {3, 4}}, {integer("axis", 1)});
  std::vector<int32_t> wide = {8, -9, 0, 4};
  checkError(d, {{}, bytesOf(wide)}, "");
  wide[2] = INT32_MIN;
  checkError(d, {{}, bytesOf(wide)},
             "gather: index -2147483648 (at position 2 of the indices) is out "
             "of range for an axis of size 9");
  bad = ok;
  bad[1] = int64_t(1) << 40;
  checkError(c, {{}, bytesOf(bad)},
             "gather: index 1099511627776 (at position 1 of the indices) is "
             "out of range for an axis of size 6");
}

// scatter_add (an embedding's gradient): each output element summed by one
// unit in index order, so the CPU's bits exactly; repeated and negative
// indices, a run of one row per unit (many rows, few columns), an inner
// axis with i32 indices, and computed indices out of range reported as
// the CPU reports them.
TEST_F(KernelCheck, ScatterAddIsTheCpusBitForBitAndReportsOutOfRange) {
  Case c = stepCase(OpId::ScatterAdd, {{F, {2, 5, 4}}, {DType::I64, {2, 5}}},
                    {F, {6, 4}}, {integer("axis", 0), integer("size", 6)});
  std::vector<int64_t> ok = {0, 5, -6, -1, 3, 2, 2, 4, 2, 0};
  checkError(c, {{}, bytesOf(ok)}, "");
  std::vector<int64_t> bad = ok;
  bad[7] = -7;
  bad[3] = 6;
  checkError(c, {{}, bytesOf(bad)},
             "scatter_add: index 6 (at position 3 of the indices) is out of "
             "range for an axis of size 6");
  // Past 32 bits (the kernel's indexing may be 32-bit: the range check is
  // made in i64 first).
  bad = ok;
  bad[1] = (int64_t(1) << 32) + 3;
  checkError(c, {{}, bytesOf(bad)},
             "scatter_add: index 4294967299 (at position 1 of the indices) is "
             "out of range for an axis of size 6");
  // 300 updates of 64 into 50 rows: 512 runs wanted, one row each.
  std::vector<int64_t> many(300);
  for (size_t k = 0; k < many.size(); ++k)
    many[k] = int64_t(k * 37 % 50) - (k % 3 == 0 ? 50 : 0);
  check(stepCase(OpId::ScatterAdd, {{F, {300, 64}}, {DType::I64, {300}}},
                 {F, {50, 64}}, {integer("axis", 0), integer("size", 50)}),
        0);
  checkError(stepCase(OpId::ScatterAdd, {{F, {300, 64}}, {DType::I64, {300}}},
                      {F, {50, 64}}, {integer("axis", 0), integer("size", 50)}),
             {{}, bytesOf(many)}, "");
  // Along an inner axis, i32 indices.
  Case d = stepCase(OpId::ScatterAdd, {{F, {3, 4, 5}}, {DType::I32, {4}}},
                    {F, {3, 9, 5}}, {integer("axis", 1), integer("size", 9)});
  std::vector<int32_t> wide = {8, -9, 8, 4};
  checkError(d, {{}, bytesOf(wide)}, "");
  wide[2] = INT32_MIN;
  checkError(d, {{}, bytesOf(wide)},
             "scatter_add: index -2147483648 (at position 2 of the indices) "
             "is out of range for an axis of size 9");
}

TEST_F(KernelCheck, RowKernelsMatchTheCpu) {
  check(stepCase(OpId::Softmax, {{F, {5, 300}}}, {F, {5, 300}},
                 {integer("axis", 1)}),
        1e-5);
  check(stepCase(OpId::LogSoftmax, {{F, {9, 40}}}, {F, {9, 40}},
                 {integer("axis", 1)}),
        1e-5);
  // Rows longer than the shared-memory row cache: three passes over global
  // memory instead.
  check(stepCase(OpId::Softmax, {{F, {3, 7000}}}, {F, {3, 7000}},
                 {integer("axis", 1)}),
        1e-5);
  check(stepCase(OpId::LayerNorm, {{F, {2, 6500}}, {F, {6500}}, {F, {6500}}},
                 {F, {2, 6500}}, {integer("axis", 1), real("epsilon", 1e-5)}),
        1e-4);
  check(stepCase(OpId::LayerNorm, {{F, {4, 3, 50}}, {F, {3, 50}}, {F, {3, 50}}},
                 {F, {4, 3, 50}},
                 {integer("axis", 1), real("epsilon", 1e-5)}),
        1e-4);
  check(stepCase(OpId::ReduceSum, {{F, {6, 7, 40}}}, {F, {6}},
                 {ints("dims", {1, 2})}),
        1e-5);
  check(stepCase(OpId::ReduceMax, {{F, {6, 100}}}, {F, {6, 1}},
                 {ints("dims", {1}), flag("keepdim")}),
        0);
  // NaN wins a row's max and min, as on the CPU (the subgroup's maxnum
  // and minnum drop it: an all-NaN row gave -inf): rows with one NaN, all
  // NaN, and none.
  for (OpId op : {OpId::ReduceMax, OpId::ReduceMin}) {
    Case c = stepCase(op, {{F, {3, 64}}}, {F, {3}}, {ints("dims", {1})});
    std::vector<float> x(3 * 64);
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = float(int(i * 29 % 97) - 48) * 0.5f;
    x[17] = NAN;
    for (size_t i = 64; i < 128; ++i)
      x[i] = NAN;
    std::vector<uint8_t> bytes(x.size() * 4);
    std::memcpy(bytes.data(), x.data(), bytes.size());
    SCOPED_TRACE(mc::rt::opName(op));
    checkError(c, {bytes}, "");
  }
}

TEST_F(KernelCheck, OtherAxesMatchTheCpu) {
  check(stepCase(OpId::Softmax, {{F, {4, 6, 5}}}, {F, {4, 6, 5}},
                 {integer("axis", 1)}),
        1e-5);
  check(stepCase(OpId::ReduceMean, {{F, {8, 3, 5}}}, {F, {3}},
                 {ints("dims", {0, 2})}),
        1e-5);
  // Few (outer, inner) pairs along a long axis: a block per pair.
  check(stepCase(OpId::Softmax, {{F, {3000, 3}}}, {F, {3000, 3}},
                 {integer("axis", 0)}),
        1e-5);
  check(stepCase(OpId::LogSoftmax, {{F, {2, 5000, 4}}}, {F, {2, 5000, 4}},
                 {integer("axis", 1)}),
        1e-5);
  check(stepCase(OpId::ReduceMin, {{DType::I32, {8, 3}}}, {DType::I32, {3}},
                 {ints("dims", {0})}),
        0);
}

TEST_F(KernelCheck, ReductionsOverLeadingDimsRunByColumns) {
  // A bias gradient's sum over the batch: 32 outputs per block, each warp
  // walking every eighth row; 45 outputs leave the second block's last
  // lanes without a column, and 300 rows do not divide among the warps.
  check(stepCase(OpId::ReduceSum, {{F, {300, 45}}}, {F, {45}},
                 {ints("dims", {0})}),
        1e-5);
  // Two leading dims, keepdim, the mean; integers' max (exact); NaN wins.
  check(stepCase(OpId::ReduceMean, {{F, {6, 7, 40}}}, {F, {1, 1, 40}},
                 {ints("dims", {0, 1}), flag("keepdim")}),
        1e-5);
  check(stepCase(OpId::ReduceMax, {{DType::I64, {33, 70}}},
                 {DType::I64, {70}}, {ints("dims", {0})}),
        0);
  Case nan = stepCase(OpId::ReduceMin, {{F, {9, 64}}}, {F, {64}},
                      {ints("dims", {0})});
  std::vector<float> x(9 * 64);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = float(int(i * 37 % 101) - 50) * 0.25f;
  x[5 * 64 + 3] = NAN;
  std::vector<uint8_t> bytes(x.size() * 4);
  std::memcpy(bytes.data(), x.data(), bytes.size());
  checkError(nan, {bytes}, "");
}

TEST_F(KernelCheck, ARegionEndingInAReductionMatchesTheCpu) {
  // mean over the last dim of (x - m)^2: layer norm's variance.
  Case c = stepCase(OpId::Fused, {{F, {7, 96}}, {F, {7, 1}}}, {F, {7, 1}});
  c.plan.steps[0].body = {
      regionOp(OpId::BroadcastInDim, {1}, F, {7, 96}, {ints("dims", {0, 1})}),
      regionOp(OpId::Sub, {0, 2}, F, {7, 96}),
      regionOp(OpId::Mul, {3, 3}, F, {7, 96}),
      regionOp(OpId::ReduceMean, {4}, F, {7, 1},
               {ints("dims", {1}), flag("keepdim")}),
  };
  check(c, 1e-5);
  // Short rows: one thread per output.
  Case d = stepCase(OpId::Fused, {{F, {7, 5}}}, {F, {7}});
  d.plan.steps[0].body = {
      regionOp(OpId::Exp, {0}, F, {7, 5}),
      regionOp(OpId::ReduceSum, {1}, F, {7}, {ints("dims", {1})}),
  };
  check(d, 1e-5);
}

TEST_F(KernelCheck, BatchNormAndPoolingMatchTheCpu) {
  Case bn = stepCase(OpId::BatchNorm,
                     {{F, {2, 3, 4, 5}}, {F, {3}}, {F, {3}}, {F, {3}}, {F, {3}}},
                     {F, {2, 3, 4, 5}},
                     {real("epsilon", 1e-5), integer("feature_axis", 1)});
  bn.positive = true; // the variance
  check(bn, 1e-5);
  check(stepCase(OpId::MaxPool2d, {{F, {2, 3, 9, 9}}}, {F, {2, 3, 5, 5}},
                 {ints("kernel", {3, 3}), ints("strides", {2, 2}),
                  ints("padding", {1, 1, 1, 1}), ints("dilation", {1, 1})}),
        0);
  for (bool include : {false, true}) {
    std::vector<OpAttr> attrs = {ints("kernel", {3, 3}), ints("strides", {2, 2}),
                                 ints("padding", {1, 1, 1, 1}),
                                 ints("dilation", {1, 1})};
    if (include)
      attrs.push_back(flag("count_include_pad"));
    check(stepCase(OpId::AvgPool2d, {{F, {1, 2, 8, 8}}}, {F, {1, 2, 4, 4}},
                   attrs),
          1e-5);
  }
}

TEST_F(KernelCheck, ADynamicBatchRunsBelowItsMax) {
  // Shapes at the max batch (8) with the batch scaled dim; run at batch 3.
  Case c;
  c.plan.batch = {1, 8, 8};
  PlanStep s;
  s.op = OpId::Softmax;
  s.attrs = OpAttrs({integer("axis", 1)});
  s.inputs = {addBuffer(c.plan, F, {8, 70}, {1, 0})};
  s.outputs = {addBuffer(c.plan, F, {8, 70}, {1, 0})};
  c.plan.steps.push_back(std::move(s));
  c.batch = 3;
  check(c, 1e-5);
  Case e;
  e.plan.batch = {1, 8, 8};
  PlanStep t;
  t.op = OpId::Fused;
  t.inputs = {addBuffer(e.plan, F, {16}), addBuffer(e.plan, F, {8, 16}, {1, 0})};
  t.outputs = {addBuffer(e.plan, F, {8, 16}, {1, 0})};
  t.body = {
      regionOp(OpId::BroadcastInDim, {0}, F, {8, 16}, {ints("dims", {1})}),
      regionOp(OpId::Add, {1, 2}, F, {8, 16}),
  };
  t.body[0].batchScale = t.body[1].batchScale = {1, 0};
  e.plan.steps.push_back(std::move(t));
  e.batch = 5;
  check(e, 0);
}

} // namespace
