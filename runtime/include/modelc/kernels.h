// CPU kernels: the definition of what every mc op computes. The runtime's
// executor and the eager frontend both call these, so eager and compiled
// results come from the same code ("one source of numerical truth").
//
// Kernels trust shapes they are given only after checkShapes-style
// validation by the caller; each still returns a Status (never aborts) for
// dtype combinations it does not implement.
//
// f16 and bf16: wherever a kernel below says "f32", it also takes f16 and
// bf16 (every float operand and float result of that one dtype; mixing
// float dtypes in one op is an error). It widens the operands to f32
// (exact), runs the f32 kernel and rounds the result once to nearest even:
// the result equals the f32 kernel's on the widened inputs, rounded once
// (matmul and conv2d accumulate in f32 through sgemm). The f32 copies live
// in per-thread scratch that grows on first use and is reused after.
#ifndef MODELC_KERNELS_H
#define MODELC_KERNELS_H

#include "modelc/ops.h"
#include "modelc/status.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace mc::rt {

enum class DType : uint8_t { F32 = 0, F16 = 1, BF16 = 2, I32 = 3, I64 = 4, I1 = 5 };

size_t dtypeSize(DType t);
const char* dtypeName(DType t); // "f32", "f16", "bf16", "i32", "i64", "i1"
inline bool isFloat(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}
/// Whether a registry type list ("f32,f16,bf16"; see OpInfo::types) names
/// `type`; an empty list allows any.
bool typeListHas(const std::string& list, const std::string& type);
/// The list for a message: "f32, f16, bf16".
std::string typeListText(const std::string& list);

using Shape = std::vector<int64_t>;
int64_t numElements(const Shape& shape);

/// The most elements one tensor may have: 2^36 (256 GiB as f32, more than
/// any one device holds). Shapes that come from input (ONNX models, .npy
/// headers, artifacts, mc types, eager tensors) are checked against it
/// before anything is allocated for them (docs/reliability.md).
inline constexpr int64_t kMaxTensorElements = int64_t(1) << 36;
/// Ok with the element count of `shape` in *count, or an error saying
/// "shape [..] has a negative dimension" / "shape [..] has more than
/// 68719476736 (2^36) elements, the limit for one tensor" (overflow
/// included).
Status checkElementCount(const Shape& shape, int64_t* count = nullptr);
std::string shapeString(const Shape& shape); // "[4, 8]"

struct ConstTensor {
  DType dtype;
  Shape shape;
  const void* data;
};
struct MutTensor {
  DType dtype;
  Shape shape;
  void* data;
};

/// Elementwise and reduction kernels are selected by the op registry's OpId.
/// unary: Neg, Exp, Log, Tanh, Sin, Cos (and Tan, Asin, Acos, Atan, Sinh,
/// Cosh, Asinh, Acosh, Atanh: libm's), Sigmoid, Relu, Sqrt, Abs (f32, i32,
/// i64), Erf, Gelu (x * Phi(x), exact erf form; PyTorch's approximate='tanh'
/// form when tanhApproximation): f32. Not: i1 only. binary: Add, Sub, Mul, Div,
/// Maximum, Minimum (f32/i32/i64, NaN propagates), Pow (f32, std::pow
/// semantics). reduce: ReduceSum, ReduceMean, ReduceMax, ReduceMin (Max/Min
/// also i32/i64). Any other OpId is an error naming the op.

/// out = op(a); same shape and dtype. f32 for all ops; i32/i64 for Neg, Relu.
Status unary(OpId op, const ConstTensor& a, const MutTensor& out,
             bool tanhApproximation = false);
/// out = op(a, b); all three have one shape and dtype. f32, i32, i64.
Status binary(OpId op, const ConstTensor& a, const ConstTensor& b,
              const MutTensor& out);
/// Element type conversion between any two of the six dtypes (f->int
/// truncates toward zero, x->i1 is x != 0, f32->f16/bf16 rounds to nearest
/// even).
Status cast(const ConstTensor& a, const MutTensor& out);
/// out[i_0..i_n] = a[i_dims[0]..]: operand dim k maps to result dim dims[k],
/// operand dim size 1 broadcasts. Any dtype.
Status broadcastInDim(const ConstTensor& a, const std::vector<int64_t>& dims,
                      const MutTensor& out);
