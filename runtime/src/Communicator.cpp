// Communicators: one process alone, and MPI with libmpi loaded at run time
// (so modelc-run and the runtime library start on machines without MPI;
// docs/decisions.md, "Data parallelism: MPI loaded at run time").
#include "modelc/communicator.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#ifdef MODELC_HAVE_MPI_H
#include <dlfcn.h>
#include <sys/prctl.h>
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

Status Communicator::allReduceHost(float* data, size_t count, ReduceOp op,
                                   const std::string& what) {
  return allReduce(data, count, DType::F32, op, what);
}

Status Communicator::broadcast(void*, size_t, int) {
  return Status::error("the " + name() + " communicator has no broadcast");
}

std::string collectiveTimeoutText(int rank, int size, const std::string& what,
                                  double timeoutSeconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", timeoutSeconds);
  std::string others = size == 2 ? "rank " + std::to_string(1 - rank)
                                 : "one or more of the other " +
                                       std::to_string(size - 1) + " ranks";
  return "rank " + std::to_string(rank) + " of " + std::to_string(size) +
         ": " + what + " did not complete within " + buf +
         " s (--dp-timeout): " + others + " did not join it: died or hangs";
}

Status checkWorldForArtifact(int64_t ranks, const Communicator& comm) {
  if (ranks == comm.size())
    return Status::ok();
  return Status::error(
      "the artifact was compiled for " + std::to_string(ranks) +
      " data-parallel ranks (modelc compile --dp-ranks=" +
      std::to_string(ranks) + "), but this process's world has " +
      std::to_string(comm.size()) + " (" + comm.name() +
      "): start it with mpirun -np " + std::to_string(ranks) +
      (comm.memory() == "cuda" || ranks > 1
           ? " (CPU or GPU), or with WORLD_SIZE=" + std::to_string(ranks) +
                 " (GPU)"
           : ""));
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
  Status broadcast(void*, size_t, int) override { return Status::ok(); }
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
  int (*QueryThread)(int*) = nullptr;
  int (*Bcast)(void*, int, MPI_Datatype, int, MPI_Comm) = nullptr;
  MPI_Comm world = nullptr;
  MPI_Datatype byte = nullptr;
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
            sym(l, "MPI_Test", &api->Test) && sym(l, "MPI_Abort", &api->Abort) &&
            sym(l, "MPI_Query_thread", &api->QueryThread) &&
            sym(l, "MPI_Bcast", &api->Bcast);
  api->world = reinterpret_cast<MPI_Comm>(dlsym(l, "ompi_mpi_comm_world"));
  api->f32 = reinterpret_cast<MPI_Datatype>(dlsym(l, "ompi_mpi_float"));
  api->f64 = reinterpret_cast<MPI_Datatype>(dlsym(l, "ompi_mpi_double"));
  api->byte = reinterpret_cast<MPI_Datatype>(dlsym(l, "ompi_mpi_byte"));
  api->sum = reinterpret_cast<MPI_Op>(dlsym(l, "ompi_mpi_op_sum"));
  api->max = reinterpret_cast<MPI_Op>(dlsym(l, "ompi_mpi_op_max"));
  if (!ok || !api->world || !api->f32 || !api->f64 || !api->byte || !api->sum || !api->max)
    return Status::error("the MPI library loaded is not OpenMPI 4 (a symbol "
                         "of its ABI is missing); modelc's MPI path needs "
                         "Debian's OpenMPI");
  return Status::ok();
}

