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

/// A matmul of bf16 (or f16) operands and result through oneDNN's matmul
/// primitive: f32 accumulation and one rounding of each result, as the
/// reference (widen to f32, multiply, narrow) computes it, in another
/// order of the sum (so not bit for bit; and with oneDNN's AMX kernels its
/// order may depend on the thread count). Bound only where the CPU has
/// instructions for the dtype (AVX512_BF16, AMX; not oneDNN's reference or its
/// emulation, which are slower than the reference): else an error, and the
/// caller widens. Constant weights (`bConstant`) are reordered once, here, into
/// the kernel's layout; the data pointers are captured. oneDNN's scratchpad is
/// the workspace (`workspaceBytes`).
Status bindNarrowMatmul(const ConstTensor &a, const ConstTensor &b, bool transA,
                        bool transB, const MutTensor &out, bool bConstant,
                        BoundKernel *bound, size_t *workspaceBytes);

} // namespace mc::rt::detail

#endif // MODELC_RUNTIME_CPU_DNNLCONV_H
