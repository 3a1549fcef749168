// Eager ops: shape checks, the runtime's CPU kernels, and trace records.
#include "frontend/Ops.h"
#include "modelc/device.h"
#include "frontend/Autograd.h"
#include "frontend/TraceHook.h"
#include "modelc/shapes.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

namespace mc {
namespace {

void check(const rt::Status& s) {
  if (!s)
    throw Error(s.message());
}

/// A shape rule's verdict (modelc/shapes.h), thrown with the op's name.
void checkShape(const char* op, const rt::Status& s) {
  if (!s)
    throw Error(std::string(op) + ": " + s.message());
}

void requireDefined(const char* op, const Tensor& t) {
  if (!t.defined())
    throw Error(std::string(op) + ": undefined tensor operand");
}

/// The dialect's element types for operand 0 of `op` (the registry's, from
/// ODS): an operand of another type is named here, not found later by the
/// verifier of a traced module (an int64 sum said "operand #0 must be
/// ranked tensor of floating-point values" and "the traced module does not
/// verify").
void requireDialectType(rt::OpId op, const char* name, const Tensor& t) {
  std::string types = rt::opInfo(op).types;
  if (!rt::typeListHas(types, rt::dtypeName(t.dtype())))
    throw Error(std::string(name) + ": " + t.describe() +
                " is not supported (" + rt::typeListText(types) + " are)");
}

/// The output of an op over `inputs`: a tensor with values when every input
/// has them (the kernel then runs), else a shape-only tensor (nothing runs;
/// the ONNX importer traces graph inputs this way, see Tensor::shapeOnly).
Tensor resultOf(const Shape& shape, DType dtype,
                std::initializer_list<const Tensor*> inputs) {
  for (const Tensor* t : inputs)
    if (!t->hasValues())
      return Tensor::shapeOnly(shape, dtype);
  return Tensor::empty(shape, dtype);
}

/// Every op reports itself here: to the tracer when one is active, and to
/// autograd when an input requires grad.
void emit(OpRecord record) {
  if (TraceHook* hook = activeTraceHook())
    hook->record(record);
  autograd::recordOp(record);
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

Tensor binaryOp(OpKind kind, rt::OpId op, const char* name, Tensor a,
                Tensor b) {
  requireDefined(name, a);
  requireDefined(name, b);
  if (a.dtype() != b.dtype())
    throw Error(std::string(name) + ": operands have different dtypes (" +
                a.describe() + " and " + b.describe() +
                "); cast one explicitly");
  requireDialectType(op, name, a);
  if (a.shape() != b.shape()) {
    // A constant broadcast against a shape-only operand (the ONNX
    // importer's trace) stays shape-only: no activation-sized copy of it.
    bool values = a.hasValues() && b.hasValues();
    Shape s = broadcastShape(name, a.shape(), b.shape());
    if (a.shape() != s)
      a = broadcastTo(a, s, values);
    if (b.shape() != s)
      b = broadcastTo(b, s, values);
  }
  Tensor out = resultOf(a.shape(), a.dtype(), {&a, &b});
  if (out.hasValues())
    check(rt::binary(op, a.view(), b.view(), out.mutView()));
  emit({kind, {a, b}, out});
  return out;
}

Tensor unaryOp(OpKind kind, rt::OpId op, const char* name,
               const Tensor& a) {
  requireDefined(name, a);
  requireDialectType(op, name, a);
  Tensor out = resultOf(a.shape(), a.dtype(), {&a});
  if (out.hasValues())
    check(rt::unary(op, a.view(), out.mutView()));
  emit({kind, {a}, out});
  return out;
}

Tensor reduceOp(OpKind kind, rt::OpId op, const char* name,
                const Tensor& a, const std::vector<int64_t>& dims,
                bool keepdim) {
  requireDefined(name, a);
  requireDialectType(op, name, a);
  std::vector<int64_t> norm;
  for (int64_t d : dims)
    norm.push_back(normalizeDim(name, d, a.rank()));
  std::sort(norm.begin(), norm.end());
  Shape outShape;
  checkShape(name, rt::shapes::reduce(a.shape(), norm, keepdim, &outShape));
  Tensor out = resultOf(outShape, a.dtype(), {&a});
  if (out.hasValues())
    check(rt::reduce(op, a.view(), norm, keepdim, out.mutView()));
  emit(OpRecord{kind, {a}, out,
                {rt::OpAttr::list("dims", norm),
                 rt::OpAttr::boolean("keepdim", keepdim)}});
  return out;
}

Tensor scalarLike(const Tensor& a, double s) {
  requireDefined("scalar op", a);
  return Tensor::scalar(s, a.dtype());
}

} // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  return binaryOp(OpKind::Add, rt::OpId::Add, "add", a, b);
}
Tensor sub(const Tensor& a, const Tensor& b) {
  return binaryOp(OpKind::Sub, rt::OpId::Sub, "sub", a, b);
}
Tensor mul(const Tensor& a, const Tensor& b) {
  return binaryOp(OpKind::Mul, rt::OpId::Mul, "mul", a, b);
}
Tensor div(const Tensor& a, const Tensor& b) {
  return binaryOp(OpKind::Div, rt::OpId::Div, "div", a, b);
}
Tensor maximum(const Tensor& a, const Tensor& b) {
  return binaryOp(OpKind::Maximum, rt::OpId::Maximum, "maximum", a, b);
}

Tensor neg(const Tensor& a) {
  return unaryOp(OpKind::Neg, rt::OpId::Neg, "neg", a);
}
Tensor exp(const Tensor& a) {
  return unaryOp(OpKind::Exp, rt::OpId::Exp, "exp", a);
}
Tensor log(const Tensor& a) {
  return unaryOp(OpKind::Log, rt::OpId::Log, "log", a);
}
Tensor tanh(const Tensor& a) {
  return unaryOp(OpKind::Tanh, rt::OpId::Tanh, "tanh", a);
}
Tensor sigmoid(const Tensor& a) {
  return unaryOp(OpKind::Sigmoid, rt::OpId::Sigmoid, "sigmoid", a);
}
Tensor relu(const Tensor& a) {
  return unaryOp(OpKind::Relu, rt::OpId::Relu, "relu", a);
}
Tensor sqrt(const Tensor& a) {
  return unaryOp(OpKind::Sqrt, rt::OpId::Sqrt, "sqrt", a);
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
  Shape outShape;
  checkShape("matmul", rt::shapes::matmul(a.shape(), b.shape(), transposeA,
                                          transposeB, &outShape));
  Tensor out = resultOf(outShape, a.dtype(), {&a, &b});
  if (out.hasValues())
    check(rt::matmul(a.view(), b.view(), transposeA, transposeB, out.mutView()));
  emit(OpRecord{OpKind::Matmul, {a, b}, out,
                {rt::OpAttr::boolean("transpose_a", transposeA),
                 rt::OpAttr::boolean("transpose_b", transposeB)}});
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
                      const std::vector<int64_t>& dims, bool values) {
  requireDefined("broadcast_in_dim", a);
  checkShape("broadcast_in_dim",
             rt::shapes::broadcastInDim(a.shape(), dims, shape));
  Tensor out = values ? resultOf(shape, a.dtype(), {&a})
                      : Tensor::shapeOnly(shape, a.dtype());
  if (out.hasValues())
    check(rt::broadcastInDim(a.view(), dims, out.mutView()));
  emit(OpRecord{OpKind::BroadcastInDim, {a}, out,
                {rt::OpAttr::list("dims", dims)}});
  return out;
}

Tensor broadcastInDim(const Tensor& a, const Shape& shape,
                      const std::vector<int64_t>& dims) {
  return broadcastInDim(a, shape, dims, /*values=*/true);
}

Tensor broadcastTo(const Tensor& a, const Shape& shape, bool values) {
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
  return broadcastInDim(a, shape, dims, values);
}

Tensor broadcastTo(const Tensor& a, const Shape& shape) {
  return broadcastTo(a, shape, /*values=*/true);
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
  std::vector<int64_t> perm;
  for (int64_t p : permutation)
    perm.push_back(normalizeDim("transpose", p, a.rank()));
  Shape outShape;
  checkShape("transpose", rt::shapes::transpose(a.shape(), perm, &outShape));
  Tensor out = resultOf(outShape, a.dtype(), {&a});
  if (out.hasValues())
    check(rt::transpose(a.view(), perm, out.mutView()));
  emit(OpRecord{OpKind::Transpose, {a}, out,
                {rt::OpAttr::list("permutation", perm)}});
  return out;
}

Tensor sum(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  return reduceOp(OpKind::ReduceSum, rt::OpId::ReduceSum, "sum", a, dims,
                  keepdim);
}
Tensor mean(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  return reduceOp(OpKind::ReduceMean, rt::OpId::ReduceMean, "mean", a, dims,
                  keepdim);
}
Tensor amax(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  return reduceOp(OpKind::ReduceMax, rt::OpId::ReduceMax, "amax", a, dims,
                  keepdim);
}

Tensor softmax(const Tensor& a, int64_t axis) {
  requireDefined("softmax", a);
  int64_t ax = normalizeDim("softmax", axis, a.rank());
  Tensor out = resultOf(a.shape(), a.dtype(), {&a});
  if (out.hasValues())
    check(rt::softmax(a.view(), ax, out.mutView()));
  emit(OpRecord{OpKind::Softmax, {a}, out, {rt::OpAttr::integer("axis", ax)}});
  return out;
}

Tensor cast(const Tensor& a, DType dtype) {
  requireDefined("cast", a);
  Tensor out = resultOf(a.shape(), dtype, {&a});
  if (out.hasValues())
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

//===--- Ops of real models ---===//

namespace mc {
namespace {

Tensor unaryRecorded(OpKind kind, rt::OpId op, const char* name,
                     const Tensor& a, bool tanh = false) {
  requireDefined(name, a);
  Tensor out = resultOf(a.shape(), a.dtype(), {&a});
  if (out.hasValues())
    check(rt::unary(op, a.view(), out.mutView(), tanh));
  OpRecord r{kind, {a}, out};
  if (kind == OpKind::Gelu)
    r.attrs.all().push_back(rt::OpAttr::boolean("tanh_approximation", tanh));
  emit(std::move(r));
  return out;
}

/// Broadcasts both operands to one shape (NumPy rules), as binaryOp does.
/// (`values`: whether the broadcasts compute theirs; false where the op's
/// other operand is shape-only, so its result is too.)
std::pair<Tensor, Tensor> broadcastPair(const char* name, Tensor a, Tensor b,
                                        bool values = true) {
  requireDefined(name, a);
  requireDefined(name, b);
  values = values && a.hasValues() && b.hasValues();
  if (a.shape() != b.shape()) {
    Shape s = broadcastShape(name, a.shape(), b.shape());
    if (a.shape() != s)
      a = broadcastTo(a, s, values);
    if (b.shape() != s)
      b = broadcastTo(b, s, values);
  }
  return {a, b};
}

Tensor compareOp(rt::CompareOp op, const char* name,
                 const Tensor& x, const Tensor& y) {
  auto [a, b] = broadcastPair(name, x, y);
  if (a.dtype() != b.dtype())
    throw Error(std::string(name) + ": operands have different dtypes (" +
                a.describe() + " and " + b.describe() + ")");
  Tensor out = resultOf(a.shape(), DType::I1, {&a, &b});
  if (out.hasValues())
    check(rt::compare(op, a.view(), b.view(), out.mutView()));
  emit(OpRecord{OpKind::Compare, {a, b}, out,
                {rt::OpAttr::integer("direction", static_cast<int64_t>(op))}});
  return out;
}

std::vector<int64_t> expectPair(const char* name, const char* what,
                                std::vector<int64_t> v) {
  if (v.size() == 1)
    v.push_back(v[0]);
  if (v.size() != 2)
    throw Error(std::string(name) + ": " + what + " needs 1 or 2 values");
  // Checked before any output size is computed: a stride of 0 divides by
  // zero there.
  if (v[0] < 1 || v[1] < 1)
    throw Error(std::string(name) + ": " + what + " must be >= 1, got " +
                rt::shapeString(v));
  return v;
}

/// [p] -> 4 x p; [ph, pw] -> [ph, pw, ph, pw]; [t, l, b, r] as is.
std::vector<int64_t> expectPadding(const char* name, std::vector<int64_t> p) {
  if (p.size() == 1)
    p = {p[0], p[0], p[0], p[0]};
  else if (p.size() == 2)
    p = {p[0], p[1], p[0], p[1]};
  else if (p.size() != 4)
    throw Error(std::string(name) +
                ": padding needs 1, 2 or 4 values ([top, left, bottom, "
                "right])");
  for (int64_t v : p)
    if (v < 0)
      throw Error(std::string(name) + ": padding must be >= 0, got " +
                  rt::shapeString(p));
  return p;
}

} // namespace

Tensor abs(const Tensor& a) {
  return unaryRecorded(OpKind::Abs, rt::OpId::Abs, "abs", a);
}
Tensor erf(const Tensor& a) {
  return unaryRecorded(OpKind::Erf, rt::OpId::Erf, "erf", a);
}
Tensor gelu(const Tensor& a, bool tanhApproximation) {
  return unaryRecorded(OpKind::Gelu, rt::OpId::Gelu, "gelu", a,
                       tanhApproximation);
}
Tensor logicalNot(const Tensor& a) {
  return unaryRecorded(OpKind::Not, rt::OpId::Not, "logical_not", a);
}
Tensor pow(const Tensor& a, const Tensor& b) {
  return binaryOp(OpKind::Pow, rt::OpId::Pow, "pow", a, b);
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  return binaryOp(OpKind::Minimum, rt::OpId::Minimum, "minimum", a, b);
}

Tensor clamp(const Tensor& a, double lo, double hi) {
  requireDefined("clamp", a);
  // min > max: PyTorch's clamp and ONNX's Clip give max everywhere (NaN
  // stays NaN), which is the clamp to [max, max]; mc.clamp asks min <= max.
  if (lo > hi)
    lo = hi;
  Tensor out = resultOf(a.shape(), a.dtype(), {&a});
  if (out.hasValues())
    check(rt::clamp(a.view(), lo, hi, out.mutView()));
  emit(OpRecord{OpKind::Clamp, {a}, out,
                {rt::OpAttr::real("min", lo), rt::OpAttr::real("max", hi)}});
  return out;
}

Tensor dropout(const Tensor& x, const Tensor& seed, const Tensor& offset,
               double p) {
  for (const Tensor* t : {&x, &seed, &offset})
    requireDefined("dropout", *t);
  if (!rt::isFloat(x.dtype()))
    throw Error("dropout: the input must be f32, f16 or bf16, got " +
                x.describe());
  for (const Tensor* t : {&seed, &offset})
    if (t->dtype() != DType::I64 || t->rank() != 0)
      throw Error(std::string("dropout: the ") +
                  (t == &seed ? "seed" : "offset") +
                  " must be an i64 scalar, got " + t->describe());
  if (!(p >= 0 && p <= 1))
    throw Error("dropout: p must be in [0, 1], got " + std::to_string(p));
  Tensor out = resultOf(x.shape(), x.dtype(), {&x, &seed, &offset});
  if (out.hasValues()) {
    uint64_t s, o;
    std::memcpy(&s, seed.rawData(), sizeof s);
    std::memcpy(&o, offset.rawData(), sizeof o);
    check(rt::dropout(x.view(), s, o, p, out.mutView()));
  }
  emit(OpRecord{
      OpKind::Dropout, {x, seed, offset}, out, {rt::OpAttr::real("p", p)}});
  return out;
}

Tensor eq(const Tensor& a, const Tensor& b) {
  return compareOp(rt::CompareOp::Eq, "eq", a, b);
}
Tensor ne(const Tensor& a, const Tensor& b) {
  return compareOp(rt::CompareOp::Ne, "ne", a, b);
}
Tensor lt(const Tensor& a, const Tensor& b) {
  return compareOp(rt::CompareOp::Lt, "lt", a, b);
}
Tensor le(const Tensor& a, const Tensor& b) {
  return compareOp(rt::CompareOp::Le, "le", a, b);
}
Tensor gt(const Tensor& a, const Tensor& b) {
  return compareOp(rt::CompareOp::Gt, "gt", a, b);
}
Tensor ge(const Tensor& a, const Tensor& b) {
  return compareOp(rt::CompareOp::Ge, "ge", a, b);
}

Tensor where(const Tensor& pred, const Tensor& x, const Tensor& y) {
  requireDefined("where", pred);
  if (pred.dtype() != DType::I1)
    throw Error("where: the condition must be i1 (bool), got " +
                pred.describe());
  bool values = pred.hasValues() && x.hasValues() && y.hasValues();
  auto [a, b] = broadcastPair("where", x, y, values);
  if (a.dtype() != b.dtype())
    throw Error("where: branches have different dtypes (" + a.describe() +
                " and " + b.describe() + ")");
  Shape s = broadcastShape("where", pred.shape(), a.shape());
  Tensor p = pred.shape() == s ? pred : broadcastTo(pred, s, values);
  if (a.shape() != s) {
    a = broadcastTo(a, s, values);
    b = broadcastTo(b, s, values);
  }
  Tensor out = resultOf(s, a.dtype(), {&p, &a, &b});
  if (out.hasValues())
    check(rt::select(p.view(), a.view(), b.view(), out.mutView()));
  emit({OpKind::Select, {p, a, b}, out});
  return out;
}

Tensor logSoftmax(const Tensor& a, int64_t axis) {
  requireDefined("log_softmax", a);
  int64_t ax = normalizeDim("log_softmax", axis, a.rank());
  Tensor out = resultOf(a.shape(), a.dtype(), {&a});
  if (out.hasValues())
    check(rt::logSoftmax(a.view(), ax, out.mutView()));
  emit(OpRecord{OpKind::LogSoftmax, {a}, out,
                {rt::OpAttr::integer("axis", ax)}});
  return out;
}

Tensor amin(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  return reduceOp(OpKind::ReduceMin, rt::OpId::ReduceMin, "amin", a, dims,
                  keepdim);
}

Tensor concat(const std::vector<Tensor>& tensors, int64_t axis) {
  if (tensors.empty())
    throw Error("concat: no tensors");
  for (const Tensor& t : tensors)
    requireDefined("concat", t);
  const Tensor& first = tensors[0];
  int64_t ax = normalizeDim("concat", axis, first.rank());
  std::vector<Shape> shapes;
  bool values = true;
  for (const Tensor& t : tensors) {
    if (t.dtype() != first.dtype())
      throw Error("concat: " + t.describe() + " does not match the dtype of " +
                  first.describe());
    shapes.push_back(t.shape());
    values = values && t.hasValues();
  }
  Shape outShape;
  checkShape("concat", rt::shapes::concat(shapes, ax, &outShape));
  Tensor out = values ? Tensor::empty(outShape, first.dtype())
                      : Tensor::shapeOnly(outShape, first.dtype());
  if (values) {
    std::vector<rt::ConstTensor> views;
    for (const Tensor& t : tensors)
      views.push_back(t.view());
    check(rt::concat(views, ax, out.mutView()));
  }
  emit(OpRecord{OpKind::Concat, tensors, out,
                {rt::OpAttr::integer("axis", ax)}});
  return out;
}

Tensor slice(const Tensor& a, const std::vector<int64_t>& start,
             const std::vector<int64_t>& count,
             const std::vector<int64_t>& step) {
  requireDefined("slice", a);
  size_t r = a.shape().size();
  if (start.size() != r || count.size() != r || step.size() != r)
    throw Error("slice: start, count and step need one entry per dimension "
                "of " + a.describe());
  // The rule takes [start, limit): the limit just past the last element
  // taken (start itself when none is).
  std::vector<int64_t> limit(r);
  for (size_t d = 0; d < r; ++d) {
    if (count[d] < 0)
      throw Error("slice: dimension " + std::to_string(d) + " of " +
                  a.describe() + " cannot take " + std::to_string(count[d]) +
                  " elements");
    __int128 end = count[d] == 0
                       ? __int128(start[d])
                       : __int128(start[d]) + __int128(count[d] - 1) * step[d] + 1;
    limit[d] = int64_t(std::min<__int128>(end, INT64_MAX));
  }
  Shape outShape;
  checkShape("slice", rt::shapes::slice(a.shape(), start, limit, step,
                                        &outShape));
  Tensor out = resultOf(outShape, a.dtype(), {&a});
  if (out.hasValues())
    check(rt::slice(a.view(), start, step, out.mutView()));
  emit(OpRecord{OpKind::Slice, {a}, out,
                {rt::OpAttr::list("start", start),
                 rt::OpAttr::list("limit", limit),
                 rt::OpAttr::list("strides", step)}});
  return out;
}

Tensor sliceDim(const Tensor& a, int64_t dim, int64_t start, int64_t end,
                int64_t step) {
  requireDefined("slice", a);
  int64_t d = normalizeDim("slice", dim, a.rank());
  int64_t size = a.shape()[d];
  if (step < 1)
    throw Error("slice: step must be >= 1");
  auto clampIndex = [&](int64_t i) {
    if (i < 0)
      i += size;
    return std::min(std::max<int64_t>(i, 0), size);
  };
  int64_t s = clampIndex(start), e = clampIndex(end);
  int64_t count = e > s ? (e - s + step - 1) / step : 0;
  std::vector<int64_t> st(a.rank(), 0), cnt(a.shape()), sp(a.rank(), 1);
  st[d] = count ? s : 0;
  cnt[d] = count;
  sp[d] = step;
  return slice(a, st, cnt, sp);
}

std::pair<Tensor, Tensor> topk(const Tensor& a, int64_t k, int64_t dim,
                               bool largest) {
  requireDefined("topk", a);
  bool floats = rt::isFloat(a.dtype());
  if (a.rank() == 0 ||
      !(floats || a.dtype() == DType::I32 || a.dtype() == DType::I64))
    throw Error("topk: needs a float, i32 or i64 tensor of rank >= 1, got " +
                a.describe());
  int64_t axis = normalizeDim("topk", dim, a.rank());
  int64_t n = a.size(axis);
  if (k < 1 || k > n)
    throw Error("topk: k = " + std::to_string(k) + " must be in [1, " +
                std::to_string(n) + "], the size of dim " +
                std::to_string(axis) + " of " + a.describe());
  if (k > kMaxTopK)
    throw Error("topk: k = " + std::to_string(k) + " is above " +
                std::to_string(kMaxTopK) +
                ", the most modelc unrolls (k selection rounds over the dim)");
  // Each round takes, among the elements not taken yet, those equal to the
  // extreme, and of those the one with the lowest rank key: the index,
  // shifted by -n for NaN when largest (NaN first) and by +n when smallest
  // (NaN last, after +inf).
  Shape iotaShape(static_cast<size_t>(a.rank()), 1);
  iotaShape[axis] = n;
  Tensor rankKey = Tensor::empty(iotaShape, DType::I64);
  for (int64_t i = 0; i < n; ++i)
    rankKey.data<int64_t>()[i] = i;
  Tensor yes = Tensor::scalar(1.0, DType::I1),
         no = Tensor::scalar(0.0, DType::I1);
  // What no element beats: +-inf, or the integer type's limit (exact: an
  // i64 limit is not a double).
  auto limit = [&](bool low) {
    if (floats)
      return Tensor::scalar(low ? -INFINITY : INFINITY, a.dtype());
    Tensor t = Tensor::empty({}, a.dtype());
    if (a.dtype() == DType::I64)
      t.data<int64_t>()[0] = low ? std::numeric_limits<int64_t>::min()
                                 : std::numeric_limits<int64_t>::max();
    else
      t.data<int32_t>()[0] = low ? std::numeric_limits<int32_t>::min()
                                 : std::numeric_limits<int32_t>::max();
    return t;
  };
  Tensor inf = limit(false), outside = limit(largest);
  // Integers have no NaN: every element is a number.
  Tensor isNan = floats ? ne(a, a) : Tensor();
  if (floats)
    rankKey = where(
        isNan, rankKey + Tensor::scalar(largest ? -n : n, DType::I64), rankKey);
  Tensor numbers = floats ? logicalNot(isNan) : Tensor(), taken;
  Tensor none = Tensor::scalar(static_cast<double>(3 * n), DType::I64);
  std::vector<Tensor> values, keys;
  for (int64_t round = 0; round < k; ++round) {
    // Free numbers: for integers, every element not taken (none in the
    // first round, so no mask).
    Tensor freeNumbers =
        floats ? (taken.defined() ? where(taken, no, numbers) : numbers)
               : (taken.defined() ? logicalNot(taken) : Tensor());
    Tensor candidates =
        freeNumbers.defined() ? where(freeNumbers, a, outside) : a;
    Tensor freeNans;
    if (floats) {
      // NaN counts as +inf for the extreme (both are ranked by the key).
      freeNans = taken.defined() ? where(taken, no, isNan) : isNan;
      candidates = where(freeNans, inf, candidates);
    }
    Tensor extreme = largest ? amax(candidates, {axis}, true)
                             : amin(candidates, {axis}, true);
    Tensor hit = eq(a, extreme);
    if (freeNumbers.defined())
      hit = where(freeNumbers, hit, no);
    if (floats)
      hit = where(freeNans, eq(extreme, inf), hit);
    Tensor key = amin(where(hit, rankKey, none), {axis}, true);
    Tensor chosen = eq(rankKey, key);
    taken = taken.defined() ? where(chosen, yes, taken) : chosen;
    // The chosen element as the extreme of it among `outside` fills (not a
    // one-hot sum: a sum from +0.0 loses -0.0's sign). Its gradient goes
    // to the chosen element alone, unless that is +-inf tied with fills.
    Tensor alone = where(chosen, a, outside);
    values.push_back(largest ? amax(alone, {axis}, true)
                             : amin(alone, {axis}, true));
    keys.push_back(key);
  }
  Tensor key = concat(keys, axis);
  // Back from rank keys to indices.
  Tensor size = Tensor::scalar(static_cast<double>(n), DType::I64);
  Tensor index =
      largest ? where(lt(key, Tensor::scalar(0.0, DType::I64)), key + size, key)
              : where(ge(key, size), key - size, key);
  return {concat(values, axis), index};
}

Tensor gather(const Tensor& a, const Tensor& indices, int64_t axis) {
  requireDefined("gather", a);
  requireDefined("gather", indices);
  if (indices.dtype() != DType::I32 && indices.dtype() != DType::I64)
    throw Error("gather: indices must be i32 or i64, got " +
                indices.describe());
  int64_t ax = normalizeDim("gather", axis, a.rank());
  Shape outShape;
  checkShape("gather",
             rt::shapes::gather(a.shape(), indices.shape(), ax, &outShape));
  Tensor out = resultOf(outShape, a.dtype(), {&a, &indices});
  if (out.hasValues())
    check(rt::gather(a.view(), indices.view(), ax, out.mutView()));
  emit(OpRecord{OpKind::Gather, {a, indices}, out,
                {rt::OpAttr::integer("axis", ax)}});
  return out;
}

Tensor scatterAdd(const Tensor& updates, const Tensor& indices, int64_t axis,
                  int64_t size) {
  requireDefined("scatter_add", updates);
  requireDefined("scatter_add", indices);
  if (updates.dtype() != DType::F32)
    throw Error("scatter_add: updates must be f32, got " + updates.describe());
  if (indices.dtype() != DType::I32 && indices.dtype() != DType::I64)
    throw Error("scatter_add: indices must be i32 or i64, got " +
                indices.describe());
  Shape outShape;
  checkShape("scatter_add",
             rt::shapes::scatterAdd(updates.shape(), indices.shape(), axis,
                                    size, &outShape));
  Tensor out = resultOf(outShape, DType::F32, {&updates, &indices});
  if (out.hasValues())
    check(rt::scatterAdd(updates.view(), indices.view(), axis, out.mutView()));
  emit(OpRecord{
      OpKind::ScatterAdd,
      {updates, indices},
      out,
      {rt::OpAttr::integer("axis", axis), rt::OpAttr::integer("size", size)}});
  return out;
}

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  if (weight.rank() != 2)
    throw Error("embedding: weight must be [num_embeddings, dim], got " +
                weight.describe());
  return gather(weight, ids, 0);
}

Tensor pad(const Tensor& a, const std::vector<int64_t>& low,
           const std::vector<int64_t>& high, double value) {
  requireDefined("pad", a);
  Shape outShape;
  checkShape("pad", rt::shapes::pad(a.shape(), low, high, &outShape));
  Tensor out = resultOf(outShape, a.dtype(), {&a});
  if (out.hasValues())
    check(rt::pad(a.view(), low, high, value, out.mutView()));
  emit(OpRecord{OpKind::Pad, {a}, out,
                {rt::OpAttr::list("low", low), rt::OpAttr::list("high", high),
                 rt::OpAttr::real("value", value)}});
  return out;
}

Tensor unsqueeze(const Tensor& a, int64_t dim) {
  requireDefined("unsqueeze", a);
  int64_t d = normalizeDim("unsqueeze", dim, a.rank() + 1);
  Shape s = a.shape();
  s.insert(s.begin() + d, 1);
  return reshape(a, s);
}

Tensor squeeze(const Tensor& a, int64_t dim) {
  requireDefined("squeeze", a);
  int64_t d = normalizeDim("squeeze", dim, a.rank());
  if (a.shape()[d] != 1)
    throw Error("squeeze: dimension " + std::to_string(dim) + " of " +
                a.describe() + " is not 1");
  Shape s = a.shape();
  s.erase(s.begin() + d);
  return reshape(a, s);
}

Tensor flatten(const Tensor& a, int64_t startDim, int64_t endDim) {
  requireDefined("flatten", a);
  if (a.rank() == 0)
    return reshape(a, {1});
  int64_t s = normalizeDim("flatten", startDim, a.rank());
  int64_t e = normalizeDim("flatten", endDim, a.rank());
  if (s > e)
    throw Error("flatten: start dim after end dim");
  Shape out(a.shape().begin(), a.shape().begin() + s);
  int64_t n = 1;
  for (int64_t d = s; d <= e; ++d)
    n *= a.shape()[d];
  out.push_back(n);
  out.insert(out.end(), a.shape().begin() + e + 1, a.shape().end());
  return reshape(a, out);
}

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias,
              std::vector<int64_t> strides, std::vector<int64_t> padding,
              std::vector<int64_t> dilation, int64_t groups) {
  requireDefined("conv2d", input);
  requireDefined("conv2d", weight);
  strides = expectPair("conv2d", "strides", strides);
  dilation = expectPair("conv2d", "dilation", dilation);
  padding = expectPadding("conv2d", padding);
  Shape outShape;
  checkShape("conv2d",
             rt::shapes::conv2d(input.shape(), weight.shape(), strides,
                                padding, dilation, groups, &outShape));
  const Shape& w = weight.shape();
  Tensor out = resultOf(outShape, input.dtype(), {&input, &weight});
  rt::Conv2dParams p;
  p.strideH = strides[0];
  p.strideW = strides[1];
  p.padTop = padding[0];
  p.padLeft = padding[1];
  p.padBottom = padding[2];
  p.padRight = padding[3];
  p.dilationH = dilation[0];
  p.dilationW = dilation[1];
  p.groups = groups;
  // Check the bias before anything runs, so a bad one records nothing.
  if (bias.defined() && (bias.rank() != 1 || bias.size(0) != w[0]))
    throw Error("conv2d: bias must be [" + std::to_string(w[0]) + "], got " +
                bias.describe());
  if (out.hasValues())
    check(rt::conv2d(input.view(), weight.view(), p, out.mutView()));
  emit(OpRecord{OpKind::Conv2d, {input, weight}, out,
                {rt::OpAttr::list("strides", strides),
                 rt::OpAttr::list("padding", padding),
                 rt::OpAttr::list("dilation", dilation),
                 rt::OpAttr::integer("groups", groups)}});
  if (!bias.defined())
    return out;
  Tensor wideBias = broadcastInDim(bias, out.shape(), {1}, out.hasValues());
  return add(out, wideBias);
}

static Tensor pool2d(bool isMax, const Tensor& input,
                     std::vector<int64_t> kernel,
                     std::vector<int64_t> strides,
                     std::vector<int64_t> padding,
                     std::vector<int64_t> dilation, bool ceilMode,
                     bool countIncludePad) {
  const char* name = isMax ? "max_pool2d" : "avg_pool2d";
  requireDefined(name, input);
  kernel = expectPair(name, "kernel", kernel);
  strides = strides.empty() ? kernel : expectPair(name, "strides", strides);
  dilation = expectPair(name, "dilation", dilation);
  padding = expectPadding(name, padding);
  Shape outShape;
  checkShape(name, rt::shapes::pool2d(input.shape(), kernel, strides, padding,
                                      dilation, ceilMode, &outShape));
  Tensor out = resultOf(outShape, input.dtype(), {&input});
  rt::Pool2dParams p;
  p.kernelH = kernel[0];
  p.kernelW = kernel[1];
  p.strideH = strides[0];
  p.strideW = strides[1];
  p.padTop = padding[0];
  p.padLeft = padding[1];
  p.padBottom = padding[2];
  p.padRight = padding[3];
  p.dilationH = dilation[0];
  p.dilationW = dilation[1];
  if (out.hasValues()) {
    if (isMax)
      check(rt::maxPool2d(input.view(), p, out.mutView()));
    else
      check(rt::avgPool2d(input.view(), p, countIncludePad, out.mutView()));
  }
  OpRecord rec{isMax ? OpKind::MaxPool2d : OpKind::AvgPool2d, {input}, out,
               {rt::OpAttr::list("kernel", kernel),
                rt::OpAttr::list("strides", strides),
                rt::OpAttr::list("padding", padding),
                rt::OpAttr::list("dilation", dilation),
                rt::OpAttr::boolean("ceil_mode", ceilMode)}};
  if (!isMax)
    rec.attrs.all().push_back(
        rt::OpAttr::boolean("count_include_pad", countIncludePad));
  emit(std::move(rec));
  return out;
}

Tensor maxPool2d(const Tensor& input, std::vector<int64_t> kernel,
                 std::vector<int64_t> strides, std::vector<int64_t> padding,
                 std::vector<int64_t> dilation, bool ceilMode) {
  return pool2d(true, input, kernel, strides, padding, dilation, ceilMode,
                false);
}

Tensor avgPool2d(const Tensor& input, std::vector<int64_t> kernel,
                 std::vector<int64_t> strides, std::vector<int64_t> padding,
                 bool ceilMode, bool countIncludePad) {
  return pool2d(false, input, kernel, strides, padding, {1, 1}, ceilMode,
                countIncludePad);
}

Tensor batchNorm(const Tensor& x, const Tensor& scale, const Tensor& offset,
                 const Tensor& mean, const Tensor& variance, double epsilon,
                 int64_t axis) {
  for (const Tensor* t : {&x, &scale, &offset, &mean, &variance})
    requireDefined("batch_norm", *t);
  int64_t ax = normalizeDim("batch_norm", axis, x.rank());
  for (const Tensor* t : {&scale, &offset, &mean, &variance})
    if (t->rank() != 1 || t->size(0) != x.shape()[ax] ||
        t->dtype() != x.dtype())
      throw Error("batch_norm: parameters must be " +
                  std::string(rt::dtypeName(x.dtype())) + "[" +
                  std::to_string(x.shape()[ax]) + "], got " + t->describe());
  Tensor out = resultOf(x.shape(), x.dtype(), {&x, &scale, &offset, &mean, &variance});
  if (out.hasValues())
    check(rt::batchNorm(x.view(), scale.view(), offset.view(), mean.view(),
                        variance.view(), epsilon, ax, out.mutView()));
  emit(OpRecord{OpKind::BatchNorm, {x, scale, offset, mean, variance}, out,
                {rt::OpAttr::real("epsilon", epsilon),
                 rt::OpAttr::integer("feature_axis", ax)}});
  return out;
}

Tensor batchNormTraining(const Tensor& x, const Tensor& scale,
                         const Tensor& offset, double epsilon, int64_t axis,
                         Tensor* batchMean, Tensor* batchVar) {
  requireDefined("batch_norm", x);
  int64_t ax = normalizeDim("batch_norm", axis, x.rank());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < x.rank(); ++d)
    if (d != ax)
      dims.push_back(d);
  Tensor m = mean(x, dims);
  Tensor xc = sub(x, broadcastInDim(m, x.shape(), {ax}));
  Tensor v = mean(mul(xc, xc), dims);
  if (batchMean)
    *batchMean = m;
  if (batchVar)
    *batchVar = v;
  return batchNorm(x, scale, offset, m, v, epsilon, ax);
}

