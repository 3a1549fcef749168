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

/// One op as it ran: its registry id, inputs, output and attributes,
/// named and typed as ODS declares them (the form artifact steps carry), so
/// the tracer builds any op by its registry entry and eager autograd hands
/// the attributes to the same derivative dispatch mc-autodiff uses.
struct OpRecord {
  OpKind kind;
  std::vector<Tensor> inputs;
  Tensor output;
  rt::OpAttrs attrs;
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
  /// A later assign to the same state replaces the earlier value.
  virtual void assign(const Tensor& state, const Tensor& value) {}
};

/// The hook of the current thread (null when not tracing).
TraceHook* activeTraceHook();
/// Sets the hook (or clears it: null), within a run or around one (the
/// ONNX import pauses the trace for nodes of constants).
void setActiveTraceHook(TraceHook* hook);
/// Sets the hook for a new run of a traced function (the tracer's, or a
/// probe's), advancing the run number: code that carries traced values
/// between ops of one run (Generator's offset) tells runs apart by it.
void startTracedRun(TraceHook* hook);
uint64_t activeTraceEpoch();

} // namespace mc

#endif // MODELC_FRONTEND_TRACEHOOK_H
