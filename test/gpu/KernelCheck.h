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
  /// The largest |cpu - lavapipe| / max(1, |cpu|), where. f16 and bf16
  /// elements one ulp from the CPU's are not in it: they are counted in
  /// `oneUlp` (each op rounds an f32 result, and f32 results that differ
  /// in their last bits round to neighbours near a halfway point).
  double worst = 0;
  size_t oneUlp = 0;
  size_t worstAt = 0;
  double cpu = 0, lavapipe = 0;
  /// For a step whose kernel can fail: the CPU kernel's error (the element
  /// of a fused region's tile made the region's), and the message the
  /// device gives for the kernel's error record; "" for none. When the
  /// CPU fails, the outputs are not compared.
  std::string cpuError, deviceError;
};

/// Checks step `index` of `plan` at `batch` (0: static, else the session's
/// batch of a dynamic plan); inputs uniform in [-3, 3] ([0.1, 3] with
/// `positive`), constants from the plan. False, with *error, when a part
/// fails to run (the CPU kernel refuses, the lowering or the dispatch
/// fails); a mismatch is reported in *out, not as an error. A CPU kernel
/// that fails is an error unless the generated kernel has an error record
/// (then both messages are in *out).
/// `given`: inputs to use instead of random ones (an empty entry: random).
/// `inPlace`: per output, the input whose buffer the generated kernel
/// writes it into (-1: its own), as a plan that runs the step in place;
/// the CPU's kernel still writes separate buffers, the values to match.
bool checkStep(const codegen::Plan& plan, size_t index, int64_t batch,
               bool positive, VulkanRunner& runner, StepCheck* out,
               std::string* error,
               const std::vector<std::vector<uint8_t>>* given = nullptr,
               const std::vector<int>* inPlace = nullptr);

} // namespace mc::gputest

#endif // MODELC_TEST_GPU_KERNELCHECK_H
