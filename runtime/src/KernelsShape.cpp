// CPU kernels that move data between shapes: concat, slice, gather, pad.
// Any dtype (they copy elements by size).
#include "KernelUtil.h"
#include "modelc/error_record.h"
#include "modelc/kernels.h"
#include "modelc/shapes.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

namespace mc::rt {

using detail::checkRank;
using detail::contiguousStrides;
using detail::kMaxRank;
using detail::normalizeAxis;
using detail::typeString;

Status concat(const std::vector<ConstTensor> &inputs, int64_t axis,
              const MutTensor &out) {
  const char *op = "concat";
  MC_RETURN_IF_ERROR(checkRank(op, "result", out.shape));
  if (inputs.empty())
    return Status::error("concat: no operands");
  size_t r = out.shape.size();
  if (!normalizeAxis(axis, r))
    return Status::error("concat: axis " + std::to_string(axis) +
                         " is out of range for a result of rank " +
                         std::to_string(r));
  int64_t total = 0;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const ConstTensor &t = inputs[k];
    bool ok = t.dtype == out.dtype && t.shape.size() == r;
    for (size_t d = 0; ok && d < r; ++d)
      ok = t.shape[d] >= 0 && (int64_t(d) == axis || t.shape[d] == out.shape[d]);
    if (!ok)
      return Status::error(
          "concat: operand " + std::to_string(k) + " " +
          typeString(t.dtype, t.shape) + " does not match result " +
          typeString(out.dtype, out.shape) + " outside axis " +
          std::to_string(axis));
    total += t.shape[axis];
  }
  if (total != out.shape[axis])
    return Status::error("concat: operand sizes along axis " +
                         std::to_string(axis) + " add up to " +
                         std::to_string(total) + ", result has " +
                         std::to_string(out.shape[axis]));
  size_t es = dtypeSize(out.dtype);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= out.shape[d];
  for (size_t d = size_t(axis) + 1; d < r; ++d)
    inner *= out.shape[d];
  size_t outRow = size_t(out.shape[axis] * inner) * es;
  uint8_t *dst = static_cast<uint8_t *>(out.data);
  size_t at = 0; // byte offset of this operand inside an output row
  for (const ConstTensor &t : inputs) {
    size_t row = size_t(t.shape[axis] * inner) * es;
    const uint8_t *src = static_cast<const uint8_t *>(t.data);
    if (row)
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(dst + size_t(o) * outRow + at, src + size_t(o) * row, row);
    at += row;
  }
  return Status::ok();
}

Status slice(const ConstTensor &a, const std::vector<int64_t> &start,
             const std::vector<int64_t> &strides, const MutTensor &out) {
  const char *op = "slice";
  MC_RETURN_IF_ERROR(checkRank(op, "operand", a.shape));
  MC_RETURN_IF_ERROR(checkRank(op, "result", out.shape));
  size_t r = a.shape.size();
  if (a.dtype != out.dtype || out.shape.size() != r || start.size() != r ||
      strides.size() != r)
    return Status::error("slice: operand " + typeString(a.dtype, a.shape) +
                         ", result " + typeString(out.dtype, out.shape) +
                         ", " + std::to_string(start.size()) + " starts and " +
                         std::to_string(strides.size()) +
                         " strides do not agree");
  int64_t aStride[kMaxRank], srcStride[kMaxRank];
  contiguousStrides(a.shape, aStride);
  int64_t offset = 0;
  bool empty = numElements(out.shape) == 0;
  for (size_t d = 0; d < r; ++d) {
    int64_t s = start[d], st = strides[d], n = out.shape[d];
    // Overflow-safe form of start + (n - 1) * stride < dim.
    bool ok = st >= 1 && s >= 0 && s <= a.shape[d] &&
              (n == 0 || (s < a.shape[d] && (n - 1) <= (a.shape[d] - 1 - s) / st));
    if (!ok)
      return Status::error("slice: dim " + std::to_string(d) + ": start " +
                           std::to_string(s) + ", stride " +
                           std::to_string(st) + " and count " +
                           std::to_string(n) +
                           " do not fit in the operand's size " +
                           std::to_string(a.shape[d]));
    srcStride[d] = aStride[d] * st;
    offset += s * aStride[d];
  }
  if (empty)
    return Status::ok();
  return detail::stridedCopyAny(op, a.dtype, out.shape, srcStride, a.data,
                                offset, out.data);
}

