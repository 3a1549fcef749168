// CPU kernels: elementwise, cast, data movement, reductions, softmax, copy.
// These define what the mc ops compute (eager and compiled both call them).
// Matmul lives in KernelsLinalg.cpp.
#include "modelc/kernels.h"
#include "modelc/error_record.h"
#include "KernelUtil.h"
#include "VecMath.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

namespace mc::rt {

using detail::checkRank;
using detail::contiguousStrides;
using detail::kMaxRank;
using detail::kParallelGrain;
using detail::normalizeAxis;
using detail::Odometer;
using detail::parallelFor;
using detail::sameTypeAndShape;
using detail::typeString;
using detail::unsupportedDType;

namespace {

/// The kernel's name for `op`, or nullptr when unary() does not implement it.
const char *unaryName(OpId op, bool tanhApproximation) {
  switch (op) {
  case OpId::Neg:
    return "neg";
  case OpId::Exp:
    return "exp";
  case OpId::Log:
    return "log";
  case OpId::Tanh:
    return "tanh";
  case OpId::Sin:
    return "sin";
  case OpId::Cos:
    return "cos";
  case OpId::Tan:
    return "tan";
  case OpId::Asin:
    return "asin";
  case OpId::Acos:
    return "acos";
  case OpId::Atan:
    return "atan";
  case OpId::Sinh:
    return "sinh";
  case OpId::Cosh:
    return "cosh";
  case OpId::Asinh:
    return "asinh";
  case OpId::Acosh:
    return "acosh";
  case OpId::Atanh:
    return "atanh";
  case OpId::Sigmoid:
    return "sigmoid";
  case OpId::Relu:
    return "relu";
  case OpId::Sqrt:
    return "sqrt";
  case OpId::Abs:
    return "abs";
  case OpId::Erf:
    return "erf";
  case OpId::Gelu:
    return tanhApproximation ? "gelu_tanh" : "gelu";
  case OpId::Not:
    return "not";
  default:
    return nullptr;
  }
}

/// The kernel's name for `op`, or nullptr when binary() does not implement it.
const char *binaryName(OpId op) {
  switch (op) {
  case OpId::Add:
    return "add";
  case OpId::Sub:
    return "sub";
  case OpId::Mul:
    return "mul";
  case OpId::Div:
    return "div";
  case OpId::Maximum:
    return "maximum";
  case OpId::Pow:
    return "pow";
  case OpId::Minimum:
    return "minimum";
  default:
    return nullptr;
  }
}

/// The kernel's name for `op`, or nullptr when reduce() does not implement it.
const char *reduceName(OpId op) {
  switch (op) {
  case OpId::ReduceSum:
    return "reduce_sum";
  case OpId::ReduceMean:
    return "reduce_mean";
  case OpId::ReduceMax:
    return "reduce_max";
  case OpId::ReduceMin:
    return "reduce_min";
  default:
    return nullptr;
  }
}

Status unimplementedOp(const char *kernel, OpId op) {
  return Status::error(std::string(kernel) + ": op '" + opName(op) +
                       "' is not implemented by this kernel");
}

/// y = f(x) elementwise, split among threads when large.
template <typename F>
void mapF32(const ConstTensor &a, const MutTensor &out, F f) {
  const float *x = static_cast<const float *>(a.data);
  float *y = static_cast<float *>(out.data);
  parallelFor(numElements(a.shape), kParallelGrain / 4,
              [&](int64_t b, int64_t e) {
                for (int64_t i = b; i < e; ++i)
                  y[i] = f(x[i]);
              });
}

/// loop(x + b, y + b, e - b) over [0, n) in parallel chunks (the VecMath
/// loops); `grain` smaller for costlier elements.
template <typename L>
void vecMap(const ConstTensor &a, const MutTensor &out, int64_t grain, L loop) {
  const float *x = static_cast<const float *>(a.data);
  float *y = static_cast<float *>(out.data);
  parallelFor(numElements(a.shape), grain,
              [&](int64_t b, int64_t e) { loop(x + b, y + b, e - b); });
}

template <typename T>
Status unaryInt(OpId op, const ConstTensor &a, const MutTensor &out,
                bool tanhApproximation) {
  using U = std::make_unsigned_t<T>;
  const T *x = static_cast<const T *>(a.data);
  T *y = static_cast<T *>(out.data);
  int64_t n = numElements(a.shape);
  if (op == OpId::Neg) {
    // Two's complement wrap (no UB on the minimum value).
    for (int64_t i = 0; i < n; ++i)
      y[i] = T(U(0) - U(x[i]));
  } else if (op == OpId::Relu) {
    for (int64_t i = 0; i < n; ++i)
      y[i] = x[i] < 0 ? T(0) : x[i];
  } else if (op == OpId::Abs) {
    // abs(min) wraps to min, like NumPy and PyTorch.
    for (int64_t i = 0; i < n; ++i)
      y[i] = x[i] < 0 ? T(U(0) - U(x[i])) : x[i];
  } else {
    return unsupportedDType(unaryName(op, tanhApproximation), a.dtype,
                            op == OpId::Not ? "i1" : "f32");
  }
  return Status::ok();
}

template <typename T>
Status binaryInt(OpId op, const ConstTensor &a, const ConstTensor &b,
                 const MutTensor &out) {
  using U = std::make_unsigned_t<T>;
  const T *x = static_cast<const T *>(a.data);
  const T *z = static_cast<const T *>(b.data);
  T *y = static_cast<T *>(out.data);
  int64_t n = numElements(a.shape);
  switch (op) {
  case OpId::Add: // wrap around, like the hardware and NumPy
    for (int64_t i = 0; i < n; ++i)
      y[i] = T(U(x[i]) + U(z[i]));
    break;
  case OpId::Sub:
    for (int64_t i = 0; i < n; ++i)
      y[i] = T(U(x[i]) - U(z[i]));
    break;
  case OpId::Mul:
    for (int64_t i = 0; i < n; ++i)
      y[i] = T(U(x[i]) * U(z[i]));
    break;
  case OpId::Div:
    // Truncates toward zero; min / -1 wraps. Division by zero is an error,
    // not a SIGFPE.
    for (int64_t i = 0; i < n; ++i)
      if (z[i] == 0)
        return Status::error(integerDivisionError(uint64_t(i)));
    for (int64_t i = 0; i < n; ++i)
      y[i] = z[i] == -1 ? T(U(0) - U(x[i])) : T(x[i] / z[i]);
    break;
  case OpId::Maximum:
    for (int64_t i = 0; i < n; ++i)
      y[i] = x[i] < z[i] ? z[i] : x[i];
    break;
  case OpId::Minimum:
    for (int64_t i = 0; i < n; ++i)
      y[i] = z[i] < x[i] ? z[i] : x[i];
    break;
  case OpId::Pow:
    return unsupportedDType("pow", a.dtype, "f32");
  default:
    return unimplementedOp("binary", op);
  }
  return Status::ok();
}

// --- cast ---
// Sources load either a float (f32/f16/bf16, exact) or an int64_t (ints and
// i1); each destination has one conversion from each.

float toF32(float v) { return v; }
float toF32(int64_t v) { return float(v); } // one correctly-rounded step

/// v rounded to 24 bits with round-to-odd (truncate, then set the last bit
/// if anything was dropped). Rounding that again to nearest-even at <= 22
/// bits is correctly rounded, which converting int -> f32 -> f16/bf16 with
/// two nearest-even roundings is not (e.g. 2^24 + 2^16 + 1 -> bf16).
float intToFloatRoundToOdd(int64_t v) {
  uint64_t u = v < 0 ? uint64_t(0) - uint64_t(v) : uint64_t(v);
  int bitsUsed = 64 - __builtin_clzll(u | 1);
  if (bitsUsed > 24) {
    int shift = bitsUsed - 24;
    uint64_t mant = u >> shift;
    if (u & ((uint64_t(1) << shift) - 1))
      mant |= 1;
    float f = std::ldexp(float(mant), shift); // exact: mant has 24 bits
    return v < 0 ? -f : f;
  }
  return float(v); // exact
}
uint16_t toF16(float v) { return floatToHalf(v); }
uint16_t toF16(int64_t v) { return floatToHalf(intToFloatRoundToOdd(v)); }
uint16_t toBF16(float v) { return floatToBf16(v); }
uint16_t toBF16(int64_t v) { return floatToBf16(intToFloatRoundToOdd(v)); }

/// Truncation toward zero, saturating (NaN -> 0) so it is never UB.
template <typename T> T floatToInt(float v) {
  if (std::isnan(v))
    return 0;
  // 2^31 and 2^63 are exact floats; anything >= them is out of range.
  const float hi = -float(std::numeric_limits<T>::min());
  if (v >= hi)
    return std::numeric_limits<T>::max();
  if (v < -hi)
    return std::numeric_limits<T>::min();
  return T(v);
}
int32_t toI32(float v) { return floatToInt<int32_t>(v); }
int32_t toI32(int64_t v) { return int32_t(uint32_t(uint64_t(v))); } // wraps
int64_t toI64(float v) { return floatToInt<int64_t>(v); }
int64_t toI64(int64_t v) { return v; }
uint8_t toI1(float v) { return v != 0.0f; } // NaN -> 1
uint8_t toI1(int64_t v) { return v != 0; }

template <typename Load>
Status castFrom(Load load, int64_t n, const MutTensor &out) {
  void *o = out.data;
  switch (out.dtype) {
  case DType::F32:
    for (int64_t i = 0; i < n; ++i)
      static_cast<float *>(o)[i] = toF32(load(i));
    return Status::ok();
  case DType::F16:
    for (int64_t i = 0; i < n; ++i)
      static_cast<uint16_t *>(o)[i] = toF16(load(i));
    return Status::ok();
  case DType::BF16:
    for (int64_t i = 0; i < n; ++i)
      static_cast<uint16_t *>(o)[i] = toBF16(load(i));
    return Status::ok();
  case DType::I32:
    for (int64_t i = 0; i < n; ++i)
      static_cast<int32_t *>(o)[i] = toI32(load(i));
    return Status::ok();
  case DType::I64:
    for (int64_t i = 0; i < n; ++i)
      static_cast<int64_t *>(o)[i] = toI64(load(i));
    return Status::ok();
  case DType::I1:
    for (int64_t i = 0; i < n; ++i)
      static_cast<uint8_t *>(o)[i] = toI1(load(i));
    return Status::ok();
  }
  return Status::error("cast: invalid result dtype " +
                       std::to_string(int(out.dtype)));
}

/// Each output's reduction runs in one fixed order on one thread; outputs
/// are split among threads. `runStep(acc, p, n)` takes a contiguous run of
/// the reduced values (a sum's runs go to double lanes).
/// The shortest contiguous run a sum hands to double lanes.
constexpr int64_t kMinLaneRun = 64;

template <typename T, typename Acc, typename Init, typename RunStep,
          typename Finish>
void reduceLoop(const T *x, T *y, const Odometer &keptDims,
                const Odometer &redDims, int64_t nOut, int64_t nRed, Init init,
                RunStep runStep, Finish finish) {
  detail::parallelFor(
      nOut, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(nRed, 1)),
      [&](int64_t ob, int64_t oe) {
        Odometer kept = keptDims, red = redDims;
        kept.seek(ob);
        // The reduced dims' innermost run, when contiguous, is a plain loop.
        int64_t run = red.rank && red.stride[red.rank - 1] == 1
                          ? red.shape[red.rank - 1]
                          : 1;
        for (int64_t o = ob; o < oe; ++o, kept.next()) {
          Acc acc = init();
          red.reset();
          const T *base = x + kept.offset;
          if (run > 1) {
            Odometer outerRed = red;
            --outerRed.rank;
            outerRed.reset();
            for (int64_t j = 0; j < nRed; j += run, outerRed.next())
              runStep(acc, base + outerRed.offset, run);
          } else {
            for (int64_t j = 0; j < nRed; ++j, red.next())
              runStep(acc, base + red.offset, 1);
          }
          y[o] = finish(acc);
        }
      });
}

/// reduceLoop's results when the reduced dims are one block with kept dims
/// inside it ([outer, nRed, inner], inner > 1: a global pool over NHWC's H
/// and W): each output still reduces its nRed values in order, but up to
/// kChunk outputs advance together along contiguous rows in a vectorized
/// `rows` loop (vec::sumRowsF64 and kin; reduceLoop would read each
/// output's values `inner` elements apart). The outputs are split into
/// column chunks, narrower when there are few rows of outputs, so a batch
/// of one still spreads over the threads.
template <typename Acc, typename Init, typename Rows, typename Finish>
void reduceMiddle(const float *x, float *y, int64_t outer, int64_t nRed,
                  int64_t inner, Init init, Rows rows, Finish finish) {
  if (outer == 0) // an empty batch: no outputs
    return;
  constexpr int64_t kChunk = 1024; // accumulators per task, in L1
  constexpr int64_t kMinTasks = 16, kMinChunk = 64;
  int64_t want = std::max<int64_t>(1, (kMinTasks + outer - 1) / outer);
  int64_t chunk = std::min(kChunk, (inner + want - 1) / want);
  chunk = std::min(inner, std::max(kMinChunk, (chunk + 15) / 16 * 16));
  int64_t chunks = (inner + chunk - 1) / chunk;
  detail::parallelFor(
      outer * chunks,
      std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(nRed * chunk, 1)),
      [&](int64_t tb, int64_t te) {
        Acc acc[kChunk];
        for (int64_t t = tb; t < te; ++t) {
          int64_t o = t / chunks, i0 = t % chunks * chunk;
          int64_t n = std::min(chunk, inner - i0);
          for (int64_t k = 0; k < n; ++k)
            acc[k] = init();
          rows(x + o * nRed * inner + i0, nRed, inner, n, acc);
          float *out = y + o * inner + i0;
          for (int64_t k = 0; k < n; ++k)
            out[k] = finish(acc[k]);
        }
      });
}

} // namespace

