// The target registry and the CPU target (see Target.h).
#include "codegen/Target.h"

#include "codegen/cuda/CudaTarget.h"
#include "passes/Passes.h"

#include <mutex>

namespace mc::codegen {

Target::~Target() = default;

namespace {

/// The CPU target: every op is a step the runtime's CPU device runs with
/// its registered kernel; element types from the op registry (ODS's
/// mcCpuTypes).
class CpuTarget final : public Target {
public:
  std::string name() const override { return "cpu"; }
  std::string elementTypes(rt::OpId op) const override {
    return rt::opInfo(op).cpuTypes;
  }
  // A fused region computes whole rows per tile: a reduction of more than
  // mc-fuse's max-full-reduction (65536) elements to one value would be
  // one tile on one thread, so it is split; unfused, each op is its own
  // step (--no-fuse: one step per op).
  ReductionSplit reductionSplit(bool fuse) const override {
    if (!fuse)
      return {};
    return {1, 65537};
  }
  // oneDNN's sgemm reads B untransposed 1.2-2x faster from 8 rows to a few
  // dozen, about as fast with many (below 8 rows the pass keeps [N, K]);
  // benchmarks.md, "Weights in the layout the product reads".
  bool pretransposesWeights() const override { return true; }
  bool runsChannelsLast() const override { return true; }
};

std::vector<std::unique_ptr<Target>>& targets() {
  static std::vector<std::unique_ptr<Target>> list;
  return list;
}

void add(std::unique_ptr<Target> target,
         std::string (*types)(rt::OpId)) {
  mc::registerTargetContract(TargetContract{target->name(), types});
  targets().push_back(std::move(target));
}

} // namespace

void registerTargets() {
  static std::once_flag once;
  std::call_once(once, [] {
    add(std::make_unique<CpuTarget>(), [](rt::OpId op) {
      return lookupTarget("cpu")->elementTypes(op);
    });
    add(cuda::createCudaTarget(), [](rt::OpId op) {
      return lookupTarget("cuda")->elementTypes(op);
    });
  });
}

const Target* lookupTarget(llvm::StringRef name) {
  for (const auto& t : targets())
    if (t->name() == name)
      return t.get();
  return nullptr;
}

std::vector<std::string> targetNames() {
  std::vector<std::string> names;
  for (const auto& t : targets())
    names.push_back(t->name());
  return names;
}

} // namespace mc::codegen
