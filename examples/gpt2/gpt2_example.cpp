// A tiny GPT-2-style language model written in the eager frontend, run
// eagerly and traced. Writes:
//   OUT/gpt2.mlir, OUT/gpt2.mlirbc   the traced model (ids -> logits)
//   OUT/ids.npy                      the example token ids (i64)
//   OUT/eager.npy                    the eager logits, the reference
#include "examples/gpt2/gpt2_block.h"
#include "frontend/jit/Trace.h"
#include "modelc/npy.h"

#include <cstdio>
#include <random>
#include <string>

using namespace mc;

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help") {
    std::fprintf(stderr, "usage: gpt2-example OUT_DIR\n");
    return argc < 2 ? 1 : 0;
  }
  std::string dir = argv[1];
  try {
    manualSeed(42);
    models::GPT2Config config;
    config.vocabSize = 512;
    config.maxPositions = 64;
    config.dModel = 64;
    config.numHeads = 4;
    config.numLayers = 2;
    auto model = std::make_shared<models::GPT2>(config);
    const int64_t batch = 2, seq = 16;
    Tensor ids = Tensor::empty({batch, seq}, DType::I64);
    std::uniform_int_distribution<int64_t> token(0, config.vocabSize - 1);
    for (int64_t i = 0; i < ids.numel(); ++i)
      ids.data<int64_t>()[i] = token(defaultGenerator());
    Tensor eager = (*model)(ids);

    jit::TraceOptions options;
    options.inputNames = {"ids"};
    options.outputNames = {"logits"};
    jit::TracedModule traced = jit::traceFunction(
        [&](const std::vector<Tensor>& in) {
          return std::vector<Tensor>{(*model)(in[0])};
        },
        {ids}, model->stateDict(), model->namedModules(), options);
    traced.save(dir + "/gpt2.mlir");
    traced.save(dir + "/gpt2.mlirbc", /*bytecode=*/true);

    auto check = [](const rt::Status& s) {
      if (!s)
        throw Error(s.message());
    };
    check(rt::writeNpy(dir + "/ids.npy", ids.dtype(), ids.shape(),
                       ids.rawData()));
    check(rt::writeNpy(dir + "/eager.npy", eager.dtype(), eager.shape(),
                       eager.rawData()));
    size_t params = 0;
    for (auto& [name, p] : model->namedParameters())
      params += p.numel();
    std::printf("gpt2-example: GPT-2-style decoder, %lld blocks, d=%lld, "
                "%lld heads, vocab %lld (%zu parameters)\n",
                static_cast<long long>(config.numLayers),
                static_cast<long long>(config.dModel),
                static_cast<long long>(config.numHeads),
                static_cast<long long>(config.vocabSize), params);
    std::printf("gpt2-example: eager forward %s -> %s\n",
                ids.describe().c_str(), eager.describe().c_str());
    std::printf("gpt2-example: traced to %s/gpt2.mlir (and .mlirbc)\n",
                dir.c_str());
    std::printf("gpt2-example: wrote %s/ids.npy and %s/eager.npy\n",
                dir.c_str(), dir.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpt2-example: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
