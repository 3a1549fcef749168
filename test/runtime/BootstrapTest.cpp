// The torchrun-style launch's TCP bootstrap (tcpBroadcast) over loopback:
// N ranks as threads of this process, each with its own LaunchVars, rank 0
// handing a 128-byte id (NCCL's unique id's size) to the others; and the
// errors a launch can make (a port in use, a rank that never connects,
// WORLD_SIZE that differs between ranks, RANK out of range or twice), and
// readLaunchVars' checks of the environment.
#include "modelc/communicator.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <cstdlib>
#include <netinet/in.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace mc::rt;

namespace {

/// A port that was free a moment ago (bound to port 0, then closed).
int freePort() {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  EXPECT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(s);
  return ntohs(a.sin_port);
}

LaunchVars vars(int rank, int world, int port) {
  LaunchVars v;
  v.present = true;
  v.rank = rank;
  v.worldSize = world;
  v.localRank = rank;
  v.masterAddr = "127.0.0.1";
  v.masterPort = port;
  return v;
}

std::string idBytes() {
  std::string id(128, '\0');
  for (size_t i = 0; i < id.size(); ++i)
    id[i] = char((i * 37 + 11) & 0xff); // zeros and 0xff among them
  return id;
}

struct Outcome {
  Status status;
  std::string bytes;
};

/// Runs the given ranks as threads; rank 0 (when among them) sends
/// idBytes(). Rank 0 starts last, so the others retry their connects.
std::vector<Outcome> launch(const std::vector<LaunchVars>& ranks,
                            double timeout) {
  std::vector<Outcome> out(ranks.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ranks.size(); ++i)
    if (ranks[i].rank != 0)
      threads.emplace_back([&, i] {
        out[i].status = tcpBroadcast(ranks[i], timeout, &out[i].bytes);
      });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  for (size_t i = 0; i < ranks.size(); ++i)
    if (ranks[i].rank == 0)
      threads.emplace_back([&, i] {
        out[i].bytes = idBytes();
        out[i].status = tcpBroadcast(ranks[i], timeout, &out[i].bytes);
      });
  for (std::thread& t : threads)
    t.join();
  return out;
}

bool contains(const Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

} // namespace

TEST(Bootstrap, EveryRankGetsRankZerosBytes) {
  for (int world : {2, 4}) {
    int port = freePort();
    std::vector<LaunchVars> ranks;
    for (int r = 0; r < world; ++r)
      ranks.push_back(vars(r, world, port));
    std::vector<Outcome> out = launch(ranks, 10);
    for (int r = 0; r < world; ++r) {
      ASSERT_TRUE(out[r].status) << "rank " << r << ": "
                                 << out[r].status.message();
      EXPECT_EQ(out[r].bytes, idBytes()) << "rank " << r;
    }
  }
}

TEST(Bootstrap, OneRankExchangesNothing) {
  std::string bytes = "untouched";
  ASSERT_TRUE(tcpBroadcast(vars(0, 1, 1), 1, &bytes));
  EXPECT_EQ(bytes, "untouched");
}

TEST(Bootstrap, PortInUseIsNamed) {
  int port = freePort();
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = htons(uint16_t(port));
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(s, 1), 0);
  std::string bytes = idBytes();
  Status st = tcpBroadcast(vars(0, 2, port), 2, &bytes);
  ::close(s);
  ASSERT_FALSE(st);
  EXPECT_TRUE(contains(st, "rank 0 of 2: cannot listen on MASTER_PORT=" +
                               std::to_string(port) +
                               ": the port is in use"))
      << st.message();
  EXPECT_TRUE(contains(st, "pick another MASTER_PORT")) << st.message();
}

TEST(Bootstrap, ARankThatNeverConnectsTimesOut) {
  // WORLD_SIZE=3, rank 2 never starts: rank 0 names it after the timeout,
  // and rank 1, connected, hears rank 0's error.
  int port = freePort();
  auto t0 = std::chrono::steady_clock::now();
  std::vector<Outcome> out = launch({vars(0, 3, port), vars(1, 3, port)}, 1);
  double took = std::chrono::duration<double>(
                    std::chrono::steady_clock::now() - t0)
                    .count();
  EXPECT_LT(took, 5.0);
  ASSERT_FALSE(out[0].status);
  EXPECT_TRUE(contains(out[0].status, "rank 0 of 3: rank 2 did not connect to "
                                      "127.0.0.1:" + std::to_string(port) +
                                      " within 1 s (--dp-timeout)"))
      << out[0].status.message();
  ASSERT_FALSE(out[1].status);
  EXPECT_TRUE(contains(out[1].status, "rank 1 of 3: "))
      << out[1].status.message();
  EXPECT_TRUE(contains(out[1].status, "rank 2 did not connect"))
      << out[1].status.message();
}

TEST(Bootstrap, RankZeroThatNeverListensTimesOut) {
  int port = freePort();
  std::string bytes;
  Status st = tcpBroadcast(vars(1, 2, port), 1, &bytes);
  ASSERT_FALSE(st);
  EXPECT_TRUE(contains(st, "rank 1 of 2: could not reach rank 0 at 127.0.0.1:" +
                               std::to_string(port) + " within 1 s"))
      << st.message();
  EXPECT_TRUE(contains(st, "Connection refused")) << st.message();
}

