// The CUDA device (kind "cuda", target "cuda"): one GPU's primary context,
// one stream, device memory, pinned staging for host copies, the
// artifact's generated kernels, CUDA graphs that replay a session's steps,
// and event timing for MODELC_PROFILE. Internal to the runtime; kernels
// registered for "cuda" reach it through KernelRequest::device.
#ifndef MODELC_RUNTIME_CUDA_CUDADEVICE_H
#define MODELC_RUNTIME_CUDA_CUDADEVICE_H

#include "CudaDriver.h"
#include "modelc/device.h"
#include "modelc/error_record.h"

#include <functional>
#include <map>
#include <memory>

typedef struct cublasLtContext* cublasLtHandle_t;
typedef struct cudnnContext* cudnnHandle_t;

namespace mc::rt::cuda {

struct CublasLt;
struct Cudnn;

/// A retained primary context; released when the device and every
/// allocation made on it are gone.
struct Context {
  const CudaDriver* d = nullptr;
  CUdevice device = 0;
  CUcontext ctx = nullptr;
  ~Context();
};

/// What the artifact's CUDA executables say about one entry point: which
/// executable the device runs it from.
struct LoadedEntry {
  size_t executable = 0; // index among the artifact's executables
  CUmodule module = nullptr;
};

class CudaDevice final : public Device {
public:
  static Status create(int ordinal, std::unique_ptr<Device>* out);
  ~CudaDevice() override;

  std::string name() const override { return "cuda:" + std::to_string(ordinal_); }
  std::string kind() const override { return "cuda"; }
  std::vector<std::string> targets() const override { return {"cuda"}; }
  bool hostAccessible() const override { return false; }
  Status allocate(size_t bytes, DeviceMemory* out) override;
  Status copyToDevice(void* dst, const void* hostSrc, size_t n) override;
  Status copyToHost(void* hostDst, const void* src, size_t n) override;
  Status synchronize() override;
  Status loadExecutables(const std::vector<ExecutableView>& e) override;
  Status bindGenerated(const KernelRequest& request, BoundKernel* out) override;
  Status runSteps(uint64_t key, const std::function<Status()>& runAll) override;
  std::unique_ptr<StepTimer> stepTimer() override;

  // For the kernels registered for "cuda".
  const CudaDriver& driver() const { return *ctx_->d; }
  CUstream stream() const { return stream_; }
  /// Makes the device's context current on the calling thread.
  Status makeCurrent() const;
  /// OK, or "<what>: CUDA_ERROR_... (...)".
  Status check(CUresult r, const std::string& what) const;
  /// The step's kernel: `launch` queues its work on the stream. The device
  /// remembers the last step it queued (to name it when an asynchronous
  /// error surfaces) and, with MODELC_CUDA_SYNC=1, synchronizes after
  /// each step so that the failing one is named.
  BoundKernel step(const KernelRequest& request,
                   std::function<Status(void* workspace)> launch);
  /// The cuBLASLt library and this device's handle, created on first use.
  Status cublasLt(const CublasLt** lib, cublasLtHandle_t* handle);
  /// The cuDNN library and this device's handle (on the device's stream),
  /// created on first use.
  Status cudnn(const Cudnn** lib, cudnnHandle_t* handle);
  /// "NVIDIA H100 80GB HBM3 (sm_90)".
  std::string gpuText() const;
  int ccMajor() const { return ccMajor_; }
  int ccMinor() const { return ccMinor_; }
  int smCount() const { return smCount_; }
  /// The format of the executable entry `entry` runs from ("" when none
  /// was loaded), for tests and messages.
  std::string entryFormat(const std::string& entry) const;
  /// Runs every step list step by step from now on, never as a CUDA graph
  /// (a step the host must watch, such as a collective), saying why once
  /// on stderr when graphs were on.
  void disableGraphs(const std::string& why);
  /// How many step lists runSteps replays as CUDA graphs (for tests).
  size_t graphCount() const;
  /// The error record (modelc/error_record.h) of the kernel of step `r`,
  /// which can fail: a zeroed 16-byte slot of device memory at *out. At
  /// the end of each runSteps the device queues a copy of its records to
  /// pinned host memory (inside the CUDA graph when one is recorded);
  /// synchronize() then reports the failed record of the lowest step
  /// with the CPU kernel's message (kernelErrorMessage), and zeroes the
  /// records. `*id` names the record for releaseErrorRecord.
  Status errorRecord(const KernelRequest& r, CUdeviceptr* out, size_t* id);
  /// The kernel that had record `id` is gone (its binding was dropped): the
  /// slot is free for another.
  void releaseErrorRecord(size_t id);
  /// Error record slots handed out so far, free ones included (for tests).
  size_t errorRecordSlots() const { return recordChecks_.size(); }
  /// A kernel of the runtime's own (PTX text compiled into the library),
  /// loaded into this device's context on first use and unloaded with the
  /// device: a function handle never outlives the context it came from.
  Status runtimeKernel(const char* ptx, const std::string& entry,
                       CUfunction* out);
  /// Runs `teardown`, if it is still alive, when the device goes, with
  /// the device's context current and its stream idle: for what lives in
  /// the device's context but not in the device (the NCCL communicator's
  /// stream, events and communicator), and may outlive it.
  void atTeardown(std::weak_ptr<std::function<void()>> teardown);
  /// Device memory made once from a constant of an artifact (a
  /// convolution's KRSC filter), shared by every binding that asks for the
  /// same KEY while one still holds it: every batch size a session binds,
  /// and every session of the model on this device. Null when none does.
  std::shared_ptr<const void> derived(const std::string& key);
  void keepDerived(const std::string& key, std::weak_ptr<const void> memory);

private:
  CudaDevice() = default;
  /// Queues a copy of n host bytes through the pinned staging buffer.
  Status stage(void* dst, const void* src, size_t n);
  /// A pinned staging buffer of at least `bytes` (pinnedFailed_ when the
  /// driver gives none: copies then go from pageable memory).
  Status ensurePinned(size_t bytes);
  /// "step N (mc.op at loc)", as errors name a step.
  static std::string stepText(const KernelRequest& r);
  /// An asynchronous error, naming the last step queued.
  Status asyncError(CUresult r, const std::string& what) const;
  /// Queues the copies of the error records to their host mirrors.
  Status queueRecordCopies();
  /// After the stream is idle: the lowest failed record's error (the
  /// records are then zeroed), else OK. `atStep`: right after a step
  /// (MODELC_CUDA_SYNC), whose caller names it.
  Status checkRecords(bool atStep);
  void note(const std::string& text);

