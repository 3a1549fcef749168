// Threads for the CPU kernels: a static parallel-for over OpenMP (when the
// runtime is built with it), used only outside BLAS calls so that our
// threads and OpenBLAS's never run nested.
//
// Determinism: parallelFor splits [0, n) into one contiguous chunk per
// thread. Kernels only hand it work whose result does not depend on the
// split (elementwise maps, whole rows or planes per index), so a result is
// the same bits whatever the thread count and on every run.
#ifndef MODELC_RUNTIME_PARALLEL_H
#define MODELC_RUNTIME_PARALLEL_H

#include <algorithm>
#include <cstdint>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace mc::rt::detail {

/// Elementwise maps below this many elements run on the calling thread:
/// waking threads costs more than it saves.
inline constexpr int64_t kParallelGrain = 32 * 1024;

/// Threads a parallel region may use (OMP_NUM_THREADS, default: cores); 1
/// without OpenMP or inside a parallel region.
inline int maxThreads() {
#ifdef _OPENMP
  return omp_in_parallel() ? 1 : omp_get_max_threads();
#else
  return 1;
#endif
}

/// f(begin, end) over [0, n) in contiguous chunks of at least `grain`
/// items, one chunk per thread; inline when that makes one chunk.
template <typename F> void parallelFor(int64_t n, int64_t grain, F &&f) {
  if (n <= 0)
    return;
  int64_t chunks = std::min<int64_t>(maxThreads(), n / std::max<int64_t>(grain, 1));
  if (chunks <= 1) {
    f(int64_t(0), n);
    return;
  }
#ifdef _OPENMP
#pragma omp parallel num_threads(int(chunks))
  {
    int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    int64_t b = n * t / nt, e = n * (t + 1) / nt;
    if (b < e)
      f(b, e);
  }
#else
  f(int64_t(0), n);
#endif
}

} // namespace mc::rt::detail

#endif // MODELC_RUNTIME_PARALLEL_H
