// modelc-gemm-bench: the runtime's sgemm (detail::sgemm: the thread split,
// then one single-threaded product per part) through OpenBLAS and through
// oneDNN, on the products of the models in bench/ and test/; prints, per
// shape, the fastest of N calls of each (taken in turns, so the machine's
// drift hits both alike), GFLOP/s, the ratio, how far apart the two
// results are, and the one the runtime's default (auto) runs. The numbers
// behind that choice (docs/decisions.md). Threads: MODELC_NUM_THREADS /
// OMP_NUM_THREADS.
//   modelc-gemm-bench [--reps N]
// --weights: instead, linear layers' products x W^T through the runtime's
// default (auto) sgemm, with W as PyTorch stores it ([out, in], read
// transposed) and as mc-pretranspose-weights stores it ([in, out]): the
// numbers behind the CPU target's choice (docs/benchmarks.md, "Weights in
// the layout the product reads").
//   modelc-gemm-bench --weights [--reps N]
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

/// Times two variants of one product in turns (the machine's drift hits
/// both alike): `run(v, c)` computes variant v into c. Fills c[v] with each
/// variant's result and best[v] with its fastest call, in seconds.
template <class Run>
void timeInTurns(int reps, const Product &p, Run run, std::vector<float> c[2],
                 double best[2]) {
  // Enough calls per timing that each takes about a millisecond.
  double macs = double(p.m) * double(p.n) * double(p.k);
  int inner = int(std::max(1.0, 2e7 / macs));
  best[0] = best[1] = 1e30;
  for (int r = 0; r < reps; ++r)
    for (int v = 0; v < 2; ++v) {
      c[v].assign(size_t(p.m * p.n), NAN);
      double t0 = seconds();
      for (int i = 0; i < inner; ++i)
        run(v, c[v].data());
      best[v] = std::min(best[v], (seconds() - t0) / inner);
    }
}

