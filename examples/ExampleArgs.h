// Command-line values the example programs share: positive counts and a
// dynamic batch's MIN..MAX, each read whole (trailing junk is an error).
#ifndef MODELC_EXAMPLES_EXAMPLEARGS_H
#define MODELC_EXAMPLES_EXAMPLEARGS_H

#include "frontend/jit/Trace.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>

namespace mc::examples {

/// `text` as a positive integer; nullopt (after printing why, as
/// "PROGRAM: error: FLAG takes ...") when it is not one.
inline std::optional<int64_t> positiveArg(const char* program,
                                          const char* flag,
                                          const char* text) {
  char* end = nullptr;
  long long v = std::strtoll(text, &end, 10);
  if (end == text || *end || v <= 0) {
    std::fprintf(stderr, "%s: error: %s takes a positive integer, got '%s'\n",
                 program, flag, text);
    return std::nullopt;
  }
  return v;
}

/// `text` as MIN..MAX bounds of a dynamic batch (opt: the max); nullopt
/// (after printing why) when it is not that.
inline std::optional<jit::DynamicBatch> dynamicBatchArg(const char* program,
                                                        const char* text) {
  long long lo = 0, hi = 0;
  int used = 0;
  if (std::sscanf(text, "%lld..%lld%n", &lo, &hi, &used) != 2 ||
      text[used] != '\0') {
    std::fprintf(stderr,
                 "%s: error: --dynamic-batch takes MIN..MAX, got '%s'\n",
                 program, text);
    return std::nullopt;
  }
  return jit::DynamicBatch{lo, hi, 0};
}

} // namespace mc::examples

#endif // MODELC_EXAMPLES_EXAMPLEARGS_H
