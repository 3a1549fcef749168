// modelc-conv-bench: the convolutions of ResNet-18 (224x224) through the
// im2col + OpenBLAS reference and through oneDNN with plain NCHW, blocked
// (reordered per call) or NHWC activations (mc.conv2d's channels_last, as
// mc-channels-last makes them); prints the fastest of N calls of each,
// taken in turns so the machine's drift hits all four alike. The numbers
// behind bindConv2d's choice of layout and mc-channels-last
// (docs/decisions.md).
//   modelc-conv-bench [--batch N]... [--reps N]
#include "BenchUtil.h"
#include "cpu/DnnlConv.h"
#include "modelc/kernels.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace mc::rt;
using mc::bench::randomFloats;
using mc::bench::seconds;

namespace {

struct Conv {
  int64_t c, hw, o, k, stride, pad, count; // count: how many in ResNet-18
};
const Conv kResNet18[] = {
    {3, 224, 64, 7, 2, 3, 1},   {64, 56, 64, 3, 1, 1, 4},
    {64, 56, 128, 3, 2, 1, 1},  {64, 56, 128, 1, 2, 0, 1},
    {128, 28, 128, 3, 1, 1, 3}, {128, 28, 256, 3, 2, 1, 1},
    {128, 28, 256, 1, 2, 0, 1}, {256, 14, 256, 3, 1, 1, 3},
    {256, 14, 512, 3, 2, 1, 1}, {256, 14, 512, 1, 2, 0, 1},
    {512, 7, 512, 3, 1, 1, 3},
};


} // namespace

int main(int argc, char **argv) {
  std::vector<int64_t> batches;
  int reps = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--batch"))
      batches.push_back(std::atoll(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--reps"))
      reps = std::atoi(argv[i + 1]);
  }
  if (batches.empty())
    batches = {1, 8};
  std::printf("| batch | conv (C->O, k, stride, map) | x | im2col ms | oneDNN "
              "plain ms | oneDNN blocked ms | oneDNN NHWC ms |\n"
              "|---|---|---|---|---|---|---|\n");
  constexpr int kWays = 4;
  for (int64_t n : batches) {
    double total[kWays] = {0, 0, 0, 0};
    for (const Conv &c : kResNet18) {
      Conv2dParams p;
      p.strideH = p.strideW = c.stride;
      p.padTop = p.padLeft = p.padBottom = p.padRight = c.pad;
      int64_t ohw = (c.hw + 2 * c.pad - c.k) / c.stride + 1;
      Shape xs{n, c.c, c.hw, c.hw}, ws{c.o, c.c, c.k, c.k},
          ys{n, c.o, ohw, ohw}, xl{n, c.hw, c.hw, c.c}, yl{n, ohw, ohw, c.o};
      std::vector<float> x = randomFloats(size_t(numElements(xs)), 1),
                         w = randomFloats(size_t(numElements(ws)), 2),
                         y(size_t(numElements(ys)));
      ConstTensor in{DType::F32, xs, x.data()}, wt{DType::F32, ws, w.data()};
      MutTensor out{DType::F32, ys, y.data()};
      // The same values read as NHWC (only the time is compared).
      ConstTensor inLast{DType::F32, xl, x.data()};
      MutTensor outLast{DType::F32, yl, y.data()};
      Conv2dParams last = p;
      last.channelsLast = true;
      BoundKernel k[kWays];
      size_t bytes[kWays] = {0, 0, 0, 0};
      bytes[0] = conv2dWorkspaceSize(xs, ws, ys, p) * sizeof(float);
      k[0] = [&](void *ws) {
        return conv2d(in, wt, p, out, static_cast<float *>(ws),
                      bytes[0] / sizeof(float));
      };
      const detail::ConvLayout layouts[] = {detail::ConvLayout::Plain,
                                            detail::ConvLayout::Blocked};
      for (int m = 1; m < 3; ++m) {
        Status st = detail::bindConv2d(in, wt, p, Epilogue{}, out, true,
                                       layouts[m - 1], &k[m], &bytes[m]);
        if (!st) {
          std::fprintf(stderr, "%s\n", st.message().c_str());
          return 1;
        }
      }
      if (Status st = bindConv2d(inLast, wt, last, Epilogue{}, outLast, true,
                                 &k[3], &bytes[3]);
          !st) {
        std::fprintf(stderr, "%s\n", st.message().c_str());
        return 1;
      }
      size_t most = *std::max_element(bytes, bytes + kWays);
      std::vector<float> scratch(most / sizeof(float) + 16);
      double best[kWays] = {1e9, 1e9, 1e9, 1e9};
      for (int r = 0; r < reps + 2; ++r)
        for (int m = 0; m < kWays; ++m) {
          double t0 = seconds();
          if (!k[m](scratch.data()))
            return 1;
          if (r >= 2) // two warm-up calls
            best[m] = std::min(best[m], seconds() - t0);
        }
      std::printf("| %lld | %lld->%lld, %lldx%lld, s%lld, %lld | %lld | %.3f | "
                  "%.3f | %.3f | %.3f |\n",
                  (long long)n, (long long)c.c, (long long)c.o, (long long)c.k,
                  (long long)c.k, (long long)c.stride, (long long)c.hw,
                  (long long)c.count, best[0] * 1e3, best[1] * 1e3,
                  best[2] * 1e3, best[3] * 1e3);
      for (int m = 0; m < kWays; ++m)
        total[m] += best[m] * double(c.count);
    }
    std::printf("| %lld | all 20 convs of ResNet-18 | | %.2f | %.2f | %.2f | "
                "%.2f |\n",
                (long long)n, total[0] * 1e3, total[1] * 1e3, total[2] * 1e3,
                total[3] * 1e3);
  }
  return 0;
}
