// Writes the C++ models' weights, inputs and eager outputs as .npy files for
// torch_crosscheck.py, which loads them into torchvision / torch.nn modules
// and compares. One folder per case under OUT_DIR; see the script.
#include "examples/gpt2/gpt2_block.h"
#include "examples/resnet/resnet18.h"
#include "frontend/Autograd.h"
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

Tensor sumAll(const Tensor& t) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < t.rank(); ++d)
    dims.push_back(d);
  return sum(t, dims);
}

/// A recurrent layer's outputs and gradients, from eager autograd, for
/// torch to reproduce: loss = sum(output * wo) + sum(h_n * wh) (+ sum(c_n *
/// wc)) with random weights wo, wh, wc, so every output element's gradient
/// differs. Writes the eager outputs, and grad.<name> for every parameter,
/// the input and the initial states.
template <typename Layer>
void writeRecurrentCase(const std::string& out, const std::string& name,
                        Layer& layer, Tensor x, Tensor h0, Tensor c0) {
  std::vector<Tensor> leaves;
  for (auto& [n, p] : layer.namedParameters())
    leaves.push_back(const_cast<Tensor&>(p).setRequiresGrad());
  for (Tensor* t : {&x, &h0, &c0})
    if (t->defined())
      leaves.push_back(t->setRequiresGrad());
  nn::RecurrentOutput r = layer.run(x, h0, c0);
  Tensor wo = Tensor::randn(r.output.shape()), wh = Tensor::randn(r.h.shape());
  Tensor loss = sumAll(r.output * wo) + sumAll(r.h * wh);
  std::vector<std::pair<std::string, Tensor>> tensors = {
      {"x", x}, {"wo", wo}, {"wh", wh}, {"output", r.output}, {"h_n", r.h}};
  if (r.c.defined()) {
    Tensor wc = Tensor::randn(r.c.shape());
    loss = loss + sumAll(r.c * wc);
    tensors.push_back({"wc", wc});
    tensors.push_back({"c_n", r.c});
  }
  loss.backward();
  // A parameter off the path has no gradient (a cell's weight_hh from a
  // zero state); PyTorch's is zeros.
  for (auto& [n, p] : layer.namedParameters())
    tensors.push_back({"grad." + n, p.grad().defined()
                                        ? p.grad()
                                        : Tensor::zeros(p.shape())});
  tensors.push_back({"grad.x", x.grad()});
  if (h0.defined()) {
    tensors.push_back({"h0", h0});
    tensors.push_back({"grad.h0", h0.grad()});
  }
  if (c0.defined()) {
    tensors.push_back({"c0", c0});
    tensors.push_back({"grad.c0", c0.grad()});
  }
  writeCase(out, name, layer, tensors);
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

    // torch.nn.LSTM, GRU and RNN: outputs, last states and every gradient.
    nn::LSTM lstm(5, 8, /*numLayers=*/2, /*bias=*/true, /*batchFirst=*/true,
                  /*dropout=*/0.0, /*bidirectional=*/true);
    writeRecurrentCase(out, "lstm_bi_batch_first", lstm,
                       Tensor::randn({3, 6, 5}), Tensor::randn({4, 3, 8}),
                       Tensor::randn({4, 3, 8}));
    nn::LSTM lstmZero(4, 6, 1, /*bias=*/false);
    writeRecurrentCase(out, "lstm_no_bias_zero_state", lstmZero,
                       Tensor::randn({5, 2, 4}), Tensor(), Tensor());
    nn::GRU gru(4, 6, /*numLayers=*/2, /*bias=*/true, /*batchFirst=*/false, 0.0,
                /*bidirectional=*/true);
    writeRecurrentCase(out, "gru_bi_zero_state", gru, Tensor::randn({7, 2, 4}),
                       Tensor(), Tensor());
    nn::GRU gruState(3, 5, 1, /*bias=*/true, /*batchFirst=*/true);
    writeRecurrentCase(out, "gru_batch_first_state", gruState,
                       Tensor::randn({2, 4, 3}), Tensor::randn({1, 2, 5}),
                       Tensor());
    nn::RNN rnn(3, 4, /*numLayers=*/2, "relu", /*bias=*/false);
    writeRecurrentCase(out, "rnn_relu_unbatched", rnn, Tensor::randn({6, 3}),
                       Tensor::randn({2, 4}), Tensor());
    nn::RNN rnnTanh(3, 4, 1, "tanh", true, /*batchFirst=*/true, 0.0,
                    /*bidirectional=*/true);
    writeRecurrentCase(out, "rnn_tanh_bi", rnnTanh, Tensor::randn({2, 5, 3}),
                       Tensor(), Tensor());
    nn::GRU gruNoBias(3, 5, 2, /*bias=*/false, /*batchFirst=*/true);
    writeRecurrentCase(out, "gru_no_bias_state", gruNoBias,
                       Tensor::randn({2, 4, 3}), Tensor::randn({2, 2, 5}),
                       Tensor());
    nn::LSTM lstmUnbatched(3, 4, 1, true, false, 0.0, /*bidirectional=*/true);
    writeRecurrentCase(out, "lstm_bi_unbatched_state", lstmUnbatched,
                       Tensor::randn({5, 3}), Tensor::randn({2, 4}),
                       Tensor::randn({2, 4}));
    nn::RNN rnnState(3, 4, 2, "tanh", true, /*batchFirst=*/false);
    writeRecurrentCase(out, "rnn_tanh_state", rnnState,
                       Tensor::randn({5, 2, 3}), Tensor::randn({2, 2, 4}),
                       Tensor());
    nn::RNN rnnReluBias(3, 4, 2, "relu", true, /*batchFirst=*/true, 0.0,
                        /*bidirectional=*/true);
    writeRecurrentCase(out, "rnn_relu_bias_bi", rnnReluBias,
                       Tensor::randn({2, 5, 3}), Tensor(), Tensor());

    // The cells: one step, batched and not, from a state and from zeros.
    nn::LSTMCell lstmCell(4, 5);
    writeRecurrentCase(out, "lstm_cell", lstmCell, Tensor::randn({3, 4}),
                       Tensor::randn({3, 5}), Tensor::randn({3, 5}));
    nn::GRUCell gruCell(4, 5, /*bias=*/false);
    writeRecurrentCase(out, "gru_cell_unbatched", gruCell, Tensor::randn({4}),
                       Tensor::randn({5}), Tensor());
    nn::RNNCell rnnCell(4, 5, true, "relu");
    writeRecurrentCase(out, "rnn_cell_zero_state", rnnCell,
                       Tensor::randn({3, 4}), Tensor(), Tensor());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "models-torch-export: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