/// MPI_COMM_WORLD with one communication thread that makes every MPI call
/// (it initializes MPI, so MPI_THREAD_FUNNELED suffices): it posts the
/// buckets' MPI_Iallreduce in the order the step starts them and drives
/// them with MPI_Test while the step's thread goes on with the backward
/// pass. OpenMPI progresses a non-blocking collective only inside MPI
/// calls, so without this thread a bucket posted early moved only at the
/// next start or at its wait (docs/data-parallel.md, "Overlap").
class MpiCommunicator final : public Communicator {
public:
  explicit MpiCommunicator(MpiApi api) : api_(api) {}
  ~MpiCommunicator() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable())
      thread_.join();
  }
  Status init() {
    std::unique_lock<std::mutex> lock(mu_);
    thread_ = std::thread([this] { run(); });
    cv_.wait(lock, [&] { return initDone_; });
    if (!initError_.empty()) {
      lock.unlock();
      thread_.join();
      return Status::error(initError_);
    }
    return Status::ok();
  }
  std::string name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  /// The thread level MPI gave (MPI_THREAD_FUNNELED or more).
  int threadLevel() const { return provided_; }

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
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (pending_.count(data))
        return Status::error("mpi all-reduce of " + what +
                             ": a collective is already pending on its "
                             "buffer");
      auto p = std::make_shared<Pending>();
      p->data = data;
      p->count = int(count);
      p->op = op;
      p->what = what;
      p->started = t0;
      pending_[data] = p;
      toPost_.push_back(std::move(p));
    }
    cv_.notify_all();
    ++stats_.collectives;
    stats_.bytes += double(count * 4);
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
    std::unique_lock<std::mutex> lock(mu_);
    auto it = pending_.find(data);
    if (it == pending_.end() && finished_.erase(data))
      return Status::ok();
    if (it == pending_.end())
      return Status::error("mpi all-reduce: no collective is pending on this "
                           "buffer (a wait without its start)");
    std::shared_ptr<Pending> p = it->second;
    auto deadline =
        p->started + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                         std::chrono::duration<double>(timeout_));
    ++waiters_; // the thread polls without pausing while someone waits
    cv_.notify_all();
    bool done = cv_.wait_until(lock, deadline, [&] { return p->done; });
    --waiters_;
    stats_.blockedSeconds += seconds(t0);
    if (!done) {
      // Left pending: the collective cannot be cancelled, and the caller
      // ends the run (abort) after this error.
      return Status::error(
          collectiveTimeoutText(rank_, size_, p->what, timeout_));
    }
    pending_.erase(it);
    if (!p->error.empty())
      return Status::error(p->error);
    return Status::ok();
  }

  Status broadcast(void* data, size_t bytes, int root) override {
    if (bytes > size_t(INT32_MAX))
      return Status::error("mpi broadcast: too many bytes");
    int rc = MPI_SUCCESS;
    Task task;
    task.run = [&] {
      rc = api_.Bcast(data, int(bytes), api_.byte, root, api_.world);
    };
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Collectives are issued in the order they are asked for: a
      // broadcast after every all-reduce started before it.
      tasks_.push_back(&task);
      cv_.notify_all();
      cv_.wait(lock, [&] { return task.done; });
    }
    if (rc != MPI_SUCCESS)
      return Status::error("rank " + std::to_string(rank_) +
                           ": MPI_Bcast failed (code " + std::to_string(rc) +
                           ")");
    return Status::ok();
  }

  void abort(int code) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      abortCode_ = code;
      aborting_ = true;
    }
    cv_.notify_all();
    // The thread calls MPI_Abort, which ends this process too; should it
    // not within 10 s, end this one at least.
    std::this_thread::sleep_for(std::chrono::seconds(10));
    std::_Exit(code);
  }

