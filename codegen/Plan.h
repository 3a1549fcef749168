// The executable plan: what codegen lowers an mc function to, before it is
// serialized into a .mcpk. MLIR-free on purpose, so the memory planner and
// the artifact writer are testable without the compiler.
#ifndef MODELC_CODEGEN_PLAN_H
#define MODELC_CODEGEN_PLAN_H

#include "mcpk_generated.h"
#include "modelc/device.h"
#include "modelc/kernels.h"
#include "modelc/library_region.h"
#include "modelc/ops.h"

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace mc::codegen {

/// Bytes of a constant or of a state buffer's initial value: owned (shared
/// between copies of the plan, never written), or borrowed from storage
/// that outlives the plan (an MLIR attribute's data, alive as long as its
/// context), so a model's weights are not copied into the plan.
class PlanBytes {
public:
  PlanBytes() = default;
  PlanBytes(std::vector<uint8_t> owned) // NOLINT: a vector is bytes
      : owned_(std::make_shared<const std::vector<uint8_t>>(std::move(owned))),
        data_(owned_->data()), size_(owned_->size()) {}
  PlanBytes(std::initializer_list<uint8_t> bytes)
      : PlanBytes(std::vector<uint8_t>(bytes)) {}
  static PlanBytes borrow(const void *data, size_t size) {
    PlanBytes b;
    b.data_ = static_cast<const uint8_t *>(data);
    b.size_ = size;
    return b;
  }
  const uint8_t *data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  void clear() { *this = PlanBytes(); }
  std::vector<uint8_t> toVector() const { return {data_, data_ + size_}; }

private:
  std::shared_ptr<const std::vector<uint8_t>> owned_;
  const uint8_t *data_ = nullptr;
  size_t size_ = 0;
};

struct PlanBuffer {
  std::string name;
  rt::DType dtype = rt::DType::F32;
  std::vector<int64_t> shape;
  fb::BufferKind kind = fb::BufferKind::Arena;
  /// Constants: the bytes (numel * dtypeSize), placed in the data section
  /// by the writer. State buffers: the initial bytes, placed in the state
  /// region's initial image (inside the data section).
  PlanBytes data;
  /// Arena buffers only: when >= 0, this buffer is a view (same bytes,
  /// another shape, e.g. a reshape) of buffer `aliasOf`, which is never
  /// itself an alias. The planner gives it its root's offset.
  int64_t aliasOf = -1;
  /// Filled by the planner: arena offset, data-section offset for constants
  /// (see layoutConstants), state-region offset for State buffers (see
  /// layoutState).
  uint64_t offset = 0;
  /// A dynamic batch (Plan::batch): empty for a static buffer, else one
  /// entry per dim, 0 for a static dim and c > 0 for a dim of c * batch.
  /// `shape` always holds the sizes at batch = Plan::batch.max, so the
  /// planner sizes every buffer at the upper bound.
  std::vector<int64_t> batchScale;

  uint64_t byteSize() const;
};

/// The bounds of a dynamic batch; max == 0 when every shape is static.
struct PlanBatch {
  int64_t min = 0, max = 0, opt = 0;
  bool dynamic() const { return max > 0; }
};

/// One op of a fused region (see Step.body in runtime/schema/mcpk.fbs):
/// operands are value numbers, the step's inputs first, then each body
/// op's result in order.
struct PlanRegionOp {
  rt::OpId op = rt::OpId::Copy;
  std::vector<uint32_t> operands;
  rt::OpAttrs attrs;
  rt::DType dtype = rt::DType::F32;
  std::string location;
  std::string precision, precisionReason;
  /// Its result's shape at the batch's max, and batch scale (as a
  /// buffer's; empty when static).
  std::vector<int64_t> shape, batchScale;
};

/// One step: an op of the registry with its attributes in the artifact's
/// generic form, or (executable >= 0) a launch of a generated kernel.
struct PlanStep {
  rt::OpId op = rt::OpId::Copy;
  std::vector<uint32_t> inputs;
  std::vector<uint32_t> outputs;
  rt::OpAttrs attrs;
  std::string location;
  /// mc-amp's decision for the op and its reason (empty without AMP).
  std::string precision, precisionReason;
  /// Index into Plan::executables and the entry point launched; -1 when
  /// the device runs its own kernel for `op`.
  int32_t executable = -1;
  std::string entry;
  /// How the device launches `entry` (Step.launch).
  rt::LaunchInfo launch;
  /// op == Fused: the region's ops, the last one's result the output.
  std::vector<PlanRegionOp> body;
  /// op == Fused with more than one output: the value numbers of outputs
  /// 1.. (Step.extra_outputs); output 0 is the last body op's result.
  std::vector<uint32_t> extraOutputs;
};

/// Code a target generated (see codegen/Target.h), stored as the artifact's
/// executables.
struct PlanExecutable {
  std::string target, format;
  std::vector<std::string> entryPoints;
  std::vector<uint8_t> data;
};

struct PlanSignature {
  std::string name;
  uint32_t buffer = 0;
};

struct Plan {
  std::string entry;
  /// The targets a device must run to run the artifact (filled from
  /// --target by buildPlan).
  std::vector<std::string> targets;
  std::vector<PlanBuffer> buffers;
  std::vector<PlanStep> steps;
  std::vector<PlanExecutable> executables;
  /// Input buffers are Arena buffers written before step 0; output buffers
  /// are Arena buffers (not aliases) read after the last step. State buffers
  /// are read in place by steps and written by steps (a global store is a
  /// Copy into one), after every read of them in the plan's step order.
  std::vector<PlanSignature> inputs;
  std::vector<PlanSignature> outputs;
  PlanBatch batch;
  uint64_t arenaSize = 0; // filled by the planner
  /// Bytes of the state region (State buffers: parameters, optimizer
  /// moments, counters), filled by the planner; 0 without State buffers.
  uint64_t stateSize = 0;
  /// The same model with one step per op (regions expanded), planned by
  /// the same planner: steps, bytes of intermediates written per run,
  /// arena. Filled by buildPlan; steps == 0 when not computed.
  struct Stats {
    uint64_t steps = 0, intermediateBytes = 0, arenaSize = 0;
  } unfused;
};

/// A fused step's body and inputs as the runtime's matchers read them
/// (dtypes and shapes; no data).
inline void regionOf(const Plan &plan, const PlanStep &step,
                     std::vector<rt::RegionOp> *body,
                     std::vector<rt::ConstTensor> *inputs) {
  for (const PlanRegionOp &op : step.body)
    body->push_back({op.op, op.attrs, op.operands, op.dtype, op.shape});
  for (uint32_t b : step.inputs)
    inputs->push_back({plan.buffers[b].dtype, plan.buffers[b].shape, nullptr});
}

/// rt::matchLibraryRegion on fused step STEP of PLAN (its types at the
/// batch's max): whether, and how, a device runs the region as one
/// library call; the device binds by the same rules.
inline rt::LibraryRegion matchLibraryStep(const Plan &plan,
                                          const PlanStep &step) {
  std::vector<rt::RegionOp> body;
  std::vector<rt::ConstTensor> inputs;
  regionOf(plan, step, &body, &inputs);
  const PlanBuffer &out = plan.buffers[step.outputs.at(0)];
  return rt::matchLibraryRegion(body, inputs, out.dtype, out.shape,
                                step.attrs.getBool("attention"));
}

/// rt::matchAttentionRegion on attention step STEP of PLAN: whether the
/// cuda device runs it as cuDNN's fused attention (the same rules).
inline rt::AttentionRegion matchAttentionStep(const Plan &plan,
                                              const PlanStep &step) {
  std::vector<rt::RegionOp> body;
  std::vector<rt::ConstTensor> inputs;
  regionOf(plan, step, &body, &inputs);
  const PlanBuffer &out = plan.buffers[step.outputs.at(0)];
  return rt::matchAttentionRegion(body, inputs, out.dtype, out.shape);
}

} // namespace mc::codegen

#endif // MODELC_CODEGEN_PLAN_H
