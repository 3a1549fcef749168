// The lavapipe harness proves itself: gpu-dialect kernels written as MLIR
// text, lowered to SPIR-V, run on Vulkan-on-CPU and checked against C++.
#include "test/gpu/SpirvLowering.h"
#include "test/gpu/VulkanRunner.h"

#include "modelc/kernels.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>

using namespace mc::gputest;

namespace {

std::string replaceAll(std::string text, const std::string &from,
                       const std::string &to) {
  for (size_t at = text.find(from); at != std::string::npos;
       at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

template <typename T> std::vector<uint8_t> bytesOf(const std::vector<T> &v) {
  std::vector<uint8_t> bytes(v.size() * sizeof(T));
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return bytes;
}

template <typename T> std::vector<T> valuesOf(const std::vector<uint8_t> &b) {
  std::vector<T> values(b.size() / sizeof(T));
  std::memcpy(values.data(), b.data(), values.size() * sizeof(T));
  return values;
}

// |got - want| / |want|; a zero must be exact, infinities and NaN equal.
double relError(double got, double want) {
  if (std::isnan(want))
    return std::isnan(got) ? 0 : INFINITY;
  if (std::isinf(want) || want == 0)
    return got == want ? 0 : INFINITY;
  return std::fabs(got - want) / std::fabs(want);
}

class LavapipeTest : public ::testing::Test {
protected:
  LavapipeTest() : context_(makeRegistry()) {}

  void SetUp() override {
    std::string why;
    runner_ = VulkanRunner::create(&why);
    if (!runner_)
      GTEST_SKIP() << "no Vulkan device for the lavapipe tests: " << why;
  }

  static mlir::DialectRegistry makeRegistry() {
    mlir::DialectRegistry registry;
    registerSpirvLoweringDialects(registry);
    return registry;
  }

  /// Parses and lowers `text`; returns the error text, empty on success.
  std::string lower(const std::string &text, std::vector<uint32_t> *words) {
    mlir::OwningOpRef<mlir::ModuleOp> module =
        mlir::parseSourceString<mlir::ModuleOp>(text, &context_);
    if (!module)
      return "the kernel text does not parse (diagnostics above)";
    std::string error;
    mlir::FailureOr<std::vector<uint32_t>> spirv =
        lowerGpuModuleToSpirv(*module, &error);
    if (mlir::failed(spirv))
      return error.empty() ? "lowering failed with no message" : error;
    *words = std::move(*spirv);
    return "";
  }

  /// Lowers `text` and dispatches `entry`; returns the error, empty if none.
  std::string run(const std::string &text, const std::string &entry,
                  const std::vector<std::vector<uint8_t> *> &buffers,
                  uint32_t groupsX) {
    std::vector<uint32_t> words;
    std::string error = lower(text, &words);
    if (error.empty() &&
        !runner_->dispatch(words, entry, buffers, groupsX, 1, 1, &error))
      return error.empty() ? "dispatch failed with no message" : error;
    return error;
  }

  mlir::MLIRContext context_;
  std::unique_ptr<VulkanRunner> runner_;
};

// (a) A grid-stride loop over 1000 elements with 4 x 64 threads (each thread
// takes 3 or 4), computing erf (polynomial, no GLSL instruction), tanh and
// exp (GLSL.std.450).
const char *kErfTanhExp = R"mlir(
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @erf_tanh_exp(%x: memref<1000xf32>, %erf: memref<1000xf32>,
                           %tanh: memref<1000xf32>, %exp: memref<1000xf32>)
        kernel attributes {spirv.entry_point_abi =
                           #spirv.entry_point_abi<workgroup_size = [64, 1, 1]>} {
      %n = arith.constant 1000 : index
      %tid = gpu.thread_id x
      %block = gpu.block_id x
      %threads = gpu.block_dim x
      %blocks = gpu.grid_dim x
      %blockStart = arith.muli %block, %threads : index
      %first = arith.addi %blockStart, %tid : index
      %stride = arith.muli %threads, %blocks : index
      scf.for %i = %first to %n step %stride {
        %v = memref.load %x[%i] : memref<1000xf32>
        %e = math.erf %v : f32
        memref.store %e, %erf[%i] : memref<1000xf32>
        %t = math.tanh %v : f32
        memref.store %t, %tanh[%i] : memref<1000xf32>
        %p = math.exp %v : f32
        memref.store %p, %exp[%i] : memref<1000xf32>
      }
      gpu.return
    }
  }
}
)mlir";

