// The CUDA device's conv2d through cuDNN's graph API against the CPU's
// conv2d (CTest label gpu; skipped, saying why, without a device): f32
// (TF32 and not), bf16 and f16, with strides, asymmetric padding,
// dilation, groups and depthwise, NCHW and NHWC (channels_last, the
// weight as given or copied to KRSC); the conv2d + bias (+ relu) regions as
// one cuDNN graph, and the regions refused (those need no cuDNN, so they
// also run on the fake driver).
#include "ConvCases.h"
#include "GpuTestUtil.h"
#include "cuda/Cudnn.h"
#include "modelc/shapes.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

using namespace mc;
using namespace mc::test;
using rt::DType;
using rt::OpId;

namespace {

/// The CPU's f32 conv2d of the values (each input first rounded to the
/// dtype), plus the bias along the channels and relu when asked.
std::vector<double> reference(const ConvCase &c, const HostTensor &x,
                              const HostTensor &w, const HostTensor *bias,
                              bool relu) {
  HostTensor xf(DType::F32, x.shape), wf(DType::F32, w.shape),
      ref(DType::F32, outShape(c));
  xf.setFloats(x.floats());
  wf.setFloats(w.floats());
  rt::Status st = rt::conv2d(xf.view(), wf.view(), convParams(c), ref.mut());
  EXPECT_TRUE(st) << st.message();
  std::vector<double> r = ref.doubles();
  const rt::Shape &s = ref.shape;
  std::vector<float> b = bias ? bias->floats() : std::vector<float>();
  int64_t plane = s[2] * s[3];
  for (size_t i = 0; i < r.size(); ++i) {
    if (bias)
      r[i] += b[size_t((int64_t(i) / plane) % s[1])];
    if (relu)
      r[i] = std::max(r[i], 0.0);
  }
  return r;
}

using CudnnConv = CudaTest;

/// NCHW <-> NHWC of a rank-4 tensor's bytes: toLast moves dim 1 last,
/// else dim 3 to 1 (SHAPE is the result's).
HostTensor permuted(const HostTensor &t, bool toLast) {
  const rt::Shape &s = t.shape;
  rt::Shape to = toLast ? rt::Shape{s[0], s[2], s[3], s[1]}
                        : rt::Shape{s[0], s[3], s[1], s[2]};
  HostTensor r(t.dtype, to);
  size_t e = rt::dtypeSize(t.dtype);
  // Index of NCHW element (n, c, hw) in each layout.
  int64_t n = toLast ? s[0] : to[0], c = toLast ? s[1] : to[1],
          hw = toLast ? s[2] * s[3] : to[2] * to[3];
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < c; ++j)
      for (int64_t k = 0; k < hw; ++k) {
        size_t nchw = size_t((i * c + j) * hw + k),
               nhwc = size_t((i * hw + k) * c + j);
        std::memcpy(&r.bytes[(toLast ? nhwc : nchw) * e],
                    &t.bytes[(toLast ? nchw : nhwc) * e], e);
      }
  return r;
}

/// How checkConv lays the case out.
enum class Layout {
  Nchw,
  Nhwc,         // channels_last, a weight the step may not preprocess
  NhwcConstant, // channels_last, a constant weight (read as KRSC)
};

