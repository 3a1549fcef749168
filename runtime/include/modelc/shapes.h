// The shape rules of the mc ops, written once: pure functions over
// dimension lists, with no MLIR, shared by the dialect (ir/ShapeInference),
// the artifact verifier, the CPU kernels and the eager frontend.
//
// Each rule returns an error Status whose message says what was expected and
// what was found (without the op's name: callers prefix it), or ok and the
// result shape in `*out`. Inputs may be untrusted (the artifact verifier
// passes attributes read from a file): no rule overflows or divides by zero.
// Axes are never negative here: callers that accept Python-style negative
// axes normalize them first.
//
// A dimension may be the batch, kBatch (-1): a size not known until run
// time, between the model's batch bounds, the same in every tensor of the
// model (the dialect's `?`, one symbol per function). Rules treat it as a
// size equal only to itself: it passes through, broadcasts from 1, and is
// refused where a rule would need its value (a slice or pad inside it,
// concatenation along it, conv channels or spatial dims). Kernels and the
// eager frontend only ever see concrete sizes.
#ifndef MODELC_SHAPES_H
#define MODELC_SHAPES_H

#include "modelc/ops.h"
#include "modelc/status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mc::rt::shapes {

using Dims = std::vector<int64_t>;

/// The batch dimension (see above); -c is c times the batch (the
/// [B * S, E] of a flattened sequence), c >= 1. A shape holds at most one
/// dim that depends on the batch.
inline constexpr int64_t kBatch = -1;
inline bool isBatch(int64_t d) { return d < 0; }
/// c of a dim of c times the batch.
inline int64_t batchMultiple(int64_t d) { return -d; }
/// Whether `dims` holds the batch.
bool hasBatch(const Dims &dims);
/// `dims` with each -c replaced by c * `batch`.
Dims resolve(const Dims &dims, int64_t batch);

/// "[2, 3]": a list of numbers (attributes).
std::string str(const Dims &dims);
/// "[?, 3]": a shape, whose batch prints as "?" (c times it as "c*?").
std::string shapeStr(const Dims &dims);

/// A dynamic batch (schema 2.1): `scale` is empty for a static shape, else
/// one entry per dim, 0 for a static dim and c > 0 for a dim of c * batch.
/// The shape at `batch` (static dims kept from `shape`). Callers check
/// that c * batch does not overflow (the verifier bounds it by the max).
Dims atBatch(const Dims &shape, const Dims &scale, int64_t batch);

/// "[?, 784]": `shape` with each dim of c * batch written "?" (c = 1) or
/// "c*?".
std::string symbolicStr(const Dims &shape, const Dims &scale);

/// `axis` indexes a dimension of a rank-`rank` shape: 0 <= axis < rank.
Status checkAxis(int64_t axis, size_t rank);

/// `input` broadcasts to `result` through `dims` (dims[i] is the result
/// dimension of input dimension i).
Status broadcastInDim(const Dims &input, const Dims &dims,
                      const Dims &result);

Status transpose(const Dims &input, const Dims &permutation, Dims *out);
/// `input` reshaped to `result`: the same element count (both hold the
/// batch, or neither, and the same product of the static sizes and the
/// batch's multiples).
Status reshape(const Dims &input, const Dims &result);

/// Reduces `dims` (unique, in any order); keepdim leaves them as size 1.
Status reduce(const Dims &input, const Dims &dims, bool keepdim, Dims *out);

/// [..., M, K] x [..., K, N] (before the transposes) with equal batch dims.
Status matmul(const Dims &lhs, const Dims &rhs, bool transposeA,
              bool transposeB, Dims *out);

Status concat(const std::vector<Dims> &inputs, int64_t axis, Dims *out);

/// Elements start, start + stride, ... below limit, per dimension. A dim of
/// Elements start, start + stride, ... below limit, per dimension. A dim of
/// the batch is only taken whole: start 0, stride 1 and limit its size (-c);
/// on a resolved shape, a limit of -c still means the whole dim.
Status slice(const Dims &input, const Dims &start, const Dims &limit,
             const Dims &strides, Dims *out);

/// input[:axis] + indices + input[axis+1:].
Status gather(const Dims &input, const Dims &indices, int64_t axis,
              Dims *out);

/// scatter_add (gather's adjoint): updates[:axis] + [size] +
/// updates[axis + rank(indices):], where updates[axis : axis +
/// rank(indices)] must be the indices' shape; size >= 1 (0 only with no
/// indices), never the batch.
Status scatterAdd(const Dims &updates, const Dims &indices, int64_t axis,
                  int64_t size, Dims *out);

