// modelc-gemm-bench: the runtime's sgemm (detail::sgemm: the thread split,
// then one single-threaded product per part) through OpenBLAS and through
// oneDNN, on the products of the models in bench/ and test/; prints, per
// shape, the fastest of N calls of each (taken in turns, so the machine's
// drift hits both alike), GFLOP/s, the ratio, how far apart the two
// results are, and the one the runtime's default (auto) runs. The numbers
// behind that choice (docs/decisions.md). Threads: MODELC_NUM_THREADS / OMP_NUM_THREADS.
//   modelc-gemm-bench [--reps N]
#include "BenchUtil.h"
#include "KernelUtil.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

using namespace mc::rt;
using mc::bench::randomFloats;
using mc::bench::seconds;

namespace {

struct Product {
  const char *where;
  int64_t m, n, k;
  bool ta, tb;
};
const Product kProducts[] = {
    {"encoder qkv proj (batch 8, seq 128)", 1024, 384, 128, false, false},
    {"encoder ffn up", 1024, 512, 128, false, false},
    {"encoder ffn down", 1024, 128, 512, false, false},
    {"encoder out proj", 1024, 128, 128, false, false},
    {"attention q k^T (per head)", 128, 128, 32, false, true},
    {"attention p v (per head)", 128, 32, 128, false, false},
    {"resnet18 fc, batch 1", 1, 1000, 512, false, false},
    {"resnet18 fc, batch 8", 8, 1000, 512, false, false},
    {"digits mlp fwd (batch 64)", 64, 128, 64, false, false},
    {"digits mlp dW (batch 64)", 64, 128, 64, true, false},
    {"mlp 1024 wide (batch 256)", 256, 1024, 1024, false, false},
    {"mlp 1024 wide dW (batch 256)", 1024, 1024, 256, true, false},
    {"mlp 2048 wide (batch 512)", 512, 2048, 2048, false, false},
    {"im2col conv 3x3, 64 ch, 56x56", 64, 3136, 576, false, false},
    {"gpt2 lm head (seq 64, vocab 8k)", 64, 8192, 256, false, true},
};


} // namespace

int main(int argc, char **argv) {
  int reps = 20;
  for (int i = 1; i + 1 < argc; i += 2)
    if (!std::strcmp(argv[i], "--reps"))
      reps = std::max(1, std::atoi(argv[i + 1]));
  if (!detail::setGemmLibrary(detail::GemmLibrary::OneDnn)) {
    std::fprintf(stderr, "modelc-gemm-bench: this runtime has no oneDNN\n");
    return 1;
  }
  std::printf("sgemm through the runtime's split on %d thread(s), best of %d "
              "calls each, in turns; auto: the runtime's default\n\n",
              detail::maxThreads(), reps);
  std::printf("| product | m x n x k | OpenBLAS ms | oneDNN ms | OpenBLAS "
              "GFLOP/s | oneDNN GFLOP/s | oneDNN / OpenBLAS | rel diff | auto |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---|\n");
  unsigned seed = 1;
  for (const Product &p : kProducts) {
    std::vector<float> a = randomFloats(size_t(p.m * p.k), ++seed),
                       b = randomFloats(size_t(p.k * p.n), ++seed);
    std::vector<float> c[2];
    double best[2] = {1e30, 1e30};
    int64_t lda = p.ta ? p.m : p.k, ldb = p.tb ? p.k : p.n;
    // Enough calls per timing that each takes about a millisecond.
    double macs = double(p.m) * double(p.n) * double(p.k);
    int inner = int(std::max(1.0, 2e7 / macs));
    for (int r = 0; r < reps; ++r)
      for (int lib = 0; lib < 2; ++lib) {
        detail::setGemmLibrary(lib ? detail::GemmLibrary::OneDnn
                                   : detail::GemmLibrary::OpenBlas);
        c[lib].assign(size_t(p.m * p.n), NAN);
        double t0 = seconds();
        for (int i = 0; i < inner; ++i)
          detail::sgemm(p.ta, p.tb, p.m, p.n, p.k, a.data(), lda, b.data(),
                        ldb, c[lib].data(), p.n);
        best[lib] = std::min(best[lib], (seconds() - t0) / inner);
      }
    double num = 0, den = 0;
    for (size_t i = 0; i < c[0].size(); ++i) {
      double d = double(c[1][i]) - c[0][i];
      num += d * d;
      den += double(c[0][i]) * c[0][i];
    }
    double flop = 2 * macs;
    std::printf("| %s | %lld x %lld x %lld%s | %.4f | %.4f | %.1f | %.1f | "
                "%.2f | %.1e | %s |\n",
                p.where, (long long)p.m, (long long)p.n, (long long)p.k,
                p.ta ? " (A^T)" : p.tb ? " (B^T)" : "", best[0] * 1e3,
                best[1] * 1e3, flop / best[0] * 1e-9, flop / best[1] * 1e-9,
                best[1] / best[0], std::sqrt(num / std::max(den, 1e-300)),
                detail::gemmLibraryFor(detail::GemmLibrary::Auto, p.m, p.n,
                                       p.k) ==
                        detail::GemmLibrary::OneDnn
                    ? "oneDNN"
                    : "OpenBLAS");
  }
  return 0;
}