/// One case on the device (a Conv2d step, or a Fused step of conv2d + bias
/// + relu) against the reference.
void checkConv(CudaTest &t, DType dtype, const ConvCase &c, int mantissaBits,
               double tol, bool withBias, bool relu,
               Layout layout = Layout::Nchw) {
  bool last = layout != Layout::Nchw;
  std::string what =
      std::string(withBias || relu ? "fused " : "") + "conv2d " +
      rt::dtypeName(dtype) + " " + c.name + (withBias ? " + bias" : "") +
      (relu ? ", relu" : "") +
      (layout == Layout::Nhwc           ? ", NHWC"
       : layout == Layout::NhwcConstant ? ", NHWC, constant weight"
                                        : "");
  SCOPED_TRACE(what);
  rt::Shape out = outShape(c);
  HostTensor x = HostTensor::random(dtype, c.x, 21, mantissaBits);
  HostTensor w = HostTensor::random(dtype, c.w, 22, mantissaBits);
  HostTensor bias = HostTensor::random(dtype, {out[1]}, 23, mantissaBits);
  std::vector<double> ref =
      reference(c, x, w, withBias ? &bias : nullptr, relu);
  HostTensor xLaid = last ? permuted(x, true) : x;
  rt::DeviceMemory dx = t.upload(xLaid), dw = t.upload(w), db = t.upload(bias),
                   dy;
  HostTensor got(dtype, out);
  rt::Shape outLaid = last ? permuted(got, true).shape : out;
  ASSERT_TRUE(t.device->allocate(got.bytes.size(), &dy));
  rt::OpAttrs none, attrs = convAttrs(c);
  if (last)
    attrs.set(rt::OpAttr::boolean("channels_last", true));
  std::vector<rt::RegionOp> body;
  bool fused = withBias || relu;
  if (fused) {
    // conv2d(0, 1); broadcast_in_dim(2, dims [channels]); add (bias
    // first); relu.
    body.push_back({OpId::Conv2d, attrs, {0, 1}, dtype, outLaid});
    uint32_t v = 3;
    if (withBias) {
      body.push_back({OpId::BroadcastInDim,
                      {rt::OpAttr::list("dims", {last ? 3 : 1})},
                      {2},
                      dtype,
                      outLaid});
      body.push_back({OpId::Add, {}, {4, v}, dtype, outLaid});
      v = 5;
    }
    if (relu)
      body.push_back({OpId::Relu, {}, {v}, dtype, outLaid});
  }
  std::vector<rt::ConstTensor> inputs{{dtype, xLaid.shape, dx.get()},
                                      {dtype, c.w, dw.get()}};
  if (fused)
    inputs.push_back({dtype, bias.shape, db.get()});
  rt::KernelRequest r{fused ? OpId::Fused : OpId::Conv2d,
                      fused ? none : attrs,
                      inputs,
                      {dtype, outLaid, dy.get()},
                      *t.device,
                      fused ? &body : nullptr};
  if (layout == Layout::NhwcConstant)
    r.constantInputs = {false, true};
  rt::Status st = t.bindAndRun(*t.device, r);
  ASSERT_TRUE(st) << st.message();
  if (last) {
    HostTensor laid(dtype, outLaid);
    t.download(dy.get(), laid);
    got = permuted(laid, false);
  } else {
    t.download(dy.get(), got);
  }
  double err = relErr(got.floats(), ref);
  EXPECT_LT(err, tol);
  std::printf("  %-62s rel_err %.2e (tol %.0e)\n", what.c_str(), err, tol);
}

// f32 on TF32 tensor cores (the default): inputs of 10 mantissa bits,
// which TF32 holds exactly, so what differs is the order of the f32 sums
// (as for the matmuls); a wrong padding, stride or group is of order 1.
TEST_F(CudnnConv, F32Tf32MatchesTheCpu) {
  for (const ConvCase &c : kCases)
    checkConv(*this, DType::F32, c, 10, tolerance(DType::F32), false, false);
}

// Full f32 inputs with TF32 off: engines with tensor-core notes skipped.
TEST_F(CudnnConv, F32WithoutTf32MatchesTheCpuToF32Tolerance) {
  ScopedEnv noTf32("MODELC_CUDA_TF32", "0");
  for (const ConvCase &c : kCases)
    checkConv(*this, DType::F32, c, 23, 1e-5, false, false);
}

TEST_F(CudnnConv, Bf16MatchesTheCpu) {
  for (const ConvCase &c : kCases)
    checkConv(*this, DType::BF16, c, 23, tolerance(DType::BF16), false, false);
}

TEST_F(CudnnConv, F16MatchesTheCpu) {
  for (const ConvCase &c : kCases)
    checkConv(*this, DType::F16, c, 23, tolerance(DType::F16), false, false);
}

