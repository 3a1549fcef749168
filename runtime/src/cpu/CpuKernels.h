// What the CPU kernel files share (internal to the runtime).
#ifndef MODELC_RUNTIME_CPU_CPUKERNELS_H
#define MODELC_RUNTIME_CPU_CPUKERNELS_H

#include "modelc/kernels.h"
#include "modelc/ops.h"

namespace mc::rt {

/// conv2d's strides, padding, dilation and groups from its step attributes
/// (lengths checked by the verifier).
Conv2dParams conv2dParams(const OpAttrs& attrs);

} // namespace mc::rt

#endif // MODELC_RUNTIME_CPU_CPUKERNELS_H
