// Collectives between the processes of a data-parallel run, behind one
// interface: MPI between CPU processes (libmpi loaded at run time), NCCL
// between GPUs (libnccl loaded at run time, with the CUDA device). The
// all-reduce step kernels (mc.all_reduce_start / mc.all_reduce_wait) reach
// the process's communicator through currentCommunicator(). A
// torchrun-style launch (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) hands
// NCCL's unique id from rank 0 to the others over a TCP bootstrap.
#ifndef MODELC_COMMUNICATOR_H
#define MODELC_COMMUNICATOR_H

#include "modelc/kernels.h"
#include "modelc/status.h"

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

namespace mc::rt {

enum class ReduceOp : uint8_t { Sum, Max };

/// What a communicator has done, for MODELC_PROFILE and the benchmark.
struct CommStats {
  long long collectives = 0;
  double bytes = 0;
  /// Seconds spent blocked in waits (and in starts, which only post): the
  /// all-reduce time the backward pass did not hide.
  double blockedSeconds = 0;
};

class Communicator {
public:
  virtual ~Communicator();
  /// "self" (one process), "mpi", "nccl".
  virtual std::string name() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Where start() and wait() take their buffers: "host" (self, mpi) or
  /// "cuda" (nccl: device memory, queued on the device's streams).
  virtual std::string memory() const { return "host"; }
  /// Starts an in-place all-reduce of `count` elements at `data` (memory
  /// as memory() says). `what` names the collective in errors ("all_reduce bucket 0
  /// (step 12)"). At most one collective is pending per `data`.
  virtual Status start(void* data, size_t count, DType dtype, ReduceOp op,
                       const std::string& what) = 0;
  /// Waits for the collective started on `data`. Fails, naming this rank,
  /// the collective and the ranks it waited for, when it has not completed
  /// within timeoutSeconds() (a rank died or hangs).
  virtual Status wait(void* data) = 0;
  /// Ends every process of the run (MPI_Abort): after a failed wait, the
  /// others may be stuck in a collective that will never complete.
  virtual void abort(int code) = 0;
  /// Copies `bytes` bytes at `data` from rank `root` to every rank
  /// (blocking; host memory): how an MPI world hands NCCL's unique id
  /// around. Only MPI implements it.
  virtual Status broadcast(void* data, size_t bytes, int root);

  Status allReduce(void* data, size_t count, DType dtype, ReduceOp op,
                   const std::string& what);
  /// An all-reduce of f32 values in host memory, whatever memory() is
  /// (the training loop's loss): allReduce for host communicators; NCCL
  /// copies them through a device buffer.
  virtual Status allReduceHost(float* data, size_t count, ReduceOp op,
                               const std::string& what);
  void setTimeout(double seconds) { timeout_ = seconds; }
  double timeoutSeconds() const { return timeout_; }
  const CommStats& stats() const { return stats_; }
  /// The `ranks` of the last all-reduce step bound to this communicator (0:
  /// none): a launcher checks that the artifact averages over its world.
  int64_t boundRanks() const { return boundRanks_; }
  void noteBoundRanks(int64_t ranks) { boundRanks_ = ranks; }
  void resetStats() { stats_ = CommStats(); }

protected:
  double timeout_ = 300;
  CommStats stats_;
  int64_t boundRanks_ = 0;
};

/// One process alone: every collective is the identity.
std::unique_ptr<Communicator> makeSelfCommunicator();

/// MPI_COMM_WORLD of a process started by mpirun (or with torchrun-style
/// RANK/WORLD_SIZE checked against it), with libmpi loaded at run time:
/// `library` (default: libmpi.so.40, then libmpi.so). Fails with a message
/// when libmpi is missing or the runtime was built without MPI headers.
Status makeMpiCommunicator(std::unique_ptr<Communicator>* out,
                           const std::string& library = "");

/// Whether this process looks started by an MPI launcher (OMPI_COMM_WORLD_SIZE,
/// PMI_SIZE, PMIX_RANK in the environment).
bool startedByMpiLauncher();

/// The torchrun-style launch variables. `present` when WORLD_SIZE is set;
/// LOCAL_RANK defaults to RANK.
struct LaunchVars {
  bool present = false;
  int rank = 0, worldSize = 1, localRank = 0;
  std::string masterAddr;
  /// The bootstrap's port: MASTER_PORT, or MASTER_PORT + 1 under torchrun
  /// (TORCHELASTIC_RUN_ID set: torchrun's own store listens on
  /// MASTER_PORT), or MODELC_BOOTSTRAP_PORT when set; `portName` says
  /// which, for messages.
  int masterPort = 0;
  std::string portName = "MASTER_PORT";
};

/// Reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT and
/// checks them (integers, RANK in [0, WORLD_SIZE), MASTER_ADDR and
/// MASTER_PORT set when WORLD_SIZE > 1).
Status readLaunchVars(LaunchVars* out);

/// The TCP bootstrap of a torchrun-style launch: rank 0 listens on
/// MASTER_PORT (every address of MASTER_ADDR's family) and, once all
/// WORLD_SIZE - 1 other ranks have connected, sends each of them `*bytes`;
/// the others connect to MASTER_ADDR:MASTER_PORT (retrying while rank 0 is
/// not up yet) and receive them into `*bytes`. Every step has a deadline of
/// `timeoutSeconds` from the call; errors name the rank and what went
/// wrong: a port in use, a rank that never connects, a WORLD_SIZE that
/// differs between ranks, a RANK out of range or given twice. Nothing is
/// exchanged when WORLD_SIZE is 1.
Status tcpBroadcast(const LaunchVars& vars, double timeoutSeconds,
                    std::string* bytes);

/// NCCL between the GPUs of the ranks, libnccl loaded at run time
/// (`library`, default libnccl.so.2 then libnccl.so, in the loader's path
/// and then the CUDA toolkit's folders; MODELC_NCCL_LIBRARY names another).
/// Rank 0 makes NCCL's unique id and `exchange` hands it to every rank
/// (tcpBroadcast, or an MPI communicator's broadcast); the NCCL
/// communicator itself is created when the CUDA device binds the first
/// all-reduce step, on that device. Fails with a message naming what was
/// tried when libnccl cannot be loaded, or when the runtime has no CUDA
/// device.
Status makeNcclCommunicator(
    int rank, int worldSize, double timeoutSeconds,
    const std::function<Status(std::string* id)>& exchange,
    std::unique_ptr<Communicator>* out, const std::string& library = "");

/// A collective that did not complete in time, as every communicator says
/// it: "rank 0 of 2: <what> did not complete within 2 s (--dp-timeout):
/// rank 1 did not join it: died or hangs".
std::string collectiveTimeoutText(int rank, int size, const std::string& what,
                                  double timeoutSeconds);

/// The all-reduce start kernels' check that the artifact was compiled for
/// this world: "the artifact was compiled for 2 data-parallel ranks ...".
Status checkWorldForArtifact(int64_t ranks, const Communicator& comm);

/// The communicator the all-reduce kernels use; a self communicator until
/// one is set. Set it before creating the session that runs the step.
Communicator& currentCommunicator();
void setCurrentCommunicator(std::shared_ptr<Communicator> comm);

} // namespace mc::rt

#endif // MODELC_COMMUNICATOR_H
