// A GPT-2-style decoder (pre-norm blocks, causal self-attention, GELU(tanh)
// MLP) built from the frontend's nn modules; names follow Hugging Face's
// GPT2Model where a module exists for them (ln_1, attn, ln_2, mlp.c_fc,
// mlp.c_proj, wte, wpe, h, ln_f, lm_head).
#ifndef MODELC_EXAMPLES_GPT2_GPT2_BLOCK_H
#define MODELC_EXAMPLES_GPT2_GPT2_BLOCK_H

#include "frontend/nn.h"

#include <memory>

namespace mc::models {

struct GPT2Config {
  int64_t vocabSize = 50257;
  int64_t maxPositions = 1024;
  int64_t dModel = 768;
  int64_t numHeads = 12;
  int64_t numLayers = 12;
  double layerNormEps = 1e-5;
};

/// The additive causal mask [T, T]: 0 where key j <= query i, -inf above
/// the diagonal. Built with ops (gt of two index tensors, then where), so a
/// trace records compare + select rather than a baked-in constant.
Tensor causalMask(int64_t t);

/// The 4x MLP: c_fc (d -> 4d), GELU(tanh), c_proj (4d -> d).
class GPT2MLP : public nn::Module {
public:
  explicit GPT2MLP(int64_t dModel);
  Tensor forward(const Tensor& x) override;
  std::string typeName() const override { return "GPT2MLP"; }
  std::shared_ptr<nn::Linear> cFc, cProj;
  std::shared_ptr<nn::GELU> act;
};

/// One pre-norm decoder block on [B, T, d]:
///   x = x + attn(ln_1(x)) with the causal mask;  x = x + mlp(ln_2(x)).
class GPT2Block : public nn::Module {
public:
  GPT2Block(int64_t dModel, int64_t numHeads, double layerNormEps = 1e-5);
  Tensor forward(const Tensor& x) override;
  std::string typeName() const override { return "GPT2Block"; }
  std::shared_ptr<nn::LayerNorm> ln1, ln2;
  std::shared_ptr<nn::MultiheadAttention> attn;
  std::shared_ptr<GPT2MLP> mlp;
};

/// Token + position embeddings, the blocks, a final LayerNorm and an LM
/// head (not tied to wte): i64 ids [B, T] -> logits [B, T, vocab].
class GPT2 : public nn::Module {
public:
  explicit GPT2(const GPT2Config& config);
  Tensor forward(const Tensor& ids) override;
  std::string typeName() const override { return "GPT2"; }
  GPT2Config config;
  std::shared_ptr<nn::Embedding> wte, wpe;
  std::shared_ptr<nn::Sequential> h;
  std::shared_ptr<nn::LayerNorm> lnF;
  std::shared_ptr<nn::Linear> lmHead;
};

} // namespace mc::models

#endif // MODELC_EXAMPLES_GPT2_GPT2_BLOCK_H
