// dtype helpers and the f32 <-> f16/bf16 conversions (round to nearest even,
// NaN/inf/subnormal exact), shared by the cast kernel and npy I/O.
#include "KernelUtil.h"
#include "VecMath.h"
#include "modelc/kernels.h"
#include "modelc/version.h"

#include <algorithm>
#include <cstring>
#include <string>

#ifndef MODELC_VERSION_STRING
#define MODELC_VERSION_STRING "unknown"
#endif

namespace mc::rt {

const char *modelcVersion() { return MODELC_VERSION_STRING; }

size_t dtypeSize(DType t) {
  switch (t) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::I64:
    return 8;
  case DType::I1:
    return 1;
  }
  return 0; // not a dtype: callers validate enum values read from files
}

const char *dtypeName(DType t) {
  switch (t) {
  case DType::F32:
    return "f32";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::I32:
    return "i32";
  case DType::I64:
    return "i64";
  case DType::I1:
    return "i1";
  }
  return "<invalid dtype>";
}

bool typeListHas(const std::string &list, const std::string &type) {
  if (list.empty())
    return true;
  for (size_t p = 0; p <= list.size();) {
    size_t q = std::min(list.find(',', p), list.size());
    if (list.compare(p, q - p, type) == 0)
      return true;
    p = q + 1;
  }
  return false;
}

std::string typeListText(const std::string &list) {
  std::string text;
  for (char c : list)
    text += c == ',' ? std::string(", ") : std::string(1, c);
  return text;
}

int64_t numElements(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

Status checkElementCount(const Shape &shape, int64_t *count) {
  // The product of the nonzero dims is bounded too: numElements (and every
  // loop over a shape's dims) multiplies them in order, so [5, 2^50, 0]
  // would overflow int64 before its 0 is reached.
  int64_t n = 1;
  bool empty = false;
  for (int64_t d : shape) {
    if (d < 0)
      return Status::error("shape " + shapeString(shape) +
                           " has a negative dimension");
    empty = empty || d == 0;
    if (d != 0 && (__builtin_mul_overflow(n, d, &n) || n > kMaxTensorElements))
      return Status::error(
          "shape " + shapeString(shape) +
          (std::count(shape.begin(), shape.end(), 0)
               ? " is too large: its nonzero dims multiply to more than " +
                     std::to_string(kMaxTensorElements) +
                     " (2^36), the limit for one tensor"
               : " has more than " + std::to_string(kMaxTensorElements) +
                     " (2^36) elements, the limit for one tensor"));
  }
  if (empty)
    n = 0;
  if (count)
    *count = n;
  return Status::ok();
}

std::string shapeString(const Shape &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

static uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
static float bitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exact in f32.
    float v = float(mant) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  if (exp == 31) // inf or NaN (payload kept)
    return bitsFloat(sign | 0x7f800000u | (mant << 13));
  return bitsFloat(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t floatToHalf(float f) {
  uint32_t x = floatBits(f);
  uint16_t sign = uint16_t((x >> 16) & 0x8000);
  uint32_t a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) {
    if (a == 0x7f800000u)
      return sign | 0x7c00;
    // NaN: keep the top payload bits, force quiet so it stays a NaN.
    return uint16_t(sign | 0x7e00 | ((a >> 13) & 0x3ff));
  }
  if (a >= 0x477ff000u) // >= 65520 rounds to inf
    return sign | 0x7c00;
  if (a < 0x38800000u) {
    // Below the smallest normal half (2^-14): a subnormal or zero half whose
    // unit is 2^-24. Values <= 2^-25 round (ties to even) to zero.
    if (a <= 0x33000000u)
      return sign;
    uint32_t exp = a >> 23;
    uint32_t mant = (a & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - exp; // 14..24
    uint32_t m = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (m & 1)))
      ++m; // may carry into the smallest normal: still the right encoding
    return uint16_t(sign | m);
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped bits; a
  // carry out of the mantissa correctly bumps the exponent.
  uint32_t h = (a - 0x38000000u) >> 13;
  uint32_t rem = a & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1)))
    ++h;
  return uint16_t(sign | h);
}

float bf16ToFloat(uint16_t h) { return bitsFloat(uint32_t(h) << 16); }

uint16_t floatToBf16(float f) {
  uint32_t x = floatBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) // NaN: truncate, force quiet
    return uint16_t((x >> 16) | 0x0040);
  // Round to nearest even on the low 16 bits; overflow lands on inf.
  uint32_t bias = 0x7fffu + ((x >> 16) & 1);
  return uint16_t((x + bias) >> 16);
}

namespace detail {

void widenToF32(DType t, const void *src, float *dst, int64_t n) {
  const uint16_t *h = static_cast<const uint16_t *>(src);
  if (t == DType::BF16)
    vec::bf16ToF32(h, dst, n);
  else
    vec::f16ToF32(h, dst, n);
}

void narrowFromF32(DType t, const float *src, void *dst, int64_t n) {
  uint16_t *h = static_cast<uint16_t *>(dst);
  if (t == DType::BF16)
    vec::f32ToBf16(src, h, n);
  else
    vec::f32ToF16(src, h, n);
}

NarrowStaging &narrowStaging() {
  thread_local NarrowStaging staging;
  return staging;
}

} // namespace detail

} // namespace mc::rt