TEST_F(LavapipeTest, GridStrideErfTanhExp) {
  constexpr int n = 1000;
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i)
    x[i] = -4.0f + 8.0f * static_cast<float>(i) / (n - 1);
  std::vector<uint8_t> in = bytesOf(x);
  std::vector<uint8_t> erf(n * 4, 0xff), tanh(n * 4, 0xff), exp(n * 4, 0xff);
  ASSERT_EQ(run(kErfTanhExp, "erf_tanh_exp", {&in, &erf, &tanh, &exp}, 4), "");

  struct Checked {
    const char *name;
    std::vector<float> got;
    double (*reference)(double);
  };
  Checked outputs[] = {{"erf", valuesOf<float>(erf), std::erf},
                       {"tanh", valuesOf<float>(tanh), std::tanh},
                       {"exp", valuesOf<float>(exp), std::exp}};
  for (const Checked &out : outputs) {
    double worst = 0;
    for (int i = 0; i < n; ++i) {
      double err = relError(out.got[i], out.reference(x[i]));
      worst = std::max(worst, err);
      EXPECT_LE(err, 1e-6) << out.name << "(" << x[i] << ") = " << out.got[i]
                           << ", want " << out.reference(x[i]);
    }
    std::cout << out.name << ": worst relative error " << worst << "\n";
  }
}

// Every math op a generated kernel may use, one kernel each: those with a
// GLSL.std.450 instruction and those SpirvLowering expands first (erf, erfc,
// tanh, cbrt by polynomials, exp2, trunc).
const char *kMathOp = R"mlir(
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @math_op(%a: memref<256xf32>, %b: memref<256xf32>,
                      %c: memref<256xf32>, %out: memref<256xf32>)
        kernel attributes {spirv.entry_point_abi =
                           #spirv.entry_point_abi<workgroup_size = [64, 1, 1]>} {
      %tid = gpu.thread_id x
      %block = gpu.block_id x
      %threads = gpu.block_dim x
      %blockStart = arith.muli %block, %threads : index
      %i = arith.addi %blockStart, %tid : index
      %x = memref.load %a[%i] : memref<256xf32>
      %y = memref.load %b[%i] : memref<256xf32>
      %z = memref.load %c[%i] : memref<256xf32>
      %r = math.{OP} {ARGS} : f32
      memref.store %r, %out[%i] : memref<256xf32>
      gpu.return
    }
  }
}
)mlir";

struct MathCase {
  const char *op;
  int arity;
  std::function<double(double, double, double)> reference;
  float lo, hi;           // the first operand, evenly spread
  float otherLo, otherHi; // the others, random
  double tolerance;       // relative
};