/// out.shape[i] == a.shape[perm[i]]. Any dtype.
Status transpose(const ConstTensor& a, const std::vector<int64_t>& perm,
                 const MutTensor& out);
/// Reduce over `dims` (sorted, unique); out has those dims removed, or kept
/// as size 1 when keepdim. f32 (Max also i32/i64).
Status reduce(OpId op, const ConstTensor& a,
              const std::vector<int64_t>& dims, bool keepdim,
              const MutTensor& out);
/// Numerically stable softmax along `axis` (max subtracted). f32.
Status softmax(const ConstTensor& a, int64_t axis, const MutTensor& out);
/// Batched matmul: a [..., M, K] (or [..., K, M] when transposeA), b [..., K,
/// N] (or [..., N, K]); batch dims equal; out [..., M, N]. f32 via BLAS.
Status matmul(const ConstTensor& a, const ConstTensor& b, bool transposeA,
              bool transposeB, const MutTensor& out);
/// Byte copy; same dtype and element count.
Status copy(const ConstTensor& a, const MutTensor& out);

//===--- Ops of real models (CNNs, transformers, ONNX graphs) ---===//

/// out = min(max(a, lo), hi); same shape and dtype. f32, i32, i64 (bounds
/// converted to the dtype). NaN stays NaN.
Status clamp(const ConstTensor& a, double lo, double hi, const MutTensor& out);
/// out (i1, one byte 0/1) = a <op> b; a and b of one shape and dtype (f32,
/// i32, i64, i1 for Eq/Ne). Comparisons with NaN are false except Ne.
Status compare(CompareOp op, const ConstTensor& a, const ConstTensor& b,
               const MutTensor& out);
/// out = pred ? a : b; pred is i1; all of one shape; a, b, out one dtype.
Status select(const ConstTensor& pred, const ConstTensor& a,
              const ConstTensor& b, const MutTensor& out);
/// log(softmax(a)) along axis, computed stably as x - max - log(sum(exp(x -
/// max))). f32.
Status logSoftmax(const ConstTensor& a, int64_t axis, const MutTensor& out);
/// Concatenation along `axis`; all inputs have out's rank and dtype and
/// equal sizes on the other dims. Any dtype.
Status concat(const std::vector<ConstTensor>& inputs, int64_t axis,
              const MutTensor& out);
/// out[i] = a[start + i * stride] per dimension; out.shape gives the count
/// of each dimension; strides >= 1. Any dtype.
Status slice(const ConstTensor& a, const std::vector<int64_t>& start,
             const std::vector<int64_t>& strides, const MutTensor& out);
/// out = take(data, indices, axis): out.shape = data.shape[:axis] +
/// indices.shape + data.shape[axis+1:]. indices i32 or i64; negative
/// indices count from the end (ONNX Gather); an index out of range is an
/// error naming it. data any dtype.
Status gather(const ConstTensor& data, const ConstTensor& indices,
              int64_t axis, const MutTensor& out);
/// gather's adjoint: out (f32) is zero but for out[i..., indices[j...],
/// k...] += updates[i..., j..., k...] (out.shape = updates.shape[:axis] +
/// [size] + updates.shape[axis + rank(indices):]). Repeated indices sum in
/// index order: the same bits on any thread count. indices i32 or i64,
/// negative from the end; one out of range is an error naming it, and
/// `out` is then unspecified.
Status scatterAdd(const ConstTensor& updates, const ConstTensor& indices,
                  int64_t axis, const MutTensor& out);
/// Constant padding: out.shape[d] = a.shape[d] + low[d] + high[d] (low,
/// high >= 0); new elements are `value` converted to the dtype. Any dtype.
Status pad(const ConstTensor& a, const std::vector<int64_t>& low,
           const std::vector<int64_t>& high, double value,
           const MutTensor& out);

struct Conv2dParams {
  int64_t strideH = 1, strideW = 1;
  int64_t padTop = 0, padLeft = 0, padBottom = 0, padRight = 0;
  int64_t dilationH = 1, dilationW = 1;
  int64_t groups = 1;
  /// Input [N, H, W, C] and result [N, OH, OW, O] (mc.conv2d's
  /// channels_last); the weight stays [O, C/groups, KH, KW].
  bool channelsLast = false;
};
/// NCHW convolution (cross-correlation, as PyTorch/ONNX): input [N, C, H, W],
/// weight [O, C/groups, KH, KW], out [N, O, OH, OW] with
/// OH = (H + padTop + padBottom - dilationH*(KH-1) - 1) / strideH + 1.
/// f32; im2col + BLAS sgemm per (image, group), or one sgemm for the whole
/// batch when the output maps are small; depthwise special-cased.
Status conv2d(const ConstTensor& input, const ConstTensor& weight,
              const Conv2dParams& params, const MutTensor& out);
