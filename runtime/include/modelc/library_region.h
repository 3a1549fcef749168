// The fused regions a device runs as one library call: a matmul with
// cuBLASLt's epilogue (bias, relu or tanh-gelu), a conv2d with a channel
// bias and relu (one cuDNN graph). One matcher, MLIR-free, for both sides
// of the contract: the cuda target keeps such a region whole (and splits
// any other region led by a matmul or conv2d), and the cuda device binds
// exactly what it accepts. Before, each side had its own copy of the
// rules, and a region one accepted and the other refused would have failed
// only on a GPU, at load.
#ifndef MODELC_LIBRARY_REGION_H
#define MODELC_LIBRARY_REGION_H

#include "modelc/device.h"
#include "modelc/kernels.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mc::rt {

struct LibraryRegion {
  enum class Kind { None, MatmulEpilogue, ConvEpilogue };
  enum class Activation { None, Relu, GeluTanh };
  Kind kind = Kind::None;
  /// The anchor's operands: step inputs.
  uint32_t lhs = 0, rhs = 0;
  /// The step input added as the bias; -1 without one.
  int64_t bias = -1;
  Activation activation = Activation::None;
  /// Kind::None: what does not fit (for the device's error message).
  std::string why;
};

/// Matches a fused region (BODY, its step's INPUTS, only dtypes and shapes
/// read, and its OUTPUT's dtype and shape):
/// - MatmulEpilogue: matmul(in a, in b), optionally its reshape straight
///   after, optionally add(value, broadcast_in_dim(in bias [N], dims
///   [last])) in either order, then optionally relu or gelu with
///   tanh_approximation (cuBLASLt's GELU epilogue is the tanh form); every
///   op of the output's dtype, the bias's N the output's last dim.
/// - ConvEpilogue: conv2d(in a, in b), optionally add(value,
///   broadcast_in_dim(in bias [C], dims [1], or [3] when the conv2d is
///   channels_last)) in either order, then optionally relu; every op of
///   the output's dtype and shape.
/// Not an attention region (ATTENTION, the step's attribute). Shapes of
/// the anchor itself (the matmul's or conv's own rule) are the device's to
/// check when it binds the call.
LibraryRegion matchLibraryRegion(const std::vector<RegionOp>& body,
                                 const std::vector<ConstTensor>& inputs,
                                 DType outputDtype, const Shape& outputShape,
                                 bool attention);

/// An attention region (mc-fuse's; the step's ATTENTION attribute) in the
/// form cuDNN's fused attention runs, O = softmax(s * (q k) + mask) v:
///   [q' = mul(q, s) | mul(s, q) | div(q, s)]        q scaled first
///   S = matmul(q or q', k)     k [.., d, skv], or [.., skv, d] with
///                              transpose_b; no transpose_a
///   then casts (between f32, f16 and bf16), at most one scale (mul by s
///   either side, or div by s; one scale in all) and then at most one
///   mask add (either side) of broadcast_in_dim(in m) or of an input of
///   the scores' shape (a mask added before the scale is refused: cuDNN
///   scales, then adds)
///   P = softmax(S', last dim), [cast], O = matmul(P, v)   v [.., skv, dv]
/// with q, k, v, m and s the step's inputs, s of rank 0 (the splat
/// constant mc-fuse passes), and nothing else in the body; and within
/// what cuDNN's fused attention takes (its documented limits): q, k, v and
/// the output of one dtype, f16 or bf16, rank 3 ([heads, s, d]) or 4
/// ([b, heads, s, d]), k read with transpose_b (its head dim contiguous,
/// as cuDNN's engines read it; cuDNN 9.19's heuristic crashes for Hopper
/// on a k stored [.., d, s]), the head dim d and v's dv equal, a multiple of 8,
/// at most 128 (the A100's limit), the mask f32 or the I/O dtype. The scale's
/// value is the caller's: the cuda target keeps such a region only when s
/// is a constant, and the device reads it once at bind.
struct AttentionRegion {
  bool ok = false;
  std::string why; // !ok: what does not fit
  uint32_t q = 0, k = 0, v = 0;
  bool kTransposed = false; // k is [.., skv, d] (the matmul's transpose_b)
  int64_t scale = -1;       // the rank-0 input, or -1
  bool scaleDivides = false;
  bool scaleBeforeMatmul = false;
  int64_t mask = -1;               // the input added to the scores, or -1
  std::vector<int64_t> maskDims;   // its broadcast_in_dim dims, or empty
  bool maskBroadcast = false;      // read through a broadcast_in_dim
  DType maskDtype = DType::F32;    // the add's dtype
};

AttentionRegion matchAttentionRegion(const std::vector<RegionOp>& body,
                                     const std::vector<ConstTensor>& inputs,
                                     DType outputDtype,
                                     const Shape& outputShape);

} // namespace mc::rt

#endif // MODELC_LIBRARY_REGION_H