private:
  struct Pending {
    void* data = nullptr;
    int count = 0;
    ReduceOp op = ReduceOp::Sum;
    MPI_Request request = nullptr; // the thread's only
    std::string what;
    std::chrono::steady_clock::time_point started;
    bool done = false;  // under mu_
    std::string error;  // under mu_, when done
  };

  /// A blocking call the thread makes for another thread.
  struct Task {
    std::function<void()> run;
    bool done = false; // under mu_
  };

  /// The communication thread: initializes MPI, posts what start() queued,
  /// tests what is in flight, calls MPI_Abort and MPI_Finalize.
  void run() {
    // Sleeps of pollSleep_ as asked, not rounded up by the default 50 us
    // timer slack.
    ::prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    std::string error;
    int initialized = 0;
    api_.Initialized(&initialized);
    if (!initialized) {
      if (api_.InitThread(nullptr, nullptr, MPI_THREAD_FUNNELED,
                          &provided_) != MPI_SUCCESS)
        error = "MPI_Init_thread failed";
      else
        ownsInit_ = true;
    } else {
      // Initialized by the program: this thread is not the one that did,
      // so MPI must allow calls from any one thread at a time.
      api_.QueryThread(&provided_);
      if (provided_ < MPI_THREAD_SERIALIZED)
        error = "MPI was initialized before modelc's communicator with a "
                "thread level below MPI_THREAD_SERIALIZED; its "
                "communication thread needs MPI_THREAD_SERIALIZED";
    }
    if (error.empty()) {
      api_.CommRank(api_.world, &rank_);
      api_.CommSize(api_.world, &size_);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      initDone_ = true;
      initError_ = error;
    }
    cv_.notify_all();
    if (!error.empty())
      return;
    std::vector<std::shared_ptr<Pending>> inFlight, post;
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (aborting_) {
        lock.unlock();
        std::fflush(stdout);
        std::fflush(stderr);
        api_.Abort(api_.world, abortCode_);
        std::_Exit(abortCode_);
      }
      if (stop_)
        break;
      post.swap(toPost_);
      if (inFlight.empty() && post.empty() && tasks_.empty()) {
        cv_.wait(lock, [&] {
          return stop_ || aborting_ || !toPost_.empty() || !tasks_.empty();
        });
        continue;
      }
      std::vector<Task*> tasks;
      tasks.swap(tasks_);
      bool waited = waiters_ > 0;
      lock.unlock();
      // Post in start order: every rank issues its collectives in the
      // same order, which MPI requires.
      std::vector<std::pair<std::shared_ptr<Pending>, std::string>> ended;
      for (auto& p : post) {
        int rc = api_.Iallreduce(MPI_IN_PLACE, p->data, p->count, api_.f32,
                                 p->op == ReduceOp::Sum ? api_.sum : api_.max,
                                 api_.world, &p->request);
        if (rc != MPI_SUCCESS)
          ended.emplace_back(p, "rank " + std::to_string(rank_) +
                                    ": MPI_Iallreduce of " + p->what +
                                    " failed (code " + std::to_string(rc) +
                                    ")");
        else
          inFlight.push_back(p);
      }
      post.clear();
      if (!tasks.empty()) {
        for (Task* t : tasks)
          t->run();
        {
          std::lock_guard<std::mutex> g(mu_);
          for (Task* t : tasks)
            t->done = true;
        }
        cv_.notify_all();
      }
      for (size_t i = 0; i < inFlight.size();) {
        int flag = 0;
        int rc = api_.Test(&inFlight[i]->request, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || flag) {
          ended.emplace_back(inFlight[i],
                             rc == MPI_SUCCESS
                                 ? std::string()
                                 : "rank " + std::to_string(rank_) +
                                       ": MPI_Test of " + inFlight[i]->what +
                                       " failed");
          inFlight.erase(inFlight.begin() + long(i));
        } else {
          ++i;
        }
      }
      if (!ended.empty()) {
        {
          std::lock_guard<std::mutex> g(mu_);
          for (auto& [p, e] : ended) {
            p->done = true;
            p->error = e;
          }
        }
        cv_.notify_all();
      }
      // Each MPI_Test drives the collectives one round further. While a
      // wait blocks on them the thread polls without sleeping (yielding
      // only to a peer rank that shares the core); while the step's thread
      // computes (mpirun binds a rank's threads to one core) it sleeps
      // pollSleep_ between rounds, so that the backward pass keeps most of
      // the core and the collective still moves every few tens of us.
      if (waited || pollSleep_.count() == 0)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(pollSleep_);
      lock.lock();
    }
    lock.unlock();
    int finalized = 1;
    // MPI_Finalize would wait for a collective still in flight (a peer
    // that died): skip it then, the process is ending on an error.
    if (ownsInit_ && inFlight.empty() &&
        api_.Finalized(&finalized) == MPI_SUCCESS && !finalized)
      api_.Finalize();
  }

  static double seconds(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
        .count();
  }
  MpiApi api_;
  bool ownsInit_ = false; // the thread's
  int provided_ = 0;
  bool noOverlap_ = [] {
    const char* v = std::getenv("MODELC_DP_OVERLAP");
    return v && std::strcmp(v, "0") == 0;
  }();
  // MODELC_DP_POLL_US: the communication thread's sleep between MPI_Test
  // rounds while the step computes (0: yield only).
  std::chrono::microseconds pollSleep_{[] {
    const char* v = std::getenv("MODELC_DP_POLL_US");
    return v && *v ? std::atol(v) : 20L;
  }()};
  int rank_ = 0, size_ = 1;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  // Under mu_:
  bool initDone_ = false, stop_ = false;
  std::string initError_;
  int abortCode_ = 0;
  bool aborting_ = false;
  int waiters_ = 0;
  std::unordered_map<void*, std::shared_ptr<Pending>> pending_;
  std::vector<std::shared_ptr<Pending>> toPost_;
  std::vector<Task*> tasks_; // blocking calls (broadcast)
  // The step's thread only:
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

#ifndef MODELC_CUDA_DEVICE
Status makeNcclCommunicator(int, int, double,
                            const std::function<Status(std::string*)>&,
                            std::unique_ptr<Communicator>*,
                            const std::string&) {
  return Status::error("this runtime was built without the CUDA device "
                       "(no cuda.h at build time): no NCCL");
}
#endif

} // namespace mc::rt
