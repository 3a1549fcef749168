// Collectives between the processes of a data-parallel run, behind one
// interface: MPI between CPU processes today (libmpi loaded at run time),
// NCCL between GPUs later. The all-reduce step kernels
// (mc.all_reduce_start / mc.all_reduce_wait) reach the process's
// communicator through currentCommunicator().
#ifndef MODELC_COMMUNICATOR_H
#define MODELC_COMMUNICATOR_H

#include "modelc/kernels.h"
#include "modelc/status.h"

#include <cstddef>
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
  /// "self" (one process), "mpi".
  virtual std::string name() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Starts an in-place all-reduce of `count` elements at `data` (memory
  /// the host can read and write; a device communicator takes device
  /// memory). `what` names the collective in errors ("all_reduce bucket 0
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

  Status allReduce(void* data, size_t count, DType dtype, ReduceOp op,
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

/// The communicator the all-reduce kernels use; a self communicator until
/// one is set. Set it before creating the session that runs the step.
Communicator& currentCommunicator();
void setCurrentCommunicator(std::shared_ptr<Communicator> comm);

} // namespace mc::rt

#endif // MODELC_COMMUNICATOR_H
