// The shape rules of the mc ops (see modelc/shapes.h).
#include "modelc/shapes.h"

#include <algorithm>

namespace mc::rt::shapes {

namespace {

std::string num(int64_t v) { return std::to_string(v); }

/// A dimension's size: "?" for the batch.
std::string sizeText(int64_t v) {
  if (!isBatch(v))
    return num(v);
  return v == kBatch ? "?" : num(batchMultiple(v)) + "*?";
}

Status err(std::string message) { return Status::error(std::move(message)); }

/// a + b without overflow; false when it would.
bool addOk(int64_t a, int64_t b, int64_t *sum) {
  return !__builtin_add_overflow(a, b, sum);
}

/// Checks the [h, w] / [top, left, bottom, right] attribute lengths shared
/// by conv and pooling.
Status checkWindowAttrs(const Dims &strides, const Dims &padding,
                        const Dims &dilation) {
  if (strides.size() != 2 || dilation.size() != 2 || padding.size() != 4)
    return err("expects strides and dilation [h, w] and padding "
               "[top, left, bottom, right], got " +
               str(strides) + ", " + str(dilation) + " and " + str(padding));
  for (int64_t v : strides)
    if (v < 1)
      return err("strides " + str(strides) + " must be >= 1");
  for (int64_t v : dilation)
    if (v < 1)
      return err("dilation " + str(dilation) + " must be >= 1");
  for (int64_t v : padding)
    if (v < 0)
      return err("padding " + str(padding) + " must be >= 0");
  return Status::ok();
}

/// The dilated extent of a kernel, dilation * (kernel - 1) + 1, exactly.
__int128 dilatedKernel(int64_t kernel, int64_t dilation) {
  return __int128(dilation) * (__int128(kernel) - 1) + 1;
}

/// Refuses the batch where a rule needs the size.
Status notBatch(int64_t d, const std::string &what) {
  if (isBatch(d))
    return err(what + " cannot be the batch (?): its size is only known "
                      "at run time");
  return Status::ok();
}

} // namespace

bool hasBatch(const Dims &dims) {
  return std::any_of(dims.begin(), dims.end(), isBatch);
}

Dims resolve(const Dims &dims, int64_t batch) {
  Dims out(dims);
  for (int64_t &d : out)
    if (isBatch(d))
      d = batchMultiple(d) * batch;
  return out;
}

std::string str(const Dims &dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i ? ", " : "") + num(dims[i]);
  return s + "]";
}

std::string shapeStr(const Dims &dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i ? ", " : "") + sizeText(dims[i]);
  return s + "]";
}

Status reshape(const Dims &input, const Dims &result) {
  auto count = [](const Dims &d, int *batches, __int128 *product) {
    *batches = 0;
    *product = 1;
    for (int64_t v : d) {
      if (isBatch(v))
        ++*batches;
      *product *= isBatch(v) ? batchMultiple(v) : v;
      if (*product > INT64_MAX)
        *product = __int128(INT64_MAX) + 1; // saturate: only equality matters
    }
    return true;
  };
  int bi = 0, br = 0;
  __int128 pi = 0, pr = 0;
  if (!count(input, &bi, &pi) || !count(result, &br, &pr))
    return err("cannot reshape " + shapeStr(input) + " to " + shapeStr(result) +
               ": sizes must be >= 0");
  if (bi > 1 || br > 1)
    return err("cannot reshape " + shapeStr(input) + " to " + shapeStr(result) +
               ": a shape holds the batch (?) at most once");
  if (bi != br || pi != pr)
    return err("cannot reshape " + shapeStr(input) + " to " + shapeStr(result) +
               ": the element counts differ");
  return Status::ok();
}

Dims atBatch(const Dims &shape, const Dims &scale, int64_t batch) {
  Dims out = shape;
  for (size_t d = 0; d < scale.size() && d < out.size(); ++d)
    if (scale[d] > 0)
      out[d] = scale[d] * batch;
  return out;
}

