// The torchrun-style launch: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and
// MASTER_PORT, and the TCP bootstrap that hands rank 0's bytes (NCCL's
// unique id) to every other rank. Plain sockets with deadlines: no
// collective of our own, only a rendezvous (docs/data-parallel.md).
#include "modelc/communicator.h"

#include <arpa/inet.h>
#include <cerrno>
#include <climits>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

namespace mc::rt {

namespace {

using Clock = std::chrono::steady_clock;

bool parseInt(const char* text, long lo, long hi, long* out) {
  if (!text || !*text)
    return false;
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(text, &end, 10);
  if (errno || *end || v < lo || v > hi)
    return false;
  *out = v;
  return true;
}

std::string fmtSeconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

int msLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - Clock::now())
                  .count();
  return left < 0 ? 0 : int(std::min<long long>(left, 1 << 30));
}

/// Closes a socket when it goes out of scope.
struct Fd {
  int fd = -1;
  Fd() = default;
  explicit Fd(int f) : fd(f) {}
  Fd(Fd&& o) noexcept : fd(o.fd) { o.fd = -1; }
  Fd& operator=(Fd&& o) noexcept {
    std::swap(fd, o.fd);
    return *this;
  }
  ~Fd() {
    if (fd >= 0)
      ::close(fd);
  }
};

/// Sends all of `n` bytes before the deadline (false: timeout or error,
/// with `*why`).
bool sendAll(int fd, const void* data, size_t n, Clock::time_point deadline,
             std::string* why) {
  const char* p = static_cast<const char*>(data);
  while (n) {
    pollfd pfd{fd, POLLOUT, 0};
    int r = ::poll(&pfd, 1, msLeft(deadline));
    if (r == 0) {
      *why = "timed out sending";
      return false;
    }
    if (r < 0 && errno == EINTR)
      continue;
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (k <= 0) {
      *why = std::string("send failed: ") + std::strerror(errno);
      return false;
    }
    p += k;
    n -= size_t(k);
  }
  return true;
}