namespace detail {

UnaryF32Loop unaryF32Loop(OpId op, bool tanhApproximation) {
  switch (op) {
  case OpId::Exp:
    return {vec::expF32, kParallelGrain / 4};
  case OpId::Tanh:
    return {vec::tanhF32, kParallelGrain / 4};
  case OpId::Sigmoid:
    return {vec::sigmoidF32, kParallelGrain / 4};
  case OpId::Relu: // NaN stays NaN
    return {vec::reluF32, kParallelGrain};
  case OpId::Neg:
    return {vec::negF32, kParallelGrain};
  case OpId::Sqrt:
    return {vec::sqrtF32, kParallelGrain};
  case OpId::Erf:
    return {vec::erfF32, kParallelGrain / 8};
  case OpId::Gelu:
    if (tanhApproximation) // PyTorch's approximate='tanh', through exp
      return {vec::geluTanhF32, kParallelGrain / 4};
    // x * Phi(x) = 0.5 * x * (1 + erf(x / sqrt(2)))
    return {vec::geluF32, kParallelGrain / 8};
  default:
    return {};
  }
}

vec::BinaryF32 binaryF32Loop(OpId op) {
  switch (op) {
  case OpId::Add:
    return vec::addF32;
  case OpId::Sub:
    return vec::subF32;
  case OpId::Mul:
    return vec::mulF32;
  case OpId::Div:
    return vec::divF32;
  default:
    return nullptr;
  }
}

vec::BinaryF32 compareMaskF32Loop(int64_t direction) {
  switch (direction) {
  case int64_t(CompareOp::Eq):
    return vec::eqMaskF32;
  case int64_t(CompareOp::Ne):
    return vec::neMaskF32;
  case int64_t(CompareOp::Lt):
    return vec::ltMaskF32;
  case int64_t(CompareOp::Le):
    return vec::leMaskF32;
  case int64_t(CompareOp::Gt):
    return vec::gtMaskF32;
  case int64_t(CompareOp::Ge):
    return vec::geMaskF32;
  default:
    return nullptr;
  }
}

} // namespace detail