std::string symbolicStr(const Dims &shape, const Dims &scale) {
  std::string s = "[";
  for (size_t d = 0; d < shape.size(); ++d) {
    int64_t c = d < scale.size() ? scale[d] : 0;
    std::string dim = c == 0 ? num(shape[d]) : "?";
    if (c > 1)
      dim = num(c) + "*?";
    s += (d ? ", " : "") + dim;
  }
  return s + "]";
}

Status checkAxis(int64_t axis, size_t rank) {
  if (axis < 0 || axis >= int64_t(rank))
    return err("axis " + num(axis) + " is out of range for rank " +
               std::to_string(rank));
  return Status::ok();
}

Status broadcastInDim(const Dims &input, const Dims &dims,
                      const Dims &result) {
  if (dims.size() != input.size())
    return err("dims " + str(dims) + " has " + std::to_string(dims.size()) +
               " entries, expected the input rank " +
               std::to_string(input.size()));
  std::vector<bool> seen(result.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = dims[i];
    if (d < 0 || d >= int64_t(result.size()))
      return err("dims[" + std::to_string(i) + "] = " + num(d) +
                 " is out of range for result rank " +
                 std::to_string(result.size()));
    if (seen[d])
      return err("dims " + str(dims) + " maps two input dimensions to result "
                 "dimension " + num(d));
    seen[d] = true;
    if (input[i] != 1 && input[i] != result[d])
      return err("input dimension " + std::to_string(i) + " of size " +
                 sizeText(input[i]) + " cannot broadcast to result dimension " +
                 num(d) + " of size " + sizeText(result[d]));
  }
  return Status::ok();
}

Status transpose(const Dims &input, const Dims &permutation, Dims *out) {
  if (permutation.size() != input.size())
    return err("permutation " + str(permutation) + " has " +
               std::to_string(permutation.size()) +
               " entries, expected the input rank " +
               std::to_string(input.size()));
  std::vector<bool> seen(input.size(), false);
  Dims result;
  for (int64_t p : permutation) {
    if (p < 0 || p >= int64_t(input.size()) || seen[p])
      return err("permutation " + str(permutation) +
                 " is not a permutation of [0, " +
                 std::to_string(input.size()) + ")");
    seen[p] = true;
    result.push_back(input[p]);
  }
  *out = std::move(result);
  return Status::ok();
}

Status reduce(const Dims &input, const Dims &dims, bool keepdim, Dims *out) {
  std::vector<bool> reduced(input.size(), false);
  for (int64_t d : dims) {
    if (d < 0 || d >= int64_t(input.size()))
      return err("reduction dimension " + num(d) +
                 " is out of range for rank " + std::to_string(input.size()));
    if (reduced[d])
      return err("reduction dimension " + num(d) + " appears twice in " +
                 str(dims));
    reduced[d] = true;
  }
  Dims result;
  for (size_t i = 0; i < input.size(); ++i) {
    if (!reduced[i])
      result.push_back(input[i]);
    else if (keepdim)
      result.push_back(1);
  }
  *out = std::move(result);
  return Status::ok();
}

Status matmul(const Dims &lhs, const Dims &rhs, bool transposeA,
              bool transposeB, Dims *out) {
  if (lhs.size() < 2 || rhs.size() < 2)
    return err("expects operands of rank >= 2, got lhs " + shapeStr(lhs) +
               " and rhs " + shapeStr(rhs));
  if (lhs.size() != rhs.size())
    return err("expects operands of equal rank (broadcast batch dimensions "
               "explicitly), got lhs " +
               shapeStr(lhs) + " and rhs " + shapeStr(rhs));
  size_t r = lhs.size();
  if (!std::equal(lhs.begin(), lhs.end() - 2, rhs.begin()))
    return err("expects equal batch dimensions, got lhs " + shapeStr(lhs) +
               " and rhs " + shapeStr(rhs));
  int64_t m = transposeA ? lhs[r - 1] : lhs[r - 2];
  int64_t kA = transposeA ? lhs[r - 2] : lhs[r - 1];
  int64_t kB = transposeB ? rhs[r - 1] : rhs[r - 2];
  int64_t n = transposeB ? rhs[r - 2] : rhs[r - 1];
  if (kA != kB)
    return err("contracting dimensions differ: lhs " + shapeStr(lhs) +
               (transposeA ? " (transposed)" : "") + " has K = " + num(kA) +
               ", rhs " + shapeStr(rhs) + (transposeB ? " (transposed)" : "") +
               " has K = " + num(kB));
  Dims result(lhs.begin(), lhs.end() - 2);
  result.push_back(m);
  result.push_back(n);
  *out = std::move(result);
  return Status::ok();
}

