// Runs one step of a plan twice, the CUDA target's generated kernel lowered
// through SPIR-V on lavapipe and the CPU runtime's kernel, on the same
// random inputs, and compares (docs/cuda.md, "Checking kernels on
// lavapipe"). Used by the kernel-kind tests and by modelc-kernel-check,
// which runs it on every generated kernel of a model.
#ifndef MODELC_TEST_GPU_KERNELCHECK_H
#define MODELC_TEST_GPU_KERNELCHECK_H

#include "VulkanRunner.h"

#include "codegen/Plan.h"

#include <string>

namespace mc::gputest {

struct StepCheck {
  /// Set when the step has no SPIR-V form (bf16) or no generated kernel.
  std::string skipped;
  std::string kind; // "elementwise", "rows", ...
  size_t elements = 0;
  /// The largest |cpu - lavapipe| / max(1, |cpu|), where.
  double worst = 0;
  size_t worstAt = 0;
  double cpu = 0, lavapipe = 0;
};

/// Checks step `index` of `plan` at `batch` (0: static, else the session's
/// batch of a dynamic plan); inputs uniform in [-3, 3] ([0.1, 3] with
/// `positive`), constants from the plan. False, with *error, when a part
/// fails to run (the CPU kernel refuses, the lowering or the dispatch
/// fails); a mismatch is reported in *out, not as an error.
bool checkStep(const codegen::Plan& plan, size_t index, int64_t batch,
               bool positive, VulkanRunner& runner, StepCheck* out,
               std::string* error);

} // namespace mc::gputest

#endif // MODELC_TEST_GPU_KERNELCHECK_H
