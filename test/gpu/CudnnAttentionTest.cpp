// The CUDA device's attention regions through cuDNN's fused attention
// against the CPU's fused attention kernel (CTest label gpu; skipped,
// saying why, without a device): the regions mc-fuse makes under
// --amp=bf16 (bf16 matmuls, the scores cast to f32 for a scale, a mask and
// the softmax, the probabilities cast back), k read with transpose_b (as
// the cuda target always leaves it), a causal mask broadcast over the
// heads, and a splat scale of rank 0 read at bind. Without a GPU, CudnnPlanTest plans the same graphs for
// an A100.
#include "GpuTestUtil.h"

#include <cmath>

using namespace mc;
using namespace mc::test;
using rt::DType;
using rt::OpAttr;
using rt::OpId;

namespace {

using CudnnAttention = CudaTest;

struct AttnCase {
  const char *name;
  int64_t b, h, s, d; // b == 0: rank 3, [h, s, d]
  bool mask, scale;
  DType dtype;
};

/// Runs the region on the device and on the CPU, and compares.
void checkAttention(CudaTest &t, const AttnCase &c) {
  SCOPED_TRACE(c.name);
  const DType io = c.dtype, f32 = DType::F32;
  rt::Shape lead = c.b ? rt::Shape{c.b, c.h} : rt::Shape{c.h};
  auto shape = [&](int64_t x, int64_t y) {
    rt::Shape s = lead;
    s.push_back(x);
    s.push_back(y);
    return s;
  };
  const int64_t rank = int64_t(lead.size()) + 2;
  rt::Shape qs = shape(c.s, c.d), ks = qs, ss = shape(c.s, c.s);
  HostTensor q = HostTensor::random(io, qs, 31, 7);
  HostTensor k = HostTensor::random(io, ks, 32, 7);
  HostTensor v = HostTensor::random(io, qs, 33, 7);
  HostTensor mask(f32, {c.s, c.s});
  std::vector<float> m(size_t(c.s * c.s));
  for (int64_t i = 0; i < c.s; ++i)
    for (int64_t j = 0; j < c.s; ++j)
      m[size_t(i * c.s + j)] = j > i ? -10000.0f : 0.0f; // causal
  mask.setFloats(m);
  HostTensor scale(f32, {});
  scale.setFloats({1.0f / std::sqrt(float(c.d))});

  // Inputs: q, k, v, mask, scale; values from 5.
  std::vector<rt::RegionOp> body;
  body.push_back({OpId::Matmul, {OpAttr::boolean("transpose_b", true)},
                  {0, 1}, io, ss});
  body.push_back({OpId::Cast, {}, {5}, f32, ss});
  uint32_t cur = 6;
  if (c.scale) {
    body.push_back({OpId::Mul, {}, {cur, 4}, f32, ss});
    cur = uint32_t(5 + body.size() - 1);
  }
  if (c.mask) {
    body.push_back({OpId::BroadcastInDim,
                    {OpAttr::list("dims", {rank - 2, rank - 1})},
                    {3}, f32, ss});
    uint32_t bcast = uint32_t(5 + body.size() - 1);
    body.push_back({OpId::Add, {}, {cur, bcast}, f32, ss});
    cur = uint32_t(5 + body.size() - 1);
  }
  body.push_back({OpId::Softmax, {OpAttr::integer("axis", rank - 1)}, {cur},
                  f32, ss});
  body.push_back({OpId::Cast, {}, {uint32_t(5 + body.size() - 1)}, io, ss});
  body.push_back({OpId::Matmul, {}, {uint32_t(5 + body.size() - 1), 2}, io,
                  qs});
  rt::OpAttrs attrs{OpAttr::boolean("attention", true)};

  // The CPU's fused attention kernel: the reference.
  std::unique_ptr<rt::Device> cpu;
  ASSERT_TRUE(rt::createDevice("cpu", &cpu));
  HostTensor want(io, qs);
  {
    rt::KernelRequest r{OpId::Fused,
                        attrs,
                        {q.view(), k.view(), v.view(), mask.view(),
                         scale.view()},
                        want.mut(),
                        *cpu,
                        &body,
                        {false, false, false, true, true}};
    rt::Status st = t.bindAndRun(*cpu, r);
    ASSERT_TRUE(st) << st.message();
  }
  rt::DeviceMemory dq = t.upload(q), dk = t.upload(k), dv = t.upload(v),
                   dm = t.upload(mask), ds = t.upload(scale), dout;
  HostTensor got(io, qs);
  ASSERT_TRUE(t.device->allocate(got.bytes.size(), &dout));
  rt::KernelRequest r{OpId::Fused,
                      attrs,
                      {{io, qs, dq.get()},
                       {io, ks, dk.get()},
                       {io, qs, dv.get()},
                       {f32, mask.shape, dm.get()},
                       {f32, {}, ds.get()}},
                      {io, qs, dout.get()},
                      *t.device,
                      &body,
                      {false, false, false, true, true}};
  rt::Status st = t.bindAndRun(*t.device, r);
  ASSERT_TRUE(st) << st.message();
  t.download(dout.get(), got);
  std::vector<float> w = want.floats();
  double err = relErr(got.floats(), std::vector<double>(w.begin(), w.end()));
  // bf16 outputs (8 bits): the CPU rounds the scores and probabilities
  // at each op, cuDNN keeps them in f32 until P.
  EXPECT_LT(err, 1e-2);
  std::printf("  %-44s rel_err %.2e (tol 1e-02)\n", c.name, err);
}

TEST_F(CudnnAttention, AmpRegionsMatchTheCpusFusedAttention) {
  const AttnCase cases[] = {
      {"GPT-2 block: causal mask", 2, 12, 128, 64, true, false, DType::BF16},
      {"encoder: [heads, s, d], scale, no mask", 0, 48, 256, 64, false, true,
       DType::BF16},
      {"f16, scale and mask, head dim 128", 1, 8, 64, 128, true, true,
       DType::F16},
  };
  for (const AttnCase &c : cases)
    checkAttention(*this, c);
}

TEST_F(CudnnAttention, AnF32RegionIsRefusedNamingWhy) {
  const DType f32 = DType::F32;
  rt::Shape qs{2, 16, 8}, ss{2, 16, 16};
  std::vector<rt::RegionOp> body = {
      {OpId::Matmul, {}, {0, 1}, f32, ss},
      {OpId::Softmax, {OpAttr::integer("axis", 2)}, {3}, f32, ss},
      {OpId::Matmul, {}, {4, 2}, f32, qs}};
  rt::OpAttrs attrs{OpAttr::boolean("attention", true)};
  rt::DeviceMemory d;
  ASSERT_TRUE(device->allocate(4096, &d));
  rt::KernelRequest r{OpId::Fused,
                      attrs,
                      {{f32, qs, d.get()}, {f32, {2, 8, 16}, d.get()},
                       {f32, qs, d.get()}},
                      {f32, qs, d.get()},
                      *device,
                      &body};
  rt::Status st = bindAndRun(*device, r);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("takes f16 and bf16, not f32"),
            std::string::npos)
      << st.message();
}

} // namespace
