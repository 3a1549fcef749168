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

/// Labels [N, d1, ...] (i32/i64) compared with the classes 0..C-1 along a
/// new dim 1: bool [N, C, d1, ...], true at each label's class. The
/// compare the runtime recognizes class labels by (rt::labelInputs).
Tensor labelMask(const Tensor& labels, int64_t classes);

/// Each label's log-probability: LOGP [N, C, d1, ...] where MASK
/// (labelMask) holds, summed over dim 1: [N, d1, ...]. Selected, not
/// multiplied by a one-hot, which would be NaN where another class's
/// log-probability is -inf (masked logits).
Tensor pickLabels(const Tensor& logp, const Tensor& mask);

/// Mean squared error over all elements (reduction='mean').
Tensor mseLoss(const Tensor& prediction, const Tensor& target);

} // namespace mc

#endif // MODELC_FRONTEND_LOSS_H
