// The eager Tensor: shape, dtype and CPU storage, with value semantics for
// users and shared storage underneath (a reshape is a view).
#ifndef MODELC_FRONTEND_TENSOR_H
#define MODELC_FRONTEND_TENSOR_H

#include "modelc/kernels.h"

#include <cstdint>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace mc {

using rt::DType;
using Shape = std::vector<int64_t>;

/// Every frontend error (bad shapes, dtypes, files) is an mc::Error.
class Error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// 64-byte aligned bytes, shared between a tensor and its views.
struct Storage {
  explicit Storage(size_t bytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data = nullptr;
  size_t bytes = 0;
};

struct GradNode;

struct TensorImpl {
  DType dtype = DType::F32;
  Shape shape;
  std::shared_ptr<Storage> storage;
  // Autograd (see Autograd.h): a leaf that requires grad accumulates into
  // `grad`; a computed tensor points at the node that made it.
  bool requiresGrad = false;
  std::shared_ptr<TensorImpl> grad;
  std::shared_ptr<GradNode> gradFn;
};

/// The random generator used for initialization.
std::mt19937_64& defaultGenerator();
/// Seeds the initializers' generator and dropout's (Generator::global(),
/// frontend/Random.h), as torch.manual_seed.
void manualSeed(uint64_t seed);

class Tensor {
public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  static Tensor empty(const Shape& shape, DType dtype = DType::F32);
  static Tensor zeros(const Shape& shape, DType dtype = DType::F32);
  /// A tensor with a shape and dtype but no values (no storage), as
  /// PyTorch's meta tensors: ops on it check shapes, compute the output
  /// shape and record themselves to the tracer, but run no kernel, and their
  /// outputs are shape-only too. The ONNX importer traces a model this way
  /// without running it. Reading its values throws mc::Error.
  static Tensor shapeOnly(const Shape& shape, DType dtype = DType::F32);
  static Tensor full(const Shape& shape, double value,
                     DType dtype = DType::F32);
  static Tensor scalar(double value, DType dtype = DType::F32);
  /// f32 tensor from values in row-major order.
  static Tensor fromVector(const std::vector<float>& values,
                           const Shape& shape);
  /// Uniform in [low, high) from the default generator (or `gen`).
  static Tensor uniform(const Shape& shape, float low, float high,
                        std::mt19937_64* gen = nullptr);
  static Tensor randn(const Shape& shape, std::mt19937_64* gen = nullptr);

  bool defined() const { return impl_ != nullptr; }
  /// False for a shape-only tensor (see shapeOnly).
  bool hasValues() const;
  const Shape& shape() const;
  DType dtype() const;
  int64_t rank() const { return static_cast<int64_t>(shape().size()); }
  int64_t size(int64_t dim) const; // negative dims count from the end
  int64_t numel() const;
  size_t byteSize() const;
  std::string describe() const; // "f32[4, 8]"

  void* rawData();
  const void* rawData() const;
  template <typename T> T* data() { return static_cast<T*>(rawData()); }
  template <typename T> const T* data() const {
    return static_cast<const T*>(rawData());
  }
  /// Copies out as floats (any dtype is converted).
  std::vector<float> toVector() const;
  /// A deep copy with its own storage.
  Tensor clone() const;

  rt::ConstTensor view() const;
  rt::MutTensor mutView();

  //===--- Autograd (see Autograd.h) ---===//
  /// Marks a leaf (a parameter) as needing gradients; returns *this.
  Tensor& setRequiresGrad(bool requires = true);
  bool requiresGrad() const;
  /// The accumulated gradient of a leaf (undefined before backward()).
  Tensor grad() const;
  void zeroGrad();
  /// Gradients of this scalar with respect to every leaf it depends on,
  /// accumulated into their grad().
  void backward() const;
  /// The same values, cut from the graph.
  Tensor detach() const;

  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& implPtr() const { return impl_; }

private:
  std::shared_ptr<TensorImpl> impl_;
};

} // namespace mc

#endif // MODELC_FRONTEND_TENSOR_H