Status unary(OpId op, const ConstTensor &a, const MutTensor &out,
             bool tanhApproximation) {
  const char *name = unaryName(op, tanhApproximation);
  if (!name)
    return unimplementedOp("unary", op);
  {
    bool narrow = false;
    const ConstTensor *const ins[] = {&a};
    Status st = detail::viaF32(
        name, ins, out, &narrow, [&](const ConstTensor *in, const MutTensor &o) {
          return unary(op, in[0], o, tanhApproximation);
        });
    if (narrow || !st)
      return st;
  }
  MC_RETURN_IF_ERROR(
      sameTypeAndShape(name, "result", a.dtype, a.shape, out.dtype, out.shape));
  if (op == OpId::Not) {
    if (a.dtype != DType::I1)
      return unsupportedDType(name, a.dtype, "i1");
    const uint8_t *x = static_cast<const uint8_t *>(a.data);
    uint8_t *y = static_cast<uint8_t *>(out.data);
    for (int64_t i = 0, n = numElements(a.shape); i < n; ++i)
      y[i] = x[i] == 0; // any nonzero byte is true
    return Status::ok();
  }
  if (a.dtype == DType::I32)
    return unaryInt<int32_t>(op, a, out, tanhApproximation);
  if (a.dtype == DType::I64)
    return unaryInt<int64_t>(op, a, out, tanhApproximation);
  if (a.dtype != DType::F32)
    return unsupportedDType(name, a.dtype,
                            op == OpId::Neg || op == OpId::Relu ||
                                    op == OpId::Abs
                                ? "f32, i32, i64"
                                : "f32");
  if (detail::UnaryF32Loop loop = detail::unaryF32Loop(op, tanhApproximation);
      loop.fn) {
    vecMap(a, out, loop.grain, loop.fn);
    return Status::ok();
  }
  switch (op) {
  case OpId::Log:
    mapF32(a, out, [](float x) { return std::log(x); });
    break;
  case OpId::Abs:
    mapF32(a, out, [](float x) { return std::fabs(x); });
    break;
  case OpId::Sin: // libm's, correctly reduced for any argument
    mapF32(a, out, [](float x) { return std::sin(x); });
    break;
  case OpId::Cos:
    mapF32(a, out, [](float x) { return std::cos(x); });
    break;
  // libm's (NaN outside the domain); PyTorch's vectorized kernels differ
  // from it by an ulp at times and overflow sinh and cosh early.
  case OpId::Tan:
    mapF32(a, out, [](float x) { return std::tan(x); });
    break;
  case OpId::Asin:
    mapF32(a, out, [](float x) { return std::asin(x); });
    break;
  case OpId::Acos:
    mapF32(a, out, [](float x) { return std::acos(x); });
    break;
  case OpId::Atan:
    mapF32(a, out, [](float x) { return std::atan(x); });
    break;
  case OpId::Sinh:
    mapF32(a, out, [](float x) { return std::sinh(x); });
    break;
  case OpId::Cosh:
    mapF32(a, out, [](float x) { return std::cosh(x); });
    break;
  case OpId::Asinh:
    mapF32(a, out, [](float x) { return std::asinh(x); });
    break;
  case OpId::Acosh:
    mapF32(a, out, [](float x) { return std::acosh(x); });
    break;
  case OpId::Atanh:
    mapF32(a, out, [](float x) { return std::atanh(x); });
    break;
  case OpId::Not: // handled above
    break;
  default: // the vectorized loops above; rejected by unaryName
    return unimplementedOp("unary", op);
  }
  return Status::ok();
}

