// ResNet-18 written in the eager frontend, run eagerly and traced. Writes:
//   OUT/resnet18.mlir, OUT/resnet18.mlirbc   the traced model
//   OUT/x.npy                                the example input
//   OUT/eager.npy                            the eager logits, the reference
#include "examples/resnet/resnet18.h"
#include "frontend/jit/Trace.h"
#include "modelc/npy.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace mc;

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help") {
    std::fprintf(stderr,
                 "usage: resnet18-example OUT_DIR [--batch N] [--size HW]\n");
    return argc < 2 ? 1 : 0;
  }
  std::string dir = argv[1];
  int64_t batch = 1, size = 224;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--batch")
      batch = std::atoll(argv[i + 1]);
    else if (flag == "--size")
      size = std::atoll(argv[i + 1]);
    else {
      std::fprintf(stderr, "resnet18-example: error: unknown flag '%s'\n",
                   flag.c_str());
      return 1;
    }
  }
  if (batch <= 0 || size < 32) {
    std::fprintf(stderr, "resnet18-example: error: --batch must be positive "
                         "and --size at least 32\n");
    return 1;
  }
  try {
    manualSeed(42);
    auto model = models::resnet18();
    models::randomizeBatchNorms(*model);
    Tensor x = Tensor::randn({batch, 3, size, size});
    auto start = std::chrono::steady_clock::now();
    Tensor eager = (*model)(x);
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - start)
                    .count();

    jit::TraceOptions options;
    options.inputNames = {"x"};
    options.outputNames = {"logits"};
    // stateDict(): the BatchNorm running statistics become named globals
    // too, not just the parameters.
    jit::TracedModule traced = jit::traceFunction(
        [&](const std::vector<Tensor>& in) {
          return std::vector<Tensor>{(*model)(in[0])};
        },
        {x}, model->stateDict(), model->namedModules(), options);
    traced.save(dir + "/resnet18.mlir");
    traced.save(dir + "/resnet18.mlirbc", /*bytecode=*/true);

    auto check = [](const rt::Status& s) {
      if (!s)
        throw Error(s.message());
    };
    check(rt::writeNpy(dir + "/x.npy", x.dtype(), x.shape(), x.rawData()));
    check(rt::writeNpy(dir + "/eager.npy", eager.dtype(), eager.shape(),
                       eager.rawData()));
    size_t params = 0;
    for (auto& [name, p] : model->namedParameters())
      params += p.numel();
    std::printf("resnet18-example: ResNet-18 (%zu parameters), input %s\n",
                params, x.describe().c_str());
    std::printf("resnet18-example: eager forward -> %s in %.0f ms\n",
                eager.describe().c_str(), ms);
    std::printf("resnet18-example: traced to %s/resnet18.mlir (and .mlirbc)\n",
                dir.c_str());
    std::printf("resnet18-example: wrote %s/x.npy and %s/eager.npy\n",
                dir.c_str(), dir.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "resnet18-example: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
