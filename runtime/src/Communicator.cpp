// Communicators: one process alone, and MPI with libmpi loaded at run time
// (so modelc-run and the runtime library start on machines without MPI;
// docs/decisions.md, "Data parallelism: MPI loaded at run time").
#include "modelc/communicator.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#ifdef MODELC_HAVE_MPI_H
#include <dlfcn.h>
// Types and OpenMPI's ABI only: no C++ bindings, nothing linked.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace mc::rt {

Communicator::~Communicator() = default;

Status Communicator::allReduce(void* data, size_t count, DType dtype,
                               ReduceOp op, const std::string& what) {
  MC_RETURN_IF_ERROR(start(data, count, dtype, op, what));
  return wait(data);
}

namespace {

class SelfCommunicator final : public Communicator {
public:
  std::string name() const override { return "self"; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Status start(void*, size_t count, DType dtype, ReduceOp,
               const std::string&) override {
    ++stats_.collectives;
    stats_.bytes += double(count * dtypeSize(dtype));
    return Status::ok();
  }
  Status wait(void*) override { return Status::ok(); }
  void abort(int code) override { std::_Exit(code); }
};

std::mutex gMutex;
std::shared_ptr<Communicator> gCurrent;

} // namespace

std::unique_ptr<Communicator> makeSelfCommunicator() {
  return std::make_unique<SelfCommunicator>();
}

Communicator& currentCommunicator() {
  std::lock_guard<std::mutex> lock(gMutex);
  if (!gCurrent)
    gCurrent = makeSelfCommunicator();
  return *gCurrent;
}

void setCurrentCommunicator(std::shared_ptr<Communicator> comm) {
  std::lock_guard<std::mutex> lock(gMutex);
  gCurrent = std::move(comm);
}

bool startedByMpiLauncher() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(v))
      return true;
  return false;
}

#ifdef MODELC_HAVE_MPI_H
namespace {

/// The few MPI entry points the runtime calls, and OpenMPI's predefined
/// handles (MPI_COMM_WORLD, MPI_FLOAT, ... are addresses of these globals
/// in OpenMPI's ABI, which Debian's libmpi.so.40 keeps).
struct MpiApi {
  void* lib = nullptr;
  int (*Initialized)(int*) = nullptr;
  int (*Finalized)(int*) = nullptr;
  int (*InitThread)(int*, char***, int, int*) = nullptr;
  int (*Finalize)() = nullptr;
  int (*CommRank)(MPI_Comm, int*) = nullptr;
  int (*CommSize)(MPI_Comm, int*) = nullptr;
  int (*Iallreduce)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm,
                    MPI_Request*) = nullptr;
  int (*Test)(MPI_Request*, int*, MPI_Status*) = nullptr;
  int (*Abort)(MPI_Comm, int) = nullptr;
  MPI_Comm world = nullptr;
  MPI_Datatype f32 = nullptr, f64 = nullptr;
  MPI_Op sum = nullptr, max = nullptr;
};

template <class F> bool sym(void* lib, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(lib, name));
  return *out != nullptr;
}