Status binary(OpId op, const ConstTensor &a, const ConstTensor &b,
              const MutTensor &out) {
  const char *name = binaryName(op);
  if (!name)
    return unimplementedOp("binary", op);
  {
    bool narrow = false;
    const ConstTensor *const ins[] = {&a, &b};
    Status st = detail::viaF32(
        name, ins, out, &narrow,
        [&](const ConstTensor *in, const MutTensor &o) { return binary(op, in[0], in[1], o); });
    if (narrow || !st)
      return st;
  }
  MC_RETURN_IF_ERROR(
      sameTypeAndShape(name, "rhs", a.dtype, a.shape, b.dtype, b.shape));
  MC_RETURN_IF_ERROR(
      sameTypeAndShape(name, "result", a.dtype, a.shape, out.dtype, out.shape));
  if (a.dtype == DType::I32)
    return binaryInt<int32_t>(op, a, b, out);
  if (a.dtype == DType::I64)
    return binaryInt<int64_t>(op, a, b, out);
  if (a.dtype != DType::F32)
    return unsupportedDType(name, a.dtype,
                            op == OpId::Pow ? "f32" : "f32, i32, i64");
  const float *x = static_cast<const float *>(a.data);
  const float *z = static_cast<const float *>(b.data);
  float *y = static_cast<float *>(out.data);
  int64_t n = numElements(a.shape);
  vec::BinaryF32 loop = detail::binaryF32Loop(op);
  parallelFor(n, op == OpId::Pow ? kParallelGrain / 8 : kParallelGrain,
              [&](int64_t lo, int64_t hi) {
    const float *xs = x + lo, *zs = z + lo;
    float *ys = y + lo;
    int64_t m = hi - lo;
    if (loop) {
      loop(xs, zs, ys, m);
      return;
    }
    switch (op) {
    case OpId::Maximum: // propagates NaN from either side
      for (int64_t i = 0; i < m; ++i)
        ys[i] = (std::isnan(xs[i]) || xs[i] > zs[i]) ? xs[i] : zs[i];
      break;
    case OpId::Minimum: // propagates NaN from either side
      for (int64_t i = 0; i < m; ++i)
        ys[i] = (std::isnan(xs[i]) || xs[i] < zs[i]) ? xs[i] : zs[i];
      break;
    case OpId::Pow:
      // A square as x * x: the correctly rounded result, as torch.pow
      // computes a power of 2, where a powf call costs ~10x (ONNX's
      // written-out layer norm squares with Pow). Special values agree:
      // NaN, inf, -0 and overflow give pow's results.
      for (int64_t i = 0; i < m; ++i)
        ys[i] = zs[i] == 2.0f ? xs[i] * xs[i] : std::pow(xs[i], zs[i]);
      break;
    default: // rejected by binaryName above
      break;
    }
  });
  return Status::ok();
}

/// Runs `convert` when the cast is from `from` to `to`; false otherwise.
template <typename From, typename To>
bool fastCast(const ConstTensor &a, const MutTensor &out, DType from, DType to,
              void (*convert)(const From *, To *, int64_t), int64_t n) {
  if (a.dtype != from || out.dtype != to)
    return false;
  convert(static_cast<const From *>(a.data), static_cast<To *>(out.data), n);
  return true;
}

Status cast(const ConstTensor &a, const MutTensor &out) {
  if (a.shape != out.shape)
    return Status::error("cast: result shape " + shapeString(out.shape) +
                         " does not match operand shape " +
                         shapeString(a.shape));
  int64_t n = numElements(a.shape);
  const void *p = a.data;
  // The casts of mixed precision (AMP), vectorized; the same bits as the
  // element loops below.
  if (fastCast(a, out, DType::F32, DType::BF16, vec::f32ToBf16, n) ||
      fastCast(a, out, DType::BF16, DType::F32, vec::bf16ToF32, n) ||
      fastCast(a, out, DType::F32, DType::F16, vec::f32ToF16, n) ||
      fastCast(a, out, DType::F16, DType::F32, vec::f16ToF32, n))
    return Status::ok();
  switch (a.dtype) {
  case DType::F32:
    if (out.dtype == DType::F32) {
      std::memmove(out.data, p, size_t(n) * 4);
      return Status::ok();
    }
    return castFrom([p](int64_t i) { return static_cast<const float *>(p)[i]; },
                    n, out);
  case DType::F16:
    return castFrom(
        [p](int64_t i) {
          return halfToFloat(static_cast<const uint16_t *>(p)[i]);
        },
        n, out);
  case DType::BF16:
    return castFrom(
        [p](int64_t i) {
          return bf16ToFloat(static_cast<const uint16_t *>(p)[i]);
        },
        n, out);
  case DType::I32:
    return castFrom(
        [p](int64_t i) { return int64_t(static_cast<const int32_t *>(p)[i]); },
        n, out);
  case DType::I64:
    return castFrom(
        [p](int64_t i) { return static_cast<const int64_t *>(p)[i]; }, n, out);
  case DType::I1: // any nonzero byte is true
    return castFrom(
        [p](int64_t i) {
          return int64_t(static_cast<const uint8_t *>(p)[i] != 0);
        },
        n, out);
  }
  return Status::error("cast: invalid operand dtype " +
                       std::to_string(int(a.dtype)));
}