/// Receives exactly `n` bytes before the deadline.
bool recvAll(int fd, void* data, size_t n, Clock::time_point deadline,
             std::string* why) {
  char* p = static_cast<char*>(data);
  while (n) {
    pollfd pfd{fd, POLLIN, 0};
    int r = ::poll(&pfd, 1, msLeft(deadline));
    if (r == 0) {
      *why = "timed out";
      return false;
    }
    if (r < 0 && errno == EINTR)
      continue;
    ssize_t k = ::recv(fd, p, n, 0);
    if (k < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (k == 0) {
      *why = "the connection was closed";
      return false;
    }
    if (k < 0) {
      *why = std::string("recv failed: ") + std::strerror(errno);
      return false;
    }
    p += k;
    n -= size_t(k);
  }
  return true;
}

// The wire format, little-endian on every machine we run on (x86-64,
// aarch64): a peer's hello, then rank 0's answer.
constexpr uint32_t kMagic = 0x5342434d; // "MCBS"
constexpr uint32_t kVersion = 1;
struct Hello {
  uint32_t magic, version;
  int32_t rank, world;
};
struct Answer {
  uint32_t magic;
  int32_t failed; // 1: `length` bytes of an error message follow
  uint32_t length;
};
constexpr uint32_t kMaxPayload = 1 << 20;

bool sendAnswer(int fd, bool failed, const std::string& payload,
                Clock::time_point deadline, std::string* why) {
  Answer a{kMagic, failed ? 1 : 0, uint32_t(payload.size())};
  return sendAll(fd, &a, sizeof a, deadline, why) &&
         sendAll(fd, payload.data(), payload.size(), deadline, why);
}

/// getaddrinfo of MASTER_ADDR:MASTER_PORT (TCP).
Status resolve(const LaunchVars& v, addrinfo** out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  std::string port = std::to_string(v.masterPort);
  int rc = ::getaddrinfo(v.masterAddr.c_str(), port.c_str(), &hints, out);
  if (rc != 0)
    return Status::error("rank " + std::to_string(v.rank) +
                         ": cannot resolve MASTER_ADDR=" + v.masterAddr +
                         ": " + ::gai_strerror(rc));
  return Status::ok();
}

std::string where(const LaunchVars& v) {
  return v.masterAddr + ":" + std::to_string(v.masterPort);
}

std::string rankOf(const LaunchVars& v) {
  return "rank " + std::to_string(v.rank) + " of " +
         std::to_string(v.worldSize);
}

Status rootBroadcast(const LaunchVars& v, double timeout,
                     const std::string& bytes) {
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(timeout));
  addrinfo* ai = nullptr;
  MC_RETURN_IF_ERROR(resolve(v, &ai));
  // Listen on every address of MASTER_ADDR's family (as torchrun's store
  // does): a machine's name may resolve to one interface while the peers
  // reach it through another.
  int family = ai->ai_family;
  ::freeaddrinfo(ai);
  Fd listener(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (listener.fd < 0)
    return Status::error(rankOf(v) + ": socket failed: " +
                         std::strerror(errno));
  int one = 1;
  ::setsockopt(listener.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_storage addr{};
  socklen_t len = 0;
  if (family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
    a->sin6_family = AF_INET6;
    a->sin6_addr = in6addr_any;
    a->sin6_port = htons(uint16_t(v.masterPort));
    len = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&addr);
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_ANY);
    a->sin_port = htons(uint16_t(v.masterPort));
    len = sizeof *a;
  }
  if (::bind(listener.fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    int e = errno;
    if (e == EADDRINUSE)
      return Status::error(
          rankOf(v) + ": cannot listen on " + v.portName + "=" +
          std::to_string(v.masterPort) +
          ": the port is in use (another job, or an earlier run still "
          "holding it): pick another MASTER_PORT (or set "
          "MODELC_BOOTSTRAP_PORT)");
    return Status::error(rankOf(v) + ": cannot listen on " + v.portName +
                         "=" + std::to_string(v.masterPort) + ": " +
                         std::strerror(e));
  }
  if (::listen(listener.fd, 128) != 0)
    return Status::error(rankOf(v) + ": listen on " + v.portName + "=" +
                         std::to_string(v.masterPort) + " failed: " +
                         std::strerror(errno));
  std::map<int, Fd> peers; // by rank
  std::string failure;
  Fd failedPeer;
  while (int(peers.size()) < v.worldSize - 1 && failure.empty()) {
    pollfd pfd{listener.fd, POLLIN, 0};
    int r = ::poll(&pfd, 1, msLeft(deadline));
    if (r < 0 && errno == EINTR)
      continue;
    if (r == 0) {
      std::string missing;
      int count = 0;
      for (int k = 1; k < v.worldSize; ++k)
        if (!peers.count(k)) {
          if (count < 8)
            missing += (missing.empty() ? "" : ", ") + std::to_string(k);
          ++count;
        }
      if (count > 8)
        missing += ", ... (" + std::to_string(count) + " in all)";
      failure = rankOf(v) + ": rank" + (count > 1 ? "s " : " ") + missing +
                " did not connect to " + where(v) + " within " +
                fmtSeconds(timeout) +
                " s (--dp-timeout): not started, WORLD_SIZE too large, or "
                "MASTER_ADDR/MASTER_PORT not the same on every rank";
      break;
    }
    Fd conn(::accept4(listener.fd, nullptr, nullptr, SOCK_CLOEXEC));
    if (conn.fd < 0)
      continue;
    Hello h{};
    std::string why;
    // A peer sends its hello at once; one that does not is not ours.
    auto helloBy = std::min(deadline, Clock::now() + std::chrono::seconds(10));
    if (!recvAll(conn.fd, &h, sizeof h, helloBy, &why) || h.magic != kMagic)
      continue; // a stray connection (a port scanner, a health check)
    std::string bad;
    if (h.version != kVersion)
      bad = "a peer speaks bootstrap version " + std::to_string(h.version) +
            ", rank 0 " + std::to_string(kVersion) +
            " (the same modelc-run on every rank?)";
    else if (h.world != v.worldSize)
      bad = "rank " + std::to_string(h.rank) + " has WORLD_SIZE=" +
            std::to_string(h.world) + " but rank 0 has WORLD_SIZE=" +
            std::to_string(v.worldSize) +
            ": every rank must be started with the same WORLD_SIZE";
    else if (h.rank <= 0 || h.rank >= v.worldSize)
      bad = "a peer says RANK=" + std::to_string(h.rank) +
            ", out of range for WORLD_SIZE=" + std::to_string(v.worldSize);
    else if (peers.count(h.rank))
      bad = "two processes say RANK=" + std::to_string(h.rank) +
            ": each rank must be started once";
    if (!bad.empty()) {
      failure = rankOf(v) + ": " + bad;
      failedPeer = std::move(conn);
      break;
    }
    peers[h.rank] = std::move(conn);
  }
  // Every peer hears the outcome: the bytes, or rank 0's error.
  auto answerBy = Clock::now() + std::chrono::seconds(10);
  std::string why;
  if (!failure.empty()) {
    if (failedPeer.fd >= 0)
      sendAnswer(failedPeer.fd, true, failure, answerBy, &why);
    for (auto& [r, fd] : peers)
      sendAnswer(fd.fd, true, failure, answerBy, &why);
    return Status::error(failure);
  }
  for (auto& [r, fd] : peers)
    if (!sendAnswer(fd.fd, false, bytes, answerBy, &why))
      return Status::error(rankOf(v) + ": sending the id to rank " +
                           std::to_string(r) + " failed: " + why);
  return Status::ok();
}

Status peerReceive(const LaunchVars& v, double timeout, std::string* bytes) {
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(timeout));
  std::string last = "nothing tried";
  for (;;) {
    addrinfo* ai = nullptr;
    MC_RETURN_IF_ERROR(resolve(v, &ai));
    Fd conn;
    for (addrinfo* a = ai; a && conn.fd < 0; a = a->ai_next) {
      Fd s(::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
                    0));
      if (s.fd < 0)
        continue;
      int rc = ::connect(s.fd, a->ai_addr, a->ai_addrlen);
      if (rc != 0 && errno == EINPROGRESS) {
        pollfd pfd{s.fd, POLLOUT, 0};
        int wait = std::min(msLeft(deadline), 2000);
        if (::poll(&pfd, 1, wait) == 1) {
          int err = 0;
          socklen_t el = sizeof err;
          ::getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &el);
          rc = err ? -1 : 0;
          errno = err ? err : ETIMEDOUT;
        } else {
          errno = ETIMEDOUT;
        }
      }
      if (rc == 0)
        conn = std::move(s);
      else
        last = std::strerror(errno);
    }
    ::freeaddrinfo(ai);
    if (conn.fd >= 0) {
      Hello h{kMagic, kVersion, int32_t(v.rank), int32_t(v.worldSize)};
      Answer a{};
      std::string why;
      // Rank 0 answers once every rank has joined, or gives up after its
      // own timeout (which started when it did, maybe after this rank): wait
      // for its answer that long from now, and a little more, to hear its
      // verdict rather than time out just before it.
      auto answerBy = Clock::now() +
                      std::chrono::duration_cast<Clock::duration>(
                          std::chrono::duration<double>(timeout + 5));
      if (!sendAll(conn.fd, &h, sizeof h, deadline, &why) ||
          !recvAll(conn.fd, &a, sizeof a, answerBy, &why)) {
        if (why == "timed out")
          return Status::error(
              rankOf(v) + ": connected to rank 0 at " + where(v) +
              ", but it did not answer within " + fmtSeconds(timeout + 5) +
              " s (--dp-timeout): some other rank did not join");
        if (Clock::now() < deadline && why == "the connection was closed" &&
            a.magic == 0) {
          // Not rank 0 yet (a previous listener going away): retry.
          last = why;
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          continue;
        }
        return Status::error(rankOf(v) + ": the bootstrap with rank 0 at " +
                             where(v) + " failed: " + why);
      }
      if (a.magic != kMagic || a.length > kMaxPayload)
        return Status::error(rankOf(v) + ": " + where(v) +
                             " does not speak modelc's bootstrap (is "
                             "MASTER_PORT another service's?)");
      std::string payload(a.length, '\0');
      if (!recvAll(conn.fd, payload.data(), payload.size(), answerBy, &why))
        return Status::error(rankOf(v) + ": receiving from rank 0 at " +
                             where(v) + " failed: " + why);
      if (a.failed)
        return Status::error(rankOf(v) + ": rank 0 stopped the launch: " +
                             payload);
      *bytes = std::move(payload);
      return Status::ok();
    }
    if (Clock::now() >= deadline)
      return Status::error(rankOf(v) + ": could not reach rank 0 at " +
                           where(v) + " within " + fmtSeconds(timeout) +
                           " s (--dp-timeout): " + last +
                           " (is rank 0 started, with the same "
                           "MASTER_ADDR and MASTER_PORT?)");
    // Rank 0 may not listen yet: try again shortly.
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::min(100, msLeft(deadline))));
  }
}

} // namespace