Status anchorResult(OpId op, const OpAttrs &attrs,
                    const std::vector<Dims> &operands, Dims *out) {
  if (operands.size() != 2)
    return err(std::string("mc.") + opName(op) + " takes 2 operands, got " +
               num(int64_t(operands.size())));
  if (op == OpId::Matmul)
    return matmul(operands[0], operands[1], attrs.getBool("transpose_a"),
                  attrs.getBool("transpose_b"), out);
  if (op == OpId::Conv2d)
    return conv2d(operands[0], operands[1], attrs.getInts("strides"),
                  attrs.getInts("padding"), attrs.getInts("dilation"),
                  attrs.getInt("groups", 1), out,
                  attrs.getBool("channels_last"));
  return err(std::string("mc.") + opName(op) + " is not an epilogue anchor");
}

Status concat(const std::vector<Dims> &inputs, int64_t axis, Dims *out) {
  if (inputs.empty())
    return err("expects at least one input");
  const Dims &first = inputs.front();
  MC_RETURN_IF_ERROR(checkAxis(axis, first.size()));
  Dims result(first);
  result[axis] = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Dims &shape = inputs[i];
    if (shape.size() != first.size())
      return err("input " + std::to_string(i) + " has rank " +
                 std::to_string(shape.size()) + ", expected " +
                 std::to_string(first.size()));
    MC_RETURN_IF_ERROR(notBatch(shape[axis], "the concatenation axis " +
                                                 num(axis) + " of input " +
                                                 std::to_string(i)));
    for (size_t d = 0; d < shape.size(); ++d)
      if (int64_t(d) != axis && shape[d] != first[d])
        return err("input " + std::to_string(i) + " " + shapeStr(shape) +
                   " differs from input 0 " + shapeStr(first) + " in dimension " +
                   std::to_string(d) + ", which is not the axis");
    if (!addOk(result[axis], shape[axis], &result[axis]))
      return err("the sizes along axis " + num(axis) + " overflow");
  }
  *out = std::move(result);
  return Status::ok();
}

Status slice(const Dims &input, const Dims &start, const Dims &limit,
             const Dims &strides, Dims *out) {
  size_t r = input.size();
  if (start.size() != r || limit.size() != r || strides.size() != r)
    return err("start, limit and strides need " + std::to_string(r) +
               " entries (the input rank), got " +
               std::to_string(start.size()) + ", " +
               std::to_string(limit.size()) + " and " +
               std::to_string(strides.size()));
  Dims result;
  for (size_t d = 0; d < r; ++d) {
    if (strides[d] < 1)
      return err("stride " + num(strides[d]) + " in dimension " +
                 std::to_string(d) + " must be >= 1");
    // A dim of the batch is taken whole: its limit is its size (-c). Once
    // the batch is known (the runtime resolves shapes, not attributes), a
    // limit of -c still means the whole dim.
    if (isBatch(input[d]) || isBatch(limit[d])) {
      if ((isBatch(input[d]) && limit[d] != input[d]) || start[d] != 0 ||
          strides[d] != 1)
        return err("dimension " + std::to_string(d) + " of size " +
                   shapeStr({input[d]}) + " is sliced from " + num(start[d]) +
                   " to " + shapeStr({limit[d]}) + " by " + num(strides[d]) +
                   "; the batch (?) can only be taken whole (start 0, "
                   "limit " + num(input[d]) + ", stride 1)");
      result.push_back(input[d]);
      continue;
    }
    if (start[d] < 0 || start[d] > limit[d] || limit[d] > input[d])
      return err("dimension " + std::to_string(d) + " of size " +
                 num(input[d]) + " cannot be sliced from " + num(start[d]) +
                 " to " + num(limit[d]) +
                 " (needs 0 <= start <= limit <= size)");
    // ceil((limit - start) / stride), without overflow.
    int64_t span = limit[d] - start[d];
    result.push_back(span / strides[d] + (span % strides[d] != 0));
  }
  *out = std::move(result);
  return Status::ok();
}

