// The executable plan: what codegen lowers an mc function to, before it is
// serialized into a .mcpk. MLIR-free on purpose, so the memory planner and
// the artifact writer are testable without the compiler.
#ifndef MODELC_CODEGEN_PLAN_H
#define MODELC_CODEGEN_PLAN_H

#include "mcpk_generated.h"
#include "modelc/kernels.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mc::codegen {

struct PlanBuffer {
  std::string name;
  rt::DType dtype = rt::DType::F32;
  std::vector<int64_t> shape;
  fb::BufferKind kind = fb::BufferKind::Arena;
  /// Constants: the bytes (numel * dtypeSize), placed in the data section
  /// by the writer. State buffers: the initial bytes, placed in the state
  /// region's initial image (inside the data section).
  std::vector<uint8_t> data;
  /// Arena buffers only: when >= 0, this buffer is a view (same bytes,
  /// another shape, e.g. a reshape) of buffer `aliasOf`, which is never
  /// itself an alias. The planner gives it its root's offset.
  int64_t aliasOf = -1;
  /// Filled by the planner: arena offset, data-section offset for constants
  /// (see layoutConstants), state-region offset for State buffers (see
  /// layoutState).
  uint64_t offset = 0;

  uint64_t byteSize() const;
};

struct PlanStep {
  fb::OpKind kind = fb::OpKind::Copy;
  std::vector<uint32_t> inputs;
  std::vector<uint32_t> outputs;
  // Attributes, by kind: MatMul uses transposeA/B; ReduceSum/Mean/Max use
  // ints (dims) and keepdim; Transpose uses ints (permutation);
  // BroadcastInDim uses ints (dims); Softmax uses axis.
  bool transposeA = false, transposeB = false, keepdim = false;
  std::vector<int64_t> ints;
  int64_t axis = 0;
  // Schema 1.1 ops. axis: Softmax/LogSoftmax, Concat, Gather, BatchNorm
  // (feature axis), LayerNorm (first normalized axis); ints: reduce dims
  // (ReduceMin too).
  bool tanhApproximation = false;          // Gelu
  double minValue = 0, maxValue = 0;       // Clamp
  fb::CompareDirection direction = fb::CompareDirection::EQ; // Compare
  std::vector<int64_t> start;              // Slice
  std::vector<int64_t> strides;            // Slice, Conv2d, pools ([h, w])
  std::vector<int64_t> low, high;          // Pad
  double padValue = 0;                     // Pad
  std::vector<int64_t> padding;            // Conv2d, pools [top, left, bottom, right]
  std::vector<int64_t> dilation;           // Conv2d, pools [h, w]
  std::vector<int64_t> kernel;             // pools [h, w]
  int64_t groups = 1;                      // Conv2d
  bool countIncludePad = false;            // AvgPool2d
  double epsilon = 0;                      // BatchNorm, LayerNorm
  std::string location;
  /// mc-amp's decision for the op and its reason (empty without AMP).
  std::string precision, precisionReason;
};

struct PlanSignature {
  std::string name;
  uint32_t buffer = 0;
};

struct Plan {
  std::string entry;
  std::vector<std::string> targets{"cpu"};
  std::vector<PlanBuffer> buffers;
  std::vector<PlanStep> steps;
  /// Input buffers are Arena buffers written before step 0; output buffers
  /// are Arena buffers (not aliases) read after the last step. State buffers
  /// are read in place by steps and written by steps (a global store is a
  /// Copy into one), after every read of them in the plan's step order.
  std::vector<PlanSignature> inputs;
  std::vector<PlanSignature> outputs;
  uint64_t arenaSize = 0; // filled by the planner
  /// Bytes of the state region (State buffers: parameters, optimizer
  /// moments, counters), filled by the planner; 0 without State buffers.
  uint64_t stateSize = 0;
};

} // namespace mc::codegen

#endif // MODELC_CODEGEN_PLAN_H