TEST_F(LavapipeTest, MathOps) {
  // 1e-6 relative is about 8 f32 ulp, more than GLSL.std.450 allows lavapipe
  // for these domains. MLIR's polynomials: erfc reaches 2.5e-6 relative in
  // its tail (x > 4, values below 1e-8), cbrt 9.7e-7. fma's operands are
  // positive because Vulkan lets Fma be an unfused multiply then add, which
  // would cancel.
  // One row per op, unwrapped:
  // clang-format off
  const MathCase cases[] = {
      {"exp", 1, [](double x, double, double) { return std::exp(x); }, -10, 10, 0, 0, 1e-6},
      {"exp2", 1, [](double x, double, double) { return std::exp2(x); }, -20, 20, 0, 0, 1e-6},
      {"log", 1, [](double x, double, double) { return std::log(x); }, 1e-3f, 1e3f, 0, 0, 1e-6},
      {"sqrt", 1, [](double x, double, double) { return std::sqrt(x); }, 0, 1e3f, 0, 0, 1e-6},
      {"rsqrt", 1, [](double x, double, double) { return 1 / std::sqrt(x); }, 1e-3f, 1e3f, 0, 0, 1e-6},
      {"absf", 1, [](double x, double, double) { return std::fabs(x); }, -10, 10, 0, 0, 0},
      {"tanh", 1, [](double x, double, double) { return std::tanh(x); }, -12, 12, 0, 0, 1e-6},
      {"erf", 1, [](double x, double, double) { return std::erf(x); }, -6, 6, 0, 0, 1e-6},
      {"erfc", 1, [](double x, double, double) { return std::erfc(x); }, -6, 6, 0, 0, 3e-6},
      {"cbrt", 1, [](double x, double, double) { return std::cbrt(x); }, -1e3f, 1e3f, 0, 0, 2e-6},
      {"trunc", 1, [](double x, double, double) { return std::trunc(x); }, -10, 10, 0, 0, 0},
      {"powf", 2, [](double x, double y, double) { return std::pow(x, y); }, 1e-2f, 10, -3, 3, 1e-6},
      {"fma", 3, [](double x, double y, double z) { return std::fma(x, y, z); }, 0.1f, 10, 0.5f, 3, 1e-6},
  };
  // clang-format on
  constexpr int n = 256;
  std::mt19937 random(7);
  for (const MathCase &c : cases) {
    std::uniform_real_distribution<float> other(c.otherLo, c.otherHi);
    std::vector<float> a(n), b(n), z(n);
    for (int i = 0; i < n; ++i) {
      a[i] = c.lo + (c.hi - c.lo) * static_cast<float>(i) / (n - 1);
      b[i] = other(random);
      z[i] = other(random);
    }
    const char *args[] = {"", "%x", "%x, %y", "%x, %y, %z"};
    std::string text =
        replaceAll(replaceAll(kMathOp, "{OP}", c.op), "{ARGS}", args[c.arity]);
    std::vector<uint8_t> inA = bytesOf(a), inB = bytesOf(b), inC = bytesOf(z);
    std::vector<uint8_t> out(n * 4, 0xff);
    ASSERT_EQ(run(text, "math_op", {&inA, &inB, &inC, &out}, n / 64), "")
        << "math." << c.op;
    std::vector<float> got = valuesOf<float>(out);
    double worst = 0;
    for (int i = 0; i < n; ++i) {
      double want = c.reference(a[i], b[i], z[i]);
      double err = relError(got[i], want);
      worst = std::max(worst, err);
      EXPECT_LE(err, c.tolerance)
          << "math." << c.op << "(" << a[i] << ", " << b[i] << ", " << z[i]
          << ") = " << got[i] << ", want " << want;
    }
    std::cout << "math." << c.op << ": worst relative error " << worst << "\n";
  }
}

// (b) One workgroup per row: strided partial sums, gpu.subgroup_reduce, one
// partial per subgroup in shared memory, a barrier, then the first subgroup
// folds the partials with a loop over gpu.num_subgroups, so nothing assumes
// 32 lanes (lavapipe has 8: 64 threads make 8 subgroups, 256 make 32, more
// than one subgroup's lanes). Block 0 also reports the subgroup size and
// count it saw in %info. Shared memory is written both ways: memory space 3
// and #gpu.address_space<workgroup>.
const char *kRowSum = R"mlir(
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @row_sum(%in: memref<{ROWS_X_COLS}xf32>, %out: memref<{ROWS}xf32>,
                      %info: memref<2xi32>)
        kernel attributes {spirv.entry_point_abi =
                           #spirv.entry_point_abi<workgroup_size = [{THREADS}, 1, 1]>} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %cols = arith.constant {COLS} : index
      %zero = arith.constant 0.0 : f32
      %tid = gpu.thread_id x
      %row = gpu.block_id x
      %threads = gpu.block_dim x
      %rowStart = arith.muli %row, %cols : index
      %partial = scf.for %j = %tid to %cols step %threads
          iter_args(%acc = %zero) -> (f32) {
        %k = arith.addi %rowStart, %j : index
        %v = memref.load %in[%k] : memref<{ROWS_X_COLS}xf32>
        %sum = arith.addf %acc, %v : f32
        scf.yield %sum : f32
      }
      %subgroupSum = gpu.subgroup_reduce add %partial : (f32) -> f32
      %lane = gpu.lane_id
      %subgroup = gpu.subgroup_id : index
      %subgroups = gpu.num_subgroups : index
      %width = gpu.subgroup_size : index
      // One slot per subgroup: {THREADS} slots hold even 1-lane subgroups.
      %partials = memref.alloc() : memref<{THREADS}xf32, {SPACE}>
      %isLeader = arith.cmpi eq, %lane, %c0 : index
      scf.if %isLeader {
        memref.store %subgroupSum, %partials[%subgroup] : memref<{THREADS}xf32, {SPACE}>
      }
      gpu.barrier
      %isFirst = arith.cmpi eq, %subgroup, %c0 : index
      scf.if %isFirst {
        %mine = scf.for %k = %lane to %subgroups step %width
            iter_args(%acc = %zero) -> (f32) {
          %v = memref.load %partials[%k] : memref<{THREADS}xf32, {SPACE}>
          %sum = arith.addf %acc, %v : f32
          scf.yield %sum : f32
        }
        %total = gpu.subgroup_reduce add %mine : (f32) -> f32
        %isThread0 = arith.cmpi eq, %tid, %c0 : index
        scf.if %isThread0 {
          memref.store %total, %out[%row] : memref<{ROWS}xf32>
          %isRow0 = arith.cmpi eq, %row, %c0 : index
          scf.if %isRow0 {
            %w = arith.index_cast %width : index to i32
            %n = arith.index_cast %subgroups : index to i32
            memref.store %w, %info[%c0] : memref<2xi32>
            memref.store %n, %info[%c1] : memref<2xi32>
          }
        }
      }
      gpu.return
    }
  }
}
)mlir";

