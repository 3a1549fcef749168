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
  if (conv) { // the bias along the channels: dim 3 of NHWC
    int64_t channels = anchor.attrs.getBool("channels_last") ? 3 : 1;
    return matchEpilogue(match, body, inputs, outputDtype, outputShape,
                         /*reshape=*/false, /*sameShape=*/true,
                         Shape{outputShape[size_t(channels)]}, channels, name,
                         convActivation);
  }
  return matchEpilogue(match, body, inputs, outputDtype, outputShape,
                       /*reshape=*/true, /*sameShape=*/false,
                       Shape{outputShape.back()},
                       int64_t(outputShape.size()) - 1, name,
                       matmulActivation);
}

AttentionRegion matchAttentionRegion(const std::vector<RegionOp>& body,
                                     const std::vector<ConstTensor>& inputs,
                                     DType outputDtype,
                                     const Shape& outputShape) {
  AttentionRegion r;
  const uint32_t n = uint32_t(inputs.size());
  auto fail = [&](std::string why) {
    r.ok = false;
    r.why = std::move(why);
    return r;
  };
  auto opText = [&](uint32_t value) {
    return "body op " + std::to_string(value - n) + " (mc." +
           opName(body[value - n].op) + ")";
  };
  auto isOp = [&](uint32_t value) { return value >= n && value < n + body.size(); };
  std::vector<bool> seen(body.size(), false);
  auto opOf = [&](uint32_t value) -> const RegionOp& { return body[value - n]; };
  // A scale: a rank-0 input, or a broadcast_in_dim of one-element input
  // (as mc-fuse leaves a splat constant); returns the input, or -1.
  auto scalarInput = [&](uint32_t value) -> int64_t {
    if (value < n)
      return inputs[value].shape.empty() ? int64_t(value) : -1;
    if (!isOp(value) || opOf(value).op != OpId::BroadcastInDim ||
        opOf(value).operands.size() != 1)
      return -1;
    uint32_t in = opOf(value).operands[0];
    if (in >= n || numElements(inputs[in].shape) != 1)
      return -1;
    return int64_t(in);
  };
  auto isScalarInput = [&](uint32_t value) { return scalarInput(value) >= 0; };
  // Takes the scale read through VALUE (marking its broadcast seen).
  auto takeScale = [&](uint32_t value) {
    r.scale = scalarInput(value);
    if (value >= n)
      seen[value - n] = true;
  };
  if (body.empty())
    return fail("the step has no body");
  auto visit = [&](uint32_t value) { seen[value - n] = true; };

  // O = matmul(P', v).
  uint32_t last = n + uint32_t(body.size()) - 1;
  const RegionOp& pv = opOf(last);
  visit(last);
  if (pv.op != OpId::Matmul || pv.operands.size() != 2)
    return fail("the last body op is mc." + std::string(opName(pv.op)) +
                ", not the matmul of the probabilities and v");
  if (pv.attrs.getBool("transpose_a") || pv.attrs.getBool("transpose_b"))
    return fail("the matmul of the probabilities and v transposes an operand");
  if (pv.operands[1] >= n)
    return fail("v is not one of the step's inputs");
  r.v = pv.operands[1];
  // A cast between f32, f16 and bf16 (mc-amp's); a cast to an integer or
  // bool changes what is computed, which cuDNN would not do.
  auto floatCast = [&](uint32_t v) {
    if (!isOp(v) || opOf(v).op != OpId::Cast || opOf(v).operands.size() != 1)
      return false;
    uint32_t from = opOf(v).operands[0];
    DType in = from < n ? inputs[from].dtype : opOf(from).dtype;
    auto isFloat = [](DType t) {
      return t == DType::F32 || t == DType::F16 || t == DType::BF16;
    };
    return isFloat(in) && isFloat(opOf(v).dtype);
  };
  uint32_t cur = pv.operands[0];
  if (floatCast(cur)) {
    visit(cur);
    cur = opOf(cur).operands.at(0);
  }
  if (!isOp(cur) || opOf(cur).op != OpId::Softmax)
    return fail("the matmul's left operand is not a softmax (or its cast)");
  const RegionOp& sm = opOf(cur);
  visit(cur);
  if (sm.shape.size() < 2 ||
      sm.attrs.getInt("axis", -1) != int64_t(sm.shape.size()) - 1)
    return fail("the softmax is not over the last dim");
  const Shape scores = sm.shape;
  cur = sm.operands.at(0);

  // Back from the softmax to the first matmul: casts, a scale, a mask.
  while (isOp(cur) && opOf(cur).op != OpId::Matmul) {
    const RegionOp& op = opOf(cur);
    visit(cur);
    if (floatCast(cur)) {
      cur = op.operands.at(0);
      continue;
    }
    if (op.op == OpId::Cast)
      return fail(opText(cur) + " casts to " + dtypeName(op.dtype) +
                  " (only casts between f32, f16 and bf16 keep the values "
                  "cuDNN computes)");
    if (op.operands.size() != 2)
      return fail(opText(cur) + " is not a cast, a scale or a mask");
    uint32_t a = op.operands[0], b = op.operands[1];
    if ((op.op == OpId::Mul && (isScalarInput(a) || isScalarInput(b))) ||
        (op.op == OpId::Div && isScalarInput(b))) {
      if (r.scale >= 0)
        return fail(opText(cur) + " is a second scale");
      bool left = isScalarInput(a) && op.op == OpId::Mul;
      takeScale(left ? a : b);
      r.scaleDivides = op.op == OpId::Div;
      cur = left ? b : a;
      continue;
    }
    if (op.op == OpId::Add) {
      if (r.mask >= 0)
        return fail(opText(cur) + " is a second mask");
      // Walking back, a scale already taken comes after the mask in the
      // region: (q k + m) * s, which is not cuDNN's s * (q k) + m.
      if (r.scale >= 0)
        return fail(opText(cur) + " adds the mask before the scale; cuDNN "
                                  "scales the scores, then adds the mask");
      // The mask is the side that is an input or a broadcast of one.
      auto maskOf = [&](uint32_t m) -> bool {
        if (m < n && inputs[m].shape == op.shape) {
          r.mask = m;
          return true;
        }
        if (isOp(m) && opOf(m).op == OpId::BroadcastInDim &&
            opOf(m).operands.at(0) < n) {
          visit(m);
          r.mask = opOf(m).operands[0];
          r.maskDims = opOf(m).attrs.getInts("dims");
          r.maskBroadcast = true;
          return true;
        }
        return false;
      };
      uint32_t add = cur;
      if (maskOf(b))
        cur = a;
      else if (maskOf(a))
        cur = b;
      else
        return fail(opText(cur) + " adds no input or broadcast of one");
      if (r.maskBroadcast) {
        // cuDNN (9.26 has no engine for either) takes a mask whose dims
        // keep their order and that varies along the keys: not one that
        // is the same for every key (stride 0 in the last dim), which
        // would change nothing in the softmax anyway.
        const std::vector<int64_t>& dims = r.maskDims;
        for (size_t i = 1; i < dims.size(); ++i)
          if (dims[i] <= dims[i - 1])
            return fail(opText(add) + " adds a mask broadcast with dims " +
                        shapeString(Shape(dims.begin(), dims.end())) +
                        " out of order (cuDNN's attention reads a mask in "
                        "its own dims' order)");
        int64_t last = int64_t(op.shape.size()) - 1;
        const Shape& ms = inputs[uint32_t(r.mask)].shape;
        if (op.shape.size() && op.shape.back() > 1 &&
            (dims.empty() || dims.back() != last || ms.empty() ||
             ms.back() != op.shape.back()))
          return fail(opText(add) + " adds a mask that is the same for "
                                    "every key (broadcast along the last "
                                    "dim), which cuDNN's attention has no "
                                    "engine for");
      }
      r.maskDtype = op.dtype;
      continue;
    }
    return fail(opText(cur) + " is not a cast, a scale or a mask");
  }
  if (!isOp(cur))
    return fail("the softmax's scores do not come from a matmul in the "
                "region");
  const RegionOp& qk = opOf(cur);
  visit(cur);
  if (qk.operands.size() != 2)
    return fail("the scores' matmul does not have two operands");
  if (qk.attrs.getBool("transpose_a"))
    return fail("the scores' matmul transposes q");
  if (qk.operands[1] >= n)
    return fail("k is not one of the step's inputs");
  r.k = qk.operands[1];
  r.kTransposed = qk.attrs.getBool("transpose_b");
  uint32_t qValue = qk.operands[0];
  if (isOp(qValue)) {
    const RegionOp& op = opOf(qValue);
    visit(qValue);
    uint32_t a = op.operands.size() == 2 ? op.operands[0] : UINT32_MAX,
             b = op.operands.size() == 2 ? op.operands[1] : UINT32_MAX;
    bool mulLeft = op.op == OpId::Mul && a != UINT32_MAX && isScalarInput(a);
    bool mulRight = op.op == OpId::Mul && b != UINT32_MAX && isScalarInput(b);
    bool div = op.op == OpId::Div && b != UINT32_MAX && isScalarInput(b);
    if (!(mulLeft || mulRight || div))
      return fail(opText(qValue) + " before the scores' matmul is not a scale "
                              "of q");
    if (r.scale >= 0)
      return fail(opText(qValue) + " is a second scale");
    takeScale(mulLeft ? a : b);
    r.scaleDivides = div;
    r.scaleBeforeMatmul = true;
    qValue = mulLeft ? b : a;
  }
  if (qValue >= n)
    return fail("q is not one of the step's inputs");
  r.q = qValue;
  for (size_t k = 0; k < body.size(); ++k)
    if (!seen[k])
      return fail(opText(n + uint32_t(k)) + " is not part of the pattern");
  if (r.scale >= 0 && inputs[size_t(r.scale)].dtype != DType::F32 &&
      inputs[size_t(r.scale)].dtype != DType::F16 &&
      inputs[size_t(r.scale)].dtype != DType::BF16)
    return fail("the scale is " +
                std::string(dtypeName(inputs[size_t(r.scale)].dtype)));

  // cuDNN's limits.
  const ConstTensor &q = inputs[r.q], &k = inputs[r.k], &v = inputs[r.v];
  size_t rank = outputShape.size();
  if (rank != 3 && rank != 4)
    return fail("the output " + shapeString(outputShape) +
                " is not [heads, s, d] or [b, heads, s, d]");
  for (const ConstTensor* t : {&q, &k, &v})
    if (t->dtype != outputDtype || t->shape.size() != rank)
      return fail("q " + typeText(q.dtype, q.shape) + ", k " +
                  typeText(k.dtype, k.shape) + ", v " +
                  typeText(v.dtype, v.shape) + " and the output " +
                  typeText(outputDtype, outputShape) +
                  " are not of one dtype and rank");
  if (outputDtype != DType::F16 && outputDtype != DType::BF16)
    return fail(std::string("cuDNN's fused attention takes f16 and bf16, "
                            "not ") +
                dtypeName(outputDtype));
  int64_t d = q.shape[rank - 1], dv = v.shape[rank - 1];
  int64_t skv = v.shape[rank - 2];
  int64_t kd = k.shape[rank - (r.kTransposed ? 1 : 2)],
          ks = k.shape[rank - (r.kTransposed ? 2 : 1)];
  if (kd != d || ks != skv || scores.back() != skv ||
      outputShape[rank - 1] != dv || outputShape[rank - 2] != q.shape[rank - 2])
    return fail("q " + shapeString(q.shape) + ", k " + shapeString(k.shape) +
                ", v " + shapeString(v.shape) + " do not make attention");
  if (!r.kTransposed)
    return fail("k is read as [.., d, s] (s contiguous); cuDNN's fused "
                "attention reads k with its head dim contiguous (a matmul "
                "with transpose_b; the cuda target rewrites a transpose "
                "into that)");
  if (d != dv || d % 8 != 0 || d > 128)
    return fail("the head dims (" + std::to_string(d) + " for q and k, " +
                std::to_string(dv) +
                " for v) are not one multiple of 8 up to 128");
  for (size_t i = 0; i + 2 < rank; ++i)
    if (q.shape[i] != outputShape[i] || k.shape[i] != outputShape[i] ||
        v.shape[i] != outputShape[i])
      return fail("q, k and v do not share the output's leading dims");
  if (r.mask >= 0 && r.maskDtype != DType::F32 && r.maskDtype != outputDtype)
    return fail(std::string("the mask is added in ") +
                dtypeName(r.maskDtype) + " (cuDNN's bias: f32 or " +
                dtypeName(outputDtype) + ")");
  if (r.mask >= 0 && inputs[size_t(r.mask)].dtype != r.maskDtype)
    return fail("the mask input is " +
                std::string(dtypeName(inputs[size_t(r.mask)].dtype)) +
                ", added in " + dtypeName(r.maskDtype));
  r.ok = true;
  return r;
}

} // namespace mc::rt