Status loadMpi(const std::string& library, MpiApi* api) {
  std::string tried;
  std::vector<std::string> names;
  if (!library.empty())
    names.push_back(library);
  else
    names = {"libmpi.so.40", "libmpi.so"};
  for (const std::string& n : names) {
    // RTLD_GLOBAL: OpenMPI's plugins resolve libmpi's symbols from the
    // global scope.
    api->lib = dlopen(n.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (api->lib)
      break;
    tried += (tried.empty() ? "" : "; ") + std::string(dlerror());
  }
  if (!api->lib)
    return Status::error("cannot load MPI (" + tried +
                         "): install Debian's OpenMPI (apt-get install "
                         "openmpi-bin libopenmpi3)");
  void* l = api->lib;
  bool ok = sym(l, "MPI_Initialized", &api->Initialized) &&
            sym(l, "MPI_Finalized", &api->Finalized) &&
            sym(l, "MPI_Init_thread", &api->InitThread) &&
            sym(l, "MPI_Finalize", &api->Finalize) &&
            sym(l, "MPI_Comm_rank", &api->CommRank) &&
            sym(l, "MPI_Comm_size", &api->CommSize) &&
            sym(l, "MPI_Iallreduce", &api->Iallreduce) &&
            sym(l, "MPI_Test", &api->Test) && sym(l, "MPI_Abort", &api->Abort);
  api->world = reinterpret_cast<MPI_Comm>(dlsym(l, "ompi_mpi_comm_world"));
  api->f32 = reinterpret_cast<MPI_Datatype>(dlsym(l, "ompi_mpi_float"));
  api->f64 = reinterpret_cast<MPI_Datatype>(dlsym(l, "ompi_mpi_double"));
  api->sum = reinterpret_cast<MPI_Op>(dlsym(l, "ompi_mpi_op_sum"));
  api->max = reinterpret_cast<MPI_Op>(dlsym(l, "ompi_mpi_op_max"));
  if (!ok || !api->world || !api->f32 || !api->f64 || !api->sum || !api->max)
    return Status::error("the MPI library loaded is not OpenMPI 4 (a symbol "
                         "of its ABI is missing); modelc's MPI path needs "
                         "Debian's OpenMPI");
  return Status::ok();
}

class MpiCommunicator final : public Communicator {
public:
  explicit MpiCommunicator(MpiApi api) : api_(api) {}
  ~MpiCommunicator() override {
    int finalized = 1;
    if (api_.Finalized(&finalized) == MPI_SUCCESS && !finalized &&
        ownsInit_)
      api_.Finalize();
  }
  Status init() {
    int initialized = 0;
    api_.Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      if (api_.InitThread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) !=
          MPI_SUCCESS)
        return Status::error("MPI_Init_thread failed");
      ownsInit_ = true;
    }
    api_.CommRank(api_.world, &rank_);
    api_.CommSize(api_.world, &size_);
    return Status::ok();
  }
  std::string name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Status start(void* data, size_t count, DType dtype, ReduceOp op,
               const std::string& what) override {
    auto t0 = std::chrono::steady_clock::now();
    if (dtype != DType::F32)
      return Status::error("mpi all-reduce of " + what + ": only f32 is "
                           "supported, got " + dtypeName(dtype));
    if (count > size_t(INT32_MAX))
      return Status::error("mpi all-reduce of " + what + ": " +
                           std::to_string(count) +
                           " elements is more than MPI's int count");
    if (pending_.count(data))
      return Status::error("mpi all-reduce of " + what +
                           ": a collective is already pending on its buffer");
    Pending& p = pending_[data];
    p.what = what;
    p.started = t0;
    int rc = api_.Iallreduce(MPI_IN_PLACE, data, int(count), api_.f32,
                             op == ReduceOp::Sum ? api_.sum : api_.max,
                             api_.world, &p.request);
    if (rc != MPI_SUCCESS) {
      pending_.erase(data);
      return Status::error("rank " + std::to_string(rank_) +
                           ": MPI_Iallreduce of " + what + " failed (code " +
                           std::to_string(rc) + ")");
    }
    ++stats_.collectives;
    stats_.bytes += double(count * 4);
    // MPI moves a non-blocking collective only inside MPI calls (no
    // progress thread by default): each start also drives the buckets in
    // flight. A finished request becomes MPI_REQUEST_NULL, which its wait's
    // MPI_Test reports done at once.
    for (auto& [ptr, q] : pending_) {
      int flag = 0;
      api_.Test(&q.request, &flag, MPI_STATUS_IGNORE);
    }
    if (noOverlap_) { // MODELC_DP_OVERLAP=0: finish it now (for measuring)
      MC_RETURN_IF_ERROR(wait(data));
      finished_.insert(data); // the step's wait then returns at once
      return Status::ok();
    }
    stats_.blockedSeconds += seconds(t0);
    return Status::ok();
  }

  Status wait(void* data) override {
    auto t0 = std::chrono::steady_clock::now();
    auto it = pending_.find(data);
    if (it == pending_.end() && finished_.erase(data))
      return Status::ok();
    if (it == pending_.end())
      return Status::error("mpi all-reduce: no collective is pending on this "
                           "buffer (a wait without its start)");
    Pending p = it->second;
    pending_.erase(it);
    int done = 0;
    for (long polls = 0;; ++polls) {
      if (api_.Test(&p.request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        return Status::error("rank " + std::to_string(rank_) + ": MPI_Test of " +
                             p.what + " failed");
      if (done)
        break;
      for (auto& [ptr, q] : pending_) { // the buckets behind it move too
        int flag = 0;
        api_.Test(&q.request, &flag, MPI_STATUS_IGNORE);
      }
      if (seconds(p.started) > timeout_) {
        std::string others;
        if (size_ == 2)
          others = "rank " + std::to_string(1 - rank_);
        else
          others = "one or more of the other " + std::to_string(size_ - 1) +
                   " ranks";
        stats_.blockedSeconds += seconds(t0);
        return Status::error(
            "rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
            ": " + p.what + " did not complete within " + fmt(timeout_) +
            " s (--dp-timeout): " + others +
            " did not join it: died or hangs");
      }
      // Spin while the collective is moving (each MPI_Test drives its
      // progress; a sleep here stalls every round of it), yielding the core
      // to a peer that shares it, and back off to 1 ms sleeps after a
      // second without completion (a slow or dead peer).
      if (polls % 1024 == 1023 && seconds(t0) > 1.0)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      else
        std::this_thread::yield(); // the peer may share this core

    }
    stats_.blockedSeconds += seconds(t0);
    return Status::ok();
  }

  void abort(int code) override { api_.Abort(api_.world, code); }

private:
  struct Pending {
    MPI_Request request = nullptr;
    std::string what;
    std::chrono::steady_clock::time_point started;
  };
  static double seconds(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
        .count();
  }
  static std::string fmt(double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", s);
    return buf;
  }
  MpiApi api_;
  bool ownsInit_ = false;
  bool noOverlap_ = [] {
    const char* v = std::getenv("MODELC_DP_OVERLAP");
    return v && std::strcmp(v, "0") == 0;
  }();
  int rank_ = 0, size_ = 1;
  std::unordered_map<void*, Pending> pending_;
  std::unordered_set<void*> finished_;
};

} // namespace

Status makeMpiCommunicator(std::unique_ptr<Communicator>* out,
                           const std::string& library) {
  MpiApi api;
  MC_RETURN_IF_ERROR(loadMpi(library, &api));
  auto comm = std::make_unique<MpiCommunicator>(api);
  MC_RETURN_IF_ERROR(comm->init());
  *out = std::move(comm);
  return Status::ok();
}
#else
Status makeMpiCommunicator(std::unique_ptr<Communicator>*,
                           const std::string&) {
  return Status::error("this runtime was built without MPI headers "
                       "(libopenmpi-dev): no data-parallel runs between "
                       "processes");
}
#endif

} // namespace mc::rt