struct RowSumCase {
  int threads;
  const char *sharedSpace;
};

void PrintTo(const RowSumCase &c, std::ostream *os) {
  *os << c.threads << " threads, shared memory in " << c.sharedSpace;
}

class RowSumTest : public LavapipeTest,
                   public ::testing::WithParamInterface<RowSumCase> {};

TEST_P(RowSumTest, SubgroupReduceThroughSharedMemory) {
  const int threads = GetParam().threads, rows = 37, cols = 1000;
  std::string text = replaceAll(kRowSum, "{SPACE}", GetParam().sharedSpace);
  for (auto [key, value] : {std::pair{"{ROWS_X_COLS}", rows * cols},
                            {"{ROWS}", rows},
                            {"{COLS}", cols},
                            {"{THREADS}", threads}})
    text = replaceAll(text, key, std::to_string(value));
  std::mt19937 random(threads);
  std::uniform_real_distribution<float> uniform(-1, 1);
  std::vector<float> x(rows * cols);
  for (float &v : x)
    v = uniform(random);
  std::vector<uint8_t> in = bytesOf(x), out(rows * 4, 0xff), info(8, 0xff);
  ASSERT_EQ(run(text, "row_sum", {&in, &out, &info}, rows), "");

  std::vector<int32_t> seen = valuesOf<int32_t>(info);
  const int width = static_cast<int>(runner_->subgroupSize());
  EXPECT_EQ(seen[0], width) << "gpu.subgroup_size against the device's";
  EXPECT_EQ(seen[1], (threads + width - 1) / width) << "gpu.num_subgroups";
  if (runner_->deviceName().find("llvmpipe") != std::string::npos) {
    EXPECT_EQ(width, 8) << "lavapipe's subgroups have 8 lanes";
  }

  std::vector<float> got = valuesOf<float>(out);
  for (int r = 0; r < rows; ++r) {
    double want = 0, magnitude = 0;
    for (int c = 0; c < cols; ++c) {
      want += x[r * cols + c];
      magnitude += std::fabs(x[r * cols + c]);
    }
    // f32 sums of 1000 terms in another order: 1e-5 of the sum of |x|
    // (relative to the sum itself, which may be near 0, it would be noise).
    EXPECT_NEAR(got[r], want, 1e-5 * magnitude) << "row " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Threads, RowSumTest,
    ::testing::Values(RowSumCase{64, "3"},
                      RowSumCase{256, "#gpu.address_space<workgroup>"}),
    [](const auto &info) {
      return std::to_string(info.param.threads) + "threads";
    });

// Each gpu.subgroup_reduce kind over one workgroup, every lane writing the
// result of its subgroup: lanes [k * width, (k + 1) * width) must agree.
const char *kReduceKinds = R"mlir(
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @reduce_kinds(%x: memref<64xf32>, %n: memref<64xi32>,
                           %add: memref<64xf32>, %max: memref<64xf32>,
                           %maximum: memref<64xf32>, %min: memref<64xf32>,
                           %addi: memref<64xi32>)
        kernel attributes {spirv.entry_point_abi =
                           #spirv.entry_point_abi<workgroup_size = [64, 1, 1]>} {
      %i = gpu.thread_id x
      %v = memref.load %x[%i] : memref<64xf32>
      %a = gpu.subgroup_reduce add %v : (f32) -> f32
      memref.store %a, %add[%i] : memref<64xf32>
      %b = gpu.subgroup_reduce maxnumf %v : (f32) -> f32
      memref.store %b, %max[%i] : memref<64xf32>
      %c = gpu.subgroup_reduce maximumf %v : (f32) -> f32
      memref.store %c, %maximum[%i] : memref<64xf32>
      %d = gpu.subgroup_reduce minnumf %v : (f32) -> f32
      memref.store %d, %min[%i] : memref<64xf32>
      %k = memref.load %n[%i] : memref<64xi32>
      %e = gpu.subgroup_reduce add %k : (i32) -> i32
      memref.store %e, %addi[%i] : memref<64xi32>
      gpu.return
    }
  }
}
)mlir";

