// Eager ops: shape checks, the runtime's CPU kernels, and trace records.
#include "frontend/Ops.h"
#include "frontend/TraceHook.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace mc {
namespace {

void check(const rt::Status& s) {
  if (!s)
    throw Error(s.message());
}

void requireDefined(const char* op, const Tensor& t) {
  if (!t.defined())
    throw Error(std::string(op) + ": undefined tensor operand");
}

void emit(OpRecord record) {
  if (TraceHook* hook = activeTraceHook())
    hook->record(record);
}

int64_t normalizeDim(const char* op, int64_t d, int64_t rank) {
  int64_t n = d < 0 ? d + rank : d;
  if (n < 0 || n >= rank)
    throw Error(std::string(op) + ": dimension " + std::to_string(d) +
                " is out of range for rank " + std::to_string(rank));
  return n;
}

Shape broadcastShape(const char* op, const Shape& a, const Shape& b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      throw Error(std::string(op) + ": shapes " + rt::shapeString(a) +
                  " and " + rt::shapeString(b) + " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Tensor binaryOp(OpKind kind, rt::BinaryOp op, const char* name, Tensor a,
                Tensor b) {
  requireDefined(name, a);
  requireDefined(name, b);
  if (a.dtype() != b.dtype())
    throw Error(std::string(name) + ": operands have different dtypes (" +
                a.describe() + " and " + b.describe() +
                "); cast one explicitly");
  if (a.shape() != b.shape()) {
    Shape s = broadcastShape(name, a.shape(), b.shape());
    if (a.shape() != s)
      a = broadcastTo(a, s);
    if (b.shape() != s)
      b = broadcastTo(b, s);
  }
  Tensor out = Tensor::empty(a.shape(), a.dtype());
  check(rt::binary(op, a.view(), b.view(), out.mutView()));
  emit({kind, {a, b}, out});
  return out;
}

Tensor unaryOp(OpKind kind, rt::UnaryOp op, const char* name,
               const Tensor& a) {
  requireDefined(name, a);
  Tensor out = Tensor::empty(a.shape(), a.dtype());
  check(rt::unary(op, a.view(), out.mutView()));
  emit({kind, {a}, out});
  return out;
}

Tensor reduceOp(OpKind kind, rt::ReduceOp op, const char* name,
                const Tensor& a, const std::vector<int64_t>& dims,
                bool keepdim) {
  requireDefined(name, a);
  std::vector<int64_t> norm;
  for (int64_t d : dims)
    norm.push_back(normalizeDim(name, d, a.rank()));
  std::sort(norm.begin(), norm.end());
  if (std::adjacent_find(norm.begin(), norm.end()) != norm.end())
    throw Error(std::string(name) + ": a dimension is repeated");
  Shape outShape;
  for (int64_t i = 0; i < a.rank(); ++i) {
    bool reduced = std::binary_search(norm.begin(), norm.end(), i);
    if (!reduced)
      outShape.push_back(a.shape()[i]);
    else if (keepdim)
      outShape.push_back(1);
  }
  Tensor out = Tensor::empty(outShape, a.dtype());
  check(rt::reduce(op, a.view(), norm, keepdim, out.mutView()));
  OpRecord r{kind, {a}, out};
  r.ints = norm;
  r.keepdim = keepdim;
  emit(std::move(r));
  return out;
}

Tensor scalarLike(const Tensor& a, double s) {
  requireDefined("scalar op", a);
  return Tensor::scalar(s, a.dtype());
}

} // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  return binaryOp(OpKind::Add, rt::BinaryOp::Add, "add", a, b);
}
Tensor sub(const Tensor& a, const Tensor& b) {
  return binaryOp(OpKind::Sub, rt::BinaryOp::Sub, "sub", a, b);
}
Tensor mul(const Tensor& a, const Tensor& b) {
  return binaryOp(OpKind::Mul, rt::BinaryOp::Mul, "mul", a, b);
}
Tensor div(const Tensor& a, const Tensor& b) {
  return binaryOp(OpKind::Div, rt::BinaryOp::Div, "div", a, b);
}
Tensor maximum(const Tensor& a, const Tensor& b) {
  return binaryOp(OpKind::Maximum, rt::BinaryOp::Maximum, "maximum", a, b);
}

