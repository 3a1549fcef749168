// Losses (see Loss.h).
#include "frontend/Loss.h"
#include "frontend/Ops.h"
#include "modelc/labels.h"

namespace mc {

Tensor crossEntropy(const Tensor& logits, const Tensor& labels) {
  if (!logits.defined() || !labels.defined())
    throw Error("cross_entropy: undefined tensor");
  if (logits.rank() != 2)
    throw Error("cross_entropy: logits must be [N, C], got " +
                logits.describe());
  if (labels.rank() != 1 || labels.size(0) != logits.size(0) ||
      (labels.dtype() != DType::I32 && labels.dtype() != DType::I64))
    throw Error("cross_entropy: labels must be i32/i64 [" +
                std::to_string(logits.size(0)) + "], got " +
                labels.describe());
  int64_t n = logits.size(0), c = logits.size(1);
  // Check the labels eagerly, exactly (as integers: a float copy rounds
  // large values): a bad label would silently give a zero row. The same
  // check guards compiled steps (modelc/labels.h).
  rt::Status ok = rt::checkLabels(labels.dtype(), labels.rawData(), n, c,
                                  "cross_entropy: labels");
  if (!ok)
    throw Error(ok.message());
  // -mean_i log_softmax(x)[i, y_i].
  Tensor picked = pickLabels(logSoftmax(logits, 1), labelMask(labels, c));
  return neg(mean(picked, {0}));
}

Tensor labelMask(const Tensor& labels, int64_t classes) {
  Shape along(size_t(labels.rank() + 1), 1);
  along[1] = classes;
  Tensor ids = Tensor::empty(along, labels.dtype());
  for (int64_t k = 0; k < classes; ++k) {
    if (labels.dtype() == DType::I64)
      ids.data<int64_t>()[k] = k;
    else
      ids.data<int32_t>()[k] = static_cast<int32_t>(k);
  }
  return eq(unsqueeze(labels, 1), ids);
}

Tensor pickLabels(const Tensor& logp, const Tensor& mask) {
  return sum(where(mask, logp, Tensor::scalar(0.0, logp.dtype())), {1});
}

Tensor mseLoss(const Tensor& prediction, const Tensor& target) {
  if (!prediction.defined() || !target.defined())
    throw Error("mse_loss: undefined tensor");
  if (prediction.shape() != target.shape())
    throw Error("mse_loss: shapes differ (" + prediction.describe() + " vs " +
                target.describe() + ")");
  Tensor d = sub(prediction, target);
  std::vector<int64_t> all;
  for (int64_t i = 0; i < prediction.rank(); ++i)
    all.push_back(i);
  Tensor sq = mul(d, d);
  return all.empty() ? sq : mean(sq, all);
}

} // namespace mc
