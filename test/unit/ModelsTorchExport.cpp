// Writes the C++ models' weights, inputs and eager outputs as .npy files for
// torch_crosscheck.py, which loads them into torchvision / torch.nn modules
// and compares. One folder per case under OUT_DIR; see the script.
#include "examples/gpt2/gpt2_block.h"
#include "examples/resnet/resnet18.h"
#include "modelc/npy.h"

#include <cstdio>
#include <string>
#include <sys/stat.h>

using namespace mc;

namespace {

void save(const std::string& path, const Tensor& t) {
  rt::Status s = rt::writeNpy(path, t.dtype(), t.shape(), t.rawData());
  if (!s)
    throw Error(s.message());
}

/// OUT/name/: every stateDict() entry as <entry>.npy, plus `tensors`.
void writeCase(const std::string& out, const std::string& name,
               const nn::Module& model,
               const std::vector<std::pair<std::string, Tensor>>& tensors) {
  std::string dir = out + "/" + name;
  ::mkdir(dir.c_str(), 0755);
  for (auto& [entry, t] : model.stateDict())
    save(dir + "/" + entry + ".npy", t);
  for (auto& [file, t] : tensors)
    save(dir + "/" + file + ".npy", t);
  std::printf("models-torch-export: wrote %s\n", dir.c_str());
}

/// Non-trivial LayerNorm affines and biases (torch starts them at 1 and 0).
void perturb(nn::Module& m) {
  for (auto& [n, p] : m.namedParameters())
    if (n.find("norm") != std::string::npos || n.find("ln_") == 0 ||
        n.find("bias") != std::string::npos) {
      Tensor r = Tensor::randn(p.shape());
      for (int64_t i = 0; i < p.numel(); ++i)
        p.data<float>()[i] += 0.2f * r.data<float>()[i];
    }
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: models-torch-export OUT_DIR\n");
    return 1;
  }
  std::string out = argv[1];
  try {
    manualSeed(2024);
    auto resnet = models::resnet18();
    models::randomizeBatchNorms(*resnet);
    Tensor image = Tensor::randn({2, 3, 64, 64});
    writeCase(out, "resnet18", *resnet,
              {{"x", image}, {"eager", (*resnet)(image)}});

    // torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True) in four
    // variants, with a causal float mask.
    Tensor mask = models::causalMask(8);
    for (bool normFirst : {false, true})
      for (const char* act : {"relu", "gelu"}) {
        nn::TransformerEncoderLayer layer(32, 4, 64, 0.1, act, 1e-5, true,
                                          normFirst);
        perturb(layer);
        Tensor x = Tensor::randn({2, 8, 32});
        writeCase(out,
                  std::string("encoder_") + (normFirst ? "pre_" : "post_") +
                      act,
                  layer, {{"x", x}, {"mask", mask}, {"eager", layer(x, mask)}});
      }

    // torch.nn.MultiheadAttention(16, 4) sequence-first, cross-attention,
    // bool mask (true = may not attend).
    nn::MultiheadAttention mha(16, 4, /*batchFirst=*/false);
    perturb(mha);
    Tensor q = Tensor::randn({5, 2, 16}), k = Tensor::randn({7, 2, 16}),
           v = Tensor::randn({7, 2, 16});
    Tensor boolMask = Tensor::zeros({5, 7}, DType::I1);
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t j = 0; j < 7; ++j)
        boolMask.data<uint8_t>()[i * 7 + j] = (i * 7 + j) % 4 == 1;
    writeCase(out, "mha_seq_first", mha,
              {{"q", q},
               {"k", k},
               {"v", v},
               {"mask", boolMask},
               {"eager", mha(q, k, v, boolMask)}});

    // The GPT-2 block (rebuilt from torch.nn modules by the script).
    models::GPT2Block block(64, 4);
    perturb(block);
    Tensor x = Tensor::randn({2, 16, 64});
    writeCase(out, "gpt2_block", block, {{"x", x}, {"eager", block(x)}});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "models-torch-export: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