Status readLaunchVars(LaunchVars* out) {
  LaunchVars v;
  const char* ws = std::getenv("WORLD_SIZE");
  if (!ws) {
    *out = v;
    return Status::ok();
  }
  v.present = true;
  long n = 0;
  if (!parseInt(ws, 1, 1 << 20, &n))
    return Status::error(std::string("WORLD_SIZE=") + ws +
                         " is not a number of processes >= 1");
  v.worldSize = int(n);
  // Under an MPI launcher MPI says who is who: RANK and WORLD_SIZE are
  // only checked against it, and no rendezvous address is needed.
  const bool mpi = startedByMpiLauncher();
  const char* r = std::getenv("RANK");
  if (!r && v.worldSize > 1 && !mpi)
    return Status::error("WORLD_SIZE=" + std::string(ws) +
                         " is set but RANK is not: a torchrun-style launch "
                         "sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and "
                         "MASTER_PORT for every process");
  if (r) {
    if (!parseInt(r, LONG_MIN, LONG_MAX, &n))
      return Status::error(std::string("RANK=") + r + " is not an integer");
    if (n < 0 || n >= v.worldSize)
      return Status::error(std::string("RANK=") + r +
                           " is out of range for WORLD_SIZE=" + ws +
                           " (ranks are 0 to " +
                           std::to_string(v.worldSize - 1) + ")");
    v.rank = int(n);
  }
  if (const char* l = std::getenv("LOCAL_RANK")) {
    if (!parseInt(l, 0, 1 << 20, &n))
      return Status::error(std::string("LOCAL_RANK=") + l +
                           " is not an integer >= 0");
    v.localRank = int(n);
  } else {
    v.localRank = v.rank;
  }
  const char* addr = std::getenv("MASTER_ADDR");
  const char* port = std::getenv("MASTER_PORT");
  if (v.worldSize > 1 && !mpi && (!addr || !*addr || !port))
    return Status::error(
        std::string("WORLD_SIZE=") + ws + " needs MASTER_ADDR and MASTER_PORT "
        "(rank 0's address and a free TCP port there), which are " +
        (addr && *addr ? "" : "MASTER_ADDR unset") +
        (!(addr && *addr) && !port ? ", " : "") + (port ? "" : "MASTER_PORT unset"));
  v.masterAddr = addr ? addr : "";
  if (port) {
    if (!parseInt(port, 1, 65535, &n))
      return Status::error(std::string("MASTER_PORT=") + port +
                           " is not a TCP port (1 to 65535)");
    v.masterPort = int(n);
    // torchrun's agent serves its own store on MASTER_PORT: the next one.
    const char* run = std::getenv("TORCHELASTIC_RUN_ID");
    if (run && *run && v.masterPort < 65535) {
      v.masterPort += 1;
      v.portName = "MASTER_PORT+1 (torchrun's store holds MASTER_PORT)";
    }
  }
  if (const char* own = std::getenv("MODELC_BOOTSTRAP_PORT")) {
    if (!parseInt(own, 1, 65535, &n))
      return Status::error(std::string("MODELC_BOOTSTRAP_PORT=") + own +
                           " is not a TCP port (1 to 65535)");
    v.masterPort = int(n);
    v.portName = "MODELC_BOOTSTRAP_PORT";
  }
  *out = v;
  return Status::ok();
}

Status tcpBroadcast(const LaunchVars& v, double timeoutSeconds,
                    std::string* bytes) {
  if (v.worldSize <= 1)
    return Status::ok();
  if (v.rank < 0 || v.rank >= v.worldSize)
    return Status::error("RANK=" + std::to_string(v.rank) +
                         " is out of range for WORLD_SIZE=" +
                         std::to_string(v.worldSize));
  if (v.rank == 0)
    return rootBroadcast(v, timeoutSeconds, *bytes);
  return peerReceive(v, timeoutSeconds, bytes);
}

} // namespace mc::rt
