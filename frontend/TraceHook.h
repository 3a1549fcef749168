// The seam between eager ops and the tracer: eager code reports each op it
// runs to the active hook, so the eager library never depends on MLIR.
#ifndef MODELC_FRONTEND_TRACEHOOK_H
#define MODELC_FRONTEND_TRACEHOOK_H

#include "frontend/Tensor.h"

namespace mc {
namespace nn {
class Module;
}

enum class OpKind {
  Add, Sub, Mul, Div, Maximum,
  Neg, Exp, Log, Tanh, Sigmoid, Relu, Sqrt,
  Cast, BroadcastInDim, Reshape, Transpose,
  ReduceSum, ReduceMean, ReduceMax, Softmax, MatMul,
};

/// One op as it ran: inputs, output, and the attributes of its kind
/// (ints: broadcast dims / permutation / reduce dims; flags: transposes,
/// keepdim; axis: softmax).
struct OpRecord {
  OpKind kind;
  std::vector<Tensor> inputs;
  Tensor output;
  std::vector<int64_t> ints;
  bool transposeA = false, transposeB = false, keepdim = false;
  int64_t axis = 0;
};

class TraceHook {
public:
  virtual ~TraceHook();
  virtual void record(const OpRecord& op) = 0;
  virtual void enterModule(const nn::Module& m) {}
  virtual void exitModule(const nn::Module& m) {}
};

/// The hook of the current thread (null when not tracing).
TraceHook* activeTraceHook();
void setActiveTraceHook(TraceHook* hook);

} // namespace mc

#endif // MODELC_FRONTEND_TRACEHOOK_H
