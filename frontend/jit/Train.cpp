// JIT training (see Train.h).
#include "frontend/jit/Train.h"
#include "codegen/Compile.h"
#include "frontend/Random.h"
#include "frontend/jit/Trace.h"
#include "modelc/labels.h"
#include "modelc/runtime.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstring>

namespace mc::jit {
namespace {

void check(mc_status_t status, const char* what) {
  if (!status)
    return;
  std::string message = mc_status_message(status);
  mc_status_free(status);
  throw Error(std::string(what) + ": " + message);
}

} // namespace

struct TrainingStep::Impl {
  std::vector<uint8_t> artifact;
  mc_model_t* model = nullptr;
  mc_session_t* session = nullptr;
  std::vector<std::pair<std::string, Tensor>> parameters; // names in model
  /// Per input, what it is as class labels (rt::labelInputs).
  std::vector<rt::LabelInput> labelClasses;
  ~Impl() {
    if (session)
      mc_session_free(session);
    if (model)
      mc_model_free(model);
  }
};

TrainingStep::TrainingStep(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
TrainingStep::TrainingStep(TrainingStep&&) noexcept = default;
TrainingStep& TrainingStep::operator=(TrainingStep&&) noexcept = default;
TrainingStep::~TrainingStep() = default;

const std::vector<uint8_t>& TrainingStep::artifact() const {
  return impl_->artifact;
}

float TrainingStep::step(const std::vector<Tensor>& batch) {
  size_t inputs = mc_model_num_inputs(impl_->model);
  if (batch.size() != inputs)
    throw Error("training step: expected " + std::to_string(inputs) +
                " batch tensors, got " + std::to_string(batch.size()));
  for (size_t i = 0; i < batch.size(); ++i) {
    const Tensor& t = batch[i];
    // Out-of-range labels would train silently on a zero one-hot row; a
    // host-side check of the batch (O(batch), no device sync).
    if (const rt::LabelInput& labels = impl_->labelClasses[i];
        labels.classes > 0) {
      rt::Status st = rt::checkLabels(
          t.dtype(), t.rawData(), t.numel(), labels.classes,
          "training step: batch tensor " + std::to_string(i) + " (labels)", 0,
          labels.ignored);
      if (!st)
        throw Error(st.message());
    }
    check(mc_session_set_input(impl_->session, i,
                               static_cast<mc_dtype_t>(t.dtype()),
                               static_cast<int32_t>(t.rank()),
                               t.shape().data(), t.rawData(), t.byteSize()),
          "training step");
  }
  check(mc_session_run(impl_->session), "training step");
  const void* data = nullptr;
  size_t bytes = 0;
  check(mc_session_output(impl_->session, 0, &data, &bytes), "training step");
  mc_tensor_info_t info;
  check(mc_model_output_info(impl_->model, 0, &info), "training step");
  Tensor loss = Tensor::empty(Shape(info.dims, info.dims + info.rank),
                              static_cast<DType>(info.dtype));
  std::memcpy(loss.rawData(), data, bytes);
  return loss.toVector().at(0);
}

std::vector<std::string> TrainingStep::stateNames() const {
  std::vector<std::string> names;
  for (size_t i = 0; i < mc_model_num_state(impl_->model); ++i) {
    mc_tensor_info_t info;
    check(mc_model_state_info(impl_->model, i, &info), "state");
    names.emplace_back(info.name);
  }
  return names;
}

Tensor TrainingStep::state(const std::string& name) const {
  for (size_t i = 0; i < mc_model_num_state(impl_->model); ++i) {
    mc_tensor_info_t info;
    check(mc_model_state_info(impl_->model, i, &info), "state");
    if (name != info.name)
      continue;
    Tensor t = Tensor::empty(Shape(info.dims, info.dims + info.rank),
                             static_cast<DType>(info.dtype));
    check(mc_session_read_state(impl_->session, name.c_str(), t.rawData(),
                                t.byteSize()),
          "state");
    return t;
  }
  throw Error("the training step has no state named '" + name + "'");
}

void TrainingStep::copyParametersTo(nn::Module& model) const {
  std::vector<std::string> names = stateNames();
  auto isState = [&](const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  // The parameters the step trains (a frozen one, or one that does not
  // reach the loss, is a constant of the step: the module's value is
  // already it), and the buffers it updates (BatchNorm's running
  // statistics).
  std::vector<std::pair<std::string, Tensor>> entries;
  for (const auto& list : {model.namedParameters(), model.namedBuffers()})
    for (const auto& entry : list)
      if (isState(entry.first))
        entries.push_back(entry);
  for (auto& [name, p] : entries) {
    Tensor trained = state(name);
    if (trained.shape() != p.shape() || trained.dtype() != p.dtype())
      throw Error("state '" + name + "' is " + trained.describe() +
                  ", the module's is " + p.describe());
    std::memcpy(const_cast<Tensor&>(p).rawData(), trained.rawData(),
                p.byteSize());
  }
  // Dropout's generator goes on from where the step's draws got to.
  if (isState("rng.offset")) {
    Tensor offset = state("rng.offset");
    Generator::global().setOffset(offset.data<uint64_t>()[0]);
  }
}

void TrainingStep::saveCheckpoint(const std::string& path) const {
  check(mc_session_save_checkpoint(impl_->session, path.c_str(), "{}"),
        "checkpoint");
}

void TrainingStep::loadCheckpoint(const std::string& path) {
  char* metadata = nullptr;
  check(mc_session_load_checkpoint(impl_->session, path.c_str(), &metadata),
        "checkpoint");
  mc_string_free(metadata);
}

TrainingStep compileTraining(nn::Module& model, const LossFn& lossFn,
                             const std::vector<Tensor>& exampleBatch,
                             const TrainingOptions& options) {
  if (exampleBatch.empty())
    throw Error("compileTraining: the example batch is empty");
  TraceOptions trace;
  trace.inputNames = options.batchNames;
  trace.inputNames.resize(exampleBatch.size());
  for (size_t i = options.batchNames.size(); i < exampleBatch.size(); ++i)
    trace.inputNames[i] = "input" + std::to_string(i);
  trace.outputNames = {"loss"};
  // Buffers are state: BatchNorm in training mode updates its running
  // statistics in the step; in eval mode they are read-only globals.
  trace.buffers = model.namedBuffers();
  trace.dynamicBatch = options.dynamicBatch;
  TracedModule traced = traceFunction(
      [&](const std::vector<Tensor>& batch) {
        return std::vector<Tensor>{lossFn(model(batch[0]), batch)};
      },
      exampleBatch, model.namedParameters(), model.namedModules(), trace);

  // Collect the compiler's diagnostics for the error message.
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(
      &traced.context(), [&](mlir::Diagnostic& d) {
        llvm::raw_string_ostream os(diagnostics);
        os << d.getLocation() << ": " << d << "\n";
        return mlir::success();
      });
  codegen::CompileOptions compile;
  compile.train = true;
  compile.training = options.pipeline;
  auto bytes = codegen::compileToArtifact(traced.module(), compile);
  if (!options.dumpMlir.empty())
    traced.save(options.dumpMlir);
  if (mlir::failed(bytes))
    throw Error("compileTraining: the training step does not compile:\n" +
                diagnostics);

  auto impl = std::make_unique<TrainingStep::Impl>();
  impl->artifact = std::move(*bytes);
  check(mc_model_load_memory(impl->artifact.data(), impl->artifact.size(),
                             "training step", &impl->model),
        "compileTraining");
  check(mc_session_create(impl->model, &impl->session), "compileTraining");
  {
    // Which inputs are class labels, found once in the compiled step (a
    // C++ view of the same bytes, dropped after).
    std::unique_ptr<rt::Model> model;
    rt::Status st = rt::Model::loadMemory(
        impl->artifact.data(), impl->artifact.size(), "training step", &model);
    if (!st)
      throw Error("compileTraining: " + st.message());
    impl->labelClasses = rt::labelInputs(*model);
  }
  return TrainingStep(std::move(impl));
}

} // namespace mc::jit
