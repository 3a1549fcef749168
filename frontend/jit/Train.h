// JIT training: trace forward + loss once, compile the whole training step
// (autodiff, optimizer, AMP, loss scaling) in-process, and step it on the
// runtime with no files written and no host synchronisation inside a step.
#ifndef MODELC_FRONTEND_JIT_TRAIN_H
#define MODELC_FRONTEND_JIT_TRAIN_H

#include "frontend/jit/Trace.h"
#include "frontend/nn.h"
#include "passes/Passes.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace mc::jit {

/// loss = lossFn(model output, batch); batch[0] is the model's input.
using LossFn = std::function<Tensor(const Tensor& output,
                                    const std::vector<Tensor>& batch)>;

struct TrainingOptions {
  /// The --train pipeline's options (optimizer, AMP, loss scaling).
  TrainPipelineOptions pipeline;
  /// Names of the batch tensors in the compiled signature.
  std::vector<std::string> batchNames = {"x", "y"};
  /// Keep the compiled step's .mlir (after the pipeline) for inspection.
  std::string dumpMlir;
  /// A dynamic batch (TraceOptions::dynamicBatch): one step runs any batch
  /// size in the bounds, and the loss of a partial batch is the mean over
  /// its real samples, so an epoch can end with one.
  std::optional<DynamicBatch> dynamicBatch;
};

/// A compiled training step with its state (parameters, optimizer moments,
/// loss scale) living in the runtime session.
class TrainingStep {
public:
  TrainingStep(TrainingStep&&) noexcept;
  TrainingStep& operator=(TrainingStep&&) noexcept;
  ~TrainingStep();

  /// One step on a batch shaped like the example batch; returns the loss.
  float step(const std::vector<Tensor>& batch);
  /// Names of the persistent state ("0.weight", "0.weight.exp_avg",
  /// "optimizer.step", "loss_scale", ...).
  std::vector<std::string> stateNames() const;
  /// A copy of one state tensor.
  Tensor state(const std::string& name) const;
  /// Copies the trained parameters, and the buffers the step updates
  /// (BatchNorm's running statistics), back into the module (for eager use),
  /// and the offset the step's dropouts reached into the global generator.
  void copyParametersTo(nn::Module& model) const;
  void saveCheckpoint(const std::string& path) const;
  void loadCheckpoint(const std::string& path);
  /// The compiled artifact (to save or run elsewhere).
  const std::vector<uint8_t>& artifact() const;

  struct Impl;
  explicit TrainingStep(std::unique_ptr<Impl> impl);

private:
  std::unique_ptr<Impl> impl_;
};

/// Traces model + loss on `exampleBatch` and compiles the training step.
/// Throws mc::Error with the compiler's diagnostics on failure.
TrainingStep compileTraining(nn::Module& model, const LossFn& lossFn,
                             const std::vector<Tensor>& exampleBatch,
                             const TrainingOptions& options = {});

} // namespace mc::jit

#endif // MODELC_FRONTEND_JIT_TRAIN_H