TEST_F(LavapipeTest, SubgroupReduceKinds) {
  constexpr int n = 64;
  std::vector<float> x(n);
  std::vector<int32_t> k(n);
  for (int i = 0; i < n; ++i) {
    x[i] = static_cast<float>((i * 37) % 64) - 20.5f; // sums exact in f32
    k[i] = (i * 7919) % 1000 - 500;
  }
  std::vector<uint8_t> inX = bytesOf(x), inK = bytesOf(k);
  std::vector<std::vector<uint8_t>> outs(5, std::vector<uint8_t>(n * 4));
  ASSERT_EQ(run(kReduceKinds, "reduce_kinds",
                {&inX, &inK, &outs[0], &outs[1], &outs[2], &outs[3], &outs[4]},
                1),
            "");
  const int width = static_cast<int>(runner_->subgroupSize());
  ASSERT_EQ(n % width, 0) << "the expected values assume full subgroups";
  std::vector<float> add = valuesOf<float>(outs[0]),
                     max = valuesOf<float>(outs[1]),
                     maximum = valuesOf<float>(outs[2]),
                     min = valuesOf<float>(outs[3]);
  std::vector<int32_t> addi = valuesOf<int32_t>(outs[4]);
  for (int i = 0; i < n; ++i) {
    int first = i / width * width;
    float wantAdd = 0, wantMax = -INFINITY, wantMin = INFINITY;
    int32_t wantAddi = 0;
    for (int j = first; j < first + width; ++j) {
      wantAdd += x[j];
      wantMax = std::max(wantMax, x[j]);
      wantMin = std::min(wantMin, x[j]);
      wantAddi += k[j];
    }
    EXPECT_EQ(add[i], wantAdd) << "lane " << i;
    EXPECT_EQ(max[i], wantMax) << "lane " << i;
    EXPECT_EQ(maximum[i], wantMax) << "lane " << i;
    EXPECT_EQ(min[i], wantMin) << "lane " << i;
    EXPECT_EQ(addi[i], wantAddi) << "lane " << i;
  }
}

// (c) f16 in memory, f32 arithmetic: gelu(x) = x/2 (1 + erf(x / sqrt 2)).
const char *kGeluF16 = R"mlir(
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @gelu_f16(%x: memref<1024xf16>, %y: memref<1024xf16>)
        kernel attributes {spirv.entry_point_abi =
                           #spirv.entry_point_abi<workgroup_size = [64, 1, 1]>} {
      %half = arith.constant 0.5 : f32
      %one = arith.constant 1.0 : f32
      %invSqrt2 = arith.constant 0.707106781 : f32
      %tid = gpu.thread_id x
      %block = gpu.block_id x
      %threads = gpu.block_dim x
      %blockStart = arith.muli %block, %threads : index
      %i = arith.addi %blockStart, %tid : index
      %h = memref.load %x[%i] : memref<1024xf16>
      %v = arith.extf %h : f16 to f32
      %scaled = arith.mulf %v, %invSqrt2 : f32
      %e = math.erf %scaled : f32
      %onePlus = arith.addf %one, %e : f32
      %halfV = arith.mulf %v, %half : f32
      %g = arith.mulf %halfV, %onePlus : f32
      %r = arith.truncf %g : f32 to f16
      memref.store %r, %y[%i] : memref<1024xf16>
      gpu.return
    }
  }
}
)mlir";

