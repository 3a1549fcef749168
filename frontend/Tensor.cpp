// The eager Tensor (see Tensor.h).
#include "frontend/Tensor.h"
#include "frontend/Random.h"
#include "frontend/TraceHook.h"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace mc {

Storage::Storage(size_t n) : bytes(n) {
  // 64-byte alignment, as the runtime's arena and data section; at least one
  // cache line so even empty tensors have a valid pointer.
  size_t rounded = ((n + 63) / 64) * 64;
  data = std::aligned_alloc(64, rounded ? rounded : 64);
  if (!data)
    throw Error("out of memory allocating a tensor of " + std::to_string(n) +
                " bytes");
  std::memset(data, 0, rounded ? rounded : 64);
}

Storage::~Storage() { std::free(data); }

std::mt19937_64& defaultGenerator() {
  static std::mt19937_64 gen(0x6d6f64656c63ULL); // "modelc"
  return gen;
}

void manualSeed(uint64_t seed) {
  defaultGenerator().seed(seed);
  Generator::global().manualSeed(seed);
}

/// Refuses a negative dimension or more than rt::kMaxTensorElements.
static void checkShapeLimits(const Shape& shape) {
  if (rt::Status s = rt::checkElementCount(shape); !s)
    throw Error(s.message());
}

Tensor Tensor::empty(const Shape& shape, DType dtype) {
  checkShapeLimits(shape);
  auto impl = std::make_shared<TensorImpl>();
  impl->dtype = dtype;
  impl->shape = shape;
  impl->storage = std::make_shared<Storage>(
      static_cast<size_t>(rt::numElements(shape)) * rt::dtypeSize(dtype));
  return Tensor(std::move(impl));
}

Tensor Tensor::shapeOnly(const Shape& shape, DType dtype) {
  checkShapeLimits(shape);
  auto impl = std::make_shared<TensorImpl>();
  impl->dtype = dtype;
  impl->shape = shape;
  return Tensor(std::move(impl));
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) {
  return empty(shape, dtype); // Storage is zero-filled.
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype) {
  Tensor f32 = empty(shape, DType::F32);
  float* p = f32.data<float>();
  for (int64_t i = 0; i < f32.numel(); ++i)
    p[i] = static_cast<float>(value);
  if (dtype == DType::F32)
    return f32;
  Tensor out = empty(shape, dtype);
  rt::Status s = rt::cast(f32.view(), out.mutView());
  if (!s)
    throw Error(s.message());
  return out;
}

Tensor Tensor::scalar(double value, DType dtype) {
  return full({}, value, dtype);
}

Tensor Tensor::fromVector(const std::vector<float>& values,
                          const Shape& shape) {
  Tensor t = empty(shape, DType::F32);
  if (static_cast<int64_t>(values.size()) != t.numel())
    throw Error("fromVector: " + std::to_string(values.size()) +
                " values do not fill shape " + rt::shapeString(shape));
  std::memcpy(t.rawData(), values.data(), values.size() * sizeof(float));
  return t;
}

Tensor Tensor::uniform(const Shape& shape, float low, float high,
                       std::mt19937_64* gen) {
  std::mt19937_64& g = gen ? *gen : defaultGenerator();
  std::uniform_real_distribution<float> dist(low, high);
  Tensor t = empty(shape, DType::F32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] = dist(g);
  return t;
}

Tensor Tensor::randn(const Shape& shape, std::mt19937_64* gen) {
  std::mt19937_64& g = gen ? *gen : defaultGenerator();
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Tensor t = empty(shape, DType::F32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] = dist(g);
  return t;
}

static const TensorImpl& checked(const std::shared_ptr<TensorImpl>& impl) {
  if (!impl)
    throw Error("use of an undefined tensor");
  return *impl;
}

const Shape& Tensor::shape() const { return checked(impl_).shape; }
DType Tensor::dtype() const { return checked(impl_).dtype; }
int64_t Tensor::numel() const { return rt::numElements(shape()); }
size_t Tensor::byteSize() const {
  return static_cast<size_t>(numel()) * rt::dtypeSize(dtype());
}

int64_t Tensor::size(int64_t dim) const {
  int64_t r = rank();
  int64_t d = dim < 0 ? dim + r : dim;
  if (d < 0 || d >= r)
    throw Error("dimension " + std::to_string(dim) +
                " is out of range for a tensor of rank " + std::to_string(r));
  return shape()[d];
}

std::string Tensor::describe() const {
  if (!defined())
    return "undefined";
  return std::string(rt::dtypeName(dtype())) + rt::shapeString(shape());
}

bool Tensor::hasValues() const { return checked(impl_).storage != nullptr; }

/// The storage of a tensor with values; a shape-only tensor has none.
static Storage& valuesOf(const std::shared_ptr<TensorImpl>& impl) {
  const TensorImpl& t = checked(impl);
  if (!t.storage)
    throw Error("the values of " + std::string(rt::dtypeName(t.dtype)) +
                rt::shapeString(t.shape) +
                " are not known: it is a shape-only tensor (it depends on a "
                "model input, which ONNX import does not run)");
  return *t.storage;
}

void* Tensor::rawData() { return valuesOf(impl_).data; }
const void* Tensor::rawData() const { return valuesOf(impl_).data; }

std::vector<float> Tensor::toVector() const {
  if (dtype() == DType::F32) {
    const float* p = data<float>();
    return std::vector<float>(p, p + numel());
  }
  Tensor f = empty(shape(), DType::F32);
  rt::Status s = rt::cast(view(), f.mutView());
  if (!s)
    throw Error(s.message());
  return f.toVector();
}

Tensor Tensor::clone() const {
  if (!hasValues())
    return shapeOnly(shape(), dtype());
  Tensor t = empty(shape(), dtype());
  std::memcpy(t.rawData(), rawData(), byteSize());
  return t;
}

rt::ConstTensor Tensor::view() const { return {dtype(), shape(), rawData()}; }
rt::MutTensor Tensor::mutView() { return {dtype(), shape(), rawData()}; }

TraceHook::~TraceHook() = default;

static thread_local TraceHook* activeHook = nullptr;
// The current run's number on this thread, unique across threads (a
// Generator's epoch names one run, whichever thread traced it).
static std::atomic<uint64_t> lastTraceEpoch{0};
static thread_local uint64_t traceEpoch = 0;
TraceHook* activeTraceHook() { return activeHook; }
uint64_t activeTraceEpoch() { return traceEpoch; }
void setActiveTraceHook(TraceHook* hook) { activeHook = hook; }
void startTracedRun(TraceHook* hook) {
  traceEpoch = ++lastTraceEpoch;
  activeHook = hook;
}

} // namespace mc