namespace {

template <typename I>
Status checkIndices(const char *op, const I *idx, int64_t n, int64_t len) {
  for (int64_t k = 0; k < n; ++k) {
    int64_t i = int64_t(idx[k]);
    if (i < -len || i >= len)
      return Status::error(indexError(op, i, uint64_t(k), len));
  }
  return Status::ok();
}

/// out[o, k, :] = src[o, idx[k], :] (idx checked; negative from the end):
/// the outer * nIdx output rows split among threads (an embedding lookup,
/// outer 1, as well as a weight's flipped window, outer O * I), short
/// `inner` runs copied by a loop rather than a memcpy call each.
template <typename I, typename T>
void gatherRows(const T *src, const I *idx, T *dst, int64_t outer,
                int64_t len, int64_t nIdx, int64_t inner) {
  if (outer == 0 || nIdx == 0 || inner == 0)
    return;
  std::vector<int64_t> from(static_cast<size_t>(nIdx));
  for (int64_t k = 0; k < nIdx; ++k) {
    int64_t i = int64_t(idx[k]);
    from[size_t(k)] = (i < 0 ? i + len : i) * inner;
  }
  int64_t grain = std::max<int64_t>(1, detail::kParallelGrain / inner);
  detail::parallelFor(outer * nIdx, grain, [&](int64_t rb, int64_t re) {
    int64_t k = rb % nIdx;
    const T *base = src + rb / nIdx * len * inner;
    T *d = dst + rb * inner;
    for (int64_t r = rb; r < re; ++r, d += inner) {
      const T *row = base + from[size_t(k)];
      if (inner == 1)
        *d = *row;
      else if (inner < 16)
        for (int64_t j = 0; j < inner; ++j)
          d[j] = row[j];
      else
        std::memcpy(d, row, size_t(inner) * sizeof(T));
      if (++k == nIdx) {
        k = 0;
        base += len * inner;
      }
    }
  });
}

template <typename I>
Status gatherTyped(const ConstTensor &data, const I *idx, int64_t nIdx,
                   int64_t outer, int64_t len, int64_t inner,
                   const MutTensor &out) {
  MC_RETURN_IF_ERROR(checkIndices("gather", idx, nIdx, len));
  const void *s = data.data;
  void *d = out.data;
  switch (dtypeSize(data.dtype)) {
  case 1:
    gatherRows(static_cast<const uint8_t *>(s), idx,
               static_cast<uint8_t *>(d), outer, len, nIdx, inner);
    return Status::ok();
  case 2:
    gatherRows(static_cast<const uint16_t *>(s), idx,
               static_cast<uint16_t *>(d), outer, len, nIdx, inner);
    return Status::ok();
  case 4:
    gatherRows(static_cast<const uint32_t *>(s), idx,
               static_cast<uint32_t *>(d), outer, len, nIdx, inner);
    return Status::ok();
  case 8:
    gatherRows(static_cast<const uint64_t *>(s), idx,
               static_cast<uint64_t *>(d), outer, len, nIdx, inner);
    return Status::ok();
  }
  return Status::error("gather: invalid dtype " +
                       std::to_string(int(data.dtype)));
}

/// Fills `n` elements of `t` with `value` converted to t's dtype (floats
/// rounded, ints truncated and saturated, i1 is value != 0).
void fillValue(DType t, void *dst, int64_t n, double value) {
  auto fill = [&](auto v) {
    using T = decltype(v);
    T *p = static_cast<T *>(dst);
    int64_t grain = detail::kParallelGrain * 4;
    detail::parallelFor(n, grain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        p[i] = v;
    });
  };
  auto toInt = [&](auto tag) {
    using T = decltype(tag);
    if (std::isnan(value))
      return T(0);
    if (value <= double(std::numeric_limits<T>::lowest()))
      return std::numeric_limits<T>::lowest();
    if (value >= double(std::numeric_limits<T>::max()))
      return std::numeric_limits<T>::max();
    return T(value);
  };
  switch (t) {
  case DType::F32:
    fill(float(value));
    break;
  case DType::F16:
    fill(floatToHalf(float(value)));
    break;
  case DType::BF16:
    fill(floatToBf16(float(value)));
    break;
  case DType::I32:
    fill(toInt(int32_t()));
    break;
  case DType::I64:
    fill(toInt(int64_t()));
    break;
  case DType::I1:
    fill(uint8_t(value != 0));
    break;
  }
}

} // namespace