Status pad(const Dims &input, const Dims &low, const Dims &high, Dims *out);

/// NCHW conv: input [N, C, H, W], weight [O, C/groups, KH, KW]; strides and
/// dilation [h, w], padding [top, left, bottom, right]. With channelsLast
/// the input is [N, H, W, C] and the result [N, OH, OW, O] (the weight
/// stays OIHW).
Status conv2d(const Dims &input, const Dims &weight, const Dims &strides,
              const Dims &padding, const Dims &dilation, int64_t groups,
              Dims *out, bool channelsLast = false);

/// The result of an epilogue anchor (matmul, conv2d; the registry's
/// epilogueAnchor) from its operands' shapes and its attributes, by the
/// rules above. Any other op is an error.
Status anchorResult(OpId op, const OpAttrs &attrs,
                    const std::vector<Dims> &operands, Dims *out);

/// NCHW pooling; ceil_mode follows PyTorch (a window must start inside the
/// input or the leading padding), and so does the padding limit (at most
/// half the dilated kernel, so no window lies in the padding alone). With
/// channelsLast, input and result are [N, H, W, C].
Status pool2d(const Dims &input, const Dims &kernel, const Dims &strides,
              const Dims &padding, const Dims &dilation, bool ceilMode,
              Dims *out, bool channelsLast = false);

/// Output size of one pooled/convolved dimension (PyTorch's formula); 0 when
/// the dilated kernel does not fit the padded input. Arguments as checked by
/// conv2d/pool2d (stride, dilation >= 1; sizes and padding >= 0).
int64_t pooledSize(int64_t input, int64_t kernel, int64_t stride,
                   int64_t padBegin, int64_t padEnd, int64_t dilation,
                   bool ceilMode);

/// Where the elements of a data-movement op's result lie in a contiguous
/// tensor, when the op is a strided view of it (no copy needed): the
/// result's dim d is the product of factors dims[d] (outermost first), each
/// a size and an element stride, and element 0 is at `offset`. Enumerating
/// every factor of every dim row-major visits the result's elements in
/// row-major order (`flatten`). A fused region reads a transpose, reshape
/// or slice of its input this way instead of a step copying it
/// (docs/fusion.md, "Views").
struct StridedView {
  struct Factor {
    int64_t size, stride;
  };
  int64_t offset = 0;
  std::vector<std::vector<Factor>> dims;
  Dims shape() const;
  /// Every factor in order (size-1 factors dropped, mergeable neighbours
  /// merged): the sizes and strides of a rank-n loop over the elements.
  void flatten(Dims *sizes, Dims *strides) const;
};

/// The view of a contiguous tensor of `shape` (concrete sizes).
StridedView contiguousView(const Dims &shape);

/// Whether `op` can be read as a view of its operand (transpose, reshape,
/// slice).
bool isViewOp(OpId op);

/// `view` becomes the view of op `op` (transpose, reshape or slice, with
/// `attrs`) applied to it, whose result has shape `result` (concrete
/// sizes). An error says why the result is no strided view of the operand:
/// a slice inside a dim that merges strided dims, a reshape that splits a
/// factor by a size that does not divide it, or attributes that do not
/// give `result`.
Status applyView(OpId op, const OpAttrs &attrs, const Dims &result,
                 StridedView *view);

/// The views of a fused region's values (inputs 0..n-1, then each body
/// op's result), as the verifier, the CPU kernels and the cuda target's
/// kernel generator read a body: which input each view reads and where
/// its elements lie in it.
class RegionViews {
public:
  RegionViews(size_t numInputs, size_t numValues)
      : numInputs_(numInputs), input_(numValues, -1), view_(numValues) {}
  bool isView(uint32_t v) const { return input_[v] >= 0; }
  /// What a view may read: an input or another view.
  bool viewable(uint32_t v) const { return v < numInputs_ || isView(v); }
  /// The input view `v` reads.
  uint32_t input(uint32_t v) const { return uint32_t(input_[v]); }
  const StridedView &view(uint32_t v) const { return view_[v]; }
  /// Value `value` is op `op` (with `attrs`, result `result`) of `operand`,
  /// which is viewable; `inputShape` is the operand's shape when it is an
  /// input (unread otherwise).
  Status add(uint32_t value, OpId op, const OpAttrs &attrs, const Dims &result,
             uint32_t operand, const Dims &inputShape);

private:
  size_t numInputs_;
  std::vector<int64_t> input_;
  std::vector<StridedView> view_;
};

} // namespace mc::rt::shapes

#endif // MODELC_SHAPES_H