std::pair<Tensor, Tensor>
batchNormRunningUpdate(const Tensor& x, const Tensor& batchMean,
                       const Tensor& batchVar, const Tensor& runningMean,
                       const Tensor& runningVar, double momentum) {
  // n / (n - 1) from the batch the step runs (x's rows counted by a sum of
  // ones): a number made of x.size(0) here would be the traced batch's at
  // every batch of a dynamic-batch artifact.
  // As 1 / (1 - (1 / rows) / (values per row and channel)), so no
  // intermediate grows with the batch (a count of 100352 is inf in f16,
  // under AMP O2).
  int64_t perRowValues = x.numel() / (x.size(0) * x.size(1));
  Tensor rows =
      sum(broadcastTo(Tensor::scalar(1.0, batchVar.dtype()), {x.size(0)}), {0});
  Tensor one = Tensor::scalar(1.0, batchVar.dtype());
  Tensor perRow = one / rows;
  Tensor perValue = perRow * (1.0 / static_cast<double>(perRowValues));
  Tensor kept = one - perValue;
  Tensor factor = one / kept;
  Tensor unbiased = batchVar * factor;
  // (No detach(): under NoGradGuard nothing is recorded for autograd, and a
  // detached view would be a stranger to the tracer, captured as a
  // constant.)
  // One traced op per statement: the operands of + are evaluated in an
  // order C++ leaves open, and the trace must not depend on the compiler.
  Tensor keptMean = runningMean * (1 - momentum);
  Tensor newMean = batchMean * momentum;
  Tensor mean = keptMean + newMean;
  Tensor keptVar = runningVar * (1 - momentum);
  Tensor newVar = unbiased * momentum;
  Tensor var = keptVar + newVar;
  return {mean, var};
}

