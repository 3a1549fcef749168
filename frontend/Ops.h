// Eager ops on Tensor. Each runs the runtime's CPU kernel and, while a trace
// is active, records itself. Binary ops broadcast like NumPy/PyTorch; the
// trace gets the explicit mc.broadcast_in_dim this implies.
#ifndef MODELC_FRONTEND_OPS_H
#define MODELC_FRONTEND_OPS_H

#include "frontend/Tensor.h"
#include "modelc/ops.h"

#include <utility>

namespace mc {

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);

Tensor neg(const Tensor& a);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor tanh(const Tensor& a);
Tensor sigmoid(const Tensor& a);
Tensor relu(const Tensor& a);
Tensor sqrt(const Tensor& a);

/// Batched matmul with mc.matmul's rules: equal ranks >= 2, equal batch dims.
Tensor matmul(const Tensor& a, const Tensor& b, bool transposeA = false,
              bool transposeB = false);
/// x @ w^T + b with w [out, in] (PyTorch's nn.functional.linear).
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b = Tensor());

/// NumPy-style broadcast to `shape`. With `values` false the result is
/// shape-only (see Tensor::shapeOnly) even where `a` has values: for an
/// operand of an op whose other operand is shape-only, so that tracing
/// does not fill an activation-sized copy of a constant.
Tensor broadcastTo(const Tensor& a, const Shape& shape);
Tensor broadcastTo(const Tensor& a, const Shape& shape, bool values);
/// mc.broadcast_in_dim: operand dim i becomes result dim dims[i].
Tensor broadcastInDim(const Tensor& a, const Shape& shape,
                      const std::vector<int64_t>& dims);
Tensor broadcastInDim(const Tensor& a, const Shape& shape,
                      const std::vector<int64_t>& dims, bool values);
/// One entry may be -1 (inferred). Shares storage with `a`.
Tensor reshape(const Tensor& a, const Shape& shape);
Tensor transpose(const Tensor& a, const std::vector<int64_t>& permutation);
/// Negative dims count from the end.
Tensor sum(const Tensor& a, const std::vector<int64_t>& dims,
           bool keepdim = false);
Tensor mean(const Tensor& a, const std::vector<int64_t>& dims,
            bool keepdim = false);
Tensor amax(const Tensor& a, const std::vector<int64_t>& dims,
            bool keepdim = false);
Tensor softmax(const Tensor& a, int64_t axis);
Tensor cast(const Tensor& a, DType dtype);

/// An elementwise op of the registry with no attributes (one operand, the
/// result of its shape and dtype): run by the CPU kernel registered for it
/// (the compiled artifact's kernel), recorded for autograd and the tracer.
/// How such an op joins the frontend without code of its own here.
Tensor elementwise(rt::OpId op, const Tensor& a);

//===--- Ops of real models (CNNs, transformers). PyTorch semantics. ---===//

Tensor abs(const Tensor& a);
Tensor erf(const Tensor& a);
inline Tensor sin(const Tensor& a) { return elementwise(rt::OpId::Sin, a); }
inline Tensor cos(const Tensor& a) { return elementwise(rt::OpId::Cos, a); }
inline Tensor tan(const Tensor& a) { return elementwise(rt::OpId::Tan, a); }
inline Tensor asin(const Tensor& a) { return elementwise(rt::OpId::Asin, a); }
inline Tensor acos(const Tensor& a) { return elementwise(rt::OpId::Acos, a); }
inline Tensor atan(const Tensor& a) { return elementwise(rt::OpId::Atan, a); }
inline Tensor sinh(const Tensor& a) { return elementwise(rt::OpId::Sinh, a); }
inline Tensor cosh(const Tensor& a) { return elementwise(rt::OpId::Cosh, a); }
inline Tensor asinh(const Tensor& a) { return elementwise(rt::OpId::Asinh, a); }
inline Tensor acosh(const Tensor& a) { return elementwise(rt::OpId::Acosh, a); }
inline Tensor atanh(const Tensor& a) { return elementwise(rt::OpId::Atanh, a); }
/// x * relu6(x + 3) / 6 (torch.nn.functional.hardswish).
inline Tensor hardswish(const Tensor& a) {
  return elementwise(rt::OpId::Hardswish, a);
}
/// GELU: exact erf form, or PyTorch's approximate='tanh' form.
Tensor gelu(const Tensor& a, bool tanhApproximation = false);
Tensor pow(const Tensor& a, const Tensor& b); // broadcasts
Tensor minimum(const Tensor& a, const Tensor& b);
/// min(max(a, lo), hi); relu6 is clamp(x, 0, 6).
Tensor clamp(const Tensor& a, double lo, double hi);
/// mc.dropout with an explicit seed and offset (i64 scalars): the mask of
/// rt::dropout. Models call dropout(x, p, training) (frontend/Random.h),
/// which draws them from the generator.
Tensor dropout(const Tensor& x, const Tensor& seed, const Tensor& offset,
               double p);
/// Comparisons broadcast and return i1 tensors.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
/// torch.where: pred (i1) ? a : b, broadcasting all three.
Tensor where(const Tensor& pred, const Tensor& a, const Tensor& b);
Tensor logicalNot(const Tensor& a); // i1
Tensor logSoftmax(const Tensor& a, int64_t axis);
Tensor amin(const Tensor& a, const std::vector<int64_t>& dims,
            bool keepdim = false);