/// Floats of scratch the conv2d below needs: the im2col matrix of one image
/// and group, [C/groups*KH*KW, OH*OW], or, when it batches the images (groups
/// 1, N > 1, OH*OW <= 256, not 1x1 stride 1 unpadded), that matrix for all
/// images plus the [O, N*OH*OW] product; 0 when it needs none (depthwise;
/// 1x1, stride 1, unpadded, one image or large maps) or when the shapes do
/// not fit. With less scratch (but at least one image's im2col matrix) it
/// computes per image.
size_t conv2dWorkspaceSize(const Shape& input, const Shape& weight,
                           const Shape& out, const Conv2dParams& params);
/// conv2d with caller-owned scratch of at least conv2dWorkspaceSize floats,
/// so that a session's run() does not allocate (the overload above
/// allocates it). The two conv2d overloads are the numerical reference;
/// bindConv2d below is the fast path tested against them.
Status conv2d(const ConstTensor& input, const ConstTensor& weight,
              const Conv2dParams& params, const MutTensor& out,
              float* workspace, size_t workspaceFloats);

/// A kernel bound to its tensors once and called many times (a session
/// calls it once per run); `workspace` is scratch of the size the binder
/// asked for, shared with other kernels that never run at the same time.
using BoundKernel = std::function<Status(void* workspace)>;

/// What a step's kernel learned while it ran about the tensor it wrote, for
/// the kernels of later steps that read that tensor (KernelRequest's
/// inputBounds and outputBound in modelc/device.h): every element is finite
/// and |v| <= maxAbs, or maxAbs is infinity when the run cannot tell (a NaN
/// or an inf is possible). A kernel that takes the slot on sets `written`
/// when it binds, and from then on writes maxAbs on every call before it
/// returns; a kernel that does not, never touches it. A reader trusts it:
/// a wrong bound is a wrong answer (DnnlConv's guard skips its scan of the
/// input on a finite bound).
struct ValueBound {
  bool written = false;
  double maxAbs = std::numeric_limits<double>::infinity();
};

/// What a fused region computes after its conv2d or matmul, in one call:
/// out = activation(anchor + bias + residual); each part optional, and
/// computed in f32 in that order (bias add, then residual add, then the
/// activation), as the reference ops `binary` and `unary` would.
struct Epilogue {
  const ConstTensor* bias = nullptr;     // conv2d: [C_out]; matmul: [N]
  const ConstTensor* residual = nullptr; // the anchor's output shape, dtype
  /// Relu, Clamp (to [clampMin, clampMax]), Gelu (exact erf form, or the
  /// tanh form with geluTanh), Sigmoid, Tanh, Hardswish, Exp, Abs.
  std::optional<OpId> activation;
  bool geluTanh = false;
  float clampMin = 0, clampMax = 0;
  /// Run-time bounds (ValueBound): the input's, published by the step that
  /// wrote it (null: none), and the slot for this result's (null: nobody
  /// reads it). Not part of what is computed. (A residual is scanned.)
  const ValueBound* inputBound = nullptr;
  ValueBound* resultBound = nullptr;
  bool empty() const { return !bias && !residual && !activation; }
};

/// Binds a conv2d whose epilogue runs inside the convolution (oneDNN with
/// post-ops on the CPU): f32 NCHW (or NHWC, params.channelsLast) tensors,
/// any stride, padding, dilation
/// and groups. `weightsConstant` promises that the weight's data is filled
/// now and never changes while the kernel lives (weights in an artifact's
/// constant section): they are then reordered once, here, into the
/// library's preferred layout. The tensors' data pointers are captured;
/// the bound kernel may be called any number of times. Returns a non-OK
/// Status, without side effects, when this combination (dtype, shape,
/// epilogue) is not supported, so that the caller falls back to conv2d
/// followed by the epilogue op by op.
Status bindConv2d(const ConstTensor& input, const ConstTensor& weight,
                  const Conv2dParams& params, const Epilogue& epilogue,
                  const MutTensor& out, bool weightsConstant,
                  BoundKernel* bound, size_t* workspaceBytes);