/// ||b - a|| / ||a||.
double relDiff(const std::vector<float> &a, const std::vector<float> &b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    double d = double(b[i]) - a[i];
    num += d * d;
    den += double(a[i]) * a[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

/// Linear layers: rows m, outputs n, inputs k.
const Product kLinears[] = {
    {"lstm h256 state step (batch 1)", 1, 1024, 256, false, true},
    {"lstm h256 state step (batch 8)", 8, 1024, 256, false, true},
    {"lstm h256 input projection (batch 8, seq 32)", 256, 1024, 128, false,
     true},
    {"resnet18 fc, batch 1", 1, 1000, 512, false, true},
    {"resnet18 fc, batch 8", 8, 1000, 512, false, true},
    {"mlp 1024 wide, batch 1", 1, 1024, 1024, false, true},
    {"bert-base ffn down, batch 1", 1, 768, 3072, false, true},
    {"bert-base ffn down, batch 8", 8, 768, 3072, false, true},
    {"mlp 1024 wide, batch 2", 2, 1024, 1024, false, true},
    {"mlp 1024 wide, batch 4", 4, 1024, 1024, false, true},
    {"mlp 1024 wide, batch 8", 8, 1024, 1024, false, true},
    {"mlp 1024 wide, batch 16", 16, 1024, 1024, false, true},
    {"mlp 1024 wide, batch 256", 256, 1024, 1024, false, true},
    {"mlp 4096 wide, batch 1", 1, 4096, 4096, false, true},
    {"mlp 4096 wide, batch 8", 8, 4096, 4096, false, true},
    {"digits mlp fwd (batch 64)", 64, 128, 64, false, true},
    {"encoder qkv proj (batch 8, seq 128)", 1024, 384, 128, false, true},
    {"encoder ffn up", 1024, 512, 128, false, true},
    {"encoder ffn down", 1024, 128, 512, false, true},
    {"bert-base ffn up (seq 128)", 128, 3072, 768, false, true},
};

/// --weights: each linear layer with W [n, k] read transposed, then W
/// [k, n] read as is, in turns; the runtime's default library choice.
int weightLayouts(int reps) {
  std::printf("linear layers x W^T through the runtime's sgemm (auto) on %d "
              "thread(s), best of %d calls each, in turns\n\n",
              detail::maxThreads(), reps);
  std::printf("| layer | m x n x k | W [n, k] read transposed, ms | W [k, n], "
              "ms | [k, n] / [n, k] | library | rel diff |\n");
  std::printf("|---|---|---:|---:|---:|---|---:|\n");
  unsigned seed = 100;
  for (const Product &p : kLinears) {
    std::vector<float> a = randomFloats(size_t(p.m * p.k), ++seed),
                       wt = randomFloats(size_t(p.k * p.n), ++seed),
                       w(wt.size());
    for (int64_t r = 0; r < p.n; ++r) // w [k, n] = wt [n, k] transposed
      for (int64_t c = 0; c < p.k; ++c)
        w[size_t(c * p.n + r)] = wt[size_t(r * p.k + c)];
    std::vector<float> c[2];
    double best[2];
    timeInTurns(
        reps, p,
        [&](int plain, float *out) {
          detail::sgemm(false, !plain, p.m, p.n, p.k, a.data(), p.k,
                        plain ? w.data() : wt.data(), plain ? p.n : p.k, out,
                        p.n);
        },
        c, best);
    std::printf("| %s | %lld x %lld x %lld | %.4f | %.4f | %.2f | %s | %.1e "
                "|\n",
                p.where, (long long)p.m, (long long)p.n, (long long)p.k,
                best[0] * 1e3, best[1] * 1e3, best[1] / best[0],
                detail::gemmLibraryFor(detail::GemmLibrary::Auto, p.m, p.n,
                                       p.k) == detail::GemmLibrary::OneDnn
                    ? "oneDNN"
                    : "OpenBLAS",
                relDiff(c[0], c[1]));
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  int reps = 20;
  bool weights = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--weights"))
      weights = true;
    else {
      std::fprintf(stderr,
                   "modelc-gemm-bench: unknown argument '%s' (usage: "
                   "modelc-gemm-bench [--weights] [--reps N])\n",
                   argv[i]);
      return 2;
    }
  }
  if (weights)
    return weightLayouts(reps);
  if (!detail::setGemmLibrary(detail::GemmLibrary::OneDnn)) {
    std::fprintf(stderr, "modelc-gemm-bench: this runtime has no oneDNN\n");
    return 1;
  }
  std::printf("sgemm through the runtime's split on %d thread(s), best of %d "
              "calls each, in turns; auto: the runtime's default (%s)\n\n",
              detail::maxThreads(), reps,
              detail::oneDnnHasAvx512()
                  ? "oneDNN runs AVX-512 here: oneDNN for every product"
                  : "oneDNN below k = 1024 and 2^27 multiply-adds");
  std::printf("| product | m x n x k | OpenBLAS ms | oneDNN ms | OpenBLAS "
              "GFLOP/s | oneDNN GFLOP/s | oneDNN / OpenBLAS | rel diff | auto |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---|\n");
  unsigned seed = 1;
  for (const Product &p : kProducts) {
    std::vector<float> a = randomFloats(size_t(p.m * p.k), ++seed),
                       b = randomFloats(size_t(p.k * p.n), ++seed);
    std::vector<float> c[2];
    double best[2];
    int64_t lda = p.ta ? p.m : p.k, ldb = p.tb ? p.k : p.n;
    timeInTurns(
        reps, p,
        [&](int lib, float *out) {
          detail::setGemmLibrary(lib ? detail::GemmLibrary::OneDnn
                                     : detail::GemmLibrary::OpenBlas);
          detail::sgemm(p.ta, p.tb, p.m, p.n, p.k, a.data(), lda, b.data(),
                        ldb, out, p.n);
        },
        c, best);
    double macs = double(p.m) * double(p.n) * double(p.k);
    double flop = 2 * macs;
    std::printf("| %s | %lld x %lld x %lld%s | %.4f | %.4f | %.1f | %.1f | "
                "%.2f | %.1e | %s |\n",
                p.where, (long long)p.m, (long long)p.n, (long long)p.k,
                p.ta ? " (A^T)" : p.tb ? " (B^T)" : "", best[0] * 1e3,
                best[1] * 1e3, flop / best[0] * 1e-9, flop / best[1] * 1e-9,
                best[1] / best[0], relDiff(c[0], c[1]),
                detail::gemmLibraryFor(detail::GemmLibrary::Auto, p.m, p.n,
                                       p.k) ==
                        detail::GemmLibrary::OneDnn
                    ? "oneDNN"
                    : "OpenBLAS");
  }
  return 0;
}