TEST_F(LavapipeTest, F16StorageF32Math) {
  constexpr int n = 1024;
  std::vector<uint16_t> x(n);
  // Multiples of 1/256 in [-2, 2), exact in f16. Below -2, 1 + erf cancels
  // in f32 and gelu loses more than f16's precision whatever the device.
  for (int i = 0; i < n; ++i)
    x[i] = mc::rt::floatToHalf(static_cast<float>(i - n / 2) / 256.0f);
  std::vector<uint8_t> in = bytesOf(x), out(n * 2, 0xff);
  ASSERT_EQ(run(kGeluF16, "gelu_f16", {&in, &out}, n / 64), "");
  std::vector<uint16_t> got = valuesOf<uint16_t>(out);
  for (int i = 0; i < n; ++i) {
    double v = mc::rt::halfToFloat(x[i]);
    double want = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    // The f32 result rounds to f16 (11 significant bits): within one f16
    // ulp, 2^-10 relative, or 2^-24 absolute near 0 (f16's subnormal step).
    EXPECT_NEAR(mc::rt::halfToFloat(got[i]), want,
                std::max(std::fabs(want) * 0x1p-10, 0x1p-24))
        << "gelu(" << v << ")";
  }
}

// (d) Scalar arguments: an i64 count (elements at and past it stay
// untouched), an i32 shift and an f32 factor, with i32, i64, i8 and f32
// memrefs. Each scalar is bound as a buffer holding its bytes.
const char *kScalars = R"mlir(
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @scalars(%in: memref<256xi32>, %wide: memref<256xi64>,
                      %bytes: memref<256xi8>, %scaled: memref<256xf32>,
                      %count: i64, %shift: i32, %alpha: f32)
        kernel attributes {spirv.entry_point_abi =
                           #spirv.entry_point_abi<workgroup_size = [64, 1, 1]>} {
      %c32 = arith.constant 32 : i64
      %tid = gpu.thread_id x
      %block = gpu.block_id x
      %threads = gpu.block_dim x
      %blockStart = arith.muli %block, %threads : index
      %i = arith.addi %blockStart, %tid : index
      %n = arith.index_cast %count : i64 to index
      %inRange = arith.cmpi ult, %i, %n : index
      scf.if %inRange {
        %v = memref.load %in[%i] : memref<256xi32>
        %v64 = arith.extsi %v : i32 to i64
        %high = arith.shli %v64, %c32 : i64
        %w = arith.addi %high, %count : i64
        memref.store %w, %wide[%i] : memref<256xi64>
        %shifted = arith.shrsi %v, %shift : i32
        %b = arith.trunci %shifted : i32 to i8
        memref.store %b, %bytes[%i] : memref<256xi8>
        %f = arith.sitofp %v : i32 to f32
        %g = arith.mulf %f, %alpha : f32
        memref.store %g, %scaled[%i] : memref<256xf32>
      }
      gpu.return
    }
  }
}
)mlir";

TEST_F(LavapipeTest, ScalarArgumentsAndIntegerMemrefs) {
  constexpr int n = 256;
  const int64_t count = 200;
  const int32_t shift = 3;
  const float alpha = -0.75f;
  std::vector<int32_t> x(n);
  for (int i = 0; i < n; ++i)
    x[i] = (i - 100) * 1000003;
  std::vector<uint8_t> in = bytesOf(x), wide(n * 8, 0xee), bytes(n, 0xee),
                       scaled(n * 4, 0xee);
  std::vector<uint8_t> countArg = bytesOf(std::vector<int64_t>{count}),
                       shiftArg = bytesOf(std::vector<int32_t>{shift}),
                       alphaArg = bytesOf(std::vector<float>{alpha});
  ASSERT_EQ(run(kScalars, "scalars",
                {&in, &wide, &bytes, &scaled, &countArg, &shiftArg, &alphaArg},
                n / 64),
            "");
  std::vector<int64_t> gotWide = valuesOf<int64_t>(wide);
  std::vector<int8_t> gotBytes = valuesOf<int8_t>(bytes);
  std::vector<float> gotScaled = valuesOf<float>(scaled);
  int64_t untouched64;
  float untouchedF;
  std::memset(&untouched64, 0xee, 8);
  std::memset(&untouchedF, 0xee, 4);
  for (int i = 0; i < n; ++i) {
    if (i < count) {
      EXPECT_EQ(gotWide[i],
                static_cast<int64_t>(x[i]) * (int64_t{1} << 32) + count)
          << i;
      EXPECT_EQ(gotBytes[i], static_cast<int8_t>(x[i] >> shift)) << i;
      EXPECT_EQ(gotScaled[i], static_cast<float>(x[i]) * alpha) << i;
    } else {
      EXPECT_EQ(gotWide[i], untouched64) << i;
      EXPECT_EQ(static_cast<uint8_t>(gotBytes[i]), 0xee) << i;
      EXPECT_EQ(std::memcmp(&gotScaled[i], &untouchedF, 4), 0) << i;
    }
  }
}

