// modelc-train-graphs: the training graphs of bench/gpu_peers.py's AMP
// training rows, traced in the C++ frontend (a training step needs a traced
// loss; an ONNX export has none): the loss is mean(model(x)^2), as the
// PyTorch side's `m(x).float().pow(2).mean()`.
//   mlp          3 x Linear(W, W) with ReLU between, x [B, W]
//   transformer  L x TransformerEncoderLayer(D, H, FF, dropout 0,
//                batch_first), x [B, S, D]
// Inputs are traced as shapes only (nothing runs); every parameter is one
// seeded block of 4096 values tiled, so the artifacts gzip small (as the
// inference rows' weights; speed does not depend on the values).
//   resnet18     examples/resnet's ResNet-18 in training mode (batch norm
//                on the batch's statistics), x [B, 3, HW, HW]
//   embedding    Embedding(V, D) then the transformer's layers, x the
//                token ids [B, S] (i64): BERT's input side
//   modelc-train-graphs OUT_DIR [--small] [--mlp WIDTH,BATCH]
//       [--transformer B,S,D,HEADS,FF,LAYERS] [--resnet18 B,HW]
//       [--embedding VOCAB]
// writes OUT_DIR/mlp_train.mlir, OUT_DIR/transformer_train.mlir (and with
// --resnet18, OUT_DIR/resnet18_train.mlir, with --embedding
// OUT_DIR/embedding_train.mlir) and OUT_DIR/param_block.npy,
// the 4096 values every parameter tiles (a peer that tiles them the same
// way has the same weights: bench/cpu_train_peers.py); --small makes the
// models tiny (a CPU smoke test of the same graphs); --mlp and
// --transformer set their sizes (CPU benchmarks of a training step).
#include "examples/resnet/resnet18.h"
#include "frontend/Ops.h"
#include "frontend/jit/Trace.h"
#include "frontend/nn.h"
#include "modelc/npy.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace mc;