Status broadcastInDim(const ConstTensor &a, const std::vector<int64_t> &dims,
                      const MutTensor &out) {
  const char *op = "broadcast_in_dim";
  MC_RETURN_IF_ERROR(checkRank(op, "operand", a.shape));
  MC_RETURN_IF_ERROR(checkRank(op, "result", out.shape));
  if (a.dtype != out.dtype)
    return Status::error(std::string(op) + ": result dtype " +
                         dtypeName(out.dtype) + " does not match operand " +
                         dtypeName(a.dtype));
  if (dims.size() != a.shape.size())
    return Status::error(std::string(op) + ": " + std::to_string(dims.size()) +
                         " dims for an operand of rank " +
                         std::to_string(a.shape.size()));
  int64_t aStride[kMaxRank], srcStride[kMaxRank] = {0};
  bool used[kMaxRank] = {false};
  contiguousStrides(a.shape, aStride);
  int64_t r = int64_t(out.shape.size());
  for (size_t k = 0; k < dims.size(); ++k) {
    int64_t d = dims[k];
    if (d < 0 || d >= r || used[d])
      return Status::error(std::string(op) + ": dims[" + std::to_string(k) +
                           "] = " + std::to_string(d) +
                           " is out of range or repeated for a result of "
                           "rank " +
                           std::to_string(r));
    used[d] = true;
    if (a.shape[k] != 1 && a.shape[k] != out.shape[d])
      return Status::error(std::string(op) + ": operand dim " +
                           std::to_string(k) + " has size " +
                           std::to_string(a.shape[k]) + ", expected 1 or " +
                           std::to_string(out.shape[d]) + " (result dim " +
                           std::to_string(d) + ")");
    srcStride[d] = a.shape[k] == 1 ? 0 : aStride[k];
  }
  return detail::stridedCopyAny(op, a.dtype, out.shape, srcStride, a.data, 0,
                                out.data);
}

Status transpose(const ConstTensor &a, const std::vector<int64_t> &perm,
                 const MutTensor &out) {
  const char *op = "transpose";
  MC_RETURN_IF_ERROR(checkRank(op, "operand", a.shape));
  int64_t r = int64_t(a.shape.size());
  if (a.dtype != out.dtype || int64_t(out.shape.size()) != r ||
      int64_t(perm.size()) != r)
    return Status::error(
        std::string(op) + ": operand " + typeString(a.dtype, a.shape) +
        ", result " + typeString(out.dtype, out.shape) + " and a " +
        std::to_string(perm.size()) + "-entry permutation do not agree");
  int64_t aStride[kMaxRank], srcStride[kMaxRank];
  bool used[kMaxRank] = {false};
  contiguousStrides(a.shape, aStride);
  for (int64_t i = 0; i < r; ++i) {
    int64_t p = perm[i];
    if (p < 0 || p >= r || used[p])
      return Status::error(std::string(op) +
                           ": permutation is not a "
                           "permutation of 0.." +
                           std::to_string(r - 1));
    used[p] = true;
    if (out.shape[i] != a.shape[p])
      return Status::error(std::string(op) + ": result shape " +
                           shapeString(out.shape) + " is not operand shape " +
                           shapeString(a.shape) + " permuted");
    srcStride[i] = aStride[p];
  }
  return detail::stridedCopyAny(op, a.dtype, out.shape, srcStride, a.data, 0,
                                out.data);
}