// Two kernels in one gpu.module: one SPIR-V module, two entry points, each
// with its own bindings from 0.
const char *kTwoKernels = R"mlir(
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @twice(%x: memref<64xf32>, %y: memref<64xf32>) kernel attributes
        {spirv.entry_point_abi = #spirv.entry_point_abi<workgroup_size = [64, 1, 1]>} {
      %i = gpu.thread_id x
      %v = memref.load %x[%i] : memref<64xf32>
      %w = arith.addf %v, %v : f32
      memref.store %w, %y[%i] : memref<64xf32>
      gpu.return
    }
    gpu.func @sum(%x: memref<64xf32>, %y: memref<64xf32>, %z: memref<64xf32>)
        kernel attributes
        {spirv.entry_point_abi = #spirv.entry_point_abi<workgroup_size = [32, 1, 1]>} {
      %tid = gpu.thread_id x
      %block = gpu.block_id x
      %c32 = arith.constant 32 : index
      %blockStart = arith.muli %block, %c32 : index
      %i = arith.addi %blockStart, %tid : index
      %v = memref.load %x[%i] : memref<64xf32>
      %w = memref.load %y[%i] : memref<64xf32>
      %s = arith.addf %v, %w : f32
      memref.store %s, %z[%i] : memref<64xf32>
      gpu.return
    }
  }
}
)mlir";

TEST_F(LavapipeTest, TwoKernelsInOneModule) {
  std::vector<uint32_t> words;
  ASSERT_EQ(lower(kTwoKernels, &words), "");
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i)
    x[i] = static_cast<float>(i) - 10.25f;
  std::vector<uint8_t> in = bytesOf(x), doubled(256), summed(256);
  std::string error;
  ASSERT_TRUE(
      runner_->dispatch(words, "twice", {&in, &doubled}, 1, 1, 1, &error))
      << error;
  ASSERT_TRUE(runner_->dispatch(words, "sum", {&in, &doubled, &summed}, 2, 1, 1,
                                &error))
      << error;
  std::vector<float> got = valuesOf<float>(summed);
  for (int i = 0; i < 64; ++i)
    EXPECT_EQ(got[i], 3 * x[i]) << i;

  EXPECT_FALSE(
      runner_->dispatch(words, "sum", {&in, &doubled}, 2, 1, 1, &error));
  EXPECT_EQ(error, "kernel 'sum' has 3 bindings (one per argument), got 2 "
                   "buffers");
}