TEST_F(CudnnConv, ConvBiasReluRegionIsOneGraphMatchingTheCpu) {
  for (DType t : {DType::F32, DType::BF16, DType::F16}) {
    int bits = t == DType::F32 ? 10 : 23;
    for (const ConvCase &c : {kCases[0], kCases[1], kCases[3], kCases[5]})
      checkConv(*this, t, c, bits, tolerance(t), true, true);
    checkConv(*this, t, kCases[0], bits, tolerance(t), true, false);
    checkConv(*this, t, kCases[2], bits, tolerance(t), false, true);
  }
}

// channels_last (what the cuda target compiles convolutions to): NHWC
// activations, the weight as given (cuDNN transposes it per call) or as a
// constant the device copies to KRSC once; every case, each dtype, and
// the bias and relu region.
TEST_F(CudnnConv, ChannelsLastMatchesTheCpu) {
  for (Layout layout : {Layout::Nhwc, Layout::NhwcConstant})
    for (DType t : {DType::F32, DType::BF16, DType::F16}) {
      int bits = t == DType::F32 ? 10 : 23;
      for (const ConvCase &c : kCases)
        checkConv(*this, t, c, bits, tolerance(t), false, false, layout);
      for (const ConvCase &c : {kCases[0], kCases[1], kCases[3], kCases[5]})
        checkConv(*this, t, c, bits, tolerance(t), true, true, layout);
    }
}

TEST_F(CudnnConv, ASessionOfConvStepsReplaysAsAGraph) {
  // Twice the same bound step, as a session's second and third runs would
  // (the variant pack is made once for the workspace).
  const ConvCase &c = kCases[0];
  HostTensor x = HostTensor::random(DType::BF16, c.x, 31);
  HostTensor w = HostTensor::random(DType::BF16, c.w, 32);
  rt::Shape out = outShape(c);
  rt::DeviceMemory dx = upload(x), dw = upload(w), dy, ws;
  HostTensor got(DType::BF16, out);
  ASSERT_TRUE(device->allocate(got.bytes.size(), &dy));
  rt::OpAttrs attrs = convAttrs(c);
  rt::KernelRequest r{OpId::Conv2d,
                      attrs,
                      {{DType::BF16, c.x, dx.get()}, {DType::BF16, c.w, dw.get()}},
                      {DType::BF16, out, dy.get()},
                      *device};
  rt::BoundKernel k;
  size_t bytes = 0;
  rt::Status st = rt::findKernel("cuda", OpId::Conv2d)(r, &k, &bytes);
  ASSERT_TRUE(st) << st.message();
  ASSERT_TRUE(device->allocate(bytes, &ws));
  for (int i = 0; i < 3; ++i) {
    st = k(ws.get());
    ASSERT_TRUE(st) << st.message();
  }
  ASSERT_TRUE(device->synchronize());
  download(dy.get(), got);
  EXPECT_LT(relErr(got.floats(), reference(c, x, w, nullptr, false)),
            tolerance(DType::BF16));
}

