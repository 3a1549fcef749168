// NCCL between the GPUs of a data-parallel run, loaded at run time
// (dlopen("libnccl.so.2")) like the CUDA driver and libraries: no nccl.h at
// build time, the few types and entry points the runtime uses are declared
// here. Internal to the runtime: the Communicator interface is the public
// face (makeNcclCommunicator in modelc/communicator.h).
#ifndef MODELC_RUNTIME_CUDA_NCCL_H
#define MODELC_RUNTIME_CUDA_NCCL_H

#include "CudaDevice.h"
#include "modelc/communicator.h"

#include <chrono>
#include <map>
#include <vector>

namespace mc::rt::cuda {

/// NCCL's ABI, as nccl.h 2.x declares it (stable since NCCL 2.0: the
/// enums' values and the 128-byte unique id).
namespace nccl {
typedef struct ncclComm* Comm;
constexpr size_t kUniqueIdBytes = 128;
struct UniqueId {
  char internal[kUniqueIdBytes];
};
typedef int Result; // ncclResult_t
constexpr Result kSuccess = 0, kInProgress = 7;
constexpr int kFloat32 = 7;         // ncclFloat32
constexpr int kSum = 0, kMax = 2;   // ncclSum, ncclMax
} // namespace nccl

// X(member, symbol, type)
#define MC_NCCL_FUNCTIONS(X)                                                   \
  X(getVersion, "ncclGetVersion", nccl::Result (*)(int*))                      \
  X(getUniqueId, "ncclGetUniqueId", nccl::Result (*)(nccl::UniqueId*))         \
  X(commInitRank, "ncclCommInitRank",                                          \
    nccl::Result (*)(nccl::Comm*, int, nccl::UniqueId, int))                   \
  X(allReduce, "ncclAllReduce",                                                \
    nccl::Result (*)(const void*, void*, size_t, int, int, nccl::Comm,         \
                     CUstream))                                                \
  X(groupStart, "ncclGroupStart", nccl::Result (*)())                          \
  X(groupEnd, "ncclGroupEnd", nccl::Result (*)())                              \
  X(commAbort, "ncclCommAbort", nccl::Result (*)(nccl::Comm))                  \
  X(commDestroy, "ncclCommDestroy", nccl::Result (*)(nccl::Comm))              \
  X(commGetAsyncError, "ncclCommGetAsyncError",                                \
    nccl::Result (*)(nccl::Comm, nccl::Result*))                               \
  X(getErrorString, "ncclGetErrorString", const char* (*)(nccl::Result))       \
  X(getLastError, "ncclGetLastError", const char* (*)(nccl::Comm))

struct NcclApi {
#define MC_NCCL_MEMBER(member, symbol, type)                                   \
  using member##Fn = type;                                                     \
  member##Fn member = nullptr;
  MC_NCCL_FUNCTIONS(MC_NCCL_MEMBER)
#undef MC_NCCL_MEMBER
  int version = 0; // ncclGetVersion: 22809 for 2.28.9
};

/// Loads libnccl (`library`, or MODELC_NCCL_LIBRARY, or libnccl.so.2 then
/// libnccl.so through openLibrary's search). The error names what was
/// tried and where.
Status loadNccl(const std::string& library, NcclApi* out);

/// "2.28.9" from ncclGetVersion's 22809 (or 2.x's older 2xyz encoding).
std::string ncclVersionText(int version);

/// The NCCL communicator: rank, size and NCCL's unique id at first; the
/// NCCL communicator proper (ncclCommInitRank) is created when a CUDA
/// device binds it (attach), on that device, with a stream of its own for
/// the collectives: a start queues "the bucket is packed" (an event on the
/// device's stream), then ncclAllReduce on the collective stream, so the
/// backward pass goes on on the device's stream while the bucket is on the
/// wire; a wait polls the collective's completion event and NCCL's
/// asynchronous error against the deadline (--dp-timeout), aborting the
/// NCCL communicator when it passes.
class NcclCommunicator final : public Communicator {
public:
  NcclCommunicator(NcclApi api, int rank, int size, nccl::UniqueId id);
  ~NcclCommunicator() override;
  std::string name() const override { return "nccl"; }
  std::string memory() const override { return "cuda"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status start(void* data, size_t count, DType dtype, ReduceOp op,
               const std::string& what) override;
  Status wait(void* data) override;
  void abort(int code) override;
  Status allReduceHost(float* data, size_t count, ReduceOp op,
                       const std::string& what) override;

  /// Creates the NCCL communicator on `device` (once; every rank calls it
  /// while binding its first all-reduce step, which ncclCommInitRank
  /// requires of all ranks together). A second device is refused.
  Status attach(CudaDevice& device);
  const NcclApi& api() const { return api_; }
  const nccl::UniqueId& uniqueId() const { return id_; }

private:
  Status ncclError(nccl::Result r, const std::string& what) const;
  /// Destroys (or aborts) the NCCL communicator and frees the stream,
  /// events and scratch in the device's context; the communicator is then
  /// on no device. Run by the destructor, or by the device when it goes
  /// first (the process's communicator outlives a session).
  void release();
  struct Pending {
    CUevent done = nullptr;
    std::string what;
    std::chrono::steady_clock::time_point started;
  };
  NcclApi api_;
  int rank_ = 0, size_ = 1;
  nccl::UniqueId id_{};
  nccl::Comm comm_ = nullptr;
  bool aborted_ = false;
  CudaDevice* device_ = nullptr;
  std::string releasedFrom_; // the device it was on, once released
  /// What the device runs when it goes first (see release).
  std::shared_ptr<std::function<void()>> teardown_;
  CUstream stream_ = nullptr; // the collectives' stream
  CUevent ready_ = nullptr;   // "the bucket is packed", on the device's
  std::vector<CUevent> freeEvents_;
  CUdeviceptr hostScratch_ = 0; // allReduceHost's device buffer
  size_t hostScratchBytes_ = 0;
  std::map<void*, Pending> pending_;
};

} // namespace mc::rt::cuda

#endif // MODELC_RUNTIME_CUDA_NCCL_H