Status gather(const ConstTensor &data, const ConstTensor &indices,
              int64_t axis, const MutTensor &out) {
  const char *op = "gather";
  MC_RETURN_IF_ERROR(checkRank(op, "data", data.shape));
  MC_RETURN_IF_ERROR(checkRank(op, "indices", indices.shape));
  MC_RETURN_IF_ERROR(checkRank(op, "result", out.shape));
  size_t r = data.shape.size();
  if (!normalizeAxis(axis, r))
    return Status::error("gather: axis " + std::to_string(axis) +
                         " is out of range for data of rank " +
                         std::to_string(r));
  if (indices.dtype != DType::I32 && indices.dtype != DType::I64)
    return detail::unsupportedDType("gather indices", indices.dtype,
                                    "i32, i64");
  Shape expect(data.shape.begin(), data.shape.begin() + axis);
  expect.insert(expect.end(), indices.shape.begin(), indices.shape.end());
  expect.insert(expect.end(), data.shape.begin() + axis + 1, data.shape.end());
  if (out.dtype != data.dtype || out.shape != expect)
    return Status::error("gather: result " + typeString(out.dtype, out.shape) +
                         " is not " + typeString(data.dtype, expect) +
                         " (data shape[:axis] + indices shape + data "
                         "shape[axis+1:])");
  int64_t outer = 1, inner = 1, len = data.shape[axis];
  for (int64_t d = 0; d < axis; ++d)
    outer *= data.shape[d];
  for (size_t d = size_t(axis) + 1; d < r; ++d)
    inner *= data.shape[d];
  int64_t nIdx = numElements(indices.shape);
  if (indices.dtype == DType::I32)
    return gatherTyped(data, static_cast<const int32_t *>(indices.data), nIdx,
                       outer, len, inner, out);
  return gatherTyped(data, static_cast<const int64_t *>(indices.data), nIdx,
                     outer, len, inner, out);
}

namespace {

/// out[o, idx[k], :] += upd[o, k, :] over zeroed `out`, k in order. The
/// threads split the columns (o and a run of the inner dim), so each
/// output element is summed by one thread in the sequential order.
template <typename I>
Status scatterAddTyped(const float *upd, const I *idx, int64_t nIdx,
                       int64_t outer, int64_t len, int64_t inner, float *out) {
  MC_RETURN_IF_ERROR(checkIndices("scatter_add", idx, nIdx, len));
  std::vector<int64_t> to(static_cast<size_t>(nIdx));
  for (int64_t k = 0; k < nIdx; ++k) {
    int64_t i = int64_t(idx[k]);
    to[size_t(k)] = (i < 0 ? i + len : i) * inner;
  }
  if (outer == 0 || inner == 0)
    return Status::ok(); // nothing to sum into
  // Column runs of 16 floats, one 64-byte line of each row where the width
  // is a multiple of 16: an embedding of width 256 is 16 units of work.
  int64_t run = std::min<int64_t>(inner, 16);
  int64_t runs = (inner + run - 1) / run;
  int64_t grain = std::max<int64_t>(
      1, detail::kParallelGrain / std::max<int64_t>(1, run * (nIdx + len)));
  detail::parallelFor(outer * runs, grain, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      int64_t o = c / runs, j0 = c % runs * run;
      int64_t j1 = std::min(inner, j0 + run);
      float *dst = out + o * len * inner;
      const float *src = upd + o * nIdx * inner;
      for (int64_t r = 0; r < len; ++r)
        std::fill(dst + r * inner + j0, dst + r * inner + j1, 0.0f);
      for (int64_t k = 0; k < nIdx; ++k) {
        float *row = dst + to[size_t(k)];
        const float *from = src + k * inner;
        for (int64_t j = j0; j < j1; ++j)
          row[j] += from[j];
      }
    }
  });
  return Status::ok();
}

} // namespace