Tensor neg(const Tensor& a) {
  return unaryOp(OpKind::Neg, rt::UnaryOp::Neg, "neg", a);
}
Tensor exp(const Tensor& a) {
  return unaryOp(OpKind::Exp, rt::UnaryOp::Exp, "exp", a);
}
Tensor log(const Tensor& a) {
  return unaryOp(OpKind::Log, rt::UnaryOp::Log, "log", a);
}
Tensor tanh(const Tensor& a) {
  return unaryOp(OpKind::Tanh, rt::UnaryOp::Tanh, "tanh", a);
}
Tensor sigmoid(const Tensor& a) {
  return unaryOp(OpKind::Sigmoid, rt::UnaryOp::Sigmoid, "sigmoid", a);
}
Tensor relu(const Tensor& a) {
  return unaryOp(OpKind::Relu, rt::UnaryOp::Relu, "relu", a);
}
Tensor sqrt(const Tensor& a) {
  return unaryOp(OpKind::Sqrt, rt::UnaryOp::Sqrt, "sqrt", a);
}

Tensor operator+(const Tensor& a, double s) { return add(a, scalarLike(a, s)); }
Tensor operator-(const Tensor& a, double s) { return sub(a, scalarLike(a, s)); }
Tensor operator*(const Tensor& a, double s) { return mul(a, scalarLike(a, s)); }
Tensor operator/(const Tensor& a, double s) { return div(a, scalarLike(a, s)); }

Tensor matmul(const Tensor& a, const Tensor& b, bool transposeA,
              bool transposeB) {
  requireDefined("matmul", a);
  requireDefined("matmul", b);
  if (a.dtype() != b.dtype())
    throw Error("matmul: operands have different dtypes (" + a.describe() +
                " and " + b.describe() + ")");
  if (a.rank() < 2 || a.rank() != b.rank())
    throw Error("matmul: expects operands of equal rank >= 2, got " +
                a.describe() + " and " + b.describe());
  int64_t r = a.rank();
  Shape batchA(a.shape().begin(), a.shape().end() - 2);
  Shape batchB(b.shape().begin(), b.shape().end() - 2);
  if (batchA != batchB)
    throw Error("matmul: batch dimensions differ: " + a.describe() + " and " +
                b.describe());
  int64_t m = transposeA ? a.shape()[r - 1] : a.shape()[r - 2];
  int64_t kA = transposeA ? a.shape()[r - 2] : a.shape()[r - 1];
  int64_t kB = transposeB ? b.shape()[r - 1] : b.shape()[r - 2];
  int64_t n = transposeB ? b.shape()[r - 2] : b.shape()[r - 1];
  if (kA != kB)
    throw Error("matmul: contracting dimensions differ (" + a.describe() +
                " and " + b.describe() + ")");
  Shape outShape = batchA;
  outShape.push_back(m);
  outShape.push_back(n);
  Tensor out = Tensor::empty(outShape, a.dtype());
  check(rt::matmul(a.view(), b.view(), transposeA, transposeB, out.mutView()));
  OpRecord rec{OpKind::MatMul, {a, b}, out};
  rec.transposeA = transposeA;
  rec.transposeB = transposeB;
  emit(std::move(rec));
  return out;
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  requireDefined("linear", x);
  requireDefined("linear", w);
  if (w.rank() != 2)
    throw Error("linear: weight must be [out, in], got " + w.describe());
  // Flatten leading dims so the matmul is 2-D: [N, in] x [out, in]^T.
  Shape lead(x.shape().begin(), x.shape().end() - 1);
  Tensor x2 = x.rank() == 2 ? x : reshape(x, {-1, x.size(-1)});
  Tensor y = matmul(x2, w, false, true);
  if (b.defined())
    y = add(y, b);
  if (x.rank() != 2) {
    lead.push_back(w.size(0));
    y = reshape(y, lead);
  }
  return y;
}

Tensor broadcastInDim(const Tensor& a, const Shape& shape,
                      const std::vector<int64_t>& dims) {
  requireDefined("broadcast_in_dim", a);
  if (static_cast<int64_t>(dims.size()) != a.rank())
    throw Error("broadcast_in_dim: dims has " + std::to_string(dims.size()) +
                " entries for an operand of rank " + std::to_string(a.rank()));
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0 || dims[i] >= static_cast<int64_t>(shape.size()))
      throw Error("broadcast_in_dim: dims out of range");
    int64_t d = a.shape()[i];
    if (d != 1 && d != shape[dims[i]])
      throw Error("broadcast_in_dim: cannot broadcast " + a.describe() +
                  " to " + rt::shapeString(shape));
  }
  Tensor out = Tensor::empty(shape, a.dtype());
  check(rt::broadcastInDim(a.view(), dims, out.mutView()));
  OpRecord rec{OpKind::BroadcastInDim, {a}, out};
  rec.ints = dims;
  emit(std::move(rec));
  return out;
}