/// torch.cat. Negative axis counts from the end.
Tensor concat(const std::vector<Tensor>& tensors, int64_t axis);
/// General strided slice: per dimension start (>= 0), count (the result
/// size) and step (>= 1).
Tensor slice(const Tensor& a, const std::vector<int64_t>& start,
             const std::vector<int64_t>& count,
             const std::vector<int64_t>& step);
/// PyTorch-style a[..., start:end:step, ...] on one dimension; start/end
/// clamp like Python slices (negative count from the end).
Tensor sliceDim(const Tensor& a, int64_t dim, int64_t start, int64_t end,
                int64_t step = 1);
/// ONNX Gather / torch.index_select generalized: out.shape = a.shape[:axis]
/// + indices.shape + a.shape[axis+1:]; indices i32/i64, negative wrap.
Tensor gather(const Tensor& a, const Tensor& indices, int64_t axis);
/// gather's adjoint (torch.index_add into zeros): f32 `updates` summed
/// into a zero tensor of shape updates.shape[:axis] + [size] +
/// updates.shape[axis + indices.rank():] at rows `indices` (negative from
/// the end), in index order. `axis` >= 0 (it counts in the result and in
/// the updates alike only from the front).
Tensor scatterAdd(const Tensor& updates, const Tensor& indices, int64_t axis,
                  int64_t size);
/// torch.topk / ONNX TopK of a float, i32 or i64 tensor: the k largest (or
/// smallest) values along `dim`, sorted, and their indices (i64). Ties go
/// to the lower index first (ONNX's rule; PyTorch leaves their order open);
/// NaN ranks above +inf, as in PyTorch: first when largest, last when
/// smallest. A composition of k selection rounds over the dim (no op of
/// its own, so it traces, differentiates and compiles for every target);
/// the gradient reaches the selected elements only. Along a dynamic batch
/// dim it is refused (its rank keys are a constant of the dim's size). k
/// is at most
/// kMaxTopK.
std::pair<Tensor, Tensor> topk(const Tensor& a, int64_t k, int64_t dim = -1,
                               bool largest = true);
constexpr int64_t kMaxTopK = 256;
/// Embedding lookup: weight [V, D], ids (i32/i64) [...] -> [..., D].
Tensor embedding(const Tensor& weight, const Tensor& ids);
/// Constant padding, low/high per dimension (>= 0).
Tensor pad(const Tensor& a, const std::vector<int64_t>& low,
           const std::vector<int64_t>& high, double value = 0.0);
/// Adds size-1 dims / removes them (both are reshapes in the graph).
Tensor unsqueeze(const Tensor& a, int64_t dim);
Tensor squeeze(const Tensor& a, int64_t dim);
Tensor flatten(const Tensor& a, int64_t startDim = 1, int64_t endDim = -1);

/// NCHW conv2d like torch.nn.functional.conv2d; `padding` is [top, left,
/// bottom, right]; bias optional ([O], added after).
Tensor conv2d(const Tensor& input, const Tensor& weight,
              const Tensor& bias = Tensor(),
              std::vector<int64_t> strides = {1, 1},
              std::vector<int64_t> padding = {0, 0, 0, 0},
              std::vector<int64_t> dilation = {1, 1}, int64_t groups = 1);
/// torch.nn.functional.max_pool2d; padding [top, left, bottom, right].
Tensor maxPool2d(const Tensor& input, std::vector<int64_t> kernel,
                 std::vector<int64_t> strides,
                 std::vector<int64_t> padding = {0, 0, 0, 0},
                 std::vector<int64_t> dilation = {1, 1},
                 bool ceilMode = false);
/// torch.nn.functional.avg_pool2d.
Tensor avgPool2d(const Tensor& input, std::vector<int64_t> kernel,
                 std::vector<int64_t> strides,
                 std::vector<int64_t> padding = {0, 0, 0, 0},
                 bool ceilMode = false, bool countIncludePad = true);
/// Inference batch norm over `axis` (1 for NCHW).
Tensor batchNorm(const Tensor& x, const Tensor& scale, const Tensor& offset,
                 const Tensor& mean, const Tensor& variance, double epsilon,
                 int64_t axis = 1);
/// Training-mode batch norm: batchNorm with the batch's mean and biased
/// variance over every dim but `axis` (so gradients reach x through them,
/// as PyTorch's); the statistics are returned in batchMean / batchVar.
Tensor batchNormTraining(const Tensor& x, const Tensor& scale,
                         const Tensor& offset, double epsilon, int64_t axis,
                         Tensor* batchMean = nullptr,
                         Tensor* batchVar = nullptr);
/// PyTorch's running statistics after a training-mode batch norm of x
/// ([N, C, ...], channels on dim 1): running * (1 - momentum) + batch's *
/// momentum, the batch's variance made unbiased (n / (n - 1), n counted
/// from the batch the step runs, so a dynamic batch gets its own). Call
/// under NoGradGuard; {mean, variance}.
std::pair<Tensor, Tensor>
batchNormRunningUpdate(const Tensor& x, const Tensor& batchMean,
                       const Tensor& batchVar, const Tensor& runningMean,
                       const Tensor& runningVar, double momentum);
/// Layer norm over the trailing dims [axis, rank).
Tensor layerNorm(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                 int64_t axis, double epsilon);

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& a) { return neg(a); }
Tensor operator+(const Tensor& a, double s);
Tensor operator-(const Tensor& a, double s);
Tensor operator*(const Tensor& a, double s);
Tensor operator/(const Tensor& a, double s);

/// Relative error ||a - b|| / ||b|| in double (NaN if either has a NaN).
double relativeError(const Tensor& a, const Tensor& b);

} // namespace mc

#endif // MODELC_FRONTEND_OPS_H
