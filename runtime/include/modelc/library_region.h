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
///   broadcast_in_dim(in bias [C], dims [1])) in either order, then
///   optionally relu; every op of the output's dtype and shape.
/// Not an attention region (ATTENTION, the step's attribute). Shapes of
/// the anchor itself (the matmul's or conv's own rule) are the device's to
/// check when it binds the call.
LibraryRegion matchLibraryRegion(const std::vector<RegionOp>& body,
                                 const std::vector<ConstTensor>& inputs,
                                 DType outputDtype, const Shape& outputShape,
                                 bool attention);

} // namespace mc::rt

#endif // MODELC_LIBRARY_REGION_H
