// The oneDNN convolution's choice of activation layout, exposed to the
// runtime's benchmarks and tests (modelc/kernels.h's bindConv2d picks it
// per shape).
#ifndef MODELC_RUNTIME_CPU_DNNLCONV_H
#define MODELC_RUNTIME_CPU_DNNLCONV_H

#include "modelc/kernels.h"

namespace mc::rt::detail {

/// Plain: the primitive reads and writes NCHW; Blocked: source and
/// destination are reordered to and from the layout the primitive prefers;
/// Auto: bindConv2d's per-shape choice.
enum class ConvLayout { Auto, Plain, Blocked };

Status bindConv2d(const ConstTensor &input, const ConstTensor &weight,
                  const Conv2dParams &params, const Epilogue &epilogue,
                  const MutTensor &out, bool weightsConstant,
                  ConvLayout layout, BoundKernel *bound,
                  size_t *workspaceBytes);

} // namespace mc::rt::detail

#endif // MODELC_RUNTIME_CPU_DNNLCONV_H
