// The seam between eager ops and the tracer: eager code reports each op it
// runs to the active hook, so the eager library never depends on MLIR.
#ifndef MODELC_FRONTEND_TRACEHOOK_H
#define MODELC_FRONTEND_TRACEHOOK_H

#include "frontend/Tensor.h"
#include "modelc/ops.h"

namespace mc {
namespace nn {
class Module;
}

/// The op of a record: the registry's one op enum (modelc/ops.h, generated
/// from ODS).
using OpKind = rt::OpId;

/// One op as it ran: inputs, output, and the attributes of its kind
/// (ints: broadcast dims / permutation / reduce dims; flags: transposes,
/// keepdim; axis: softmax, log_softmax, concat, gather, norms).
struct OpRecord {
  OpKind kind;
  std::vector<Tensor> inputs;
  Tensor output;
  std::vector<int64_t> ints;
  bool transposeA = false, transposeB = false, keepdim = false;
  int64_t axis = 0;
  // Ops of real models (same meaning as in codegen's PlanStep).
  bool tanhApproximation = false;          // Gelu
  double minValue = 0, maxValue = 0;       // Clamp
  rt::CompareOp direction = rt::CompareOp::Eq;
  std::vector<int64_t> start, strides;     // Slice (strides: Conv2d, pools)
  std::vector<int64_t> low, high;          // Pad
  double padValue = 0;                     // Pad
  std::vector<int64_t> padding, dilation;  // Conv2d, pools
  std::vector<int64_t> kernel;             // pools
  int64_t groups = 1;                      // Conv2d
  bool ceilMode = false;                   // pools
  bool countIncludePad = false;            // AvgPool2d
  double epsilon = 0;                      // BatchNorm, LayerNorm
};

class TraceHook {
public:
  virtual ~TraceHook();
  virtual void record(const OpRecord& op) = 0;
  virtual void enterModule(const nn::Module& m) {}
  virtual void exitModule(const nn::Module& m) {}
  /// `state` (a module buffer, e.g. BatchNorm's running statistics) takes
  /// `value` when the traced function has run: a tracer makes it mutable
  /// state of the traced step. Eager code updates the buffer itself instead.
  virtual void assign(const Tensor& state, const Tensor& value) {}
};

/// The hook of the current thread (null when not tracing).
TraceHook* activeTraceHook();
void setActiveTraceHook(TraceHook* hook);

} // namespace mc

#endif // MODELC_FRONTEND_TRACEHOOK_H
