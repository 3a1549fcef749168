// jit::trace: run a module eagerly on example inputs and record the ops it
// runs as an mc function, with parameters as named ml_program globals.
#ifndef MODELC_FRONTEND_JIT_TRACE_H
#define MODELC_FRONTEND_JIT_TRACE_H

#include "frontend/nn.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mlir {
class MLIRContext;
class ModuleOp;
} // namespace mlir

namespace mc::jit {

/// The bounds of a dynamic batch (see TraceOptions::dynamicBatch).
struct DynamicBatch {
  int64_t min = 1, max = 1;
  int64_t opt = 0; // the size tuning favours; 0: max
};

struct TraceOptions {
  std::string functionName = "forward";
  /// Names of the inputs / outputs in the signature (default: "x" for one
  /// input, else "input0", "input1", ...; "out" / "output0", ...).
  std::vector<std::string> inputNames;
  std::vector<std::string> outputNames;
  /// Module buffers (BatchNorm's running statistics) to trace as named
  /// globals tagged `mc.buffer` (state that gets no gradient); those the
  /// function assigns (TraceHook::assign) become mutable and are stored
  /// when it returns.
  std::vector<std::pair<std::string, Tensor>> buffers;
  /// A dynamic batch: every input's leading dim (the examples' batch, which
  /// must lie in the bounds) becomes `?`, and so does every dim that follows
  /// it. The function runs twice, at the examples' batch and at one more
  /// (or one less), and a dim that changes by exactly the batch is the
  /// batch; the two runs must record the same ops with the same attributes
  /// (a slice's limit at the batch becomes "to the end"), and a dim that
  /// scales otherwise (a [B * S, E] flatten) is refused for now. The
  /// function gets `mc.batch = array<i64: min, max, opt>`.
  std::optional<DynamicBatch> dynamicBatch;
  /// Parameters and constants of at least 64 KiB (not splats) become
  /// `dense_resource` blobs that share the tensors' storage instead of
  /// copies in the module: the weights are in memory once. The caller must
  /// not write to those tensors afterwards (the module would see it). The
  /// ONNX importer, which owns its tensors, sets it.
  bool shareWeightStorage = false;
};

/// A traced (or loaded) mc module and the MLIR context that owns it.
class TracedModule {
public:
  TracedModule();
  ~TracedModule();
  TracedModule(TracedModule&&) noexcept;
  TracedModule& operator=(TracedModule&&) noexcept;

  mlir::ModuleOp module() const;
  mlir::MLIRContext& context() const;
  /// The module as .mlir text (weights printed inline as hex).
  std::string str() const;
  /// Writes .mlir text, or MLIR bytecode when `bytecode`; throws mc::Error.
  void save(const std::string& path, bool bytecode = false) const;
  /// Parses .mlir text or bytecode (detected); throws mc::Error with the
  /// parser's file:line:col diagnostic.
  static TracedModule load(const std::string& path);

  struct Impl;

private:
  std::unique_ptr<Impl> impl_;
  friend TracedModule traceFunction(
      const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>&,
      const std::vector<Tensor>&,
      const std::vector<std::pair<std::string, Tensor>>&,
      const std::vector<std::pair<std::string, const nn::Module*>>&,
      const TraceOptions&);
};

/// Traces `module.forward` on `example` (one input). Parameters and buffers
/// (stateDict()) become named globals.
TracedModule trace(nn::Module& module, const Tensor& example,
                   const TraceOptions& options = {});

/// Traces any function of tensors; `parameters` become named globals, and
/// `modules` (path, module) name the scopes ops are located in.
TracedModule traceFunction(
    const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
    const std::vector<Tensor>& examples,
    const std::vector<std::pair<std::string, Tensor>>& parameters,
    const std::vector<std::pair<std::string, const nn::Module*>>& modules = {},
    const TraceOptions& options = {});

/// A new MLIRContext with every dialect modelc reads loaded.
std::unique_ptr<mlir::MLIRContext> createContext();

} // namespace mc::jit

#endif // MODELC_FRONTEND_JIT_TRACE_H
