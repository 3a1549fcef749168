// The runtime's seam for backends: a Device (memory, copies, running steps,
// synchronizing) registered by name, and kernels registered per (op,
// device). The CPU device is the first; a CUDA device plugs in the same way,
// in its own files, without edits to the executor (docs/compiler.md,
// "How to add a target").
#ifndef MODELC_DEVICE_H
#define MODELC_DEVICE_H

#include "modelc/kernels.h"
#include "modelc/ops.h"
#include "modelc/status.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace mc::rt {

/// Memory a device allocated; freed by its deleter.
using DeviceMemory = std::unique_ptr<uint8_t, std::function<void(uint8_t*)>>;

/// Times the steps of runs for MODELC_PROFILE (see Device::stepTimer).
class StepTimer {
public:
  virtual ~StepTimer();
  /// Called before step `index` runs, and with index == the number of
  /// steps after the last one.
  virtual void mark(size_t index) = 0;
  /// Called after the run synchronized: adds to seconds[i] the time step i
  /// took in it (seconds has one entry per step).
  virtual Status collect(std::vector<double>& seconds) = 0;
};

class Device {
public:
  virtual ~Device();
  /// "cpu", "cuda:0": what users pass to --device and what errors name.
  virtual std::string name() const = 0;
  /// The registry name of its kind ("cpu"); kernels are registered per kind.
  virtual std::string kind() const = 0;
  /// The artifact targets this device runs ("cpu").
  virtual std::vector<std::string> targets() const = 0;
  /// Whether the host may read and write device memory directly (a CPU).
  virtual bool hostAccessible() const = 0;
  /// `bytes` of device memory, 64-byte aligned (zero bytes: a null pointer).
  virtual Status allocate(size_t bytes, DeviceMemory* out) = 0;
  virtual Status copyToDevice(void* dst, const void* hostSrc, size_t n) = 0;
  virtual Status copyToHost(void* hostDst, const void* src, size_t n) = 0;
  /// Waits for everything queued on the device; reports asynchronous
  /// errors.
  virtual Status synchronize() = 0;

  /// Called once per session, before any step is bound, with every one of
  /// the artifact's executables, in the file's order (a device loads those
  /// of its targets: cubins, PTX, and ignores the rest). The views point
  /// into the artifact, which outlives the session.
  virtual Status loadExecutables(const std::vector<struct ExecutableView>& e);
  /// Binds a step that launches a generated kernel (request.generated is
  /// set); devices without generated code refuse.
  virtual Status bindGenerated(const struct KernelRequest& request,
                               BoundKernel* out);

  /// Runs the steps of one Session::run: `runAll` calls every step's
  /// kernel in order and returns the first error (already naming the
  /// step). `key` names the step list together with every address it
  /// touches (tensors, workspace): a later call with the same key runs the
  /// same kernels on the same memory, so a device may record one run's
  /// work and replay it (the CUDA device records a key's second run as a
  /// CUDA graph and replays it from the third). Session gives a binding a
  /// new key whenever any of that changes. Key 0: run as is and record
  /// nothing (profiling). The default calls runAll().
  virtual Status runSteps(uint64_t key, const std::function<Status()>& runAll);
  /// The timer MODELC_PROFILE uses. The default reads the host clock at
  /// each mark, which times steps that run synchronously (the CPU); a
  /// device with asynchronous steps times them on the device (CUDA
  /// events).
  virtual std::unique_ptr<StepTimer> stepTimer();
};

/// One of the artifact's executables (Model.executables).
struct ExecutableView {
  std::string target, format;
  std::vector<std::string> entryPoints;
  const uint8_t* data = nullptr;
  size_t size = 0;
};

/// How a generated kernel is launched (Step.launch in mcpk.fbs): blocks of
/// `block` threads, each covering `perBlock` units, for
/// units + unitsPerBatch * batch units in all.
struct LaunchInfo {
  uint32_t block = 0, perBlock = 0, sharedBytes = 0;
  uint64_t units = 0, unitsPerBatch = 0;
  /// The kernel's last parameter is a pointer to its error record (two
  /// u64, zeroed; see ErrorRecord in modelc/error_record.h).
  bool errorRecord = false;
  uint64_t unitsAt(int64_t batch) const {
    return units + unitsPerBatch * uint64_t(batch < 0 ? 0 : batch);
  }
};

/// A step that launches entry `entry` of executable `executable` (an index
/// into the artifact's executables, as passed to loadExecutables).
struct GeneratedKernel {
  uint32_t executable = 0;
  std::string entry;
  LaunchInfo launch;
  /// The session's batch, the kernel's last argument (0: static model).
  int64_t batch = 0;
};

/// One op of a fused region (an mc.fused step's body; rules at Step.body
/// in runtime/schema/mcpk.fbs): value numbers are the step's inputs, then
/// each op's result in order; every result has the step output's shape.
struct RegionOp {
  OpId op;
  OpAttrs attrs;
  std::vector<uint32_t> operands;
  DType dtype;
  Shape shape; // its result's, at the session's batch
};