Tensor broadcastTo(const Tensor& a, const Shape& shape) {
  requireDefined("broadcast_to", a);
  if (a.shape() == shape)
    return a;
  if (shape.size() < a.shape().size())
    throw Error("broadcast_to: cannot broadcast " + a.describe() + " to " +
                rt::shapeString(shape) + " (fewer dimensions)");
  // NumPy rules: align trailing dims; operand dims of size 1 stretch, which
  // broadcast_in_dim allows directly.
  size_t offset = shape.size() - a.shape().size();
  std::vector<int64_t> dims;
  for (size_t i = 0; i < a.shape().size(); ++i)
    dims.push_back(static_cast<int64_t>(i + offset));
  return broadcastInDim(a, shape, dims);
}

Tensor reshape(const Tensor& a, const Shape& shapeIn) {
  requireDefined("reshape", a);
  Shape shape = shapeIn;
  int64_t known = 1, inferred = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (inferred >= 0)
        throw Error("reshape: more than one -1 in " + rt::shapeString(shape));
      inferred = static_cast<int64_t>(i);
    } else if (shape[i] < 0) {
      throw Error("reshape: negative dimension in " + rt::shapeString(shape));
    } else {
      known *= shape[i];
    }
  }
  if (inferred >= 0) {
    if (known == 0 || a.numel() % known != 0)
      throw Error("reshape: cannot infer -1 reshaping " + a.describe() +
                  " to " + rt::shapeString(shapeIn));
    shape[inferred] = a.numel() / known;
  }
  if (rt::numElements(shape) != a.numel())
    throw Error("reshape: cannot reshape " + a.describe() + " (" +
                std::to_string(a.numel()) + " elements) to " +
                rt::shapeString(shapeIn));
  auto impl = std::make_shared<TensorImpl>(*a.impl());
  impl->shape = shape;
  Tensor out(std::move(impl));
  emit({OpKind::Reshape, {a}, out});
  return out;
}

Tensor transpose(const Tensor& a, const std::vector<int64_t>& permutation) {
  requireDefined("transpose", a);
  if (static_cast<int64_t>(permutation.size()) != a.rank())
    throw Error("transpose: permutation size differs from rank of " +
                a.describe());
  std::vector<int64_t> perm;
  std::vector<bool> seen(a.rank(), false);
  Shape outShape;
  for (int64_t p : permutation) {
    int64_t n = normalizeDim("transpose", p, a.rank());
    if (seen[n])
      throw Error("transpose: not a permutation");
    seen[n] = true;
    perm.push_back(n);
    outShape.push_back(a.shape()[n]);
  }
  Tensor out = Tensor::empty(outShape, a.dtype());
  check(rt::transpose(a.view(), perm, out.mutView()));
  OpRecord rec{OpKind::Transpose, {a}, out};
  rec.ints = perm;
  emit(std::move(rec));
  return out;
}

Tensor sum(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  return reduceOp(OpKind::ReduceSum, rt::ReduceOp::Sum, "sum", a, dims,
                  keepdim);
}
Tensor mean(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  return reduceOp(OpKind::ReduceMean, rt::ReduceOp::Mean, "mean", a, dims,
                  keepdim);
}
Tensor amax(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  return reduceOp(OpKind::ReduceMax, rt::ReduceOp::Max, "amax", a, dims,
                  keepdim);
}

Tensor softmax(const Tensor& a, int64_t axis) {
  requireDefined("softmax", a);
  int64_t ax = normalizeDim("softmax", axis, a.rank());
  Tensor out = Tensor::empty(a.shape(), a.dtype());
  check(rt::softmax(a.view(), ax, out.mutView()));
  OpRecord rec{OpKind::Softmax, {a}, out};
  rec.axis = ax;
  emit(std::move(rec));
  return out;
}

Tensor cast(const Tensor& a, DType dtype) {
  requireDefined("cast", a);
  Tensor out = Tensor::empty(a.shape(), dtype);
  check(rt::cast(a.view(), out.mutView()));
  emit({OpKind::Cast, {a}, out});
  return out;
}

double relativeError(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape())
    throw Error("relativeError: shapes differ (" + a.describe() + " vs " +
                b.describe() + ")");
  std::vector<float> x = a.toVector(), y = b.toVector();
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) || std::isnan(y[i]))
      return std::nan("");
    double d = static_cast<double>(x[i]) - y[i];
    num += d * d;
    den += static_cast<double>(y[i]) * y[i];
  }
  if (den == 0)
    return num == 0 ? 0.0 : std::sqrt(num);
  return std::sqrt(num / den);
}

} // namespace mc
