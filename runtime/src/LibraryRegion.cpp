// The fused regions a device runs as one library call (library_region.h).
#include "modelc/library_region.h"

#include "modelc/ops.h"

namespace mc::rt {
namespace {

using Kind = LibraryRegion::Kind;
using Activation = LibraryRegion::Activation;

LibraryRegion refuse(std::string why) {
  LibraryRegion r;
  r.why = std::move(why);
  return r;
}

std::string typeText(DType dtype, const Shape& shape) {
  return std::string(dtypeName(dtype)) + shapeString(shape);
}

/// The epilogue after the anchor (body[0], whose result is value N, the
/// first after the step's N inputs): optionally a reshape straight after
/// (RESHAPE), a bias of BIASSHAPE broadcast along BIASDIM and added in
/// either order, then optionally one activation ACTIVATION accepts. Every
/// op must have the output's dtype (and its shape, with SAMESHAPE).
LibraryRegion matchEpilogue(LibraryRegion match,
                            const std::vector<RegionOp>& body,
                            const std::vector<ConstTensor>& inputs,
                            DType outputDtype, const Shape& outputShape,
                            bool reshape, bool sameShape,
                            const Shape& biasShape, int64_t biasDim,
                            const char* anchor,
                            Activation (*activation)(const RegionOp&,
                                                     std::string* why)) {
  const uint32_t n = uint32_t(inputs.size());
  auto opText = [&](size_t k) {
    return "body op " + std::to_string(k) + " is mc." + opName(body[k].op);
  };
  uint32_t cur = n; // the value the epilogue has reached
  uint32_t biasValue = UINT32_MAX;
  bool added = false;
  for (size_t k = 1; k < body.size(); ++k) {
    const RegionOp& op = body[k];
    uint32_t value = n + uint32_t(k);
    if (op.dtype != outputDtype || (sameShape && op.shape != outputShape))
      return refuse(opText(k) + " of " +
                    (sameShape ? typeText(op.dtype, op.shape)
                               : std::string(dtypeName(op.dtype))) +
                    ", the output is " +
                    (sameShape ? typeText(outputDtype, outputShape)
                               : std::string(dtypeName(outputDtype))));
    bool readsCur = op.operands.size() == 1 && op.operands[0] == cur;
    switch (op.op) {
    case OpId::Reshape:
      // Same bytes; only straight after the anchor.
      if (!reshape || k != 1 || !readsCur)
        return refuse(opText(k) + " not straight after the " + anchor);
      cur = value;
      continue;
    case OpId::BroadcastInDim: {
      if (match.bias >= 0 || op.operands.size() != 1 || op.operands[0] >= n)
        return refuse(opText(k) +
                      " of a value the region computes, or a second one");
      const ConstTensor& in = inputs[op.operands[0]];
      std::vector<int64_t> dims = op.attrs.getInts("dims");
      if (in.shape != biasShape || in.dtype != outputDtype ||
          dims != std::vector<int64_t>{biasDim})
        return refuse(opText(k) + " of " + typeText(in.dtype, in.shape) +
                      " along dims [" +
                      (dims.empty() ? "" : std::to_string(dims[0])) +
                      (dims.size() > 1 ? ", ..." : "") + "], not one bias of " +
                      shapeString(biasShape) + " along dim " +
                      std::to_string(biasDim));
      match.bias = op.operands[0];
      biasValue = value;
      continue;
    }
    case OpId::Add: {
      if (op.operands.size() != 2 || added ||
          match.activation != Activation::None || match.bias < 0)
        return refuse(opText(k) + " that is not the bias's add (one, "
                                  "after the bias's broadcast, before the "
                                  "activation)");
      uint32_t a = op.operands[0], b = op.operands[1];
      if (!((a == cur && b == biasValue) || (b == cur && a == biasValue)))
        return refuse(opText(k) + " that does not add the bias to the " +
                      anchor + "'s result");
      added = true;
      cur = value;
      continue;
    }
    default: {
      std::string why;
      Activation act = activation(op, &why);
      if (act == Activation::None)
        return refuse(opText(k) + why);
      if (!readsCur || match.activation != Activation::None)
        return refuse(opText(k) + " not applied to the " + anchor +
                      "'s result or its sum");
      match.activation = act;
      cur = value;
      continue;
    }
    }
  }
  if (match.bias >= 0 && !added)
    return refuse(std::string("the bias is broadcast but never added"));
  if (cur != n + body.size() - 1)
    return refuse("the last body op is not the epilogue's result");
  return match;
}

Activation matmulActivation(const RegionOp& op, std::string* why) {
  if (op.op == OpId::Relu)
    return Activation::Relu;
  if (op.op == OpId::Gelu) {
    if (op.attrs.getBool("tanh_approximation"))
      return Activation::GeluTanh;
    *why = " in its exact (erf) form; cuBLASLt's GELU epilogue is the tanh "
           "approximation";
  }
  return Activation::None;
}

Activation convActivation(const RegionOp& op, std::string*) {
  return op.op == OpId::Relu ? Activation::Relu : Activation::None;
}

} // namespace

LibraryRegion matchLibraryRegion(const std::vector<RegionOp>& body,
                                 const std::vector<ConstTensor>& inputs,
                                 DType outputDtype, const Shape& outputShape,
                                 bool attention) {
  if (body.empty())
    return refuse("the step has no body");
  if (attention)
    return refuse("this is an attention region");
  const RegionOp& anchor = body[0];
  const uint32_t n = uint32_t(inputs.size());
  bool conv = anchor.op == OpId::Conv2d;
  if (anchor.op != OpId::Matmul && !conv)
    return refuse("body op 0 is mc." + std::string(opName(anchor.op)) +
                  ", not a matmul or conv2d");
  const char* name = conv ? "conv2d" : "matmul";
  if (anchor.operands.size() != 2 || anchor.operands[0] >= n ||
      anchor.operands[1] >= n)
    return refuse(std::string("the ") + name +
                  " does not read two of the step's inputs");
  if (anchor.dtype != outputDtype || (conv && anchor.shape != outputShape))
    return refuse(std::string("the ") + name + " computes " +
                  (conv ? typeText(anchor.dtype, anchor.shape)
                        : std::string(dtypeName(anchor.dtype))) +
                  ", the output is " +
                  (conv ? typeText(outputDtype, outputShape)
                        : std::string(dtypeName(outputDtype))));
  if (outputShape.empty() || (conv && outputShape.size() != 4))
    return refuse("the output " + shapeString(outputShape) + " is not a " +
                  name + "'s result");
  LibraryRegion match;
  match.kind = conv ? Kind::ConvEpilogue : Kind::MatmulEpilogue;
  match.lhs = anchor.operands[0];
  match.rhs = anchor.operands[1];
  if (conv)
    return matchEpilogue(match, body, inputs, outputDtype, outputShape,
                         /*reshape=*/false, /*sameShape=*/true,
                         Shape{outputShape[1]}, 1, name, convActivation);
  return matchEpilogue(match, body, inputs, outputDtype, outputShape,
                       /*reshape=*/true, /*sameShape=*/false,
                       Shape{outputShape.back()},
                       int64_t(outputShape.size()) - 1, name,
                       matmulActivation);
}

} // namespace mc::rt