Status reduce(OpId op, const ConstTensor &a,
              const std::vector<int64_t> &dims, bool keepdim,
              const MutTensor &out) {
  const char *name = reduceName(op);
  if (!name)
    return unimplementedOp("reduce", op);
  {
    bool narrow = false;
    const ConstTensor *const ins[] = {&a};
    Status st = detail::viaF32(
        name, ins, out, &narrow,
        [&](const ConstTensor *in, const MutTensor &o) { return reduce(op, in[0], dims, keepdim, o); });
    if (narrow || !st)
      return st;
  }
  MC_RETURN_IF_ERROR(checkRank(name, "operand", a.shape));
  if (a.dtype != out.dtype)
    return Status::error(std::string(name) + ": result dtype " +
                         dtypeName(out.dtype) + " does not match operand " +
                         dtypeName(a.dtype));
  bool minMax = op == OpId::ReduceMax || op == OpId::ReduceMin;
  bool intMinMax =
      minMax && (a.dtype == DType::I32 || a.dtype == DType::I64);
  if (a.dtype != DType::F32 && !intMinMax)
    return unsupportedDType(name, a.dtype, minMax ? "f32, i32, i64" : "f32");
  int r = int(a.shape.size());
  bool reduced[kMaxRank] = {false};
  for (size_t k = 0; k < dims.size(); ++k) {
    if (dims[k] < 0 || dims[k] >= r || (k > 0 && dims[k] <= dims[k - 1]))
      return Status::error(std::string(name) +
                           ": dims must be sorted, unique and in [0, " +
                           std::to_string(r) + ")");
    reduced[dims[k]] = true;
  }
  // Split the operand into kept and reduced dims; check the result shape.
  int64_t aStride[kMaxRank];
  contiguousStrides(a.shape, aStride);
  Odometer kept, red;
  size_t expectRank = keepdim ? size_t(r) : size_t(r) - dims.size();
  bool shapeOk = out.shape.size() == expectRank;
  size_t o = 0;
  for (int d = 0; d < r; ++d) {
    // Adjacent dims contiguous in the operand walk as one (the same order):
    // a batch norm's H and W are one run of H * W values.
    (reduced[d] ? red : kept).push(a.shape[d], aStride[d]);
    if (reduced[d] && !keepdim)
      continue;
    int64_t expect = reduced[d] ? 1 : a.shape[d];
    shapeOk = shapeOk && o < out.shape.size() && out.shape[o] == expect;
    ++o;
  }
  if (!shapeOk)
    return Status::error(std::string(name) + ": result shape " +
                         shapeString(out.shape) +
                         " does not match the operand " + shapeString(a.shape) +
                         " reduced over the dims");
  int64_t nOut = 1, nRed = 1;
  for (int d = 0; d < kept.rank; ++d)
    nOut *= kept.shape[d];
  for (int d = 0; d < red.rank; ++d)
    nRed *= red.shape[d];
  if (a.dtype == DType::F32) {
    const float *x = static_cast<const float *>(a.data);
    float *y = static_cast<float *>(out.data);
    // One block of reduced dims with kept dims inside it: reduceMiddle.
    int first = -1, last = -1;
    for (int d = 0; d < r; ++d)
      if (reduced[d]) {
        first = first < 0 ? d : first;
        last = d;
      }
    int64_t outer = 1, inner = 1;
    bool block = first >= 0 && last - first + 1 == int(dims.size());
    for (int d = 0; d < r && block; ++d) {
      if (d < first)
        outer *= a.shape[d];
      if (d > last)
        inner *= a.shape[d];
    }
    bool middle = block && inner > 1 && nRed > 1;
    // Max and min in order, one value at a time (the first NaN stays; which
    // of -0 and +0 wins depends on the order); `rows` is that step's
    // vectorized form over rows (reduceMiddle).
    auto extreme = [&](float init, auto step, auto rows) {
      auto first = [init] { return init; };
      auto same = [](float m) { return m; };
      if (middle) {
        reduceMiddle<float>(x, y, outer, nRed, inner, first, rows, same);
        return;
      }
      reduceLoop<float, float>(
          x, y, kept, red, nOut, nRed, first,
          [step](float &m, const float *p, int64_t n) {
            for (int64_t k = 0; k < n; ++k)
              m = step(m, p[k]);
          },
          same);
    };
    if (op == OpId::ReduceMax) {
      extreme(
          -std::numeric_limits<float>::infinity(),
          [](float m, float v) { return (std::isnan(m) || m >= v) ? m : v; },
          vec::maxRowsF32);
      return Status::ok();
    }
    if (op == OpId::ReduceMin) {
      extreme(
          std::numeric_limits<float>::infinity(),
          [](float m, float v) { return (std::isnan(m) || m <= v) ? m : v; },
          vec::minRowsF32);
      return Status::ok();
    }
    // Sums accumulate in double: the sum does not depend on reduction
    // size. Over middle dims each output sums in order (its columns
    // advance together); otherwise each output's contiguous runs of at
    // least kMinLaneRun values go to kSumLanes double lanes (a fixed
    // order, latency no longer one add per value), summed pairwise at the
    // end, and shorter runs are summed in order.
    double scale = op == OpId::ReduceMean ? 1.0 / double(nRed) : 1.0;
    if (middle) {
      reduceMiddle<double>(
          x, y, outer, nRed, inner, [] { return 0.0; }, vec::sumRowsF64,
          [scale](double s) { return float(s * scale); });
      return Status::ok();
    }
    int64_t run =
        red.rank && red.stride[red.rank - 1] == 1 ? red.shape[red.rank - 1] : 1;
    if (run < kMinLaneRun) { // short runs: the lanes would cost more
      reduceLoop<float, double>(
          x, y, kept, red, nOut, nRed, [] { return 0.0; },
          [](double &acc, const float *p, int64_t n) {
            for (int64_t k = 0; k < n; ++k)
              acc += double(p[k]);
          },
          [scale](double acc) { return float(acc * scale); });
      return Status::ok();
    }
    struct Lanes {
      double l[vec::kSumLanes];
    };
    reduceLoop<float, Lanes>(
        x, y, kept, red, nOut, nRed, [] { return Lanes{}; },
        [](Lanes &a, const float *p, int64_t n) {
          vec::sumLanesF64(p, n, a.l);
        },
        [scale](const Lanes &a) {
          return float(vec::sumOfLanesF64(a.l) * scale);
        });
    return Status::ok();
  }
  auto intLoop = [&](auto tag) {
    using T = decltype(tag);
    bool isMin = op == OpId::ReduceMin;
    T first = isMin ? std::numeric_limits<T>::max()
                    : std::numeric_limits<T>::lowest();
    reduceLoop<T, T>(
        static_cast<const T *>(a.data), static_cast<T *>(out.data), kept, red,
        nOut, nRed, [first] { return first; },
        [isMin](T &m, const T *p, int64_t n) {
          for (int64_t k = 0; k < n; ++k)
            m = isMin ? (p[k] < m ? p[k] : m) : (m < p[k] ? p[k] : m);
        },
        [](T m) { return m; });
  };
  if (a.dtype == DType::I32)
    intLoop(int32_t());
  else
    intLoop(int64_t());
  return Status::ok();
}

Status softmax(const ConstTensor &a, int64_t axis, const MutTensor &out) {
  {
    bool narrow = false;
    const ConstTensor *const ins[] = {&a};
    Status st = detail::viaF32(
        "softmax", ins, out, &narrow,
        [&](const ConstTensor *in, const MutTensor &o) { return softmax(in[0], axis, o); });
    if (narrow || !st)
      return st;
  }
  MC_RETURN_IF_ERROR(checkRank("softmax", "operand", a.shape));
  MC_RETURN_IF_ERROR(sameTypeAndShape("softmax", "result", a.dtype, a.shape,
                                      out.dtype, out.shape));
  if (a.dtype != DType::F32)
    return unsupportedDType("softmax", a.dtype, "f32");
  int64_t r = int64_t(a.shape.size());
  if (axis < 0)
    axis += r;
  if (axis < 0 || axis >= r)
    return Status::error("softmax: axis " + std::to_string(axis) +
                         " is out of range for rank " + std::to_string(r));
  int64_t outer = 1, inner = 1, len = a.shape[axis];
  for (int64_t d = 0; d < axis; ++d)
    outer *= a.shape[d];
  for (int64_t d = axis + 1; d < r; ++d)
    inner *= a.shape[d];
  const float *x = static_cast<const float *>(a.data);
  float *y = static_cast<float *>(out.data);
  if (len == 0)
    return Status::ok();
  if (inner == 1) { // rows along the last axis: the vectorized row kernel
    parallelFor(outer, std::max<int64_t>(1, kParallelGrain / 4 / len),
                [&](int64_t b, int64_t e) {
                  for (int64_t o = b; o < e; ++o)
                    vec::softmaxRow(x + o * len, y + o * len, len);
                });
    return Status::ok();
  }
  parallelFor(outer * inner, std::max<int64_t>(1, kParallelGrain / 4 / len),
              [&](int64_t b, int64_t e) {
  for (int64_t oi = b; oi < e; ++oi) {
    {
      int64_t o = oi / inner, i = oi % inner;
      const float *xs = x + o * len * inner + i;
      float *ys = y + o * len * inner + i;
      // Subtracting the max keeps exp in range; a NaN anywhere makes the
      // whole row NaN.
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < len; ++j)
        m = (std::isnan(m) || m >= xs[j * inner]) ? m : xs[j * inner];
      double sum = 0;
      for (int64_t j = 0; j < len; ++j) {
        float e = vec::fastExp(xs[j * inner] - m);
        ys[j * inner] = e;
        sum += e;
      }
      double inv = 1.0 / sum;
      for (int64_t j = 0; j < len; ++j)
        ys[j * inner] = float(double(ys[j * inner]) * inv);
    }
  }
  });
  return Status::ok();
}

