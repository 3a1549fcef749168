// A sequence model in the eager frontend: an LSTM reads a noisy sine wave
// and a linear head names its frequency (4 classes). Writes what the lit
// test (test/tools/sequence.test) and the GPU check compile, run and train:
//   OUT/seq.mlir                 the traced classifier: x [B, T, 1] -> logits
//   OUT/x.npy, OUT/eager.npy     an example batch and its eager logits
//   OUT/seq_train.mlir           forward + cross-entropy on (x, y), the input
//                                of `modelc compile --train`
//   OUT/x_train.npy, y_train.npy the training set (--samples waves)
// With --dynamic-batch MIN..MAX both graphs take any batch in the bounds.
#include "examples/ExampleArgs.h"
#include "frontend/Loss.h"
#include "frontend/jit/Trace.h"
#include "frontend/nn.h"
#include "modelc/npy.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <random>
#include <string>

using namespace mc;

namespace {

constexpr int64_t kSteps = 24;  // samples per wave
constexpr int64_t kClasses = 4; // 1, 2, 3 or 4 periods per wave

/// torch.nn.LSTM(1, hidden, batch_first=True) and a Linear on its last
/// hidden state.
class SequenceClassifier : public nn::Module {
public:
  explicit SequenceClassifier(int64_t hidden) {
    lstm = registerModule("lstm", std::make_shared<nn::LSTM>(
                                      1, hidden, 1, true, /*batchFirst=*/true));
    head =
        registerModule("head", std::make_shared<nn::Linear>(hidden, kClasses));
  }
  Tensor forward(const Tensor& x) override {
    return (*head)(squeeze(lstm->run(x).h, 0)); // h_n [1, B, H] -> [B, 4]
  }
  std::string typeName() const override { return "SequenceClassifier"; }
  std::shared_ptr<nn::LSTM> lstm;
  std::shared_ptr<nn::Linear> head;
};

/// n waves sin(2 pi k t / T + phase) + noise, k = label + 1, as x [n, T, 1]
/// and labels y [n].
std::pair<Tensor, Tensor> makeWaves(int64_t n, std::mt19937_64& gen) {
  Tensor x = Tensor::empty({n, kSteps, 1});
  Tensor y = Tensor::empty({n}, DType::I64);
  std::uniform_real_distribution<float> phase(0.0f, 6.2831853f);
  std::normal_distribution<float> noise(0.0f, 0.3f);
  for (int64_t i = 0; i < n; ++i) {
    int64_t label = static_cast<int64_t>(gen() % kClasses);
    y.data<int64_t>()[i] = label;
    float p = phase(gen);
    for (int64_t t = 0; t < kSteps; ++t)
      x.data<float>()[i * kSteps + t] =
          std::sin(6.2831853f * static_cast<float>((label + 1) * t) /
                       static_cast<float>(kSteps) +
                   p) +
          noise(gen);
  }
  return {x, y};
}

void save(const std::string& path, const Tensor& t) {
  rt::Status s = rt::writeNpy(path, t.dtype(), t.shape(), t.rawData());
  if (!s)
    throw Error(s.message());
}

} // namespace

int main(int argc, char** argv) {
  const char* usage = "usage: sequence-example OUT_DIR [--batch N] "
                      "[--dynamic-batch MIN..MAX] [--samples N] "
                      "[--hidden H]\n";
  if (argc < 2 || std::string(argv[1]) == "--help") {
    std::fprintf(stderr, "%s", usage);
    return argc < 2 ? 1 : 0;
  }
  std::string dir = argv[1];
  int64_t batch = 32, samples = 2048, hidden = 32;
  std::optional<jit::DynamicBatch> dynamic;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--batch" || a == "--samples" || a == "--hidden") &&
        i + 1 < argc) {
      std::optional<int64_t> v =
          examples::positiveArg("sequence-example", a.c_str(), argv[++i]);
      if (!v)
        return 1;
      (a == "--batch" ? batch : a == "--samples" ? samples : hidden) = *v;
    } else if (a == "--dynamic-batch" && i + 1 < argc) {
      dynamic = examples::dynamicBatchArg("sequence-example", argv[++i]);
      if (!dynamic)
        return 1;
    } else {
      std::fprintf(stderr, "sequence-example: error: unknown argument '%s'\n%s",
                   a.c_str(), usage);
      return 1;
    }
  }
  try {
    manualSeed(7);
    SequenceClassifier model(hidden);
    std::mt19937_64 gen(2026);
    auto [x, y] = makeWaves(batch, gen);
    Tensor eager = model(x);

    jit::TraceOptions options;
    options.inputNames = {"x"};
    options.outputNames = {"logits"};
    options.dynamicBatch = dynamic;
    jit::trace(model, x, options).save(dir + "/seq.mlir");

    jit::TraceOptions trainNames;
    trainNames.inputNames = {"x", "y"};
    trainNames.outputNames = {"loss"};
    trainNames.dynamicBatch = dynamic;
    jit::traceFunction(
        [&](const std::vector<Tensor>& in) {
          return std::vector<Tensor>{crossEntropy(model(in[0]), in[1])};
        },
        {x, y}, model.stateDict(), model.namedModules(), trainNames)
        .save(dir + "/seq_train.mlir");

    save(dir + "/x.npy", x);
    save(dir + "/eager.npy", eager);
    auto [xTrain, yTrain] = makeWaves(samples, gen);
    save(dir + "/x_train.npy", xTrain);
    save(dir + "/y_train.npy", yTrain);

    size_t params = 0;
    for (auto& [name, p] : model.namedParameters())
      params += p.numel();
    std::printf("sequence-example: LSTM(1, %lld) + Linear(%lld, %lld) "
                "(%zu parameters) on waves of %lld steps, batch %lld\n",
                static_cast<long long>(hidden), static_cast<long long>(hidden),
                static_cast<long long>(kClasses), params,
                static_cast<long long>(kSteps), static_cast<long long>(batch));
    std::printf("sequence-example: eager forward -> %s\n",
                eager.describe().c_str());
    std::printf("sequence-example: traced to %s/seq.mlir, training graph in "
                "%s/seq_train.mlir\n",
                dir.c_str(), dir.c_str());
    std::printf("sequence-example: wrote %lld training waves\n",
                static_cast<long long>(samples));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sequence-example: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
