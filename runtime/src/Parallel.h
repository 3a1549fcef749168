// Threads for the CPU kernels: a static parallel-for over a small pool of
// the runtime's own, used only between BLAS calls (OpenBLAS has its own
// threads; the two never run nested).
//
// Why not OpenMP: libgomp's idle threads spin for milliseconds after each
// parallel region (unless OMP_WAIT_POLICY=passive is set before the
// process starts), which on a 2-core machine halves the speed of the sgemm
// that follows; ResNet-18 ran 4x slower. This pool's workers spin only
// briefly, yielding, then sleep.
//
// Except with oneDNN (MODELC_PARALLEL_OPENMP): its convolutions run on
// libgomp's threads, and a second set of spinning threads next to them
// made the elementwise steps between convolutions twice as slow. There the
// same chunks run in an OpenMP parallel region instead: one team for
// everything, as in PyTorch (docs/decisions.md, "CPU convolution through
// oneDNN").
//
// Threads: MODELC_NUM_THREADS, else OMP_NUM_THREADS, else the number of
// cores (read once, at the first parallel kernel).
//
// Determinism: parallelFor splits [0, n) into one contiguous chunk per
// thread. Kernels only hand it work whose result does not depend on the
// split (elementwise maps, whole rows or planes per index), so a result is
// the same bits whatever the thread count, on every run.
#ifndef MODELC_RUNTIME_PARALLEL_H
#define MODELC_RUNTIME_PARALLEL_H

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace mc::rt::detail {

/// Elementwise maps below this many elements run on the calling thread:
/// waking threads costs more than it saves.
inline constexpr int64_t kParallelGrain = 32 * 1024;

/// Threads parallelFor may use (1 inside a parallelFor chunk).
int maxThreads();

using ChunkFn = void (*)(void *ctx, int64_t begin, int64_t end);
/// Runs fn over `chunks` contiguous chunks of [0, n), one per thread; false
/// (nothing run) when the pool is busy with another caller's work.
bool runChunks(int chunks, int64_t n, ChunkFn fn, void *ctx);

/// f(begin, end) over [0, n) in contiguous chunks of at least `grain`
/// items, one chunk per thread; inline when that makes one chunk, inside a
/// chunk, or while another thread has the pool.
template <typename F> void parallelFor(int64_t n, int64_t grain, F &&f) {
  if (n <= 0)
    return;
  int64_t chunks =
      std::min<int64_t>(maxThreads(), n / std::max<int64_t>(grain, 1));
  if (chunks > 1) {
    using Fn = std::remove_reference_t<F>;
    ChunkFn tramp = [](void *ctx, int64_t b, int64_t e) {
      (*static_cast<Fn *>(ctx))(b, e);
    };
    if (runChunks(int(chunks), n, tramp,
                  const_cast<void *>(static_cast<const void *>(&f))))
      return;
  }
  f(int64_t(0), n);
}

} // namespace mc::rt::detail

#endif // MODELC_RUNTIME_PARALLEL_H