  std::shared_ptr<Context> ctx_;
  int ordinal_ = 0;
  std::string gpuName_;
  int ccMajor_ = 0, ccMinor_ = 0, smCount_ = 0;
  size_t sharedOptin_ = 48 << 10;
  CUstream stream_ = nullptr;
  // Pinned host memory that copies go through (cuMemAllocHost).
  uint8_t* pinned_ = nullptr;
  size_t pinnedSize_ = 0, pinnedUsed_ = 0;
  bool pinnedFailed_ = false;
  // The artifact's executables and the modules loaded from them.
  std::vector<ExecutableView> exes_;
  std::map<std::string, LoadedEntry> entries_;
  std::vector<CUmodule> modules_;
  std::map<std::string, CUfunction> functions_;
  // CUDA graphs by runSteps key (at most kMaxGraphs).
  struct Recorded {
    uint64_t key = 0;
    CUgraphExec exec = nullptr;
    bool failed = false; // could not be recorded: runs step by step
  };
  std::vector<Recorded> recorded_;
  bool graphs_ = true, syncEachStep_ = false, noted_ = false;
  /// The step last queued, or what ran last ("a replayed CUDA graph").
  std::shared_ptr<const std::string> lastStep_;
  const CublasLt* lt_ = nullptr;
  cublasLtHandle_t ltHandle_ = nullptr;
  const Cudnn* dnn_ = nullptr;
  cudnnHandle_t dnnHandle_ = nullptr;
  // Error records: blocks of slots in device memory with pinned host
  // mirrors (neither moves once a graph captured a copy between them).
  struct RecordBlock {
    CUdeviceptr device = 0;
    uint64_t* host = nullptr;
    size_t used = 0; // slots handed out
  };
  struct RecordCheck {
    bool live = true; // a bound kernel has it
    size_t block = 0, slot = 0;
    uint32_t stepIndex = 0;
    std::string where; // "step N (mc.op at loc)"
    // What kernelErrorMessage needs of the step.
    OpId op = OpId::Copy;
    OpAttrs attrs;
    std::vector<Shape> inputs;
  };
  std::vector<RecordBlock> recordBlocks_;
  std::vector<RecordCheck> recordChecks_;
  // runtimeKernel's modules (apart from the artifact's, which
  // loadExecutables replaces) and functions by entry name.
  std::vector<CUmodule> runtimeModules_;
  std::map<std::string, CUfunction> runtimeFunctions_;
  std::vector<std::weak_ptr<std::function<void()>>> teardowns_;
  std::map<std::string, std::weak_ptr<const void>> derived_;
};

/// The CudaDevice a kernel request runs on (kernels registered for "cuda"
/// get only those).
inline CudaDevice& cudaDevice(const KernelRequest& r) {
  return static_cast<CudaDevice&>(r.device);
}

/// Whether the environment variable is set to something other than "" or
/// "0".
bool envFlag(const char* name, bool dflt);

} // namespace mc::rt::cuda

#endif // MODELC_RUNTIME_CUDA_CUDADEVICE_H
