// What the runtime's benchmark programs (modelc-conv-bench,
// modelc-gemm-bench) share: a clock and seeded random inputs.
#ifndef MODELC_TEST_RUNTIME_BENCHUTIL_H
#define MODELC_TEST_RUNTIME_BENCHUTIL_H

#include <chrono>
#include <random>
#include <vector>

namespace mc::bench {

inline double seconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// n floats uniform in [-1, 1), the same for the same seed.
inline std::vector<float> randomFloats(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(n);
  for (float &x : v)
    x = d(rng);
  return v;
}

} // namespace mc::bench

#endif // MODELC_TEST_RUNTIME_BENCHUTIL_H