// Refused before cuDNN is asked: runs on the fake driver too.
TEST_F(CudnnConv, RegionsOtherThanConvBiasReluAreRefusedNamingTheOp) {
  rt::DeviceMemory dummy;
  ASSERT_TRUE(device->allocate(1 << 16, &dummy));
  void *p = dummy.get();
  const ConvCase &c = kCases[0];
  rt::Shape out = outShape(c);
  rt::OpAttrs none;
  auto refuse = [&](std::vector<rt::RegionOp> body, rt::Shape biasShape,
                    const std::string &why) {
    rt::KernelRequest r{OpId::Fused,
                        none,
                        {{DType::F32, c.x, p},
                         {DType::F32, c.w, p},
                         {DType::F32, biasShape, p}},
                        {DType::F32, out, p},
                        *device,
                        &body};
    rt::BoundKernel k;
    size_t bytes = 0;
    rt::Status st = rt::findKernel("cuda", OpId::Fused)(r, &k, &bytes);
    ASSERT_FALSE(st) << why;
    EXPECT_TRUE(has(st.message(), why)) << st.message();
    EXPECT_TRUE(has(st.message(), "the compiler generates a kernel"))
        << st.message();
  };
  rt::RegionOp conv{OpId::Conv2d, convAttrs(c), {0, 1}, DType::F32, out};
  rt::RegionOp bcast{
      OpId::BroadcastInDim, {rt::OpAttr::list("dims", {1})}, {2},
      DType::F32, out};
  // An activation other than relu.
  refuse({conv, {OpId::Sigmoid, {}, {3}, DType::F32, out}}, {16},
         "body op 1 is mc.sigmoid");
  // A bias that is not along the channels.
  rt::RegionOp alongW = bcast;
  alongW.attrs = {rt::OpAttr::list("dims", {3})};
  refuse({conv, alongW, {OpId::Add, {}, {3, 4}, DType::F32, out}}, {16},
         "not one bias of [16] along dim 1");
  // Relu before the bias.
  refuse({conv, {OpId::Relu, {}, {3}, DType::F32, out}, bcast,
          {OpId::Add, {}, {4, 5}, DType::F32, out}},
         {16}, "body op 3 is mc.add that is not the bias's add");
}

/// The JSON value of KEY in cuDNN's flat device-property JSON, as text.
std::string jsonValue(const std::string &json, const std::string &key) {
  size_t at = json.find("\"" + key + "\"");
  if (at == std::string::npos)
    return "";
  at = json.find(':', at);
  size_t end = json.find_first_of(",}\n", at);
  std::string v = json.substr(at + 1, end - at - 1);
  v.erase(0, v.find_first_not_of(" \""));
  v.erase(v.find_last_not_of(" \"") + 1);
  return v;
}

std::string readText(const std::string &path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// CI plans every cuDNN graph for the GPUs that
// test/gpu/Inputs/*.cudnn-device.json describe (CudnnPlanTest). Those
// were written from published figures; on a GPU, its own properties are
// printed (for the log) and, for the GPU a file names, compared.
TEST_F(CudnnConv, TheGpusPropertiesAreThoseTheCheckedInJsonDescribes) {
  const rt::cuda::Cudnn *dnn = nullptr;
  cudnnHandle_t handle = nullptr;
  rt::Status st = cuda->cudnn(&dnn, &handle);
  ASSERT_TRUE(st) << st.message();
  rt::cuda::DeviceProperties props;
  st = rt::cuda::DeviceProperties::fromHandle(*dnn, handle, &props);
  ASSERT_TRUE(st) << st.message();
  std::string json;
  st = props.json(&json);
  ASSERT_TRUE(st) << st.message();
  std::printf("cuDNN's device properties of this GPU:\n%s\n", json.c_str());
  std::string name = jsonValue(json, "deviceName");
  for (const char *file : {"a100", "h100"}) {
    // The source tree's, else the one under the working directory (the
    // GPU machine runs from a copy of the repository's root).
    std::string path =
        std::string(MODELC_TEST_GPU_INPUTS) + "/" + file + ".cudnn-device.json";
    std::string mine = readText(path);
    if (mine.empty()) {
      path = std::string("test/gpu/Inputs/") + file + ".cudnn-device.json";
      mine = readText(path);
    }
    if (mine.empty() || jsonValue(mine, "deviceName") != name)
      continue;
    for (const char *key :
         {"deviceVer", "multiProcessorCount", "maxSharedMemoryPerBlockOptin",
          "maxSharedMemoryPerBlock", "reservedSharedMemoryPerBlock",
          "l2CacheSize", "maxThreadsPerSM", "maxRegistersPerSM",
          "maxCtasPerSM"})
      EXPECT_EQ(jsonValue(json, key), jsonValue(mine, key))
          << key << " of " << name << " differs from " << path
          << ": replace the file with the JSON printed above";
    return;
  }
  std::printf("(no checked-in file describes '%s')\n", name.c_str());
}

} // namespace
