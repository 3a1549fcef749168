// bindConv2d where the runtime is built without oneDNN: never supported, so
// every caller falls back to the im2col reference conv2d.
#include "modelc/kernels.h"

namespace mc::rt {

Status bindConv2d(const ConstTensor &, const ConstTensor &,
                  const Conv2dParams &, const Epilogue &, const MutTensor &,
                  bool, BoundKernel *, size_t *) {
  return Status::error("conv2d: this runtime was built without oneDNN");
}

} // namespace mc::rt
