// The runtime's communicators: one process alone, and MPI between the
// processes of `mpirun -np 2 modelc_runtime_tests --gtest_filter=
// 'Communicator.*'` (the CTest test runtime.mpi); run alone, the MPI test
// skips, visibly.
#include "modelc/communicator.h"

#include <gtest/gtest.h>

#include <vector>

using namespace mc::rt;

TEST(Communicator, SelfIsTheIdentity) {
  std::unique_ptr<Communicator> self = makeSelfCommunicator();
  EXPECT_EQ(self->rank(), 0);
  EXPECT_EQ(self->size(), 1);
  std::vector<float> x{1.5f, -2.0f, 3.25f};
  ASSERT_TRUE(self->allReduce(x.data(), x.size(), DType::F32, ReduceOp::Sum,
                              "test"));
  EXPECT_EQ(x, (std::vector<float>{1.5f, -2.0f, 3.25f}));
  EXPECT_EQ(self->stats().collectives, 1);
  EXPECT_EQ(self->stats().bytes, 12.0);
}

TEST(Communicator, MissingMpiLibraryIsAClearError) {
  std::unique_ptr<Communicator> comm;
  Status st = makeMpiCommunicator(&comm, "libmpi-that-is-not-there.so.99");
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("MPI"), std::string::npos) << st.message();
  EXPECT_FALSE(comm);
}

// Sum and max over the ranks, two collectives in flight at once (waited in
// the reverse order), the in-flight bookkeeping's errors, and a broadcast.
TEST(Communicator, MpiSumAndMaxOverTheRanks) {
  if (!startedByMpiLauncher())
    GTEST_SKIP() << "not started by mpirun (see the CTest test runtime.mpi)";
  std::unique_ptr<Communicator> comm;
  Status st = makeMpiCommunicator(&comm);
  ASSERT_TRUE(st) << st.message();
  const int n = comm->size(), r = comm->rank();
  ASSERT_GE(n, 2);
  // Rank r holds r + 1 + i at i: the sum is n(n+1)/2 + n*i, the max n + i.
  std::vector<float> sum(1000), max(7);
  for (size_t i = 0; i < sum.size(); ++i)
    sum[i] = float(r + 1 + int(i));
  for (size_t i = 0; i < max.size(); ++i)
    max[i] = float(r + 1 + int(i));
  ASSERT_TRUE(comm->start(sum.data(), sum.size(), DType::F32, ReduceOp::Sum,
                          "sum"));
  ASSERT_TRUE(comm->start(max.data(), max.size(), DType::F32, ReduceOp::Max,
                          "max"));
  Status again = comm->start(sum.data(), sum.size(), DType::F32,
                             ReduceOp::Sum, "sum again");
  EXPECT_FALSE(again);
  EXPECT_NE(again.message().find("already pending"), std::string::npos);
  ASSERT_TRUE(comm->wait(max.data()));
  ASSERT_TRUE(comm->wait(sum.data()));
  for (size_t i = 0; i < sum.size(); ++i)
    ASSERT_EQ(sum[i], float(n * (n + 1) / 2 + n * int(i))) << i;
  for (size_t i = 0; i < max.size(); ++i)
    ASSERT_EQ(max[i], float(n + int(i))) << i;
  Status orphan = comm->wait(sum.data());
  EXPECT_FALSE(orphan);
  EXPECT_NE(orphan.message().find("no collective is pending"),
            std::string::npos);
  EXPECT_EQ(comm->stats().collectives, 2);
  Status f16 = comm->start(sum.data(), 2, DType::F16, ReduceOp::Sum, "f16");
  EXPECT_FALSE(f16);

  // A broadcast from rank 0 (how an MPI world hands NCCL's unique id
  // around): 128 bytes, rank 0's on every rank; all-reduces after it.
  // (One communicator per process: MPI starts once.)
  std::string id(128, '\0');
  for (size_t i = 0; i < id.size(); ++i)
    id[i] = char(r == 0 ? (i * 7 + 3) & 0xff : 0);
  st = comm->broadcast(id.data(), id.size(), 0);
  ASSERT_TRUE(st) << st.message();
  for (size_t i = 0; i < id.size(); ++i)
    ASSERT_EQ(uint8_t(id[i]), uint8_t((i * 7 + 3) & 0xff)) << i;
  float x = 1;
  ASSERT_TRUE(comm->allReduceHost(&x, 1, ReduceOp::Sum, "x"));
  EXPECT_EQ(x, float(n));
}

// Without libnccl (or without the CUDA device in this runtime) the NCCL
// communicator is a clear error naming what was tried.
TEST(Communicator, MissingNcclLibraryIsAClearError) {
  std::unique_ptr<Communicator> comm;
  Status st = makeNcclCommunicator(
      0, 1, 1, [](std::string*) { return Status::ok(); }, &comm,
      "libnccl-that-is-not-there.so.9");
  ASSERT_FALSE(st);
  EXPECT_FALSE(comm);
  const std::string& m = st.message();
  bool noDevice = m.find("without the CUDA device") != std::string::npos;
  if (!noDevice) {
    EXPECT_NE(m.find("cannot load NCCL: libnccl-that-is-not-there.so.9 not "
                     "found"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("/usr/local/cuda/lib64"), std::string::npos) << m;
    EXPECT_NE(m.find("MODELC_NCCL_LIBRARY"), std::string::npos) << m;
  }
}