namespace {

std::vector<float> paramBlock() {
  std::mt19937 rng(0);
  std::normal_distribution<float> d(0.0f, 0.02f);
  std::vector<float> block(4096);
  for (float& v : block)
    v = d(rng);
  return block;
}

void tileParameters(nn::Module& m) {
  const std::vector<float> block = paramBlock();
  for (auto& [name, p] : m.namedParameters()) {
    float* data = p.data<float>();
    for (int64_t i = 0; i < p.numel(); ++i)
      data[i] = block[size_t(i) % block.size()];
  }
}

void traceLoss(nn::Module& model, const Shape& inputShape,
               const std::string& path, DType inputType = DType::F32) {
  Tensor x = Tensor::shapeOnly(inputShape, inputType);
  jit::TraceOptions names;
  names.inputNames = {"x"};
  names.outputNames = {"loss"};
  jit::traceFunction(
      [&](const std::vector<Tensor>& in) {
        Tensor y = model(in[0]);
        std::vector<int64_t> all;
        for (int64_t d = 0; d < int64_t(y.shape().size()); ++d)
          all.push_back(d);
        return std::vector<Tensor>{mean(y * y, all)};
      },
      {x}, model.stateDict(), model.namedModules(), names)
      .save(path);
  std::printf("modelc-train-graphs: %s\n", path.c_str());
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help")) {
    std::fprintf(stderr, "usage: modelc-train-graphs OUT_DIR [--small] "
                         "[--mlp WIDTH,BATCH]\n");
    return argc < 2 ? 1 : 0;
  }
  std::string dir = argv[1];
  bool small = false;
  long long mlpWidth = 0, mlpBatch = 0, tf[6] = {0}, rn[2] = {0}, vocab = 0;
  auto positive = [](const long long* v, int n) {
    for (int k = 0; k < n; ++k)
      if (v[k] <= 0)
        return false;
    return true;
  };
  for (int i = 2; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--small")) {
      small = true;
    } else if (!std::strcmp(argv[i], "--mlp") && i + 1 < argc &&
               std::sscanf(argv[i + 1], "%lld,%lld", &mlpWidth, &mlpBatch) ==
                   2 &&
               mlpWidth > 0 && mlpBatch > 0) {
      ++i;
    } else if (!std::strcmp(argv[i], "--transformer") && i + 1 < argc &&
               std::sscanf(argv[i + 1], "%lld,%lld,%lld,%lld,%lld,%lld", &tf[0],
                           &tf[1], &tf[2], &tf[3], &tf[4], &tf[5]) == 6 &&
               positive(tf, 6) && tf[2] % tf[3] == 0) {
      ++i;
    } else if (!std::strcmp(argv[i], "--embedding") && i + 1 < argc &&
               std::sscanf(argv[i + 1], "%lld", &vocab) == 1 && vocab > 0) {
      ++i;
    } else if (!std::strcmp(argv[i], "--resnet18") && i + 1 < argc &&
               std::sscanf(argv[i + 1], "%lld,%lld", &rn[0], &rn[1]) == 2 &&
               positive(rn, 2) && rn[1] >= 32) {
      ++i;
    } else {
      std::fprintf(stderr,
                   "modelc-train-graphs: error: unknown or malformed "
                   "argument '%s' (--small, --mlp WIDTH,BATCH, --transformer "
                   "B,S,D,HEADS,FF,LAYERS with HEADS dividing D, --resnet18 "
                   "B,HW with HW >= 32, --embedding VOCAB)\n",
                   argv[i]);
      return 1;
    }
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    std::fprintf(stderr, "modelc-train-graphs: error: cannot create %s: %s\n",
                 dir.c_str(), ec.message().c_str());
    return 1;
  }
  try {
    manualSeed(0);
    int64_t b = small ? 8 : 4096, w = small ? 32 : 4096;
    if (mlpWidth) {
      w = mlpWidth;
      b = mlpBatch;
    }
    nn::Sequential mlp({std::make_shared<nn::Linear>(w, w),
                        std::make_shared<nn::ReLU>(),
                        std::make_shared<nn::Linear>(w, w),
                        std::make_shared<nn::ReLU>(),
                        std::make_shared<nn::Linear>(w, w)});
    tileParameters(mlp);
    traceLoss(mlp, {b, w}, dir + "/mlp_train.mlir");

    int64_t batch = small ? 2 : 32, seq = small ? 16 : 512,
            dModel = small ? 32 : 768, heads = small ? 4 : 12,
            ff = small ? 64 : 3072, layers = small ? 2 : 4;
    if (tf[0]) {
      batch = tf[0];
      seq = tf[1];
      dModel = tf[2];
      heads = tf[3];
      ff = tf[4];
      layers = tf[5];
    }
    nn::Sequential encoder;
    for (int64_t l = 0; l < layers; ++l)
      encoder.push_back(std::make_shared<nn::TransformerEncoderLayer>(
          dModel, heads, ff, /*dropout=*/0.0, "relu", 1e-5,
          /*batchFirst=*/true));
    tileParameters(encoder);
    traceLoss(encoder, {batch, seq, dModel}, dir + "/transformer_train.mlir");

    if (vocab) {
      nn::Sequential embedded({std::make_shared<nn::Embedding>(vocab, dModel)});
      for (int64_t l = 0; l < layers; ++l)
        embedded.push_back(std::make_shared<nn::TransformerEncoderLayer>(
            dModel, heads, ff, /*dropout=*/0.0, "relu", 1e-5,
            /*batchFirst=*/true));
      tileParameters(embedded);
      traceLoss(embedded, {batch, seq}, dir + "/embedding_train.mlir",
                DType::I64);
    }

    if (rn[0]) {
      std::shared_ptr<models::ResNet> resnet = models::resnet18();
      tileParameters(*resnet);
      resnet->train(); // batch norm on the batch's statistics
      traceLoss(*resnet, {rn[0], 3, rn[1], rn[1]},
                dir + "/resnet18_train.mlir");
    }
    const std::vector<float> block = paramBlock();
    rt::Status st = rt::writeNpy(dir + "/param_block.npy", rt::DType::F32,
                                 {int64_t(block.size())}, block.data());
    if (!st)
      throw Error(st.message());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "modelc-train-graphs: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