Status gather(const Dims &input, const Dims &indices, int64_t axis,
              Dims *out) {
  MC_RETURN_IF_ERROR(checkAxis(axis, input.size()));
  Dims result(input.begin(), input.begin() + axis);
  result.insert(result.end(), indices.begin(), indices.end());
  result.insert(result.end(), input.begin() + axis + 1, input.end());
  *out = std::move(result);
  return Status::ok();
}

Status scatterAdd(const Dims &updates, const Dims &indices, int64_t axis,
                  int64_t size, Dims *out) {
  size_t ri = indices.size();
  if (axis < 0 || size_t(axis) + ri > updates.size())
    return err("axis " + num(axis) + " and indices of rank " +
               std::to_string(ri) + " do not fit updates of rank " +
               std::to_string(updates.size()) +
               " (axis + rank(indices) <= rank(updates))");
  Dims middle(updates.begin() + axis, updates.begin() + axis + int64_t(ri));
  if (middle != indices)
    return err("updates dims " + num(axis) + ".." +
               num(axis + int64_t(ri) - 1) + " are " + str(middle) +
               ", not the indices' shape " + str(indices));
  if (size < 0 || isBatch(size))
    return err("size " + num(size) + " is not a static size >= 0");
  bool anyIndex = true;
  for (int64_t d : indices)
    anyIndex = anyIndex && d != 0;
  if (size == 0 && anyIndex)
    return err("size 0 with indices: no index can be in range");
  Dims result(updates.begin(), updates.begin() + axis);
  result.push_back(size);
  result.insert(result.end(), updates.begin() + axis + int64_t(ri),
                updates.end());
  *out = std::move(result);
  return Status::ok();
}

Status pad(const Dims &input, const Dims &low, const Dims &high, Dims *out) {
  if (low.size() != input.size() || high.size() != input.size())
    return err("low and high need " + std::to_string(input.size()) +
               " entries (the input rank), got " +
               std::to_string(low.size()) + " and " +
               std::to_string(high.size()));
  Dims result(input.size());
  for (size_t d = 0; d < input.size(); ++d) {
    if (low[d] < 0 || high[d] < 0)
      return err("padding of dimension " + std::to_string(d) +
                 " is negative (low " + num(low[d]) + ", high " +
                 num(high[d]) + ")");
    if (isBatch(input[d])) {
      if (low[d] || high[d])
        return err("dimension " + std::to_string(d) +
                   " is the batch (?), which cannot be padded");
      result[d] = input[d];
      continue;
    }
    if (!addOk(input[d], low[d], &result[d]) ||
        !addOk(result[d], high[d], &result[d]))
      return err("padding of dimension " + std::to_string(d) +
                 " overflows (size " + num(input[d]) + ", low " +
                 num(low[d]) + ", high " + num(high[d]) + ")");
  }
  *out = std::move(result);
  return Status::ok();
}

