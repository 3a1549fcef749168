// CPU kernels of the elementwise ops (modelc/kernels.h computes them),
// registered per op.
#include "modelc/device.h"

#include <algorithm>

namespace mc::rt {
namespace {

/// The kernel of an elementwise float op from its scalar function: f32, and
/// f16 / bf16 widened to f32 and rounded once, as every float kernel. How a
/// new elementwise op gets its CPU kernel in a few lines.
template <float (*F)(float)>
Status floatMapKernel(const KernelRequest& r, BoundKernel* out, size_t*) {
  const ConstTensor& a = r.inputs[0];
  if (a.dtype != DType::F32 && a.dtype != DType::F16 && a.dtype != DType::BF16)
    return Status::error(std::string("mc.") + opName(r.op) + ": dtype " +
                         dtypeName(a.dtype) + " is not supported (f32, f16, "
                         "bf16)");
  if (r.output.dtype != a.dtype || r.output.shape != a.shape)
    return Status::error(std::string("mc.") + opName(r.op) +
                         ": the output must have the input's dtype and shape");
  *out = [a, o = r.output](void*) {
    int64_t n = numElements(a.shape);
    if (a.dtype == DType::F32) {
      const float* x = static_cast<const float*>(a.data);
      float* y = static_cast<float*>(o.data);
      for (int64_t i = 0; i < n; ++i)
        y[i] = F(x[i]);
      return Status::ok();
    }
    bool half = a.dtype == DType::F16;
    const uint16_t* x = static_cast<const uint16_t*>(a.data);
    uint16_t* y = static_cast<uint16_t*>(o.data);
    for (int64_t i = 0; i < n; ++i) {
      float v = F(half ? halfToFloat(x[i]) : bf16ToFloat(x[i]));
      y[i] = half ? floatToHalf(v) : floatToBf16(v);
    }
    return Status::ok();
  };
  return Status::ok();
}

template <OpId Op>
Status unaryKernel(const KernelRequest& r, BoundKernel* out, size_t*) {
  *out = [a = r.inputs[0], o = r.output](void*) { return unary(Op, a, o); };
  return Status::ok();
}

template <OpId Op>
Status binaryKernel(const KernelRequest& r, BoundKernel* out, size_t*) {
  *out = [a = r.inputs[0], b = r.inputs[1], o = r.output](void*) {
    return binary(Op, a, b, o);
  };
  return Status::ok();
}

Status copyKernel(const KernelRequest& r, BoundKernel* out, size_t*) {
  *out = [a = r.inputs[0], o = r.output](void*) { return copy(a, o); };
  return Status::ok();
}

Status castKernel(const KernelRequest& r, BoundKernel* out, size_t*) {
  *out = [a = r.inputs[0], o = r.output](void*) { return cast(a, o); };
  return Status::ok();
}

Status geluKernel(const KernelRequest& r, BoundKernel* out, size_t*) {
  *out = [tanh = r.attrs.getBool("tanh_approximation"), a = r.inputs[0],
          o = r.output](void*) { return unary(OpId::Gelu, a, o, tanh); };
  return Status::ok();
}

Status clampKernel(const KernelRequest& r, BoundKernel* out, size_t*) {
  *out = [lo = r.attrs.getFloat("min"), hi = r.attrs.getFloat("max"),
          a = r.inputs[0], o = r.output](void*) { return clamp(a, lo, hi, o); };
  return Status::ok();
}

Status compareKernel(const KernelRequest& r, BoundKernel* out, size_t*) {
  int64_t dir = r.attrs.getInt("direction");
  if (dir < 0 || dir > int64_t(CompareOp::Ge))
    return Status::error("compare direction " + std::to_string(dir) +
                         " is out of range");
  *out = [op = CompareOp(dir), a = r.inputs[0], b = r.inputs[1],
          o = r.output](void*) { return compare(op, a, b, o); };
  return Status::ok();
}

Status selectKernel(const KernelRequest& r, BoundKernel* out, size_t*) {
  *out = [p = r.inputs[0], a = r.inputs[1], b = r.inputs[2],
          o = r.output](void*) { return select(p, a, b, o); };
  return Status::ok();
}

/// The seed and offset are read when the step runs: they are state that
/// the step's graph advances (docs/training.md, "Dropout").
Status dropoutKernel(const KernelRequest& r, BoundKernel* out, size_t*) {
  for (size_t i : {1, 2})
    if (r.inputs[i].dtype != DType::I64 || !r.inputs[i].shape.empty())
      return Status::error(std::string("mc.dropout: the ") +
                           (i == 1 ? "seed" : "offset") +
                           " must be an i64 scalar");
  *out = [p = r.attrs.getFloat("p"), a = r.inputs[0], seed = r.inputs[1],
          offset = r.inputs[2], o = r.output](void*) {
    return dropout(a, *static_cast<const uint64_t*>(seed.data),
                   *static_cast<const uint64_t*>(offset.data), p, o);
  };
  return Status::ok();
}

float hardswish(float x) { return x * std::min(std::max(x + 3.f, 0.f), 6.f) / 6.f; }

MC_REGISTER_KERNEL(cpu, Hardswish, floatMapKernel<hardswish>);
MC_REGISTER_KERNEL(cpu, Copy, copyKernel);
MC_REGISTER_KERNEL(cpu, Cast, castKernel);
MC_REGISTER_KERNEL(cpu, Add, binaryKernel<OpId::Add>);
MC_REGISTER_KERNEL(cpu, Sub, binaryKernel<OpId::Sub>);
MC_REGISTER_KERNEL(cpu, Mul, binaryKernel<OpId::Mul>);
MC_REGISTER_KERNEL(cpu, Div, binaryKernel<OpId::Div>);
MC_REGISTER_KERNEL(cpu, Maximum, binaryKernel<OpId::Maximum>);
MC_REGISTER_KERNEL(cpu, Minimum, binaryKernel<OpId::Minimum>);
MC_REGISTER_KERNEL(cpu, Pow, binaryKernel<OpId::Pow>);
MC_REGISTER_KERNEL(cpu, Neg, unaryKernel<OpId::Neg>);
MC_REGISTER_KERNEL(cpu, Exp, unaryKernel<OpId::Exp>);
MC_REGISTER_KERNEL(cpu, Log, unaryKernel<OpId::Log>);
MC_REGISTER_KERNEL(cpu, Tanh, unaryKernel<OpId::Tanh>);
MC_REGISTER_KERNEL(cpu, Sin, unaryKernel<OpId::Sin>);
MC_REGISTER_KERNEL(cpu, Cos, unaryKernel<OpId::Cos>);
MC_REGISTER_KERNEL(cpu, Tan, unaryKernel<OpId::Tan>);
MC_REGISTER_KERNEL(cpu, Asin, unaryKernel<OpId::Asin>);
MC_REGISTER_KERNEL(cpu, Acos, unaryKernel<OpId::Acos>);
MC_REGISTER_KERNEL(cpu, Atan, unaryKernel<OpId::Atan>);
MC_REGISTER_KERNEL(cpu, Sinh, unaryKernel<OpId::Sinh>);
MC_REGISTER_KERNEL(cpu, Cosh, unaryKernel<OpId::Cosh>);
MC_REGISTER_KERNEL(cpu, Asinh, unaryKernel<OpId::Asinh>);
MC_REGISTER_KERNEL(cpu, Acosh, unaryKernel<OpId::Acosh>);
MC_REGISTER_KERNEL(cpu, Atanh, unaryKernel<OpId::Atanh>);
MC_REGISTER_KERNEL(cpu, Sigmoid, unaryKernel<OpId::Sigmoid>);
MC_REGISTER_KERNEL(cpu, Relu, unaryKernel<OpId::Relu>);
MC_REGISTER_KERNEL(cpu, Sqrt, unaryKernel<OpId::Sqrt>);
MC_REGISTER_KERNEL(cpu, Abs, unaryKernel<OpId::Abs>);
MC_REGISTER_KERNEL(cpu, Erf, unaryKernel<OpId::Erf>);
MC_REGISTER_KERNEL(cpu, Not, unaryKernel<OpId::Not>);
MC_REGISTER_KERNEL(cpu, Gelu, geluKernel);
MC_REGISTER_KERNEL(cpu, Clamp, clampKernel);
MC_REGISTER_KERNEL(cpu, Dropout, dropoutKernel);
MC_REGISTER_KERNEL(cpu, Compare, compareKernel);
MC_REGISTER_KERNEL(cpu, Select, selectKernel);

} // namespace
} // namespace mc::rt
