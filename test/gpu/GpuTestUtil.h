// What the GPU tests share: a fixture that skips, visibly, where no CUDA
// device is found; host tensors of any float dtype; device copies; binding
// and running one kernel the way a session does.
#ifndef MODELC_TEST_GPU_GPUTESTUTIL_H
#define MODELC_TEST_GPU_GPUTESTUTIL_H

#include "TestUtil.h"
#include "cuda/CudaDevice.h"
#include "modelc/device.h"
#include "modelc/kernels.h"

#include <cmath>
#include <cstring>
#include <gtest/gtest.h>

namespace mc::test {

/// Whether `text` contains `what` (for error messages).
inline bool has(const std::string &text, const std::string &what) {
  return text.find(what) != std::string::npos;
}

/// A tensor in host memory, of f32, f16 or bf16 (as raw bytes).
struct HostTensor {
  rt::DType dtype = rt::DType::F32;
  rt::Shape shape;
  std::vector<uint8_t> bytes;

  HostTensor() = default;
  HostTensor(rt::DType t, rt::Shape s)
      : dtype(t), shape(std::move(s)),
        bytes(size_t(rt::numElements(shape)) * rt::dtypeSize(t)) {}
  size_t size() const { return size_t(rt::numElements(shape)); }

  /// Uniform values in [-1, 1), rounded to the dtype; with `mantissaBits`,
  /// also to that many bits of mantissa (10: values TF32 holds exactly).
  static HostTensor random(rt::DType t, rt::Shape s, unsigned seed,
                           int mantissaBits = 23) {
    HostTensor h(t, std::move(s));
    std::vector<float> v = randomFloats(h.size(), seed);
    for (float &x : v)
      if (mantissaBits < 23) {
        int e;
        float m = std::frexp(x, &e); // x = m * 2^e, 0.5 <= |m| < 1
        float scale = std::ldexp(1.0f, mantissaBits + 1);
        x = std::ldexp(std::nearbyint(m * scale) / scale, e);
      }
    h.setFloats(v);
    return h;
  }
  void setFloats(const std::vector<float> &v) {
    for (size_t i = 0; i < v.size(); ++i) {
      if (dtype == rt::DType::F32) {
        std::memcpy(bytes.data() + 4 * i, &v[i], 4);
        continue;
      }
      uint16_t h = dtype == rt::DType::F16 ? rt::floatToHalf(v[i])
                                           : rt::floatToBf16(v[i]);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
  }
  std::vector<float> floats() const {
    std::vector<float> v(size());
    for (size_t i = 0; i < v.size(); ++i) {
      if (dtype == rt::DType::F32) {
        std::memcpy(&v[i], bytes.data() + 4 * i, 4);
        continue;
      }
      uint16_t h;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      v[i] = dtype == rt::DType::F16 ? rt::halfToFloat(h) : rt::bf16ToFloat(h);
    }
    return v;
  }
  std::vector<double> doubles() const {
    std::vector<float> f = floats();
    return std::vector<double>(f.begin(), f.end());
  }
  rt::ConstTensor view() const { return {dtype, shape, bytes.data()}; }
  rt::MutTensor mut() { return {dtype, shape, bytes.data()}; }
};

/// The project's tolerance per dtype, as ||out - ref|| / ||ref||
/// (ARCHITECTURE.md; f32 matmuls run on TF32 tensor cores by default).
inline double tolerance(rt::DType t) {
  switch (t) {
  case rt::DType::F16:
    return 2e-3;
  case rt::DType::BF16:
    return 1e-2;
  default:
    return 5e-4;
  }
}

/// Sets an environment variable for the life of the object.
class ScopedEnv {
public:
  ScopedEnv(const char *name, const char *value) : name_(name) {
    if (const char *old = std::getenv(name))
      old_ = old, had_ = true;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_)
      setenv(name_.c_str(), old_.c_str(), 1);
    else
      unsetenv(name_.c_str());
  }

private:
  std::string name_, old_;
  bool had_ = false;
};

/// Skips, saying why, where this machine has no CUDA device. Its helpers
/// are public: the tests' free functions use them.
class CudaTest : public ::testing::Test {
public:
  void SetUp() override {
    rt::Status st = rt::createDevice("cuda", &device);
    if (!st)
      GTEST_SKIP() << "no CUDA device here: " << st.message();
    cuda = static_cast<rt::cuda::CudaDevice *>(device.get());
  }

  rt::DeviceMemory upload(const HostTensor &h) {
    rt::DeviceMemory m;
    EXPECT_TRUE(device->allocate(h.bytes.size(), &m));
    EXPECT_TRUE(device->copyToDevice(m.get(), h.bytes.data(), h.bytes.size()));
    return m;
  }
  /// A device tensor's bytes into `h` (of its dtype and shape).
  void download(const void *src, HostTensor &h) {
    rt::Status st = device->copyToHost(h.bytes.data(), src, h.bytes.size());
    ASSERT_TRUE(st) << st.message();
  }

  /// Binds `r` with the kernel `device` registered for its op, runs it
  /// once with a workspace of the size it asked for, and waits.
  rt::Status bindAndRun(rt::Device &dev, const rt::KernelRequest &r) {
    rt::KernelFactory f = rt::findKernel(dev.kind(), r.op);
    if (!f)
      return rt::Status::error(std::string("no ") + dev.kind() +
                               " kernel for mc." + rt::opName(r.op));
    rt::BoundKernel k;
    size_t bytes = 0;
    MC_RETURN_IF_ERROR(f(r, &k, &bytes));
    rt::DeviceMemory ws;
    MC_RETURN_IF_ERROR(dev.allocate(bytes, &ws));
    MC_RETURN_IF_ERROR(k(ws.get()));
    return dev.synchronize();
  }

  std::unique_ptr<rt::Device> device;
  rt::cuda::CudaDevice *cuda = nullptr;
};

} // namespace mc::test

#endif // MODELC_TEST_GPU_GPUTESTUTIL_H