int64_t pooledSize(int64_t input, int64_t kernel, int64_t stride,
                   int64_t padBegin, int64_t padEnd, int64_t dilation,
                   bool ceilMode) {
  // __int128: the verifier passes attributes straight from a file.
  __int128 span = __int128(input) + padBegin + padEnd -
                  dilatedKernel(kernel, dilation);
  if (span < 0)
    return 0;
  __int128 out = (span + (ceilMode ? stride - 1 : 0)) / stride + 1;
  // PyTorch: the last window must start inside the input or the leading
  // padding, not in the trailing padding.
  if (ceilMode && (out - 1) * stride >= __int128(input) + padBegin)
    --out;
  // Only absurd attributes (sizes near INT64_MAX) get here; no real shape
  // matches the saturated value.
  return out > INT64_MAX ? INT64_MAX : int64_t(out);
}

namespace {
/// An NCHW rule applied to a channels_last input: `rule` gets the input as
/// [N, C, H, W] and its result comes back as [N, H, W, C]; its errors say
/// how the input was read.
template <typename Rule>
Status viaChannelsFirst(const Dims &input, Dims *out, Rule rule) {
  if (input.size() != 4)
    return err("expects input [N, H, W, C] (channels_last), got " +
               shapeStr(input));
  Status st = rule(Dims{input[0], input[3], input[1], input[2]});
  if (!st)
    return err(st.message() + " (the channels_last input " + shapeStr(input) +
               " read as NCHW)");
  const Dims &d = *out;
  *out = Dims{d[0], d[2], d[3], d[1]};
  return Status::ok();
}
} // namespace

Status conv2d(const Dims &input, const Dims &weight, const Dims &strides,
              const Dims &padding, const Dims &dilation, int64_t groups,
              Dims *out, bool channelsLast) {
  if (channelsLast)
    return viaChannelsFirst(input, out, [&](const Dims &nchw) {
      return conv2d(nchw, weight, strides, padding, dilation, groups, out);
    });
  if (input.size() != 4 || weight.size() != 4)
    return err("expects input [N, C, H, W] and weight [O, C/groups, KH, "
               "KW], got " +
               shapeStr(input) + " and " + shapeStr(weight));
  MC_RETURN_IF_ERROR(checkWindowAttrs(strides, padding, dilation));
  for (size_t d = 2; d < 4; ++d)
    MC_RETURN_IF_ERROR(notBatch(input[d], "input dimension " + num(d)));
  for (size_t d : {0, 2, 3})
    MC_RETURN_IF_ERROR(notBatch(weight[d], "weight dimension " + num(d)));
  // The channels may be the batch (c times it): a weight gradient
  // convolves over the batch. The checks below hold symbolically (-c).
  if (isBatch(input[1]) != isBatch(weight[1]))
    return err("input channels " + sizeText(input[1]) +
               " and weight input channels " + sizeText(weight[1]) +
               " must both be the batch or both be static");
  if (groups < 1 || input[1] % groups != 0 || weight[0] % groups != 0)
    return err("groups " + num(groups) + " must divide the input channels " +
               num(input[1]) + " and the output channels " + num(weight[0]));
  // weight[1] * groups == input[1], without overflow.
  if (weight[1] != input[1] / groups)
    return err("weight " + shapeStr(weight) + " expects " +
               (weight[1] > INT64_MAX / groups
                    ? std::string("more than ") + num(INT64_MAX)
                    : num(weight[1] * groups)) +
               " input channels (" + num(weight[1]) + " per group x " +
               num(groups) + " groups), input " + shapeStr(input) + " has " +
               num(input[1]));
  int64_t oh = pooledSize(input[2], weight[2], strides[0], padding[0],
                          padding[2], dilation[0], false);
  int64_t ow = pooledSize(input[3], weight[3], strides[1], padding[1],
                          padding[3], dilation[1], false);
  if (weight[2] < 1 || weight[3] < 1 || oh < 1 || ow < 1)
    return err("the kernel " + str(Dims(weight.begin() + 2, weight.end())) +
               " does not fit the padded input " + shapeStr(input));
  *out = Dims{input[0], weight[0], oh, ow};
  return Status::ok();
}