/// What a kernel factory gets: one step of a session, its tensors in the
/// device's memory (shapes and dtypes checked by the artifact verifier).
struct KernelRequest {
  OpId op;
  const OpAttrs& attrs;
  std::vector<ConstTensor> inputs;
  MutTensor output;
  Device& device;
  /// op == Fused: the region's ops; null otherwise.
  const std::vector<RegionOp>* body = nullptr;
  /// constantInputs[i]: input i is a weight of the artifact's constant
  /// section, filled before binding and never written while the session
  /// lives, so a factory may preprocess it once (reorder, pack). Empty, or
  /// shorter than inputs: not constant.
  std::vector<bool> constantInputs = {};
  /// A launch of a generated kernel of this device's target; null for the
  /// device's own kernels (see Device::bindGenerated).
  const GeneratedKernel* generated = nullptr;
  /// The step's index and source location, for errors.
  uint32_t stepIndex = 0;
  std::string location = {};
  /// op == Fused with more than one output (schema 2.7, a plain elementwise
  /// region): outputs 1.., and the body value number each holds (output is
  /// the last op's). Every such kernel stores a unit's outputs after it
  /// has read all of that unit's inputs, so an output may be an input's
  /// buffer (in place) as for one output.
  std::vector<MutTensor> extraOutputs = {};
  std::vector<uint32_t> extraValues = {};
  /// inputBounds[i]: the bound (modelc/kernels.h's ValueBound) that the
  /// step which wrote input i may publish; null for a graph input, a
  /// constant or a state. outputBound: this step's own slot for its
  /// output. Empty and null where the caller tracks none (a kernel must
  /// work without them).
  std::vector<const ValueBound*> inputBounds = {};
  ValueBound* outputBound = nullptr;
  bool isConstant(size_t i) const {
    return i < constantInputs.size() && constantInputs[i];
  }
  const ValueBound* inputBound(size_t i) const {
    return i < inputBounds.size() ? inputBounds[i] : nullptr;
  }
};

// A step's kernel is a BoundKernel (modelc/kernels.h): run() calls it once
// per step with scratch of the size the factory asked for (shared by the
// steps, which run one at a time).

/// Checks a step once, when the session is created, and returns what run()
/// calls; `workspaceBytes` (initially 0) is how much scratch it needs.
using KernelFactory = Status (*)(const KernelRequest& request,
                                 BoundKernel* out, size_t* workspaceBytes);

/// Registers `factory` as the kernel of `op` on devices of kind `device`.
/// Use MC_REGISTER_KERNEL in the file that holds the kernel.
void registerKernel(const char* device, OpId op, KernelFactory factory);
/// The kernel of `op` on `device` kinds; null when there is none.
KernelFactory findKernel(const std::string& device, OpId op);

struct KernelRegistration {
  KernelRegistration(const char* device, OpId op, KernelFactory factory) {
    registerKernel(device, op, factory);
  }
};
#define MC_REGISTER_KERNEL(device, op, factory)                                \
  static ::mc::rt::KernelRegistration mcKernel_##device##_##op(                \
      #device, ::mc::rt::OpId::op, factory)

/// Creates device `ordinal` of a kind; fails (with why) when it is absent.
using DeviceFactory = Status (*)(int ordinal, std::unique_ptr<Device>* out);
/// How many devices of a kind this machine has (0 when the driver or the
/// hardware is missing). Cheap after the first call, never prints.
using DeviceCounter = int (*)();
/// Why a kind has no device here ("no CUDA driver: libcuda.so.1 not
/// found"); called only when its count is 0.
using DeviceAbsence = std::string (*)();

struct DeviceKind {
  std::string name;
  /// Larger is preferred by "auto" (cpu: 0).
  int priority = 0;
  DeviceFactory create = nullptr;
  DeviceCounter count = nullptr;
  /// The artifact targets devices of this kind run.
  std::vector<std::string> targets;
  /// Optional: said in errors and by "auto" when the count is 0.
  DeviceAbsence whyAbsent = nullptr;
};

void registerDeviceKind(DeviceKind kind);
const std::vector<DeviceKind>& deviceKinds();

struct DeviceKindRegistration {
  explicit DeviceKindRegistration(DeviceKind kind) {
    registerDeviceKind(std::move(kind));
  }
};

/// "cpu", "cuda", "cuda:1" or "auto" (the preferred kind present, e.g.
/// cuda:0 on a machine with a GPU, else cpu; with `targets`, an artifact's,
/// the preferred one that runs one of them). Errors name what is offered,
/// and why a kind has no device ("device 'cuda' is not present (no CUDA
/// driver: libcuda.so.1 not found; available: cpu)"). With `why`, "auto"
/// says why it chose what it chose ("cuda skipped: no CUDA driver: ...").
Status createDevice(const std::string& spec, std::unique_ptr<Device>* out,
                    std::string* why = nullptr,
                    const std::vector<std::string>& targets = {});
/// The devices present, by name ("cpu", "cuda:0", ...).
std::vector<std::string> availableDevices();
/// Every target a device present here runs.
std::vector<std::string> offeredTargets();

} // namespace mc::rt

#endif // MODELC_DEVICE_H