// (e) Errors are text, never a crash: from the runner (entry point, SPIR-V,
// buffers, workgroup count) and from the lowering.
TEST_F(LavapipeTest, RunnerErrors) {
  std::vector<uint32_t> words;
  ASSERT_EQ(lower(kGeluF16, &words), "");
  std::vector<uint8_t> in(2048), out(2048);
  std::string error;
  auto dispatch =
      [&](const std::vector<uint32_t> &spirv, const std::string &entry,
          const std::vector<std::vector<uint8_t> *> &buffers, uint32_t groups) {
        error.clear();
        return runner_->dispatch(spirv, entry, buffers, groups, 1, 1, &error);
      };

  EXPECT_FALSE(dispatch(words, "gelu", {&in, &out}, 16));
  EXPECT_EQ(error, "no GLCompute entry point 'gelu' in the SPIR-V module (it "
                   "has: gelu_f16)");

  std::vector<uint32_t> truncated(words.begin(),
                                  words.begin() + words.size() / 2);
  EXPECT_FALSE(dispatch(truncated, "gelu_f16", {&in, &out}, 16));
  EXPECT_NE(error.find("the SPIR-V module is invalid (spirv-val"),
            std::string::npos)
      << error;

  EXPECT_FALSE(
      dispatch({0xdeadbeef, 1, 2, 3, 4, 5}, "gelu_f16", {&in, &out}, 16));
  EXPECT_EQ(error, "not a SPIR-V module: 6 words, no SPIR-V magic number "
                   "first");

  EXPECT_FALSE(dispatch(words, "gelu_f16", {&in}, 16));
  EXPECT_EQ(error, "kernel 'gelu_f16' has 2 bindings (one per argument), got "
                   "1 buffers");

  std::vector<uint8_t> empty;
  EXPECT_FALSE(dispatch(words, "gelu_f16", {&in, &empty}, 16));
  EXPECT_EQ(error.rfind("buffer 1 has 0 bytes", 0), 0u) << error;

  EXPECT_FALSE(dispatch(words, "gelu_f16", {&in, &out}, 0));
  EXPECT_EQ(error.rfind("workgroup count 0 in dimension x is outside 1..", 0),
            0u)
      << error;

  std::vector<uint32_t> wide;
  ASSERT_EQ(lower(replaceAll(kGeluF16, "[64, 1, 1]", "[2048, 1, 1]"), &wide),
            "");
  EXPECT_FALSE(dispatch(wide, "gelu_f16", {&in, &out}, 1));
  EXPECT_EQ(error.rfind("kernel 'gelu_f16' has workgroups of 2048x1x1 "
                        "threads; the device allows ",
                        0),
            0u)
      << error;

  // The runner still works after all that.
  EXPECT_TRUE(dispatch(words, "gelu_f16", {&in, &out}, 16)) << error;
}

// The limits lavapipe has and a GPU does not, which modelc-kernel-check
// skips a kernel for: 32 buffers, 128 MiB each.
TEST_F(LavapipeTest, BeyondLimitsNamesTheBuffersAndTheRange) {
  EXPECT_EQ(runner_->beyondLimits({2048, 1}), "");
  EXPECT_EQ(runner_->beyondLimits(std::vector<size_t>(33, 4)),
            "33 buffers, the device binds at most 32");
  EXPECT_EQ(runner_->beyondLimits({16, (size_t(128) << 20) + 1}),
            "buffer 1 has 134217729 bytes, over the device's storage buffer "
            "range of 134217728");
}

TEST_F(LavapipeTest, LoweringErrors) {
  std::vector<uint32_t> words;
  // bf16 has no SPIR-V type; MLIR would reinterpret its bits as f32
  // without a word, so the harness refuses it.
  std::string bf16 = replaceAll(replaceAll(kGeluF16, "f16", "bf16"),
                                "@gelu_bbf16", "@gelu_bf16");
  std::string error = lower(bf16, &words);
  EXPECT_NE(error.find(":15:12: error: 'memref.load' op uses 'bf16', which "
                       "has no SPIR-V type on lavapipe"),
            std::string::npos)
      << error;

  std::string noAbi = replaceAll(kGeluF16,
                                 R"(attributes {spirv.entry_point_abi =
                           #spirv.entry_point_abi<workgroup_size = [64, 1, 1]>})",
                                 "");
  error = lower(noAbi, &words);
  EXPECT_NE(error.find("kernel needs a 'spirv.entry_point_abi' attribute"),
            std::string::npos)
      << error;

  // CUDA's 32-lane shuffle: SPIR-V cannot pick the lanes taking part.
  const char *shuffle32 = R"mlir(
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @shuffle(%x: memref<64xf32>) kernel attributes
        {spirv.entry_point_abi = #spirv.entry_point_abi<workgroup_size = [64, 1, 1]>} {
      %i = gpu.thread_id x
      %v = memref.load %x[%i] : memref<64xf32>
      %offset = arith.constant 16 : i32
      %width = arith.constant 32 : i32
      %w, %valid = gpu.shuffle xor %v, %offset, %width : f32
      memref.store %w, %x[%i] : memref<64xf32>
      gpu.return
    }
  }
}
)mlir";
  error = lower(shuffle32, &words);
  EXPECT_NE(error.find("'gpu.shuffle' op width must be the constant 8, the "
                       "target's subgroup size"),
            std::string::npos)
      << error;

  std::string noContainer =
      replaceAll(kGeluF16, "attributes {gpu.container_module}", "");
  error = lower(noContainer, &words);
  EXPECT_NE(error.find("expected a module with the 'gpu.container_module' "
                       "attribute"),
            std::string::npos)
      << error;
}

} // namespace
