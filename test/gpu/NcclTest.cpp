// NCCL on one GPU (world size 1), against the CPU (CTest label gpu; skipped,
// saying why, without a device or without libnccl): the NCCL communicator's
// all-reduce (sum, max) and its host-value all-reduce leave the values as
// the self communicator does, bit for bit; the cuda all-reduce step pair
// (pack the bucket, NCCL, scale) gives what the CPU pair gives, bit for
// bit. Issue 11's "NCCL all-reduce checked against the CPU result on one
// GPU"; test/gpu/run.sh runs it.
#include "GpuTestUtil.h"
#include "cuda/Nccl.h"
#include "modelc/communicator.h"

using namespace mc;
using namespace mc::test;
using rt::DType;
using rt::OpId;

namespace {

class Nccl : public CudaTest {
public:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped())
      return;
    rt::Status st = rt::makeNcclCommunicator(
        0, 1, 30, [](std::string *) { return rt::Status::ok(); }, &comm);
    if (!st)
      GTEST_SKIP() << "no NCCL here: " << st.message();
    nccl = static_cast<rt::cuda::NcclCommunicator *>(comm.get());
    std::printf("  NCCL %s on %s\n",
                rt::cuda::ncclVersionText(nccl->api().version).c_str(),
                cuda->gpuText().c_str());
    st = nccl->attach(*cuda);
    ASSERT_TRUE(st) << st.message();
  }
  void TearDown() override { rt::setCurrentCommunicator(nullptr); }

  std::unique_ptr<rt::Communicator> comm;
  rt::cuda::NcclCommunicator *nccl = nullptr;
};

bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

} // namespace

TEST_F(Nccl, AllReduceOfOneRankIsTheCpuResult) {
  for (rt::ReduceOp op : {rt::ReduceOp::Sum, rt::ReduceOp::Max}) {
    HostTensor x = HostTensor::random(DType::F32, {3, 1000}, 5);
    rt::DeviceMemory d = upload(x);
    rt::Status st = comm->start(d.get(), x.size(), DType::F32, op, "test");
    ASSERT_TRUE(st) << st.message();
    st = comm->wait(d.get());
    ASSERT_TRUE(st) << st.message();
    HostTensor out(DType::F32, x.shape);
    download(d.get(), out);
    // The CPU result: the self communicator on the same values.
    std::vector<float> ref = x.floats();
    std::unique_ptr<rt::Communicator> self = rt::makeSelfCommunicator();
    ASSERT_TRUE(self->allReduce(ref.data(), ref.size(), DType::F32, op, "cpu"));
    EXPECT_TRUE(sameBits(out.floats(), ref));
  }
  float loss = 2.75f;
  rt::Status st = comm->allReduceHost(&loss, 1, rt::ReduceOp::Sum, "loss");
  ASSERT_TRUE(st) << st.message();
  EXPECT_EQ(loss, 2.75f);
  EXPECT_EQ(comm->stats().collectives, 3);
}

TEST_F(Nccl, StepPairMatchesTheCpuPair) {
  // Two gradients packed into one bucket, all-reduced and scaled (0.5:
  // not 1, so that the scale kernel is checked).
  HostTensor g0 = HostTensor::random(DType::F32, {17, 33}, 1);
  HostTensor g1 = HostTensor::random(DType::F32, {129}, 2);
  rt::Shape bucket{int64_t(g0.size() + g1.size())};
  rt::OpAttrs startAttrs{rt::OpAttr::integer("ranks", 1)};
  rt::OpAttrs waitAttrs{rt::OpAttr::real("scale", 0.5)};

  // The CPU pair with the self communicator.
  std::unique_ptr<rt::Device> cpu;
  ASSERT_TRUE(rt::createDevice("cpu", &cpu));
  rt::setCurrentCommunicator(rt::makeSelfCommunicator());
  HostTensor cpuBucket(DType::F32, bucket), cpuOut(DType::F32, bucket);
  rt::KernelRequest cs{OpId::AllReduceStart, startAttrs,
                       {g0.view(), g1.view()}, cpuBucket.mut(), *cpu};
  rt::KernelRequest cw{OpId::AllReduceWait, waitAttrs, {cpuBucket.view()},
                       cpuOut.mut(), *cpu};
  rt::Status st = bindAndRun(*cpu, cs);
  ASSERT_TRUE(st) << st.message();
  st = bindAndRun(*cpu, cw);
  ASSERT_TRUE(st) << st.message();

  // The cuda pair with NCCL.
  rt::setCurrentCommunicator(
      std::shared_ptr<rt::Communicator>(comm.release()));
  rt::DeviceMemory d0 = upload(g0), d1 = upload(g1), db, dout;
  size_t bytes = size_t(rt::numElements(bucket)) * 4;
  ASSERT_TRUE(device->allocate(bytes, &db));
  ASSERT_TRUE(device->allocate(bytes, &dout));
  rt::KernelRequest gs{OpId::AllReduceStart,
                       startAttrs,
                       {{DType::F32, g0.shape, d0.get()},
                        {DType::F32, g1.shape, d1.get()}},
                       {DType::F32, bucket, db.get()},
                       *device};
  rt::KernelRequest gw{OpId::AllReduceWait,
                       waitAttrs,
                       {{DType::F32, bucket, db.get()}},
                       {DType::F32, bucket, dout.get()},
                       *device};
  st = bindAndRun(*device, gs);
  ASSERT_TRUE(st) << st.message();
  st = bindAndRun(*device, gw);
  ASSERT_TRUE(st) << st.message();
  HostTensor out(DType::F32, bucket);
  download(dout.get(), out);
  EXPECT_TRUE(sameBits(out.floats(), cpuOut.floats()));
  std::printf("  nccl step pair (%zu floats) == cpu step pair: %s\n",
              out.size(),
              sameBits(out.floats(), cpuOut.floats()) ? "yes" : "NO");
}

TEST_F(Nccl, AnArtifactForTwoRanksIsRefusedInAWorldOfOne) {
  rt::setCurrentCommunicator(
      std::shared_ptr<rt::Communicator>(comm.release()));
  rt::DeviceMemory d;
  ASSERT_TRUE(device->allocate(16, &d));
  rt::OpAttrs attrs{rt::OpAttr::integer("ranks", 2)};
  rt::KernelRequest r{OpId::AllReduceStart,
                      attrs,
                      {{DType::F32, {4}, d.get()}},
                      {DType::F32, {4}, d.get()},
                      *device};
  rt::Status st = bindAndRun(*device, r);
  ASSERT_FALSE(st);
  EXPECT_TRUE(has(st.message(), "compiled for 2 data-parallel ranks"))
      << st.message();
  EXPECT_TRUE(has(st.message(), "(nccl)")) << st.message();
}