Tensor layerNorm(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                 int64_t axis, double epsilon) {
  for (const Tensor* t : {&x, &gamma, &beta})
    requireDefined("layer_norm", *t);
  int64_t ax = normalizeDim("layer_norm", axis, x.rank());
  Shape normalized(x.shape().begin() + ax, x.shape().end());
  for (const Tensor* t : {&gamma, &beta})
    if (t->shape() != normalized || t->dtype() != x.dtype())
      throw Error("layer_norm: gamma and beta must be " +
                  std::string(rt::dtypeName(x.dtype())) +
                  rt::shapeString(normalized) + ", got " + t->describe());
  Tensor out = resultOf(x.shape(), x.dtype(), {&x, &gamma, &beta});
  if (out.hasValues())
    check(rt::layerNorm(x.view(), gamma.view(), beta.view(), ax, epsilon,
                        out.mutView()));
  emit(OpRecord{OpKind::LayerNorm, {x, gamma, beta}, out,
                {rt::OpAttr::integer("axis", ax),
                 rt::OpAttr::real("epsilon", epsilon)}});
  return out;
}

Tensor elementwise(OpKind op, const Tensor& a) {
  const rt::OpInfo& info = rt::opInfo(op);
  std::string name = info.mnemonic;
  if (!info.isStep || !info.fusible || info.operands != 1 ||
      !info.attrs.empty())
    throw Error(name + ": not an elementwise op without attributes");
  requireDefined(name.c_str(), a);
  requireDialectType(op, name.c_str(), a);
  if (!a.hasValues()) {
    Tensor out = Tensor::shapeOnly(a.shape(), a.dtype());
    emit(OpRecord{op, {a}, out});
    return out;
  }
  static std::unique_ptr<rt::Device> cpu = [] {
    std::unique_ptr<rt::Device> d;
    check(rt::createDevice("cpu", &d));
    return d;
  }();
  rt::KernelFactory factory = rt::findKernel("cpu", op);
  if (!factory)
    throw Error(name + ": no cpu kernel is registered");
  Tensor out = Tensor::empty(a.shape(), a.dtype());
  rt::OpAttrs attrs;
  rt::BoundKernel kernel;
  size_t workspace = 0;
  check(factory(rt::KernelRequest{op, attrs, {a.view()}, out.mutView(), *cpu},
                &kernel, &workspace));
  if (workspace)
    throw Error(name + ": its kernel needs scratch, which eager mode does "
                       "not provide");
  check(kernel(nullptr));
  emit(OpRecord{op, {a}, out});
  return out;
}

} // namespace mc
