// Integer inputs used as indices. Class labels of a training step: which
// integer inputs a compiled cross-entropy uses as class indices, and a
// check that label values lie in [0, classes). Out-of-range labels otherwise train silently on a zero
// one-hot row (loss -0) where PyTorch raises "Target 10 is out of bounds".
#ifndef MODELC_LABELS_H
#define MODELC_LABELS_H

#include "modelc/model.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mc::rt {

/// What an input is to the graph as class labels.
struct LabelInput {
  int64_t classes = 0; // 0: not class labels
  /// A value the graph leaves out of the loss (ONNX's ignore_index,
  /// PyTorch's -100 by default), allowed besides [0, classes).
  std::optional<int64_t> ignored;
};

/// For each input of MODEL (in signature order), what it is as class
/// labels. Labels are recognized the way the frontend's cross-entropy (and
/// the ONNX import of SoftmaxCrossEntropyLoss) is traced: the i32/i64
/// input (reshaped, broadcast) compared for equality with a constant [0,
/// 1, ..., C-1] (the longest such); the ignored value is the one constant
/// outside [0, C) it is compared unequal with (`labels != ignore_index`),
/// none when there are several.
std::vector<LabelInput> labelInputs(const Model &model);

/// Checks COUNT labels (I32 or I64 at DATA) against [0, CLASSES), IGNORED
/// allowed besides. The error names WHAT, the index (FIRSTINDEX + i), the
/// value and the class count.
Status checkLabels(DType dtype, const void *data, int64_t count,
                   int64_t classes, const std::string &what,
                   int64_t firstIndex = 0,
                   std::optional<int64_t> ignored = std::nullopt);

/// An integer input whose values a gather uses as indices (an embedding's
/// token ids): `dim` is the size of the gathered dim (indices lie in
/// [-dim, dim)), `where` the gather step (op and source location). dim is
/// 0 for an input that indexes nothing.
struct IndexInput {
  int64_t dim = 0;
  std::string where;
};

/// For each input of MODEL (in signature order), the gathers that use its
/// values as indices: the i32/i64 input (its reshapes, copies, transposes
/// and broadcasts) as a gather step's indices, over a dim of static size;
/// the smallest such dim. A gather after a step that writes the input's
/// bytes does not count (its indices are not the caller's). Session::setInput
/// checks those inputs' values before any step runs: a device kernel
/// cannot report an index out of range the way the CPU's gather does, so
/// the cuda target gathers by run-time indices only from such inputs.
std::vector<IndexInput> gatherIndexInputs(const Model &model);

/// Checks COUNT indices (I32 or I64 at DATA) against [-dim, dim) of INDEX;
/// the error names WHAT, the element, its value and the gather.
Status checkGatherIndices(DType dtype, const void *data, int64_t count,
                          const IndexInput &index, const std::string &what);

} // namespace mc::rt

#endif // MODELC_LABELS_H