struct Pool2dParams {
  int64_t kernelH = 1, kernelW = 1;
  int64_t strideH = 1, strideW = 1;
  int64_t padTop = 0, padLeft = 0, padBottom = 0, padRight = 0;
  int64_t dilationH = 1, dilationW = 1;
  /// Input and result [N, H, W, C] (channels_last), else NCHW.
  bool channelsLast = false;
};
/// NCHW (or NHWC) max pooling. out's spatial size is given (so ceil_mode is the
/// caller's choice); a window that lies partly outside the padded input
/// only looks at the positions inside the input (PyTorch semantics). f32.
Status maxPool2d(const ConstTensor& input, const Pool2dParams& params,
                 const MutTensor& out);
/// NCHW average pooling; the divisor counts the window positions inside the
/// padded input when countIncludePad, else those inside the input (both as
/// PyTorch, including its ceil_mode rule that windows starting in the right
/// padding are clipped to input + padding). f32.
Status avgPool2d(const ConstTensor& input, const Pool2dParams& params,
                 bool countIncludePad, const MutTensor& out);
/// Inference batch norm over feature axis `axis`: out = (x - mean) /
/// sqrt(var + eps) * scale + offset; scale/offset/mean/var are 1-D of size
/// x.shape[axis]. f32.
Status batchNorm(const ConstTensor& x, const ConstTensor& scale,
                 const ConstTensor& offset, const ConstTensor& mean,
                 const ConstTensor& variance, double epsilon, int64_t axis,
                 const MutTensor& out);
/// Layer norm over dims [axis, rank): mean and biased variance per row,
/// out = (x - mean) / sqrt(var + eps) * gamma + beta; gamma/beta have shape
/// x.shape[axis:]. f32, two passes (mean, then variance) per row.
Status layerNorm(const ConstTensor& x, const ConstTensor& gamma,
                 const ConstTensor& beta, int64_t axis, double epsilon,
                 const MutTensor& out);

//===--- Random numbers: dropout ---===//

/// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
/// 3", SC'11; Random123's philox4x32_10, the generator of PyTorch's CUDA
/// dropout and JAX): the four 32-bit words of counter `ctr` under `key`. A
/// pure function of its arguments, so every element's random word is
/// computed where it is needed, in any order, on any device, with the same
/// result. The constants, for code generators that compute it themselves
/// (the cuda target's kernels):
inline constexpr uint32_t kPhiloxM0 = 0xD2511F53u, kPhiloxM1 = 0xCD9E8D57u;
inline constexpr uint32_t kPhiloxW0 = 0x9E3779B9u, kPhiloxW1 = 0xBB67AE85u;
inline constexpr int kPhiloxRounds = 10;
struct PhiloxWords {
  uint32_t w[4];
};
PhiloxWords philox4x32(PhiloxWords counter, uint32_t key0, uint32_t key1);

/// The random word of element `i` of mc.dropout: word i % 4 of Philox at
/// counter (i / 4 as two words, low first; `offset` as two words) under
/// key `seed` (two words).
uint32_t dropoutWord(uint64_t seed, uint64_t offset, uint64_t i);
/// Element i is kept when the top 24 bits of its word are below this:
/// round((1 - p) * 2^24), so p = 0 keeps everything and p = 1 nothing.
/// `p` must be in [0, 1].
uint32_t dropoutKeepBelow(double p);
/// The factor kept elements are scaled by, 1 / (1 - p) in f32 (0 for p = 1,
/// where nothing is kept).
float dropoutScale(double p);
/// Inverted dropout (mc.dropout): out[i] = a[i] * dropoutScale(p) where
/// element i is kept, else a[i] * 0 (PyTorch's product with the mask: a
/// dropped NaN or inf gives NaN); i the row-major index. f32, and f16 / bf16
/// computed in f32 and rounded once. The same (seed, offset) gives the same
/// mask; a gradient is the same op on the incoming gradient.
Status dropout(const ConstTensor& a, uint64_t seed, uint64_t offset, double p,
               const MutTensor& out);

/// f16 / bf16 <-> f32 conversions (round to nearest even).
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
float bf16ToFloat(uint16_t h);
uint16_t floatToBf16(float f);

} // namespace mc::rt

#endif // MODELC_KERNELS_H