Status pool2d(const Dims &input, const Dims &kernel, const Dims &strides,
              const Dims &padding, const Dims &dilation, bool ceilMode,
              Dims *out, bool channelsLast) {
  if (channelsLast)
    return viaChannelsFirst(input, out, [&](const Dims &nchw) {
      return pool2d(nchw, kernel, strides, padding, dilation, ceilMode, out);
    });
  if (input.size() != 4)
    return err("expects input [N, C, H, W], got " + shapeStr(input));
  for (size_t d = 1; d < 4; ++d)
    MC_RETURN_IF_ERROR(notBatch(input[d], "input dimension " + num(d)));
  if (kernel.size() != 2 || kernel[0] < 1 || kernel[1] < 1)
    return err("kernel " + str(kernel) + " must be [h, w] with sizes >= 1");
  MC_RETURN_IF_ERROR(checkWindowAttrs(strides, padding, dilation));
  for (int i = 0; i < 2; ++i) {
    __int128 eff = dilatedKernel(kernel[i], dilation[i]);
    if (__int128(padding[i]) * 2 > eff || __int128(padding[i + 2]) * 2 > eff) {
      bool dilated = dilation[0] != 1 || dilation[1] != 1;
      return err("padding " + str(padding) + " must be at most half the " +
                 (dilated ? "dilated " : "") + "kernel " + str(kernel) +
                 (dilated ? " (dilation " + str(dilation) + ")" : ""));
    }
  }
  int64_t oh = pooledSize(input[2], kernel[0], strides[0], padding[0],
                          padding[2], dilation[0], ceilMode);
  int64_t ow = pooledSize(input[3], kernel[1], strides[1], padding[1],
                          padding[3], dilation[1], ceilMode);
  if (oh < 1 || ow < 1)
    return err("the window " + str(kernel) + " does not fit the padded input " +
               shapeStr(input));
  *out = Dims{input[0], input[1], oh, ow};
  return Status::ok();
}

Dims StridedView::shape() const {
  Dims out;
  for (const std::vector<Factor> &d : dims) {
    int64_t n = 1;
    for (const Factor &f : d)
      n *= f.size;
    out.push_back(n);
  }
  return out;
}

void StridedView::flatten(Dims *sizes, Dims *strides) const {
  sizes->clear();
  strides->clear();
  bool empty = false;
  for (const std::vector<Factor> &d : dims)
    for (const Factor &f : d) {
      empty |= f.size == 0;
      if (f.size == 1)
        continue;
      // (a, s * b) followed by (b, s) is one factor (a * b, s).
      if (!sizes->empty() && strides->back() == f.size * f.stride) {
        sizes->back() *= f.size;
        strides->back() = f.stride;
        continue;
      }
      sizes->push_back(f.size);
      strides->push_back(f.stride);
    }
  if (empty) {
    *sizes = {0};
    *strides = {0};
  }
}

StridedView contiguousView(const Dims &shape) {
  StridedView v;
  v.dims.resize(shape.size());
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    v.dims[d] = {StridedView::Factor{shape[d], stride}};
    stride *= shape[d];
  }
  return v;
}

bool isViewOp(OpId op) {
  return op == OpId::Transpose || op == OpId::Reshape || op == OpId::Slice;
}

