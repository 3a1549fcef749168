// The kernels' thread pool (see Parallel.h): N-1 workers plus the caller.
//
// A job is one 64-bit state word, generation << 32 | chunks << 16 | next
// chunk, published with release. Every participant, the caller included,
// claims chunks with a compare-and-swap on that word until none is left, so
// a worker that is asleep, or shares the caller's core, never delays a
// job: the caller just runs its chunks. The job's fields are read only
// after a successful claim, and the caller publishes the next job only when
// every claimed chunk is done, so they never change under a reader. Idle
// workers spin briefly (pause, then sched_yield, so a thread that wants the
// core gets it), then sleep on a condition variable.
#include "Parallel.h"

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#ifdef MODELC_PARALLEL_OPENMP
#include <omp.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define MC_CPU_RELAX() _mm_pause()
#else
#define MC_CPU_RELAX() std::this_thread::yield()
#endif

namespace mc::rt::detail {

namespace {

thread_local bool tInChunk = false;

int configuredThreads() {
  unsigned hc = std::thread::hardware_concurrency();
  int cores = hc ? int(std::min(hc, 256u)) : 1;
  for (const char *var : {"MODELC_NUM_THREADS", "OMP_NUM_THREADS"})
    if (const char *v = std::getenv(var)) {
      char *end = nullptr;
      long n = std::strtol(v, &end, 10);
      // OpenMP's list form ("4,2": nested levels) gives the first level.
      bool whole = *end == '\0' ||
                   (*end == ',' && std::string(var) == "OMP_NUM_THREADS");
      if (end != v && whole && n >= 1)
        return int(std::min(n, 256L));
      // Said once (the pool is made once), as MODELC_GEMM's is.
      std::fprintf(stderr,
                   "modelc: %s=%s is not a thread count >= 1; ignored\n",
                   var, v);
    }
  return cores;
}

class Pool {
public:
  explicit Pool(int threads) : threads_(threads) {
    for (int i = 1; i < threads; ++i)
      workers_.emplace_back([this] { loop(); });
  }
  ~Pool() {
    stop_.store(true);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      state_.fetch_add(uint64_t(1) << 32); // a new generation wakes them
    }
    wake_.notify_all();
    for (std::thread &t : workers_)
      t.join();
  }

  bool run(int chunks, int64_t n, ChunkFn fn, void *ctx) {
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (!busy)
      return false;
    chunks = std::min({chunks, threads_, 0xffff});
    uint32_t gen = uint32_t(state_.load(std::memory_order_relaxed) >> 32) + 1;
    fn_ = fn;
    ctx_ = ctx;
    n_ = n;
    done_.store(0, std::memory_order_relaxed);
    state_.store(uint64_t(gen) << 32 | uint64_t(chunks) << 16,
                 std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
      { std::lock_guard<std::mutex> lock(mutex_); }
      wake_.notify_all();
    }
    work(gen);
    for (int spin = 0; done_.load(std::memory_order_acquire) < chunks; ++spin)
      if (spin < 64)
        MC_CPU_RELAX();
      else
        std::this_thread::yield();
    return true;
  }

private:
  /// Claims and runs chunks of job `gen` until none is left.
  void work(uint32_t gen) {
    bool outer = tInChunk;
    tInChunk = true;
    uint64_t s = state_.load(std::memory_order_acquire);
    for (;;) {
      if (uint32_t(s >> 32) != gen)
        break;
      uint32_t chunks = uint32_t(s >> 16) & 0xffff, next = uint32_t(s) & 0xffff;
      if (next >= chunks)
        break;
      if (!state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel,
                                        std::memory_order_acquire))
        continue;
      int64_t b = n_ * next / chunks, e = n_ * (next + 1) / chunks;
      fn_(ctx_, b, e);
      done_.fetch_add(1, std::memory_order_release);
      s = state_.load(std::memory_order_acquire);
    }
    tInChunk = outer;
  }

  void loop() {
    tInChunk = true;
    uint32_t seen = 0;
    for (;;) {
      auto gen = [&] {
        // seq_cst: pairs with run()'s store and sleepers_ check (Dekker).
        return uint32_t(state_.load(std::memory_order_seq_cst) >> 32);
      };
      // Back-to-back kernels (an add, then a relu) find us awake; after a
      // few tens of microseconds we leave the core to others and sleep.
      for (int spin = 0; gen() == seen && spin < 256 + 128; ++spin)
        if (spin < 256)
          MC_CPU_RELAX();
        else
          std::this_thread::yield();
      if (gen() == seen) {
        std::unique_lock<std::mutex> lock(mutex_);
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        wake_.wait(lock, [&] { return gen() != seen; });
        sleepers_.fetch_sub(1, std::memory_order_relaxed);
      }
      if (stop_.load())
        return;
      seen = gen();
      work(seen);
    }
  }

  const int threads_;
  std::vector<std::thread> workers_;
  std::mutex busy_;  // one job at a time
  std::mutex mutex_; // with wake_, for sleeping workers
  std::condition_variable wake_;
  std::atomic<uint64_t> state_{0}; // generation << 32 | chunks << 16 | next
  std::atomic<int> done_{0};       // chunks of the current job finished
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  ChunkFn fn_ = nullptr;
  void *ctx_ = nullptr;
  int64_t n_ = 0;
};

#ifndef MODELC_PARALLEL_OPENMP
Pool &pool() {
  static Pool p(configuredThreads());
  return p;
}
#endif

} // namespace

int maxThreads() {
  if (tInChunk)
    return 1;
  static const int n = configuredThreads();
  return n;
}

bool runChunks(int chunks, int64_t n, ChunkFn fn, void *ctx) {
  if (tInChunk || chunks <= 1)
    return false;
#ifdef MODELC_PARALLEL_OPENMP
  // The chunks of the pool's split, on OpenMP's threads: the team that
  // oneDNN's convolutions run on, so no second set of threads spins
  // against it.
  // One caller at a time, as with the pool: another thread's kernel runs
  // inline rather than oversubscribing the cores.
  static std::atomic<bool> busy{false};
  if (busy.exchange(true, std::memory_order_acquire))
    return false;
  chunks = std::min(chunks, maxThreads());
#pragma omp parallel num_threads(chunks)
  {
    int t = omp_get_thread_num(), team = omp_get_num_threads();
    tInChunk = true;
    for (int c = t; c < chunks; c += team)
      fn(ctx, n * c / chunks, n * (c + 1) / chunks);
    tInChunk = false;
  }
  busy.store(false, std::memory_order_release);
  return true;
#else
  return pool().run(chunks, n, fn, ctx);
#endif
}

} // namespace mc::rt::detail
