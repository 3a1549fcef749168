// bindConv2d where the runtime is built without oneDNN: never supported, so
// every caller falls back to the im2col reference conv2d.
#include "cpu/DnnlConv.h"

namespace mc::rt {

Status detail::bindConv2d(const ConstTensor &, const ConstTensor &,
                          const Conv2dParams &, const Epilogue &,
                          const MutTensor &, bool, ConvLayout, BoundKernel *,
                          size_t *) {
  return Status::error("conv2d: this runtime was built without oneDNN");
}

Status detail::bindNarrowMatmul(const ConstTensor &, const ConstTensor &, bool,
                                bool, const MutTensor &, bool, BoundKernel *,
                                size_t *) {
  return Status::error("matmul: this runtime was built without oneDNN");
}

Status bindConv2d(const ConstTensor &input, const ConstTensor &weight,
                  const Conv2dParams &params, const Epilogue &epilogue,
                  const MutTensor &out, bool weightsConstant,
                  BoundKernel *bound, size_t *workspaceBytes) {
  return detail::bindConv2d(input, weight, params, epilogue, out,
                            weightsConstant, detail::ConvLayout::Auto, bound,
                            workspaceBytes);
}

} // namespace mc::rt
