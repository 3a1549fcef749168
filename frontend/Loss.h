// Losses (differentiable, built from primitive ops so they trace and
// compile like any model code).
#ifndef MODELC_FRONTEND_LOSS_H
#define MODELC_FRONTEND_LOSS_H

#include "frontend/Tensor.h"

namespace mc {

/// Softmax cross-entropy with integer class labels, averaged over the batch
/// (torch.nn.functional.cross_entropy): logits [N, C] float, labels [N]
/// i32/i64 in [0, C) (an out-of-range label is an error naming it).
Tensor crossEntropy(const Tensor& logits, const Tensor& labels);

/// Mean squared error over all elements (reduction='mean').
Tensor mseLoss(const Tensor& prediction, const Tensor& target);

} // namespace mc

#endif // MODELC_FRONTEND_LOSS_H