TEST(Bootstrap, WrongWorldSizeIsNamedOnBothSides) {
  int port = freePort();
  std::vector<Outcome> out = launch({vars(0, 2, port), vars(1, 3, port)}, 5);
  ASSERT_FALSE(out[0].status);
  EXPECT_TRUE(contains(out[0].status,
                       "rank 1 has WORLD_SIZE=3 but rank 0 has WORLD_SIZE=2"))
      << out[0].status.message();
  ASSERT_FALSE(out[1].status);
  EXPECT_TRUE(contains(out[1].status, "rank 0 stopped the launch: "))
      << out[1].status.message();
  EXPECT_TRUE(contains(out[1].status, "WORLD_SIZE=3 but rank 0 has"))
      << out[1].status.message();
}

TEST(Bootstrap, ARankGivenTwiceIsNamed) {
  int port = freePort();
  std::vector<Outcome> out =
      launch({vars(0, 3, port), vars(1, 3, port), vars(1, 3, port)}, 5);
  ASSERT_FALSE(out[0].status);
  EXPECT_TRUE(contains(out[0].status, "two processes say RANK=1"))
      << out[0].status.message();
}

TEST(Bootstrap, RankOutOfRangeIsRefusedBeforeConnecting) {
  std::string bytes;
  Status st = tcpBroadcast(vars(4, 4, 1), 1, &bytes);
  ASSERT_FALSE(st);
  EXPECT_TRUE(contains(st, "RANK=4 is out of range for WORLD_SIZE=4"))
      << st.message();
}

namespace {
using Vars = std::vector<std::pair<const char*, const char*>>;
/// Sets the launch variables for one test, and unsets them after.
struct Env {
  explicit Env(const Vars& vars) {
    for (const char* n :
         {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
          "TORCHELASTIC_RUN_ID", "MODELC_BOOTSTRAP_PORT"})
      ::unsetenv(n);
    for (auto& [n, v] : vars)
      ::setenv(n, v, 1);
  }
  ~Env() {
    for (const char* n :
         {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
          "TORCHELASTIC_RUN_ID", "MODELC_BOOTSTRAP_PORT"})
      ::unsetenv(n);
  }
};
} // namespace

TEST(Bootstrap, LaunchVariablesAreChecked) {
  LaunchVars v;
  {
    Env e(Vars{});
    ASSERT_TRUE(readLaunchVars(&v));
    EXPECT_FALSE(v.present);
  }
  {
    Env e(Vars{{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "node1"},
           {"MASTER_PORT", "29500"}});
    ASSERT_TRUE(readLaunchVars(&v));
    EXPECT_TRUE(v.present);
    EXPECT_EQ(v.rank, 1);
    EXPECT_EQ(v.worldSize, 2);
    EXPECT_EQ(v.localRank, 1); // LOCAL_RANK defaults to RANK
    EXPECT_EQ(v.masterAddr, "node1");
    EXPECT_EQ(v.masterPort, 29500);
  }
  {
    // Under torchrun its own store listens on MASTER_PORT: the next port.
    Env e(Vars{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "node1"},
               {"MASTER_PORT", "29500"}, {"TORCHELASTIC_RUN_ID", "none"}});
    ASSERT_TRUE(readLaunchVars(&v));
    EXPECT_EQ(v.masterPort, 29501);
    EXPECT_EQ(v.portName.rfind("MASTER_PORT+1", 0), 0u) << v.portName;
  }
  {
    Env e(Vars{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "node1"},
               {"MASTER_PORT", "29500"}, {"MODELC_BOOTSTRAP_PORT", "31000"}});
    ASSERT_TRUE(readLaunchVars(&v));
    EXPECT_EQ(v.masterPort, 31000);
    EXPECT_EQ(v.portName, "MODELC_BOOTSTRAP_PORT");
  }
  {
    Env e(Vars{{"WORLD_SIZE", "1"}});
    ASSERT_TRUE(readLaunchVars(&v)); // one process needs no master
    EXPECT_EQ(v.worldSize, 1);
  }
  auto fails = [&](const Vars& vars, const std::string& text) {
    Env e(vars);
    LaunchVars w;
    Status st = readLaunchVars(&w);
    EXPECT_FALSE(st) << text;
    EXPECT_TRUE(contains(st, text)) << st.message();
  };
  fails({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"},
         {"MASTER_PORT", "1"}},
        "RANK=2 is out of range for WORLD_SIZE=2 (ranks are 0 to 1)");
  fails({{"RANK", "-1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"},
         {"MASTER_PORT", "1"}},
        "RANK=-1 is out of range");
  fails({{"WORLD_SIZE", "two"}}, "WORLD_SIZE=two is not a number");
  fails({{"WORLD_SIZE", "0"}}, "WORLD_SIZE=0 is not a number of processes >= 1");
  fails({{"WORLD_SIZE", "2"}}, "WORLD_SIZE=2 is set but RANK is not");
  fails({{"RANK", "0"}, {"WORLD_SIZE", "2"}},
        "WORLD_SIZE=2 needs MASTER_ADDR and MASTER_PORT");
  fails({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"},
         {"MASTER_PORT", "70000"}},
        "MASTER_PORT=70000 is not a TCP port");
}