namespace {

/// A clamp bound as an integer of type T: truncated toward zero and
/// saturated; a NaN bound is no bound (`none`).
template <typename T> T intBound(double v, T none) {
  if (std::isnan(v))
    return none;
  if (v <= double(std::numeric_limits<T>::lowest()))
    return std::numeric_limits<T>::lowest();
  if (v >= double(std::numeric_limits<T>::max()))
    return std::numeric_limits<T>::max();
  return T(v);
}

template <typename T>
void clampInt(const ConstTensor &a, double lo, double hi,
              const MutTensor &out) {
  T l = intBound<T>(lo, std::numeric_limits<T>::lowest());
  T h = intBound<T>(hi, std::numeric_limits<T>::max());
  const T *x = static_cast<const T *>(a.data);
  T *y = static_cast<T *>(out.data);
  for (int64_t i = 0, n = numElements(a.shape); i < n; ++i) {
    T v = x[i] < l ? l : x[i];
    y[i] = v > h ? h : v;
  }
}

const char *compareName(CompareOp op) {
  switch (op) {
  case CompareOp::Eq:
    return "eq";
  case CompareOp::Ne:
    return "ne";
  case CompareOp::Lt:
    return "lt";
  case CompareOp::Le:
    return "le";
  case CompareOp::Gt:
    return "gt";
  case CompareOp::Ge:
    return "ge";
  }
  return "?";
}

template <typename T, typename F>
void compareLoop(const ConstTensor &a, const ConstTensor &b,
                 const MutTensor &out, F f) {
  const T *x = static_cast<const T *>(a.data);
  const T *z = static_cast<const T *>(b.data);
  uint8_t *y = static_cast<uint8_t *>(out.data);
  for (int64_t i = 0, n = numElements(a.shape); i < n; ++i)
    y[i] = uint8_t(f(x[i], z[i]));
}

template <typename T>
void compareTyped(CompareOp op, const ConstTensor &a, const ConstTensor &b,
                  const MutTensor &out) {
  // IEEE comparisons: with a NaN operand all are false except Ne.
  switch (op) {
  case CompareOp::Eq:
    compareLoop<T>(a, b, out, [](T x, T z) { return x == z; });
    break;
  case CompareOp::Ne:
    compareLoop<T>(a, b, out, [](T x, T z) { return x != z; });
    break;
  case CompareOp::Lt:
    compareLoop<T>(a, b, out, [](T x, T z) { return x < z; });
    break;
  case CompareOp::Le:
    compareLoop<T>(a, b, out, [](T x, T z) { return x <= z; });
    break;
  case CompareOp::Gt:
    compareLoop<T>(a, b, out, [](T x, T z) { return x > z; });
    break;
  case CompareOp::Ge:
    compareLoop<T>(a, b, out, [](T x, T z) { return x >= z; });
    break;
  }
}

template <typename T>
void selectLoop(const uint8_t *p, const ConstTensor &a, const ConstTensor &b,
                const MutTensor &out) {
  const T *x = static_cast<const T *>(a.data);
  const T *z = static_cast<const T *>(b.data);
  T *y = static_cast<T *>(out.data);
  for (int64_t i = 0, n = numElements(a.shape); i < n; ++i)
    y[i] = p[i] ? x[i] : z[i];
}

} // namespace

Status clamp(const ConstTensor &a, double lo, double hi, const MutTensor &out) {
  {
    bool narrow = false;
    const ConstTensor *const ins[] = {&a};
    Status st = detail::viaF32(
        "clamp", ins, out, &narrow,
        [&](const ConstTensor *in, const MutTensor &o) { return clamp(in[0], lo, hi, o); });
    if (narrow || !st)
      return st;
  }
  MC_RETURN_IF_ERROR(sameTypeAndShape("clamp", "result", a.dtype, a.shape,
                                      out.dtype, out.shape));
  switch (a.dtype) {
  case DType::F32: {
    // NaN stays NaN (both comparisons are false); a NaN bound is no bound.
    vec::clampF32(static_cast<const float *>(a.data), float(lo), float(hi),
                  static_cast<float *>(out.data), numElements(a.shape));
    return Status::ok();
  }
  case DType::I32:
    clampInt<int32_t>(a, lo, hi, out);
    return Status::ok();
  case DType::I64:
    clampInt<int64_t>(a, lo, hi, out);
    return Status::ok();
  default:
    return unsupportedDType("clamp", a.dtype, "f32, i32, i64");
  }
}

Status compare(CompareOp op, const ConstTensor &a, const ConstTensor &b,
               const MutTensor &out) {
  {
    bool narrow = false;
    const ConstTensor *const ins[] = {&a, &b};
    Status st = detail::viaF32(
        compareName(op), ins, out, &narrow,
        [&](const ConstTensor *in, const MutTensor &o) { return compare(op, in[0], in[1], o); });
    if (narrow || !st)
      return st;
  }
  std::string name = std::string("compare ") + compareName(op);
  MC_RETURN_IF_ERROR(sameTypeAndShape(name.c_str(), "rhs", a.dtype, a.shape,
                                      b.dtype, b.shape));
  if (out.dtype != DType::I1 || out.shape != a.shape)
    return Status::error(name + ": result " +
                         typeString(out.dtype, out.shape) + " is not i1" +
                         shapeString(a.shape) + " (the operand shape)");
  switch (a.dtype) {
  case DType::F32:
    compareTyped<float>(op, a, b, out);
    return Status::ok();
  case DType::I32:
    compareTyped<int32_t>(op, a, b, out);
    return Status::ok();
  case DType::I64:
    compareTyped<int64_t>(op, a, b, out);
    return Status::ok();
  case DType::I1: {
    if (op != CompareOp::Eq && op != CompareOp::Ne)
      return unsupportedDType(name.c_str(), a.dtype, "f32, i32, i64");
    bool eq = op == CompareOp::Eq;
    const uint8_t *x = static_cast<const uint8_t *>(a.data);
    const uint8_t *z = static_cast<const uint8_t *>(b.data);
    uint8_t *y = static_cast<uint8_t *>(out.data);
    for (int64_t i = 0, n = numElements(a.shape); i < n; ++i)
      y[i] = uint8_t(((x[i] != 0) == (z[i] != 0)) == eq);
    return Status::ok();
  }
  default:
    return unsupportedDType(name.c_str(), a.dtype,
                            "f32, i32, i64; i1 for eq/ne");
  }
}