Status scatterAdd(const ConstTensor &updates, const ConstTensor &indices,
                  int64_t axis, const MutTensor &out) {
  const char *op = "scatter_add";
  MC_RETURN_IF_ERROR(checkRank(op, "updates", updates.shape));
  MC_RETURN_IF_ERROR(checkRank(op, "indices", indices.shape));
  MC_RETURN_IF_ERROR(checkRank(op, "result", out.shape));
  if (updates.dtype != DType::F32 || out.dtype != DType::F32)
    return detail::unsupportedDType("scatter_add", updates.dtype, "f32");
  if (indices.dtype != DType::I32 && indices.dtype != DType::I64)
    return detail::unsupportedDType("scatter_add indices", indices.dtype,
                                    "i32, i64");
  size_t ri = indices.shape.size();
  int64_t size = axis >= 0 && size_t(axis) < out.shape.size()
                     ? out.shape[size_t(axis)]
                     : -1;
  Shape expect;
  Status rule =
      shapes::scatterAdd(updates.shape, indices.shape, axis, size, &expect);
  if (!rule.isOk() || out.shape != expect)
    return Status::error(
        "scatter_add: updates " + typeString(updates.dtype, updates.shape) +
        ", indices " + typeString(indices.dtype, indices.shape) + ", axis " +
        std::to_string(axis) + " and result " +
        typeString(out.dtype, out.shape) + " do not agree" +
        (rule.isOk() ? std::string() : ": " + rule.message()));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= updates.shape[size_t(d)];
  for (size_t d = size_t(axis) + ri; d < updates.shape.size(); ++d)
    inner *= updates.shape[d];
  int64_t nIdx = numElements(indices.shape);
  const float *u = static_cast<const float *>(updates.data);
  float *o = static_cast<float *>(out.data);
  if (indices.dtype == DType::I32)
    return scatterAddTyped(u, static_cast<const int32_t *>(indices.data), nIdx,
                           outer, size, inner, o);
  return scatterAddTyped(u, static_cast<const int64_t *>(indices.data), nIdx,
                         outer, size, inner, o);
}

Status pad(const ConstTensor &a, const std::vector<int64_t> &low,
           const std::vector<int64_t> &high, double value,
           const MutTensor &out) {
  MC_RETURN_IF_ERROR(checkRank("pad", "operand", a.shape));
  MC_RETURN_IF_ERROR(checkRank("pad", "result", out.shape));
  size_t r = a.shape.size();
  if (a.dtype != out.dtype || out.shape.size() != r || low.size() != r ||
      high.size() != r)
    return Status::error("pad: operand " + typeString(a.dtype, a.shape) +
                         ", result " + typeString(out.dtype, out.shape) +
                         ", " + std::to_string(low.size()) + " low and " +
                         std::to_string(high.size()) +
                         " high paddings do not agree");
  for (size_t d = 0; d < r; ++d)
    if (low[d] < 0 || high[d] < 0 ||
        out.shape[d] != a.shape[d] + low[d] + high[d])
      return Status::error(
          "pad: dim " + std::to_string(d) + ": operand size " +
          std::to_string(a.shape[d]) + " + low " + std::to_string(low[d]) +
          " + high " + std::to_string(high[d]) +
          " (both >= 0) does not give the result size " +
          std::to_string(out.shape[d]));
  int64_t n = numElements(out.shape);
  fillValue(out.dtype, out.data, n, value);
  int64_t na = numElements(a.shape);
  if (na == 0)
    return Status::ok();
  size_t es = dtypeSize(a.dtype);
  if (r == 0) {
    std::memcpy(out.data, a.data, es);
    return Status::ok();
  }
  // The operand into place: a scatter with the result's strides.
  int64_t oStride[kMaxRank];
  contiguousStrides(out.shape, oStride);
  int64_t base = 0;
  for (size_t d = 0; d < r; ++d)
    base += low[d] * oStride[d];
  uint8_t *dst = static_cast<uint8_t *>(out.data) + size_t(base) * es;
  switch (es) {
  case 1:
    detail::stridedScatter(a.shape, oStride,
                           static_cast<const uint8_t *>(a.data), dst);
    break;
  case 2:
    detail::stridedScatter(a.shape, oStride,
                           static_cast<const uint16_t *>(a.data),
                           reinterpret_cast<uint16_t *>(dst));
    break;
  case 4:
    detail::stridedScatter(a.shape, oStride,
                           static_cast<const uint32_t *>(a.data),
                           reinterpret_cast<uint32_t *>(dst));
    break;
  default:
    detail::stridedScatter(a.shape, oStride,
                           static_cast<const uint64_t *>(a.data),
                           reinterpret_cast<uint64_t *>(dst));
    break;
  }
  return Status::ok();
}

} // namespace mc::rt
