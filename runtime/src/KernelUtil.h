// Helpers shared by the kernel files: error messages and shape checks that
// never allocate on success (run() must not allocate).
#ifndef MODELC_RUNTIME_KERNELUTIL_H
#define MODELC_RUNTIME_KERNELUTIL_H

#include "modelc/kernels.h"
#include "modelc/runtime.h"

#include <string>

namespace mc::rt::detail {

/// Strided kernels index with fixed arrays of this size (no allocation).
inline constexpr int kMaxRank = MC_MAX_RANK;

inline std::string typeString(DType t, const Shape &s) {
  return std::string(dtypeName(t)) + shapeString(s);
}

inline Status unsupportedDType(const char *op, DType t, const char *supported) {
  return Status::error(std::string(op) + ": unsupported dtype " + dtypeName(t) +
                       " (supported: " + supported + ")");
}

inline Status checkRank(const char *op, const char *what, const Shape &s) {
  if (s.size() > size_t(kMaxRank))
    return Status::error(std::string(op) + ": " + what + " has rank " +
                         std::to_string(s.size()) + ", more than the " +
                         std::to_string(kMaxRank) + " the kernels support");
  for (int64_t d : s)
    if (d < 0)
      return Status::error(std::string(op) + ": " + what + " has shape " +
                           shapeString(s) + " with a negative dimension");
  return Status::ok();
}

/// Row-major strides of `s` into `strides` (s.size() <= kMaxRank).
inline void contiguousStrides(const Shape &s, int64_t *strides) {
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    strides[i] = acc;
    acc *= s[i];
  }
}

} // namespace mc::rt::detail

#endif // MODELC_RUNTIME_KERNELUTIL_H