Status select(const ConstTensor &pred, const ConstTensor &a,
              const ConstTensor &b, const MutTensor &out) {
  if (pred.dtype != DType::I1)
    return Status::error("select: predicate " +
                         typeString(pred.dtype, pred.shape) + " is not i1");
  if (a.shape != pred.shape)
    return Status::error("select: on_true " + typeString(a.dtype, a.shape) +
                         " does not have the shape of the predicate " +
                         typeString(pred.dtype, pred.shape));
  MC_RETURN_IF_ERROR(
      sameTypeAndShape("select", "on_false", a.dtype, a.shape, b.dtype, b.shape));
  MC_RETURN_IF_ERROR(sameTypeAndShape("select", "result", a.dtype, a.shape,
                                      out.dtype, out.shape));
  const uint8_t *p = static_cast<const uint8_t *>(pred.data);
  switch (dtypeSize(a.dtype)) {
  case 1:
    selectLoop<uint8_t>(p, a, b, out);
    return Status::ok();
  case 2:
    selectLoop<uint16_t>(p, a, b, out);
    return Status::ok();
  case 4:
    selectLoop<uint32_t>(p, a, b, out);
    return Status::ok();
  case 8:
    selectLoop<uint64_t>(p, a, b, out);
    return Status::ok();
  }
  return Status::error("select: invalid dtype " + std::to_string(int(a.dtype)));
}

Status copy(const ConstTensor &a, const MutTensor &out) {
  if (a.dtype != out.dtype || numElements(a.shape) != numElements(out.shape))
    return Status::error("copy: result " + typeString(out.dtype, out.shape) +
                         " does not have the dtype and element count of "
                         "operand " +
                         typeString(a.dtype, a.shape));
  // memmove: a reshape copy between views of one buffer may overlap.
  std::memmove(out.data, a.data,
               size_t(numElements(a.shape)) * dtypeSize(a.dtype));
  return Status::ok();
}

} // namespace mc::rt

namespace mc::rt {

PhiloxWords philox4x32(PhiloxWords c, uint32_t k0, uint32_t k1) {
  for (int round = 0; round < kPhiloxRounds; ++round) {
    if (round) {
      k0 += kPhiloxW0;
      k1 += kPhiloxW1;
    }
    uint64_t p0 = uint64_t(kPhiloxM0) * c.w[0];
    uint64_t p1 = uint64_t(kPhiloxM1) * c.w[2];
    c = PhiloxWords{{uint32_t(p1 >> 32) ^ c.w[1] ^ k0, uint32_t(p1),
                     uint32_t(p0 >> 32) ^ c.w[3] ^ k1, uint32_t(p0)}};
  }
  return c;
}

namespace {

/// The four words of mc.dropout's counter `block` (elements 4 * block ..
/// 4 * block + 3).
PhiloxWords dropoutBlock(uint64_t seed, uint64_t offset, uint64_t block) {
  return philox4x32(PhiloxWords{{uint32_t(block), uint32_t(block >> 32),
                                 uint32_t(offset), uint32_t(offset >> 32)}},
                    uint32_t(seed), uint32_t(seed >> 32));
}

} // namespace

uint32_t dropoutWord(uint64_t seed, uint64_t offset, uint64_t i) {
  return dropoutBlock(seed, offset, i / 4).w[i % 4];
}

uint32_t dropoutKeepBelow(double p) {
  return uint32_t(std::llround((1.0 - p) * double(1u << 24)));
}

float dropoutScale(double p) { return p < 1 ? float(1.0 / (1.0 - p)) : 0.f; }

Status dropout(const ConstTensor &a, uint64_t seed, uint64_t offset, double p,
               const MutTensor &out) {
  if (!(p >= 0 && p <= 1))
    return Status::error("dropout: p must be in [0, 1], got " +
                         std::to_string(p));
  if (!isFloat(a.dtype))
    return unsupportedDType("dropout", a.dtype, "f32, f16, bf16");
  MC_RETURN_IF_ERROR(sameTypeAndShape("dropout", "result", a.dtype, a.shape,
                                      out.dtype, out.shape));
  uint32_t keepBelow = dropoutKeepBelow(p);
  float scale = dropoutScale(p);
  int64_t n = numElements(a.shape);
  DType t = a.dtype;
  // Four elements per Philox call: the words of one counter.
  detail::parallelFor(
      (n + 3) / 4, detail::kParallelGrain / 4, [&](int64_t begin, int64_t end) {
        for (int64_t blk = begin; blk < end; ++blk) {
          PhiloxWords w = dropoutBlock(seed, offset, uint64_t(blk));
          for (int64_t i = blk * 4, k = 0; k < 4 && i < n; ++k, ++i) {
            // A product with 0 where dropped, as PyTorch's x * mask * scale:
            // a dropped NaN or inf stays NaN (a loss scaler still sees it).
            float factor = (w.w[k] >> 8) < keepBelow ? scale : 0.f;
            if (t == DType::F32) {
              float x = static_cast<const float *>(a.data)[i];
              static_cast<float *>(out.data)[i] = x * factor;
              continue;
            }
            uint16_t h = static_cast<const uint16_t *>(a.data)[i];
            float x = t == DType::F16 ? halfToFloat(h) : bf16ToFloat(h);
            float y = x * factor;
            static_cast<uint16_t *>(out.data)[i] =
                t == DType::F16 ? floatToHalf(y) : floatToBf16(y);
          }
        }
      });
  return Status::ok();
}

} // namespace mc::rt
