// A GPT-2-style decoder (see gpt2_block.h).
#include "examples/gpt2/gpt2_block.h"

#include <cmath>

namespace mc::models {

Tensor causalMask(int64_t t) {
  Tensor rows = Tensor::empty({t, 1}, DType::I64);
  Tensor cols = Tensor::empty({1, t}, DType::I64);
  for (int64_t i = 0; i < t; ++i) {
    rows.data<int64_t>()[i] = i;
    cols.data<int64_t>()[i] = i;
  }
  // Key j is hidden from query i when j > i.
  return where(gt(cols, rows), Tensor::scalar(-INFINITY),
               Tensor::scalar(0.0));
}

GPT2MLP::GPT2MLP(int64_t dModel) {
  cFc = registerModule("c_fc", std::make_shared<nn::Linear>(dModel,
                                                            4 * dModel));
  act = registerModule("act", std::make_shared<nn::GELU>("tanh"));
  cProj = registerModule("c_proj", std::make_shared<nn::Linear>(4 * dModel,
                                                                dModel));
}

Tensor GPT2MLP::forward(const Tensor& x) {
  return (*cProj)((*act)((*cFc)(x)));
}

GPT2Block::GPT2Block(int64_t dModel, int64_t numHeads, double layerNormEps) {
  ln1 = registerModule("ln_1", std::make_shared<nn::LayerNorm>(
                                   Shape{dModel}, layerNormEps));
  attn = registerModule("attn", std::make_shared<nn::MultiheadAttention>(
                                    dModel, numHeads, /*batchFirst=*/true));
  ln2 = registerModule("ln_2", std::make_shared<nn::LayerNorm>(
                                   Shape{dModel}, layerNormEps));
  mlp = registerModule("mlp", std::make_shared<GPT2MLP>(dModel));
}

Tensor GPT2Block::forward(const Tensor& x) {
  if (x.rank() != 3)
    throw Error("GPT2Block: expects [B, T, d], got " + x.describe());
  Tensor h = (*ln1)(x);
  Tensor y = x + (*attn)(h, h, h, causalMask(x.size(1)));
  return y + (*mlp)((*ln2)(y));
}

GPT2::GPT2(const GPT2Config& config) : config(config) {
  wte = registerModule("wte", std::make_shared<nn::Embedding>(
                                  config.vocabSize, config.dModel));
  wpe = registerModule("wpe", std::make_shared<nn::Embedding>(
                                  config.maxPositions, config.dModel));
  h = registerModule("h", std::make_shared<nn::Sequential>());
  for (int64_t i = 0; i < config.numLayers; ++i)
    h->push_back(std::make_shared<GPT2Block>(config.dModel, config.numHeads,
                                             config.layerNormEps));
  lnF = registerModule("ln_f", std::make_shared<nn::LayerNorm>(
                                   Shape{config.dModel}, config.layerNormEps));
  lmHead = registerModule("lm_head",
                          std::make_shared<nn::Linear>(
                              config.dModel, config.vocabSize, /*bias=*/false));
}

Tensor GPT2::forward(const Tensor& ids) {
  if (ids.rank() != 2)
    throw Error("GPT2: expects token ids [B, T], got " + ids.describe());
  int64_t t = ids.size(1);
  if (t > config.maxPositions)
    throw Error("GPT2: sequence length " + std::to_string(t) +
                " exceeds max positions " +
                std::to_string(config.maxPositions));
  Tensor positions = Tensor::empty({t}, DType::I64);
  for (int64_t i = 0; i < t; ++i)
    positions.data<int64_t>()[i] = i;
  // Two statements: C++ leaves the order of +'s operands open, and the
  // trace records ops in the order they run (docs/compiler.md, "The
  // tracer").
  Tensor tokens = (*wte)(ids);        // [B, T, d]
  Tensor place = (*wpe)(positions);   // [T, d]
  Tensor x = tokens + place;
  x = (*h)(x);
  return (*lmHead)((*lnF)(x));
}

} // namespace mc::models
