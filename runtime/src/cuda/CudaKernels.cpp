// The CUDA device's own kernels: matmul through cuBLASLt, a fused region
// that is a matmul with a bias and relu/tanh-gelu epilogue (cuBLASLt's
// epilogues), conv2d through cuDNN, a fused region that is a conv2d with a
// channel bias and relu (one cuDNN graph), and copy. Every other op of a CUDA artifact is a generated
// kernel (Device::bindGenerated).
#include "CublasLt.h"
#include "CudaDevice.h"
#include "Cudnn.h"
#include "cpu/CpuKernels.h" // conv2dParams
#include "modelc/shapes.h"

namespace mc::rt::cuda {
namespace {

bool isFloat(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

/// The GemmProblem of a matmul from its operands, attributes and result
/// (the CPU kernel's semantics: [..., M, K] x [..., K, N] -> [..., M, N],
/// equal batch dims, one float dtype).
Status gemmOf(const ConstTensor& a, const ConstTensor& b, const OpAttrs& attrs,
              DType dtype, const Shape& result, GemmProblem* p) {
  p->transposeA = attrs.getBool("transpose_a");
  p->transposeB = attrs.getBool("transpose_b");
  if (!isFloat(a.dtype) || a.dtype != b.dtype || a.dtype != dtype)
    return Status::error(std::string("matmul: operands ") +
                         dtypeName(a.dtype) + " and " + dtypeName(b.dtype) +
                         " and result " + dtypeName(dtype) +
                         ": cuda takes one of f32, f16, bf16 for all three");
  Shape expected;
  MC_RETURN_IF_ERROR(
      shapes::matmul(a.shape, b.shape, p->transposeA, p->transposeB, &expected));
  if (expected != result)
    return Status::error("matmul: the result is " + shapeString(result) +
                         ", the operands give " + shapeString(expected));
  size_t r = a.shape.size();
  p->dtype = dtype;
  p->batch = 1;
  for (size_t d = 0; d + 2 < r; ++d)
    p->batch *= a.shape[d];
  p->m = result[r - 2];
  p->n = result[r - 1];
  p->k = p->transposeA ? a.shape[r - 2] : a.shape[r - 1];
  p->a = a.data;
  p->b = b.data;
  return Status::ok();
}

Status matmulKernel(const KernelRequest& r, BoundKernel* out,
                    size_t* workspaceBytes) {
  GemmProblem p;
  MC_RETURN_IF_ERROR(gemmOf(r.inputs[0], r.inputs[1], r.attrs, r.output.dtype,
                            r.output.shape, &p));
  p.d = r.output.data;
  return bindGemm(cudaDevice(r), r, p, out, workspaceBytes);
}

/// "mc.fused on cuda runs ... ; <why> (the compiler splits such regions or
/// generates a kernel for them)".
Status notAnEpilogue(const std::string& why) {
  return Status::error(
      "mc.fused: the cuda device runs a fused region itself only when it is "
      "a matmul of two inputs, optionally reshaped, plus a bias (a "
      "broadcast_in_dim of an input along the last dim), then optionally "
      "relu or gelu with tanh_approximation (cuBLASLt's epilogues); " +
      why + " (the compiler generates a kernel for such regions, or splits "
      "them)");
}

/// The ConvProblem of a conv2d from its operands, attributes and result
/// (the CPU kernel's semantics: NCHW, OIHW weights, one float dtype).
Status convOf(const ConstTensor& x, const ConstTensor& w, const OpAttrs& attrs,
              DType dtype, const Shape& result, ConvProblem* p) {
  if (!isFloat(x.dtype) || x.dtype != w.dtype || x.dtype != dtype)
    return Status::error(std::string("conv2d: input ") + dtypeName(x.dtype) +
                         ", weight " + dtypeName(w.dtype) + " and result " +
                         dtypeName(dtype) +
                         ": cuda takes one of f32, f16, bf16 for all three");
  p->params = conv2dParams(attrs);
  const Conv2dParams& c = p->params;
  Shape expected;
  if (x.shape.size() != 4 || w.shape.size() != 4)
    return Status::error("conv2d: input " + shapeString(x.shape) +
                         " and weight " + shapeString(w.shape) +
                         " must be rank 4 (NCHW, OIHW)");
  Status rule = shapes::conv2d(
      x.shape, w.shape, {c.strideH, c.strideW},
      {c.padTop, c.padLeft, c.padBottom, c.padRight},
      {c.dilationH, c.dilationW}, c.groups, &expected);
  if (!rule)
    return Status::error("conv2d: " + rule.message());
  if (expected != result)
    return Status::error("conv2d: the result is " + shapeString(result) +
                         ", the operands give " + shapeString(expected));
  p->dtype = dtype;
  p->x = x.shape;
  p->w = w.shape;
  p->y = result;
  p->xData = x.data;
  p->wData = w.data;
  return Status::ok();
}

Status conv2dKernel(const KernelRequest& r, BoundKernel* out,
                    size_t* workspaceBytes) {
  ConvProblem p;
  MC_RETURN_IF_ERROR(convOf(r.inputs[0], r.inputs[1], r.attrs, r.output.dtype,
                            r.output.shape, &p));
  p.yData = r.output.data;
  return bindConv(cudaDevice(r), r, p, out, workspaceBytes);
}

/// "mc.fused on cuda runs ... ; <why> (...)", for regions led by a conv2d.
Status notAConvEpilogue(const std::string& why) {
  return Status::error(
      "mc.fused: the cuda device runs a region led by a conv2d only when it "
      "is the conv2d of two inputs, then optionally the add of a bias (a "
      "broadcast_in_dim of an input [C] along dim 1), then optionally relu "
      "(one cuDNN graph); " +
      why + " (the compiler generates a kernel for such regions, or splits "
            "them)");
}

/// A fused region led by a conv2d: conv2d(in a, in b), then optionally
/// add(conv, broadcast_in_dim(in c [K], dims [1])) (either operand order),
/// then optionally relu; one cuDNN graph with the bias and relu as
/// pointwise ops on the f32 result.
Status fusedConvKernel(const KernelRequest& r, BoundKernel* out,
                       size_t* workspaceBytes) {
  const std::vector<RegionOp>& body = *r.body;
  const uint32_t n = uint32_t(r.inputs.size());
  const RegionOp& conv = body[0];
  auto opText = [&](size_t k) {
    return "body op " + std::to_string(k) + " is mc." + opName(body[k].op);
  };
  if (conv.operands.size() != 2 || conv.operands[0] >= n ||
      conv.operands[1] >= n)
    return notAConvEpilogue("the conv2d does not read two of the step's "
                            "inputs");
  if (conv.dtype != r.output.dtype || conv.shape != r.output.shape)
    return notAConvEpilogue(std::string("the conv2d computes ") +
                            dtypeName(conv.dtype) + shapeString(conv.shape) +
                            ", the output is " + dtypeName(r.output.dtype) +
                            shapeString(r.output.shape));
  ConvProblem p;
  MC_RETURN_IF_ERROR(convOf(r.inputs[conv.operands[0]],
                            r.inputs[conv.operands[1]], conv.attrs, conv.dtype,
                            conv.shape, &p));
  p.yData = r.output.data;
  uint32_t cur = n; // the value reached (the convolution's result)
  uint32_t biasValue = UINT32_MAX;
  const ConstTensor* bias = nullptr;
  for (size_t k = 1; k < body.size(); ++k) {
    const RegionOp& op = body[k];
    uint32_t value = n + uint32_t(k);
    if (op.dtype != r.output.dtype || op.shape != r.output.shape)
      return notAConvEpilogue(opText(k) + " of " + dtypeName(op.dtype) +
                              shapeString(op.shape) + ", the output is " +
                              dtypeName(r.output.dtype) +
                              shapeString(r.output.shape));
    switch (op.op) {
    case OpId::BroadcastInDim: {
      if (bias || op.operands.size() != 1 || op.operands[0] >= n)
        return notAConvEpilogue(opText(k) + " of a value the region "
                                            "computes, or a second one");
      const ConstTensor& in = r.inputs[op.operands[0]];
      if (in.shape != Shape{p.y[1]} || in.dtype != r.output.dtype ||
          op.attrs.getInts("dims") != std::vector<int64_t>{1})
        return notAConvEpilogue(opText(k) + " of " + dtypeName(in.dtype) +
                                shapeString(in.shape) +
                                ", not one bias of [" +
                                std::to_string(p.y[1]) + "] along dim 1");
      bias = &in;
      biasValue = value;
      continue;
    }
    case OpId::Add: {
      if (op.operands.size() != 2 || p.bias || p.relu || !bias)
        return notAConvEpilogue(opText(k) + " that is not the bias's add "
                                            "(one, before relu)");
      uint32_t a = op.operands[0], b = op.operands[1];
      if (!((a == cur && b == biasValue) || (b == cur && a == biasValue)))
        return notAConvEpilogue(opText(k) + " that does not add the bias to "
                                            "the convolution");
      p.bias = bias->data;
      cur = value;
      continue;
    }
    case OpId::Relu:
      if (op.operands.size() != 1 || op.operands[0] != cur || p.relu)
        return notAConvEpilogue(opText(k) + " not applied to the "
                                            "convolution or its sum");
      p.relu = true;
      cur = value;
      continue;
    default:
      return notAConvEpilogue(opText(k));
    }
  }
  if (cur != n + body.size() - 1)
    return notAConvEpilogue("the last body op is not the epilogue's result");
  return bindConv(cudaDevice(r), r, p, out, workspaceBytes);
}

/// A fused region led by a matmul whose rest is what cuBLASLt's epilogue
/// computes: bias along the last dim, then relu or the tanh form of gelu.
/// cuBLASLt has no erf gelu (its GELU epilogue is the tanh approximation,
/// which is why PyTorch maps only approximate='tanh' to it), so a region
/// with the exact gelu is refused.
Status fusedKernel(const KernelRequest& r, BoundKernel* out,
                   size_t* workspaceBytes) {
  if (!r.body || r.body->empty())
    return Status::error("mc.fused: the step has no body");
  if (r.attrs.getBool("attention"))
    return notAnEpilogue("this is an attention region");
  if ((*r.body)[0].op == OpId::Conv2d)
    return fusedConvKernel(r, out, workspaceBytes);
  const std::vector<RegionOp>& body = *r.body;
  const uint32_t n = uint32_t(r.inputs.size());
  const RegionOp& mm = body[0];
  auto opText = [&](size_t k) {
    return "body op " + std::to_string(k) + " is mc." + opName(body[k].op);
  };
  if (mm.op != OpId::Matmul)
    return notAnEpilogue(opText(0));
  if (mm.operands.size() != 2 || mm.operands[0] >= n || mm.operands[1] >= n)
    return notAnEpilogue("the matmul does not read two of the step's inputs");
  if (mm.dtype != r.output.dtype)
    return notAnEpilogue(std::string("the matmul computes ") +
                         dtypeName(mm.dtype) + ", the output is " +
                         dtypeName(r.output.dtype));
  GemmProblem p;
  MC_RETURN_IF_ERROR(gemmOf(r.inputs[mm.operands[0]], r.inputs[mm.operands[1]],
                            mm.attrs, mm.dtype, mm.shape, &p));
  p.d = r.output.data;
  uint32_t cur = n; // the value the epilogue has reached (the product)
  std::vector<uint32_t> biasValues; // broadcasts of the bias input
  const ConstTensor* bias = nullptr;
  for (size_t k = 1; k < body.size(); ++k) {
    const RegionOp& op = body[k];
    uint32_t value = n + uint32_t(k);
    if (op.dtype != r.output.dtype)
      return notAnEpilogue(opText(k) + " of " + dtypeName(op.dtype) +
                           ", the output is " + dtypeName(r.output.dtype));
    auto readsCur = [&] {
      return op.operands.size() == 1 && op.operands[0] == cur;
    };
    switch (op.op) {
    case OpId::Reshape:
      // Same bytes; only straight after the matmul.
      if (k != 1 || !readsCur())
        return notAnEpilogue(opText(k) + " not straight after the matmul");
      cur = value;
      continue;
    case OpId::BroadcastInDim: {
      if (op.operands.size() != 1 || op.operands[0] >= n)
        return notAnEpilogue(opText(k) + " of a value the region computes");
      const ConstTensor& in = r.inputs[op.operands[0]];
      std::vector<int64_t> dims = op.attrs.getInts("dims");
      int64_t last = int64_t(r.output.shape.size()) - 1;
      if (bias || in.shape.size() != 1 || in.shape[0] != p.n ||
          dims != std::vector<int64_t>{last} || in.dtype != r.output.dtype)
        return notAnEpilogue(opText(k) + " of " + dtypeName(in.dtype) +
                             shapeString(in.shape) + " along dims [" +
                             (dims.empty() ? "" : std::to_string(dims[0])) +
                             (dims.size() > 1 ? ", ..." : "") +
                             "], not one bias of [" + std::to_string(p.n) +
                             "] along the last dim");
      bias = &in;
      biasValues.push_back(value);
      continue;
    }
    case OpId::Add: {
      if (op.operands.size() != 2 || p.bias ||
          p.activation != GemmActivation::None)
        return notAnEpilogue(opText(k) + " after the bias or activation");
      uint32_t a = op.operands[0], b = op.operands[1];
      uint32_t other = a == cur ? b : b == cur ? a : UINT32_MAX;
      if (other == UINT32_MAX || biasValues.empty() ||
          other != biasValues[0])
        return notAnEpilogue(opText(k) + " that does not add the bias to "
                                         "the product");
      p.bias = bias->data;
      cur = value;
      continue;
    }
    case OpId::Relu:
    case OpId::Gelu:
      if (!readsCur() || p.activation != GemmActivation::None)
        return notAnEpilogue(opText(k) + " not applied to the product");
      if (op.op == OpId::Gelu && !op.attrs.getBool("tanh_approximation"))
        return notAnEpilogue(opText(k) +
                             " in its exact (erf) form; cuBLASLt's GELU "
                             "epilogue is the tanh approximation");
      p.activation = op.op == OpId::Relu ? GemmActivation::Relu
                                         : GemmActivation::GeluTanh;
      cur = value;
      continue;
    default:
      return notAnEpilogue(opText(k));
    }
  }
  if (cur != n + body.size() - 1)
    return notAnEpilogue("the last body op is not the epilogue's result");
  if (r.output.shape.empty() || r.output.shape.back() != p.n ||
      numElements(r.output.shape) != p.batch * p.m * p.n)
    return notAnEpilogue("the output " + shapeString(r.output.shape) +
                         " is not the product " + shapeString(mm.shape) +
                         " with its last dim kept");
  return bindGemm(cudaDevice(r), r, p, out, workspaceBytes);
}

Status copyKernel(const KernelRequest& r, BoundKernel* out, size_t*) {
  size_t bytes = size_t(numElements(r.output.shape)) * dtypeSize(r.output.dtype);
  if (r.inputs[0].dtype != r.output.dtype ||
      numElements(r.inputs[0].shape) != numElements(r.output.shape))
    return Status::error("copy: " + std::string(dtypeName(r.inputs[0].dtype)) +
                         shapeString(r.inputs[0].shape) + " to " +
                         dtypeName(r.output.dtype) +
                         shapeString(r.output.shape));
  CudaDevice& dev = cudaDevice(r);
  CUdeviceptr from = CUdeviceptr(r.inputs[0].data),
              to = CUdeviceptr(r.output.data);
  if (!bytes || from == to) { // in place: nothing to move
    *out = [](void*) { return Status::ok(); };
    return Status::ok();
  }
  *out = dev.step(r, [&dev, from, to, bytes](void*) {
    return dev.check(
        dev.driver().memcpyDtoDAsync(to, from, bytes, dev.stream()),
        "cuMemcpyDtoDAsync");
  });
  return Status::ok();
}

MC_REGISTER_KERNEL(cuda, Matmul, matmulKernel);
MC_REGISTER_KERNEL(cuda, Fused, fusedKernel);
MC_REGISTER_KERNEL(cuda, Conv2d, conv2dKernel);
MC_REGISTER_KERNEL(cuda, Copy, copyKernel);

} // namespace
} // namespace mc::rt::cuda
