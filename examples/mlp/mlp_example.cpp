// The demo's model: an MLP softmax classifier written in the eager frontend,
// run eagerly and traced. Writes what the rest of the demo compiles and runs:
//   OUT/mlp.mlir, OUT/mlp.mlirbc   the traced model (text and bytecode)
//   OUT/x.npy                      the example input
//   OUT/eager.npy                  the eager output, the reference
//   OUT/mlp_train.mlir             forward + cross-entropy on (x, y), the
//                                  input of `modelc compile --train`
// With --dynamic-batch MIN..MAX both graphs take any batch in the bounds
// (the example's batch, --batch, must lie in them).
#include "examples/ExampleArgs.h"
#include "frontend/Loss.h"
#include "frontend/jit/Trace.h"
#include "frontend/nn.h"
#include "modelc/npy.h"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

using namespace mc;

int main(int argc, char** argv) {
  const char* usage =
      "usage: mlp-example OUT_DIR [--batch N] [--dynamic-batch MIN..MAX]\n";
  if (argc < 2 || std::string(argv[1]) == "--help") {
    std::fprintf(stderr, "%s", usage);
    return argc < 2 ? 1 : 0;
  }
  std::string dir = argv[1];
  int64_t batch = 8;
  std::optional<jit::DynamicBatch> dynamic;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--batch" && i + 1 < argc) {
      std::optional<int64_t> v =
          examples::positiveArg("mlp-example", "--batch", argv[++i]);
      if (!v)
        return 1;
      batch = *v;
    } else if (a == "--dynamic-batch" && i + 1 < argc) {
      dynamic = examples::dynamicBatchArg("mlp-example", argv[++i]);
      if (!dynamic)
        return 1;
    } else {
      std::fprintf(stderr, "mlp-example: error: unknown argument '%s'\n%s",
                   a.c_str(), usage);
      return 1;
    }
  }
  try {
    manualSeed(42);
    // 8x8 images in, 10 classes out: the shape of scikit-learn's digits.
    auto model = std::make_shared<nn::Sequential>(
        std::initializer_list<std::shared_ptr<nn::Module>>{
            std::make_shared<nn::Linear>(64, 128),
            std::make_shared<nn::ReLU>(),
            std::make_shared<nn::Linear>(128, 64),
            std::make_shared<nn::Tanh>(),
            std::make_shared<nn::Linear>(64, 10),
            std::make_shared<nn::Softmax>(1),
        });
    Tensor x = Tensor::randn({batch, 64});
    Tensor eager = (*model)(x);

    jit::TraceOptions options;
    options.inputNames = {"x"};
    options.outputNames = {"probs"};
    options.dynamicBatch = dynamic;
    jit::TracedModule traced = jit::trace(*model, x, options);
    traced.save(dir + "/mlp.mlir");
    traced.save(dir + "/mlp.mlirbc", /*bytecode=*/true);

    // The training graph: logits (no softmax) and cross-entropy on integer
    // labels; `modelc compile --train` differentiates it.
    nn::Sequential classifier(
        {model->children()[0].second, model->children()[1].second,
         model->children()[2].second, model->children()[3].second,
         model->children()[4].second});
    Tensor labels = Tensor::zeros({batch}, DType::I64);
    jit::TraceOptions trainNames;
    trainNames.inputNames = {"x", "y"};
    trainNames.outputNames = {"loss"};
    trainNames.dynamicBatch = dynamic;
    jit::traceFunction(
        [&](const std::vector<Tensor>& in) {
          return std::vector<Tensor>{crossEntropy(classifier(in[0]), in[1])};
        },
        {x, labels}, classifier.stateDict(), classifier.namedModules(),
        trainNames)
        .save(dir + "/mlp_train.mlir");

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
    std::printf("mlp-example: MLP 64-128-64-10 (%zu parameters), batch %lld\n",
                params, static_cast<long long>(batch));
    std::printf("mlp-example: eager forward -> %s\n", eager.describe().c_str());
    std::printf("mlp-example: traced to %s/mlp.mlir (and .mlirbc)\n",
                dir.c_str());
    std::printf("mlp-example: wrote %s/x.npy and %s/eager.npy\n", dir.c_str(),
                dir.c_str());
    std::printf("mlp-example: training graph (forward + cross-entropy) in "
                "%s/mlp_train.mlir\n",
                dir.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mlp-example: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
