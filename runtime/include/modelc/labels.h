// Class labels of a training step: which integer inputs a compiled
// cross-entropy uses as class indices, and a check that label values lie in
// [0, classes). Out-of-range labels otherwise train silently on a zero
// one-hot row (loss -0) where PyTorch raises "Target 10 is out of bounds".
#ifndef MODELC_LABELS_H
#define MODELC_LABELS_H

#include "modelc/model.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mc::rt {

/// For each input of MODEL (in signature order), the class count when the
/// graph uses it as class labels, 0 otherwise. Labels are recognized the way
/// the frontend's cross-entropy is traced: the i32/i64 input (reshaped,
/// broadcast) compared for equality with a constant [0, 1, ..., C-1].
std::vector<int64_t> labelClassCounts(const Model &model);

/// Checks COUNT labels (I32 or I64 at DATA) against [0, CLASSES). The error
/// names WHAT, the index (FIRSTINDEX + i), the value and the class count.
Status checkLabels(DType dtype, const void *data, int64_t count,
                   int64_t classes, const std::string &what,
                   int64_t firstIndex = 0);

} // namespace mc::rt

#endif // MODELC_LABELS_H
