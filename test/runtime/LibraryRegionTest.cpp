// rt::matchLibraryRegion: the fused regions the cuda device runs as one
// library call (cuBLASLt's epilogues, one cuDNN graph), the rules both the
// cuda target (which keeps such regions whole) and the device (which binds
// them) use. Each case builds a region as mc-fuse would and checks what the
// matcher takes from it, or the reason it gives.
#include "modelc/library_region.h"

#include <gtest/gtest.h>

namespace mc::rt {
namespace {

using Kind = LibraryRegion::Kind;
using Act = LibraryRegion::Activation;

RegionOp op(OpId id, std::vector<uint32_t> operands, Shape shape,
            DType dtype = DType::F32, OpAttrs attrs = {}) {
  return RegionOp{id, std::move(attrs), std::move(operands), dtype,
                  std::move(shape)};
}

OpAttrs dims(std::vector<int64_t> d) {
  return OpAttrs{OpAttr::list("dims", std::move(d))};
}

OpAttrs tanh(bool on) {
  return OpAttrs{OpAttr::boolean("tanh_approximation", on)};
}

ConstTensor in(Shape shape, DType dtype = DType::F32) {
  return ConstTensor{dtype, std::move(shape), nullptr};
}

/// x [8, 16] x w [16, 32] + b [32]: the step's inputs 0, 1, 2; the body's
/// values start at 3.
const std::vector<ConstTensor> kGemmInputs = {in({8, 16}), in({16, 32}),
                                              in({32})};
const Shape kOut = {8, 32};

TEST(LibraryRegion, MatmulBiasReluIsOneCublasLtCall) {
  std::vector<RegionOp> body = {
      op(OpId::Matmul, {0, 1}, kOut),
      op(OpId::BroadcastInDim, {2}, kOut, DType::F32, dims({1})),
      op(OpId::Add, {4, 3}, kOut), // the bias first: either order
      op(OpId::Relu, {5}, kOut)};
  LibraryRegion m = matchLibraryRegion(body, kGemmInputs, DType::F32, kOut,
                                       false);
  EXPECT_EQ(m.kind, Kind::MatmulEpilogue) << m.why;
  EXPECT_EQ(m.lhs, 0u);
  EXPECT_EQ(m.rhs, 1u);
  EXPECT_EQ(m.bias, 2);
  EXPECT_EQ(m.activation, Act::Relu);
}

TEST(LibraryRegion, MatmulReshapeBiasTanhGelu) {
  // [2, 4, 16] x [16, 32] -> [2, 4, 32] reshaped to [8, 32]: the reshape
  // only straight after the matmul.
  std::vector<ConstTensor> inputs = {in({2, 4, 16}), in({16, 32}), in({32})};
  std::vector<RegionOp> body = {
      op(OpId::Matmul, {0, 1}, {2, 4, 32}), op(OpId::Reshape, {3}, kOut),
      op(OpId::BroadcastInDim, {2}, kOut, DType::F32, dims({1})),
      op(OpId::Add, {4, 5}, kOut),
      op(OpId::Gelu, {6}, kOut, DType::F32, tanh(true))};
  LibraryRegion m = matchLibraryRegion(body, inputs, DType::F32, kOut, false);
  EXPECT_EQ(m.kind, Kind::MatmulEpilogue) << m.why;
  EXPECT_EQ(m.activation, Act::GeluTanh);
  // Without a bias: cuBLASLt's plain GELU epilogue.
  body = {op(OpId::Matmul, {0, 1}, kOut),
          op(OpId::Gelu, {3}, kOut, DType::F32, tanh(true))};
  m = matchLibraryRegion(body, kGemmInputs, DType::F32, kOut, false);
  EXPECT_EQ(m.kind, Kind::MatmulEpilogue) << m.why;
  EXPECT_EQ(m.bias, -1);
}

TEST(LibraryRegion, WhatCublasLtCannotComputeIsRefusedWithTheReason) {
  auto refused = [](std::vector<RegionOp> body,
                    std::vector<ConstTensor> inputs, bool attention = false) {
    LibraryRegion m =
        matchLibraryRegion(body, inputs, DType::F32, kOut, attention);
    EXPECT_EQ(m.kind, Kind::None);
    return m.why;
  };
  RegionOp mm = op(OpId::Matmul, {0, 1}, kOut);
  RegionOp bias = op(OpId::BroadcastInDim, {2}, kOut, DType::F32, dims({1}));
  EXPECT_EQ(refused({mm, op(OpId::Gelu, {3}, kOut, DType::F32, tanh(false))},
                    kGemmInputs),
            "body op 1 is mc.gelu in its exact (erf) form; cuBLASLt's GELU "
            "epilogue is the tanh approximation");
  EXPECT_EQ(refused({mm, op(OpId::Exp, {3}, kOut)}, kGemmInputs),
            "body op 1 is mc.exp");
  // A bias along the wrong dim, or of the wrong size.
  EXPECT_EQ(refused({mm,
                     op(OpId::BroadcastInDim, {2}, kOut, DType::F32,
                        dims({0})),
                     op(OpId::Add, {3, 4}, kOut)},
                    kGemmInputs),
            "body op 1 is mc.broadcast_in_dim of f32[32] along dims [0], not "
            "one bias of [32] along dim 1");
  EXPECT_EQ(refused({mm, bias, op(OpId::Add, {3, 4}, kOut)},
                    {in({8, 16}), in({16, 32}), in({16})}),
            "body op 1 is mc.broadcast_in_dim of f32[16] along dims [1], not "
            "one bias of [32] along dim 1");
  // The activation before the bias, a bias never added, a second add.
  EXPECT_EQ(refused({mm, op(OpId::Relu, {3}, kOut), bias,
                     op(OpId::Add, {4, 5}, kOut)},
                    kGemmInputs),
            "body op 3 is mc.add that is not the bias's add (one, after the "
            "bias's broadcast, before the activation)");
  EXPECT_EQ(refused({mm, bias}, kGemmInputs),
            "the bias is broadcast but never added");
  EXPECT_EQ(refused({mm, bias, op(OpId::Add, {3, 4}, kOut),
                     op(OpId::Add, {5, 4}, kOut)},
                    kGemmInputs),
            "body op 3 is mc.add that is not the bias's add (one, after the "
            "bias's broadcast, before the activation)");
  // The matmul reads a value of the region; a reshape later on; another
  // dtype; an attention region.
  EXPECT_EQ(refused({op(OpId::Matmul, {0, 3}, kOut)}, kGemmInputs),
            "the matmul does not read two of the step's inputs");
  EXPECT_EQ(refused({mm, op(OpId::Relu, {3}, kOut),
                     op(OpId::Reshape, {4}, kOut)},
                    kGemmInputs),
            "body op 2 is mc.reshape not straight after the matmul");
  EXPECT_EQ(refused({mm, op(OpId::Relu, {3}, kOut, DType::BF16)},
                    kGemmInputs),
            "body op 1 is mc.relu of bf16, the output is f32");
  EXPECT_EQ(refused({mm, op(OpId::Relu, {3}, kOut)}, kGemmInputs, true),
            "this is an attention region");
  EXPECT_EQ(refused({op(OpId::Add, {0, 1}, kOut)}, kGemmInputs),
            "body op 0 is mc.add, not a matmul or conv2d");
}

TEST(LibraryRegion, ConvChannelBiasReluIsOneCudnnGraph) {
  Shape y = {2, 8, 6, 6};
  std::vector<ConstTensor> inputs = {in({2, 3, 8, 8}, DType::BF16),
                                     in({8, 3, 3, 3}, DType::BF16),
                                     in({8}, DType::BF16)};
  std::vector<RegionOp> body = {
      op(OpId::Conv2d, {0, 1}, y, DType::BF16),
      op(OpId::BroadcastInDim, {2}, y, DType::BF16, dims({1})),
      op(OpId::Add, {3, 4}, y, DType::BF16),
      op(OpId::Relu, {5}, y, DType::BF16)};
  LibraryRegion m = matchLibraryRegion(body, inputs, DType::BF16, y, false);
  EXPECT_EQ(m.kind, Kind::ConvEpilogue) << m.why;
  EXPECT_EQ(m.bias, 2);
  EXPECT_EQ(m.activation, Act::Relu);
  // cuDNN's pointwise ops here: relu only, every op of the output's shape.
  body[3] = op(OpId::Gelu, {5}, y, DType::BF16, tanh(true));
  m = matchLibraryRegion(body, inputs, DType::BF16, y, false);
  EXPECT_EQ(m.kind, Kind::None);
  EXPECT_EQ(m.why, "body op 3 is mc.gelu");
  body[3] = op(OpId::Relu, {5}, {2, 8, 36}, DType::BF16);
  m = matchLibraryRegion(body, inputs, DType::BF16, y, false);
  EXPECT_EQ(m.kind, Kind::None);
  EXPECT_EQ(m.why, "body op 3 is mc.relu of bf16[2, 8, 36], the output is "
                   "bf16[2, 8, 6, 6]");
  // The bias along the channels only.
  body = {op(OpId::Conv2d, {0, 1}, y, DType::BF16),
          op(OpId::BroadcastInDim, {2}, y, DType::BF16, dims({3})),
          op(OpId::Add, {3, 4}, y, DType::BF16)};
  m = matchLibraryRegion(body, inputs, DType::BF16, y, false);
  EXPECT_EQ(m.kind, Kind::None);
  EXPECT_EQ(m.why, "body op 1 is mc.broadcast_in_dim of bf16[8] along dims "
                   "[3], not one bias of [8] along dim 1");
}

// A channels_last conv2d (NHWC result [2, 6, 6, 8]) takes its bias along
// dim 3, and only there.
TEST(LibraryRegion, ChannelsLastConvTakesItsBiasAlongDim3) {
  Shape y = {2, 6, 6, 8};
  std::vector<ConstTensor> inputs = {in({2, 8, 8, 3}, DType::BF16),
                                     in({8, 3, 3, 3}, DType::BF16),
                                     in({8}, DType::BF16)};
  OpAttrs last{OpAttr::boolean("channels_last", true)};
  std::vector<RegionOp> body = {
      op(OpId::Conv2d, {0, 1}, y, DType::BF16, last),
      op(OpId::BroadcastInDim, {2}, y, DType::BF16, dims({3})),
      op(OpId::Add, {4, 3}, y, DType::BF16),
      op(OpId::Relu, {5}, y, DType::BF16)};
  LibraryRegion m = matchLibraryRegion(body, inputs, DType::BF16, y, false);
  EXPECT_EQ(m.kind, Kind::ConvEpilogue) << m.why;
  EXPECT_EQ(m.bias, 2);
  EXPECT_EQ(m.activation, Act::Relu);
  body[1] = op(OpId::BroadcastInDim, {2}, y, DType::BF16, dims({1}));
  inputs[2] = in({6}, DType::BF16);
  m = matchLibraryRegion(body, inputs, DType::BF16, y, false);
  EXPECT_EQ(m.kind, Kind::None);
  EXPECT_EQ(m.why, "body op 1 is mc.broadcast_in_dim of bf16[6] along dims "
                   "[1], not one bias of [8] along dim 3");
}

// --- attention (rt::matchAttentionRegion) ---

/// bf16 q [2, 4, 16, 32], k [2, 4, 16, 32] (read with transpose_b), v, a
/// mask [16, 16] and an f32 scale of rank 0: inputs 0..4, values from 5.
std::vector<ConstTensor> attnInputs(DType dtype = DType::BF16,
                                    int64_t d = 32) {
  return {in({2, 4, 16, d}, dtype), in({2, 4, 16, d}, dtype),
          in({2, 4, 16, d}, dtype), in({16, 16}), in({})};
}

/// mc-fuse's region under --amp=bf16: q k^T, cast to f32, * scale, + the
/// mask's broadcast, softmax, cast back, p v.
std::vector<RegionOp> attnBody(DType dtype = DType::BF16, int64_t d = 32) {
  Shape s{2, 4, 16, 16};
  return {op(OpId::Matmul, {0, 1}, s, dtype,
             {OpAttr::boolean("transpose_b", true)}),
          op(OpId::Cast, {5}, s),
          op(OpId::Mul, {6, 4}, s),
          op(OpId::BroadcastInDim, {3}, s, DType::F32, dims({2, 3})),
          op(OpId::Add, {8, 7}, s),
          op(OpId::Softmax, {9}, s, DType::F32, {OpAttr::integer("axis", 3)}),
          op(OpId::Cast, {10}, s, dtype),
          op(OpId::Matmul, {11, 2}, {2, 4, 16, d}, dtype)};
}

TEST(LibraryRegion, AmpAttentionIsCudnnsFusedAttention) {
  AttentionRegion m = matchAttentionRegion(attnBody(), attnInputs(),
                                           DType::BF16, {2, 4, 16, 32});
  ASSERT_TRUE(m.ok) << m.why;
  EXPECT_EQ(m.q, 0u);
  EXPECT_EQ(m.k, 1u);
  EXPECT_EQ(m.v, 2u);
  EXPECT_TRUE(m.kTransposed);
  EXPECT_EQ(m.scale, 4);
  EXPECT_FALSE(m.scaleDivides);
  EXPECT_FALSE(m.scaleBeforeMatmul);
  EXPECT_EQ(m.mask, 3);
  EXPECT_TRUE(m.maskBroadcast);
  EXPECT_EQ(m.maskDims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(m.maskDtype, DType::F32);
}

TEST(LibraryRegion, QScaledBeforeTheMatmulThroughABroadcastIsTheScale) {
  // PyTorch's MultiheadAttention: q / splat, then q k, softmax, p v, all
  // in f16; the splat reaches the region as a broadcast of a rank-0
  // input. Inputs: s (rank 0), q, k [.., s, d] (read with transpose_b), v.
  Shape qs{8, 16, 32}, ss{8, 16, 16};
  std::vector<ConstTensor> inputs = {in({}, DType::F16),
                                     in(qs, DType::F16),
                                     in(qs, DType::F16),
                                     in(qs, DType::F16)};
  std::vector<RegionOp> body = {
      op(OpId::BroadcastInDim, {0}, qs, DType::F16, dims({})),
      op(OpId::Div, {1, 4}, qs, DType::F16),
      op(OpId::Matmul, {5, 2}, ss, DType::F16,
         {OpAttr::boolean("transpose_b", true)}),
      op(OpId::Softmax, {6}, ss, DType::F16, {OpAttr::integer("axis", 2)}),
      op(OpId::Matmul, {7, 3}, qs, DType::F16)};
  AttentionRegion m = matchAttentionRegion(body, inputs, DType::F16, qs);
  ASSERT_TRUE(m.ok) << m.why;
  EXPECT_EQ(m.q, 1u);
  EXPECT_EQ(m.k, 2u);
  EXPECT_TRUE(m.kTransposed);
  EXPECT_EQ(m.scale, 0);
  EXPECT_TRUE(m.scaleDivides);
  EXPECT_TRUE(m.scaleBeforeMatmul);
  EXPECT_EQ(m.mask, -1);
}

TEST(LibraryRegion, AttentionCudnnCannotRunIsRefusedWithTheReason) {
  auto why = [](std::vector<RegionOp> body, std::vector<ConstTensor> inputs,
                DType out, Shape outShape) {
    AttentionRegion m = matchAttentionRegion(body, inputs, out, outShape);
    EXPECT_FALSE(m.ok);
    return m.why;
  };
  EXPECT_NE(why(attnBody(DType::F32), attnInputs(DType::F32), DType::F32,
                {2, 4, 16, 32})
                .find("takes f16 and bf16, not f32"),
            std::string::npos);
  EXPECT_NE(why(attnBody(DType::BF16, 20), attnInputs(DType::BF16, 20),
                DType::BF16, {2, 4, 16, 20})
                .find("not one multiple of 8 up to 128"),
            std::string::npos);
  std::vector<RegionOp> body = attnBody();
  body[5].attrs = {OpAttr::integer("axis", 2)};
  EXPECT_NE(why(body, attnInputs(), DType::BF16, {2, 4, 16, 32})
                .find("the softmax is not over the last dim"),
            std::string::npos);
  body = attnBody();
  body[1] = op(OpId::Exp, {5}, {2, 4, 16, 16}); // not a cast, scale or mask
  EXPECT_NE(why(body, attnInputs(), DType::BF16, {2, 4, 16, 32})
                .find("body op 1 (mc.exp) is not a cast, a scale or a mask"),
            std::string::npos);
  // k stored [.., d, s]: cuDNN reads k with its head dim contiguous.
  std::vector<ConstTensor> kt = attnInputs();
  kt[1] = in({2, 4, 32, 16}, DType::BF16);
  body = attnBody();
  body[0].attrs = {};
  EXPECT_NE(why(body, kt, DType::BF16, {2, 4, 16, 32})
                .find("k is read as [.., d, s]"),
            std::string::npos);
  body = attnBody();
  body[7].attrs = {OpAttr::boolean("transpose_b", true)};
  EXPECT_NE(why(body, attnInputs(), DType::BF16, {2, 4, 16, 32})
                .find("transposes an operand"),
            std::string::npos);
  // The mask added before the scale: (q k + m) * s is not cuDNN's
  // s * (q k) + m.
  body = attnBody();
  body[2] = op(OpId::BroadcastInDim, {3}, {2, 4, 16, 16}, DType::F32,
               dims({2, 3}));
  body[3] = op(OpId::Add, {6, 7}, {2, 4, 16, 16}); // + the mask
  body[4] = op(OpId::Mul, {8, 4}, {2, 4, 16, 16}); // then * s
  EXPECT_NE(why(body, attnInputs(), DType::BF16, {2, 4, 16, 32})
                .find("adds the mask before the scale"),
            std::string::npos);
  // A cast to an integer type is not mc-amp's and changes the values.
  body = attnBody();
  body[1] = op(OpId::Cast, {5}, {2, 4, 16, 16}, DType::I32);
  EXPECT_NE(why(body, attnInputs(), DType::BF16, {2, 4, 16, 32})
                .find("body op 1 (mc.cast) casts to i32"),
            std::string::npos);
  // A mask in f16 under bf16 q, k, v: cuDNN's bias is f32 or the I/O type.
  std::vector<ConstTensor> f16Mask = attnInputs();
  f16Mask[3] = in({16, 16}, DType::F16);
  body = attnBody();
  for (size_t k : {3, 4})
    body[k].dtype = DType::F16;
  body[1].dtype = DType::F16;
  body[2].dtype = DType::F16;
  body[5].dtype = DType::F16;
  EXPECT_NE(why(body, f16Mask, DType::BF16, {2, 4, 16, 32})
                .find("the mask is added in f16"),
            std::string::npos);
  // A second scale, on q before the matmul.
  std::vector<ConstTensor> inputs = attnInputs();
  body = attnBody();
  for (RegionOp &o : body)
    for (uint32_t &v : o.operands)
      if (v >= 5)
        ++v;
  body.insert(body.begin(),
              op(OpId::Mul, {0, 4}, {2, 4, 16, 32}, DType::BF16));
  body[1].operands[0] = 5;
  EXPECT_NE(why(body, inputs, DType::BF16, {2, 4, 16, 32})
                .find("is a second scale"),
            std::string::npos);
  // Masks cuDNN 9.26's fused attention has no engine for (9.19 planned
  // them): one that is the same for every key, read through a size-1 dim
  // or not along the last dim at all, and one whose dims are out of order.
  inputs = attnInputs();
  inputs[3] = in({16, 1});
  std::string text = why(attnBody(), inputs, DType::BF16, {2, 4, 16, 32});
  EXPECT_NE(text.find("body op 4 (mc.add) adds a mask that is the same "
                      "for every key"),
            std::string::npos)
      << text;
  inputs[3] = in({16});
  body = attnBody();
  body[3].attrs = dims({2});
  EXPECT_NE(why(body, inputs, DType::BF16, {2, 4, 16, 32})
                .find("the same for every key"),
            std::string::npos);
  inputs[3] = in({16, 16});
  body[3].attrs = dims({3, 2});
  EXPECT_NE(why(body, inputs, DType::BF16, {2, 4, 16, 32})
                .find("broadcast with dims [3, 2] out of order"),
            std::string::npos);
  // A key-padding mask [b, 1, 1, skv]: one value per key, the same for
  // every head and query: cuDNN's to take.
  inputs[3] = in({2, 1, 1, 16});
  body[3].attrs = dims({0, 1, 2, 3});
  AttentionRegion m =
      matchAttentionRegion(body, inputs, DType::BF16, {2, 4, 16, 32});
  EXPECT_TRUE(m.ok) << m.why;
}

} // namespace
} // namespace mc::rt