Status applyView(OpId op, const OpAttrs &attrs, const Dims &result,
                 StridedView *view) {
  using Factor = StridedView::Factor;
  Dims input = view->shape();
  for (int64_t d : result)
    if (d < 0)
      return err("a view needs concrete sizes, not " + shapeStr(result));
  Dims expected;
  switch (op) {
  case OpId::Transpose: {
    Dims perm = attrs.getInts("permutation");
    MC_RETURN_IF_ERROR(transpose(input, perm, &expected));
    if (expected != result)
      break;
    std::vector<std::vector<Factor>> dims;
    for (int64_t p : perm)
      dims.push_back(view->dims[size_t(p)]);
    view->dims = std::move(dims);
    return Status::ok();
  }
  case OpId::Reshape: {
    MC_RETURN_IF_ERROR(reshape(input, result));
    if (std::find(result.begin(), result.end(), 0) != result.end()) {
      StridedView empty;
      for (int64_t d : result)
        empty.dims.push_back({Factor{d, 0}});
      empty.offset = view->offset;
      *view = std::move(empty);
      return Status::ok();
    }
    // The factors in order, then each result dim takes the outermost ones
    // until their product is its size, splitting a factor whose size its
    // remaining need divides.
    std::vector<Factor> factors; // merged where contiguous to each other
    for (const std::vector<Factor> &d : view->dims)
      for (const Factor &f : d) {
        if (f.size == 1)
          continue;
        if (!factors.empty() &&
            factors.back().stride == f.size * f.stride) {
          factors.back() = Factor{factors.back().size * f.size, f.stride};
          continue;
        }
        factors.push_back(f);
      }
    size_t next = 0;
    std::vector<std::vector<Factor>> dims;
    for (int64_t size : result) {
      std::vector<Factor> mine;
      int64_t need = size;
      while (need > 1) {
        Factor &f = factors.at(next);
        if (f.size <= need) {
          if (need % f.size != 0)
            return err("reshaping " + shapeStr(input) + " to " +
                       shapeStr(result) + " regroups strided dims: no view");
          mine.push_back(f);
          need /= f.size;
          ++next;
        } else {
          if (f.size % need != 0)
            return err("reshaping " + shapeStr(input) + " to " +
                       shapeStr(result) + " splits a strided dim of " +
                       num(f.size) + " by " + num(need) + ": no view");
          int64_t inner = f.size / need;
          mine.push_back(Factor{need, f.stride * inner});
          f = Factor{inner, f.stride};
          need = 1;
        }
      }
      if (mine.empty())
        mine.push_back(Factor{1, 0});
      dims.push_back(std::move(mine));
    }
    view->dims = std::move(dims);
    return Status::ok();
  }
  case OpId::Slice: {
    Dims start = attrs.getInts("start"), strides = attrs.getInts("strides");
    if (start.size() != input.size() || strides.size() != input.size() ||
        result.size() != input.size())
      return err("a slice of " + shapeStr(input) + " needs start and strides "
                 "of its rank");
    for (size_t d = 0; d < input.size(); ++d) {
      int64_t b = start[d], step = strides[d], n = result[d];
      if (step < 1 || b < 0 || b > input[d] ||
          (n > 0 && (b >= input[d] || n - 1 > (input[d] - 1 - b) / step)))
        return err("slice [" + num(b) + ", step " + num(step) + "] of " +
                   num(n) + " elements is outside dim " + std::to_string(d) +
                   " of " + shapeStr(input));
      if (b == 0 && step == 1 && n == input[d])
        continue;
      std::vector<Factor> real;
      for (const Factor &f : view->dims[d])
        if (f.size != 1)
          real.push_back(f);
      if (real.size() > 1)
        return err("slicing dim " + std::to_string(d) + " of " +
                   shapeStr(input) + ", a merge of strided dims: no view");
      int64_t stride = real.empty() ? 0 : real[0].stride;
      view->offset += b * stride;
      // One element (or none): its stride is never used (and an untrusted
      // step times the stride could overflow).
      view->dims[d] = {Factor{n, n > 1 ? stride * step : stride}};
    }
    return Status::ok();
  }
  default:
    return err(std::string(opName(op)) + " is not a view");
  }
  return err(std::string(opName(op)) + " of " + shapeStr(input) + " gives " +
             shapeStr(expected) + ", not " + shapeStr(result));
}

Status RegionViews::add(uint32_t value, OpId op, const OpAttrs &attrs,
                        const Dims &result, uint32_t operand,
                        const Dims &inputShape) {
  StridedView v = operand < numInputs_ ? contiguousView(inputShape)
                                       : view_[operand];
  MC_RETURN_IF_ERROR(applyView(op, attrs, result, &v));
  input_[value] = operand < numInputs_ ? int64_t(operand) : input_[operand];
  view_[value] = std::move(v);
  return Status::ok();
}

} // namespace mc::rt::shapes
