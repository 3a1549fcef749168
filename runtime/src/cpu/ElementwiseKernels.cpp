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

template <UnaryOp Op>
Status unaryKernel(const KernelRequest& r, BoundKernel* out, size_t*) {
  *out = [a = r.inputs[0], o = r.output](void*) { return unary(Op, a, o); };
  return Status::ok();
}

template <BinaryOp Op>
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
  UnaryOp op = r.attrs.getBool("tanh_approximation") ? UnaryOp::GeluTanh
                                                     : UnaryOp::Gelu;
  *out = [op, a = r.inputs[0], o = r.output](void*) { return unary(op, a, o); };
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

float hardswish(float x) { return x * std::min(std::max(x + 3.f, 0.f), 6.f) / 6.f; }

MC_REGISTER_KERNEL(cpu, Hardswish, floatMapKernel<hardswish>);
MC_REGISTER_KERNEL(cpu, Copy, copyKernel);
MC_REGISTER_KERNEL(cpu, Cast, castKernel);
MC_REGISTER_KERNEL(cpu, Add, binaryKernel<BinaryOp::Add>);
MC_REGISTER_KERNEL(cpu, Sub, binaryKernel<BinaryOp::Sub>);
MC_REGISTER_KERNEL(cpu, Mul, binaryKernel<BinaryOp::Mul>);
MC_REGISTER_KERNEL(cpu, Div, binaryKernel<BinaryOp::Div>);
MC_REGISTER_KERNEL(cpu, Maximum, binaryKernel<BinaryOp::Maximum>);
MC_REGISTER_KERNEL(cpu, Minimum, binaryKernel<BinaryOp::Minimum>);
MC_REGISTER_KERNEL(cpu, Pow, binaryKernel<BinaryOp::Pow>);
MC_REGISTER_KERNEL(cpu, Neg, unaryKernel<UnaryOp::Neg>);
MC_REGISTER_KERNEL(cpu, Exp, unaryKernel<UnaryOp::Exp>);
MC_REGISTER_KERNEL(cpu, Log, unaryKernel<UnaryOp::Log>);
MC_REGISTER_KERNEL(cpu, Tanh, unaryKernel<UnaryOp::Tanh>);
MC_REGISTER_KERNEL(cpu, Sigmoid, unaryKernel<UnaryOp::Sigmoid>);
MC_REGISTER_KERNEL(cpu, Relu, unaryKernel<UnaryOp::Relu>);
MC_REGISTER_KERNEL(cpu, Sqrt, unaryKernel<UnaryOp::Sqrt>);
MC_REGISTER_KERNEL(cpu, Abs, unaryKernel<UnaryOp::Abs>);
MC_REGISTER_KERNEL(cpu, Erf, unaryKernel<UnaryOp::Erf>);
MC_REGISTER_KERNEL(cpu, Not, unaryKernel<UnaryOp::Not>);
MC_REGISTER_KERNEL(cpu, Gelu, geluKernel);
MC_REGISTER_KERNEL(cpu, Clamp, clampKernel);
MC_REGISTER_KERNEL(cpu, Compare, compareKernel);
MC_REGISTER_KERNEL(cpu, Select, selectKernel);

} // namespace
} // namespace mc::rt
