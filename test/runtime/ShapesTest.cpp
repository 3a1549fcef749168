// The shape library (modelc/shapes.h): each rule's result on ordinary
// shapes, each of its errors, and the drift it ended: a negative axis is
// refused by the rule and so by the artifact verifier, as by the dialect.
#include "TestUtil.h"
#include "modelc/model.h"
#include "modelc/shapes.h"

#include <algorithm>
#include <climits>
#include <random>
#include <gtest/gtest.h>

using namespace mc;
using namespace mc::rt::shapes;
using mc::rt::Status;

namespace {

/// The error message of `s`, or "ok".
std::string msg(const Status &s) { return s ? "ok" : s.message(); }

TEST(Shapes, Str) {
  EXPECT_EQ(str({}), "[]");
  EXPECT_EQ(str({2, 3}), "[2, 3]");
}

TEST(Shapes, CheckAxis) {
  EXPECT_TRUE(checkAxis(0, 3));
  EXPECT_TRUE(checkAxis(2, 3));
  EXPECT_EQ(msg(checkAxis(3, 3)), "axis 3 is out of range for rank 3");
  // Python-style negative axes are the frontend's to normalize.
  EXPECT_EQ(msg(checkAxis(-1, 3)), "axis -1 is out of range for rank 3");
  EXPECT_EQ(msg(checkAxis(0, 0)), "axis 0 is out of range for rank 0");
}

TEST(Shapes, BroadcastInDim) {
  EXPECT_TRUE(broadcastInDim({3, 1}, {1, 2}, {2, 3, 4}));
  EXPECT_TRUE(broadcastInDim({}, {}, {2, 3}));
  EXPECT_EQ(msg(broadcastInDim({3}, {0, 1}, {3, 3})),
            "dims [0, 1] has 2 entries, expected the input rank 1");
  EXPECT_EQ(msg(broadcastInDim({3}, {2}, {3, 3})),
            "dims[0] = 2 is out of range for result rank 2");
  EXPECT_EQ(msg(broadcastInDim({3}, {-1}, {3, 3})),
            "dims[0] = -1 is out of range for result rank 2");
  EXPECT_EQ(msg(broadcastInDim({3, 3}, {1, 1}, {3, 3})),
            "dims [1, 1] maps two input dimensions to result dimension 1");
  EXPECT_EQ(msg(broadcastInDim({2}, {1}, {2, 3})),
            "input dimension 0 of size 2 cannot broadcast to result "
            "dimension 1 of size 3");
}

TEST(Shapes, Transpose) {
  Dims out;
  ASSERT_TRUE(transpose({2, 3, 4}, {2, 0, 1}, &out));
  EXPECT_EQ(out, (Dims{4, 2, 3}));
  EXPECT_EQ(msg(transpose({2, 3}, {0}, &out)),
            "permutation [0] has 1 entries, expected the input rank 2");
  EXPECT_EQ(msg(transpose({2, 3}, {0, 0}, &out)),
            "permutation [0, 0] is not a permutation of [0, 2)");
  EXPECT_EQ(msg(transpose({2, 3}, {-1, 0}, &out)),
            "permutation [-1, 0] is not a permutation of [0, 2)");
}

TEST(Shapes, Reduce) {
  Dims out;
  ASSERT_TRUE(reduce({2, 3, 4}, {2, 0}, false, &out));
  EXPECT_EQ(out, (Dims{3}));
  ASSERT_TRUE(reduce({2, 3, 4}, {0, 2}, true, &out));
  EXPECT_EQ(out, (Dims{1, 3, 1}));
  ASSERT_TRUE(reduce({2, 3}, {}, false, &out));
  EXPECT_EQ(out, (Dims{2, 3}));
  EXPECT_EQ(msg(reduce({2, 3}, {2}, false, &out)),
            "reduction dimension 2 is out of range for rank 2");
  EXPECT_EQ(msg(reduce({2, 3}, {-1}, false, &out)),
            "reduction dimension -1 is out of range for rank 2");
  EXPECT_EQ(msg(reduce({2, 3}, {1, 1}, false, &out)),
            "reduction dimension 1 appears twice in [1, 1]");
}

TEST(Shapes, Matmul) {
  Dims out;
  ASSERT_TRUE(matmul({5, 2, 3}, {5, 3, 4}, false, false, &out));
  EXPECT_EQ(out, (Dims{5, 2, 4}));
  ASSERT_TRUE(matmul({3, 2}, {4, 3}, true, true, &out));
  EXPECT_EQ(out, (Dims{2, 4}));
  EXPECT_EQ(msg(matmul({3}, {3, 4}, false, false, &out)),
            "expects operands of rank >= 2, got lhs [3] and rhs [3, 4]");
  EXPECT_EQ(msg(matmul({1, 2, 3}, {3, 4}, false, false, &out)),
            "expects operands of equal rank (broadcast batch dimensions "
            "explicitly), got lhs [1, 2, 3] and rhs [3, 4]");
  EXPECT_EQ(msg(matmul({2, 2, 3}, {5, 3, 4}, false, false, &out)),
            "expects equal batch dimensions, got lhs [2, 2, 3] and rhs "
            "[5, 3, 4]");
  EXPECT_EQ(msg(matmul({2, 3}, {4, 3}, false, false, &out)),
            "contracting dimensions differ: lhs [2, 3] has K = 3, rhs [4, 3] "
            "has K = 4");
  EXPECT_EQ(msg(matmul({2, 3}, {4, 3}, true, false, &out)),
            "contracting dimensions differ: lhs [2, 3] (transposed) has K = "
            "2, rhs [4, 3] has K = 4");
}

TEST(Shapes, Concat) {
  Dims out;
  ASSERT_TRUE(concat({{2, 3}, {2, 5}}, 1, &out));
  EXPECT_EQ(out, (Dims{2, 8}));
  ASSERT_TRUE(concat({{0, 3}, {4, 3}}, 0, &out));
  EXPECT_EQ(out, (Dims{4, 3}));
  EXPECT_EQ(msg(concat({}, 0, &out)), "expects at least one input");
  EXPECT_EQ(msg(concat({{2, 3}}, 2, &out)),
            "axis 2 is out of range for rank 2");
  EXPECT_EQ(msg(concat({{2, 3}, {2, 3}}, -1, &out)),
            "axis -1 is out of range for rank 2");
  EXPECT_EQ(msg(concat({{2, 3}, {2}}, 1, &out)),
            "input 1 has rank 1, expected 2");
  EXPECT_EQ(msg(concat({{2, 3}, {4, 3}}, 1, &out)),
            "input 1 [4, 3] differs from input 0 [2, 3] in dimension 0, "
            "which is not the axis");
  EXPECT_EQ(msg(concat({{INT64_MAX}, {1}}, 0, &out)),
            "the sizes along axis 0 overflow");
}

TEST(Shapes, Slice) {
  Dims out;
  // ceil((limit - start) / stride): 4 of [0, 7) by 2, 1 of [1, 2).
  ASSERT_TRUE(slice({7, 3}, {0, 1}, {7, 2}, {2, 1}, &out));
  EXPECT_EQ(out, (Dims{4, 1}));
  ASSERT_TRUE(slice({4}, {4}, {4}, {1}, &out));
  EXPECT_EQ(out, (Dims{0}));
  EXPECT_EQ(msg(slice({4, 4}, {0}, {1, 1}, {1, 1}, &out)),
            "start, limit and strides need 2 entries (the input rank), got "
            "1, 2 and 2");
  EXPECT_EQ(msg(slice({4}, {0}, {4}, {0}, &out)),
            "stride 0 in dimension 0 must be >= 1");
  EXPECT_EQ(msg(slice({4}, {-1}, {4}, {1}, &out)),
            "dimension 0 of size 4 cannot be sliced from -1 to 4 (needs 0 <= "
            "start <= limit <= size)");
  EXPECT_EQ(msg(slice({4}, {3}, {2}, {1}, &out)),
            "dimension 0 of size 4 cannot be sliced from 3 to 2 (needs 0 <= "
            "start <= limit <= size)");
  EXPECT_EQ(msg(slice({4}, {0}, {5}, {1}, &out)),
            "dimension 0 of size 4 cannot be sliced from 0 to 5 (needs 0 <= "
            "start <= limit <= size)");
  // No overflow in the count.
  ASSERT_TRUE(slice({INT64_MAX}, {0}, {INT64_MAX}, {INT64_MAX}, &out));
  EXPECT_EQ(out, (Dims{1}));
}

TEST(Shapes, Gather) {
  Dims out;
  ASSERT_TRUE(gather({10, 4}, {2, 3}, 0, &out));
  EXPECT_EQ(out, (Dims{2, 3, 4}));
  ASSERT_TRUE(gather({10, 4, 5}, {}, 1, &out));
  EXPECT_EQ(out, (Dims{10, 5}));
  EXPECT_EQ(msg(gather({10, 4}, {2}, 2, &out)),
            "axis 2 is out of range for rank 2");
  EXPECT_EQ(msg(gather({10, 4}, {2}, -1, &out)),
            "axis -1 is out of range for rank 2");
}

TEST(Shapes, ScatterAdd) {
  Dims out;
  ASSERT_TRUE(scatterAdd({2, 3, 4}, {2, 3}, 0, 10, &out));
  EXPECT_EQ(out, (Dims{10, 4}));
  ASSERT_TRUE(scatterAdd({5, 3, 2}, {3}, 1, 7, &out));
  EXPECT_EQ(out, (Dims{5, 7, 2}));
  ASSERT_TRUE(scatterAdd({5, 2}, {}, 1, 7, &out)); // a scalar index
  EXPECT_EQ(out, (Dims{5, 7, 2}));
  ASSERT_TRUE(scatterAdd({0, 4}, {0}, 0, 0, &out)); // nothing, into nothing
  EXPECT_EQ(out, (Dims{0, 4}));
  // The batch: in the indices, summed away (an embedding's gradient); in
  // the leading dims, kept; never the size.
  const int64_t B = kBatch;
  ASSERT_TRUE(scatterAdd({B, 5, 16}, {B, 5}, 0, 100, &out));
  EXPECT_EQ(out, (Dims{100, 16}));
  ASSERT_TRUE(scatterAdd({B, 3, 2}, {3}, 1, 7, &out));
  EXPECT_EQ(out, (Dims{B, 7, 2}));
  EXPECT_EQ(msg(scatterAdd({B, 4}, {B}, 0, B, &out)),
            "size -1 is not a static size >= 0");
  EXPECT_EQ(msg(scatterAdd({2, 4}, {3}, 0, 10, &out)),
            "updates dims 0..0 are [2], not the indices' shape [3]");
  EXPECT_EQ(msg(scatterAdd({2, 4}, {2}, 2, 10, &out)),
            "axis 2 and indices of rank 1 do not fit updates of rank 2 (axis "
            "+ rank(indices) <= rank(updates))");
  EXPECT_EQ(msg(scatterAdd({2, 4}, {2}, -1, 10, &out)),
            "axis -1 and indices of rank 1 do not fit updates of rank 2 (axis "
            "+ rank(indices) <= rank(updates))");
  EXPECT_EQ(msg(scatterAdd({2, 4}, {2}, 0, 0, &out)),
            "size 0 with indices: no index can be in range");
}

TEST(Shapes, Pad) {
  Dims out;
  ASSERT_TRUE(pad({2, 3}, {0, 1}, {1, 2}, &out));
  EXPECT_EQ(out, (Dims{3, 6}));
  EXPECT_EQ(msg(pad({2, 3}, {0}, {1, 2}, &out)),
            "low and high need 2 entries (the input rank), got 1 and 2");
  EXPECT_EQ(msg(pad({2, 3}, {0, -1}, {0, 0}, &out)),
            "padding of dimension 1 is negative (low -1, high 0)");
  EXPECT_EQ(msg(pad({2}, {INT64_MAX}, {0}, &out)),
            "padding of dimension 0 overflows (size 2, low "
            "9223372036854775807, high 0)");
}

TEST(Shapes, Conv2d) {
  Dims out;
  // ResNet stem: 224 -> (224 + 6 - 7) / 2 + 1 = 112.
  ASSERT_TRUE(conv2d({1, 3, 224, 224}, {64, 3, 7, 7}, {2, 2}, {3, 3, 3, 3},
                     {1, 1}, 1, &out));
  EXPECT_EQ(out, (Dims{1, 64, 112, 112}));
  // Grouped, dilated, asymmetric: H (9 + 1 - 5) / 1 + 1 = 6, W 8 - 3 + 1.
  ASSERT_TRUE(conv2d({2, 4, 9, 8}, {6, 2, 3, 3}, {1, 1}, {1, 0, 0, 0},
                     {2, 1}, 2, &out));
  EXPECT_EQ(out, (Dims{2, 6, 6, 6}));
  EXPECT_EQ(msg(conv2d({3, 8, 8}, {4, 3, 3, 3}, {1, 1}, {0, 0, 0, 0}, {1, 1},
                       1, &out)),
            "expects input [N, C, H, W] and weight [O, C/groups, KH, KW], "
            "got [3, 8, 8] and [4, 3, 3, 3]");
  EXPECT_EQ(msg(conv2d({1, 3, 8, 8}, {4, 3, 3, 3}, {1}, {0, 0, 0, 0}, {1, 1},
                       1, &out)),
            "expects strides and dilation [h, w] and padding [top, left, "
            "bottom, right], got [1], [1, 1] and [0, 0, 0, 0]");
  EXPECT_EQ(msg(conv2d({1, 3, 8, 8}, {4, 3, 3, 3}, {0, 1}, {0, 0, 0, 0},
                       {1, 1}, 1, &out)),
            "strides [0, 1] must be >= 1");
  EXPECT_EQ(msg(conv2d({1, 3, 8, 8}, {4, 3, 3, 3}, {1, 1}, {0, 0, 0, 0},
                       {1, 0}, 1, &out)),
            "dilation [1, 0] must be >= 1");
  EXPECT_EQ(msg(conv2d({1, 3, 8, 8}, {4, 3, 3, 3}, {1, 1}, {0, -1, 0, 0},
                       {1, 1}, 1, &out)),
            "padding [0, -1, 0, 0] must be >= 0");
  EXPECT_EQ(msg(conv2d({1, 4, 8, 8}, {6, 1, 3, 3}, {1, 1}, {0, 0, 0, 0},
                       {1, 1}, 3, &out)),
            "groups 3 must divide the input channels 4 and the output "
            "channels 6");
  EXPECT_EQ(msg(conv2d({1, 4, 8, 8}, {6, 1, 3, 3}, {1, 1}, {0, 0, 0, 0},
                       {1, 1}, 2, &out)),
            "weight [6, 1, 3, 3] expects 2 input channels (1 per group x 2 "
            "groups), input [1, 4, 8, 8] has 4");
  EXPECT_EQ(msg(conv2d({1, 3, 2, 2}, {4, 3, 3, 3}, {1, 1}, {0, 0, 0, 0},
                       {1, 1}, 1, &out)),
            "the kernel [3, 3] does not fit the padded input [1, 3, 2, 2]");
  // Attributes straight from a file: no overflow.
  EXPECT_EQ(msg(conv2d({1, 3, 8, 8}, {4, 3, 3, 3}, {1, 1}, {0, 0, 0, 0},
                       {INT64_MAX, 1}, 1, &out)),
            "the kernel [3, 3] does not fit the padded input [1, 3, 8, 8]");
}

TEST(Shapes, PooledSizeFollowsPyTorch) {
  // 7 -> kernel 3, stride 2: floor 3, ceil 3; 8 -> floor 3, ceil 4.
  EXPECT_EQ(pooledSize(7, 3, 2, 0, 0, 1, false), 3);
  EXPECT_EQ(pooledSize(7, 3, 2, 0, 0, 1, true), 3);
  EXPECT_EQ(pooledSize(8, 3, 2, 0, 0, 1, false), 3);
  EXPECT_EQ(pooledSize(8, 3, 2, 0, 0, 1, true), 4);
  // Ceil mode drops a window that would start in the trailing padding:
  // 5, kernel 2, stride 2, padding 1: floor 3, ceil 4 -> 3.
  EXPECT_EQ(pooledSize(5, 2, 2, 1, 1, 1, true), 3);
  EXPECT_EQ(pooledSize(6, 2, 2, 1, 1, 1, true), 4);
  // Dilation 2: the window spans 5.
  EXPECT_EQ(pooledSize(9, 3, 1, 0, 0, 2, false), 5);
  // Does not fit: 0.
  EXPECT_EQ(pooledSize(2, 3, 1, 0, 0, 1, false), 0);
  EXPECT_EQ(pooledSize(INT64_MAX, 1, 1, INT64_MAX, INT64_MAX, 1, false),
            INT64_MAX);
}

TEST(Shapes, Pool2d) {
  Dims out;
  // ResNet: 112, kernel 3, stride 2, padding 1 -> 56.
  ASSERT_TRUE(pool2d({1, 64, 112, 112}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1},
                     false, &out));
  EXPECT_EQ(out, (Dims{1, 64, 56, 56}));
  ASSERT_TRUE(pool2d({1, 2, 8, 8}, {3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, true,
                     &out));
  EXPECT_EQ(out, (Dims{1, 2, 4, 4}));
  // PyTorch bounds the padding by half the dilated kernel: kernel 2,
  // dilation 2 spans 3, so padding 1 is fine.
  ASSERT_TRUE(pool2d({1, 1, 6, 6}, {2, 2}, {1, 1}, {1, 1, 1, 1}, {2, 2},
                     false, &out));
  EXPECT_EQ(out, (Dims{1, 1, 6, 6}));
  EXPECT_EQ(msg(pool2d({2, 8, 8}, {2, 2}, {1, 1}, {0, 0, 0, 0}, {1, 1}, false,
                       &out)),
            "expects input [N, C, H, W], got [2, 8, 8]");
  EXPECT_EQ(msg(pool2d({1, 1, 8, 8}, {2}, {1, 1}, {0, 0, 0, 0}, {1, 1}, false,
                       &out)),
            "kernel [2] must be [h, w] with sizes >= 1");
  EXPECT_EQ(msg(pool2d({1, 1, 8, 8}, {2, 0}, {1, 1}, {0, 0, 0, 0}, {1, 1},
                       false, &out)),
            "kernel [2, 0] must be [h, w] with sizes >= 1");
  EXPECT_EQ(msg(pool2d({1, 1, 8, 8}, {2, 2}, {0, 1}, {0, 0, 0, 0}, {1, 1},
                       false, &out)),
            "strides [0, 1] must be >= 1");
  EXPECT_EQ(msg(pool2d({1, 1, 8, 8}, {2, 2}, {1, 1}, {2, 2, 2, 2}, {1, 1},
                       false, &out)),
            "padding [2, 2, 2, 2] must be at most half the kernel [2, 2]");
  EXPECT_EQ(msg(pool2d({1, 1, 8, 8}, {2, 2}, {1, 1}, {2, 0, 0, 0}, {2, 2},
                       false, &out)),
            "padding [2, 0, 0, 0] must be at most half the dilated kernel "
            "[2, 2] (dilation [2, 2])");
  EXPECT_EQ(msg(pool2d({1, 4, 2, 2}, {3, 3}, {1, 1}, {0, 0, 0, 0}, {1, 1},
                       false, &out)),
            "the window [3, 3] does not fit the padded input [1, 4, 2, 2]");
}

// The drift the library ended: the verifier used to take axes in
// [-rank, rank) where the dialect (and now the rule) takes [0, rank).
TEST(Shapes, VerifierRefusesANegativeAxisLikeTheDialect) {
  codegen::Plan p;
  auto buf = [&](const char *name, rt::Shape shape) {
    codegen::PlanBuffer b;
    b.name = name;
    b.dtype = rt::DType::F32;
    b.shape = std::move(shape);
    p.buffers.push_back(b);
    return uint32_t(p.buffers.size() - 1);
  };
  uint32_t a = buf("a", {2, 3}), b = buf("b", {2, 5}), c = buf("c", {2, 8});
  codegen::PlanStep &s =
      test::addStep(p, rt::OpId::Concat, {a, b}, c, "model.py:1");
  p.entry = "cat";
  p.inputs = {{"a", a}, {"b", b}};
  p.outputs = {{"c", c}};
  ASSERT_TRUE(codegen::planMemory(p));
  auto verify = [&](int64_t axis) {
    test::eraseAttr(s, "axis");
    test::setInt(s, "axis", axis);
    std::vector<uint8_t> bytes;
    Status w = codegen::writeArtifactToBytes(p, &bytes);
    if (!w)
      return w;
    std::unique_ptr<rt::Model> model;
    return rt::Model::loadMemory(bytes.data(), bytes.size(), "cat.mcpk",
                                 &model);
  };
  // The same shape as the rule gives.
  Dims expect;
  ASSERT_TRUE(concat({{2, 3}, {2, 5}}, 1, &expect));
  EXPECT_EQ(expect, (Dims{2, 8}));
  EXPECT_TRUE(verify(1)) << msg(verify(1));
  Status st = verify(-1);
  ASSERT_FALSE(st);
  // The writer runs the verifier on what it writes.
  EXPECT_NE(st.message().find("step 0 (mc.concat at model.py:1): "
                              "output buffer 2 'c' f32[2, 8]: axis -1 is out "
                              "of range for rank 2"),
            std::string::npos)
      << st.message();
}

} // namespace

namespace {

// The batch (kBatch, the dialect's `?`): rules pass it through, broadcast
// into it from 1, and refuse what would need its size, in words that name
// it.
TEST(Shapes, TheBatchPassesThroughAndIsRefusedWhereItsSizeMatters) {
  const int64_t B = kBatch;
  Dims out;
  EXPECT_EQ(shapeStr({B, 4}), "[?, 4]");
  EXPECT_EQ(str({B, 4}), "[-1, 4]"); // attributes are numbers
  EXPECT_TRUE(hasBatch({2, B}));
  EXPECT_FALSE(hasBatch({2, 3}));
  EXPECT_EQ(resolve({B, 4, B}, 7), (Dims{7, 4, 7}));
  // Passes through.
  ASSERT_TRUE(matmul({B, 8}, {8, 3}, false, false, &out));
  EXPECT_EQ(out, (Dims{B, 3}));
  ASSERT_TRUE(matmul({B, 8}, {B, 3}, true, false, &out)); // a weight gradient
  EXPECT_EQ(out, (Dims{8, 3}));
  ASSERT_TRUE(reduce({B, 8}, {0}, false, &out));
  EXPECT_EQ(out, (Dims{8}));
  ASSERT_TRUE(transpose({B, 8}, {1, 0}, &out));
  EXPECT_EQ(out, (Dims{8, B}));
  ASSERT_TRUE(conv2d({B, 4, 9, 9}, {8, 2, 3, 3}, {2, 2}, {1, 1, 0, 0},
                     {1, 1}, 2, &out));
  EXPECT_EQ(out, (Dims{B, 8, 4, 4}));
  ASSERT_TRUE(pool2d({B, 4, 9, 9}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1},
                     false, &out));
  EXPECT_EQ(out, (Dims{B, 4, 5, 5}));
  ASSERT_TRUE(gather({100, 16}, {B, 5}, 0, &out)); // an embedding
  EXPECT_EQ(out, (Dims{B, 5, 16}));
  ASSERT_TRUE(slice({B, 8}, {0, 2}, {B, 8}, {1, 2}, &out));
  EXPECT_EQ(out, (Dims{B, 3}));
  ASSERT_TRUE(pad({B, 8}, {0, 1}, {0, 1}, &out));
  EXPECT_EQ(out, (Dims{B, 10}));
  ASSERT_TRUE(concat({{B, 2}, {B, 3}}, 1, &out));
  EXPECT_EQ(out, (Dims{B, 5}));
  EXPECT_TRUE(broadcastInDim({1, 8}, {0, 1}, {B, 8}));
  EXPECT_TRUE(broadcastInDim({}, {}, {B, 8}));
  EXPECT_TRUE(reshape({B, 2, 4}, {B, 8}));
  // Multiples of the batch (-c): a [B, S, E] -> [B * S, E] flatten and back.
  EXPECT_EQ(shapeStr({-8, 64}), "[8*?, 64]");
  EXPECT_EQ(resolve({-8, 64}, 3), (Dims{24, 64}));
  EXPECT_TRUE(reshape({B, 8, 64}, {-8, 64}));
  EXPECT_TRUE(reshape({-8, 64}, {B, 8, 64}));
  EXPECT_EQ(msg(reshape({B, 8, 64}, {-4, 64})),
            "cannot reshape [?, 8, 64] to [4*?, 64]: the element counts "
            "differ");
  ASSERT_TRUE(matmul({-8, 64}, {64, 32}, false, false, &out));
  EXPECT_EQ(out, (Dims{-8, 32}));
  ASSERT_TRUE(slice({8, -4, 192}, {0, 0, 64}, {8, -4, 128}, {1, 1, 1}, &out));
  EXPECT_EQ(out, (Dims{8, -4, 64}));
  // Resolved (at run time), a limit of -c still takes the whole dim.
  ASSERT_TRUE(slice({8, 12, 192}, {0, 0, 64}, {8, -4, 128}, {1, 1, 1}, &out));
  EXPECT_EQ(out, (Dims{8, 12, 64}));
  EXPECT_FALSE(slice({8, -4, 192}, {0, 0, 0}, {8, -1, 192}, {1, 1, 1}, &out));
  // Refused.
  EXPECT_EQ(msg(broadcastInDim({8}, {0}, {B})),
            "input dimension 0 of size 8 cannot broadcast to result "
            "dimension 0 of size ?");
  EXPECT_FALSE(matmul({B, 8}, {4, 3}, false, false, &out));
  EXPECT_FALSE(matmul({B, 8}, {8, 3}, true, false, &out)); // ? against 8
  EXPECT_EQ(msg(reshape({B, 8}, {8, 8})),
            "cannot reshape [?, 8] to [8, 8]: the element counts differ");
  EXPECT_EQ(msg(reshape({B, 8}, {B, 4})),
            "cannot reshape [?, 8] to [?, 4]: the element counts differ");
  EXPECT_EQ(msg(reshape({B, 8}, {B, B})),
            "cannot reshape [?, 8] to [?, ?]: a shape holds the batch (?) at "
            "most once");
  EXPECT_EQ(msg(concat({{B, 2}, {B, 2}}, 0, &out)),
            "the concatenation axis 0 of input 0 cannot be the batch (?): its "
            "size is only known at run time");
  EXPECT_EQ(msg(slice({B, 8}, {1, 0}, {B, 8}, {1, 1}, &out)),
            "dimension 0 of size [?] is sliced from 1 to [?] by 1; the batch "
            "(?) can only be taken whole (start 0, limit -1, stride 1)");
  EXPECT_EQ(msg(slice({B, 8}, {0, 0}, {4, 8}, {1, 1}, &out)),
            "dimension 0 of size [?] is sliced from 0 to [4] by 1; the batch "
            "(?) can only be taken whole (start 0, limit -1, stride 1)");
  EXPECT_EQ(msg(pad({B, 8}, {1, 0}, {0, 0}, &out)),
            "dimension 0 is the batch (?), which cannot be padded");
  EXPECT_EQ(msg(conv2d({1, B, 9, 9}, {8, 2, 3, 3}, {1, 1}, {0, 0, 0, 0},
                       {1, 1}, 1, &out)),
            "input channels ? and weight input channels 2 must both be the "
            "batch or both be static");
  EXPECT_EQ(msg(conv2d({B, 2, 9, 9}, {B, 2, 3, 3}, {1, 1}, {0, 0, 0, 0},
                       {1, 1}, 1, &out)),
            "weight dimension 0 cannot be the batch (?): its size is only "
            "known at run time");
  EXPECT_EQ(msg(conv2d({1, 2, B, 9}, {8, 2, 3, 3}, {1, 1}, {0, 0, 0, 0},
                       {1, 1}, 1, &out)),
            "input dimension 2 cannot be the batch (?): its size is only "
            "known at run time");
  // A weight gradient: the batch in the channels (grouped: c times it).
  ASSERT_TRUE(conv2d({3, B, 9, 9}, {8, B, 7, 7}, {1, 1}, {0, 0, 0, 0},
                     {1, 1}, 1, &out));
  EXPECT_EQ(out, (Dims{3, 8, 3, 3}));
  ASSERT_TRUE(conv2d({3, -2, 9, 9}, {8, B, 7, 7}, {1, 1}, {0, 0, 0, 0},
                     {1, 1}, 2, &out));
  EXPECT_EQ(out, (Dims{3, 8, 3, 3}));
  EXPECT_EQ(msg(pool2d({1, 4, B, 9}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1},
                       false, &out)),
            "input dimension 2 cannot be the batch (?): its size is only "
            "known at run time");
}

} // namespace
// A dynamic batch: dims of c * batch resolve at a batch and print as "?".
TEST(Shapes, AtBatchAndSymbolicStr) {
  EXPECT_EQ(atBatch({64, 8, 128}, {1, 0, 2}, 7), (Dims{7, 8, 14}));
  EXPECT_EQ(atBatch({4, 8}, {}, 7), (Dims{4, 8})); // static
  EXPECT_EQ(symbolicStr({64, 784}, {1, 0}), "[?, 784]");
  EXPECT_EQ(symbolicStr({128, 3}, {2, 0}), "[2*?, 3]");
  EXPECT_EQ(symbolicStr({4, 8}, {}), "[4, 8]");
  EXPECT_EQ(symbolicStr({}, {}), "[]");
}

// The element-count limit of one tensor (rt::kMaxTensorElements, 2^36):
// the count at and under the limit, empty shapes, and refusals past it,
// past int64, for negative dims, and for empty shapes whose other dims
// multiply past the limit.
TEST(Shapes, ElementCountLimit) {
  int64_t n = -1;
  ASSERT_TRUE(rt::checkElementCount({}, &n));
  EXPECT_EQ(n, 1);
  ASSERT_TRUE(rt::checkElementCount({1 << 16, 1 << 20}, &n));
  EXPECT_EQ(n, rt::kMaxTensorElements);
  ASSERT_TRUE(rt::checkElementCount({1 << 20, 0, 1 << 16}, &n));
  EXPECT_EQ(n, 0);
  // Empty, but the other dims multiply past the limit (they would overflow
  // numElements before the 0 is reached): refused. The npy fuzz target
  // found [5, 78797596, 777738888888983, 0, ...] accepted here and then
  // overflowing in encodeNpy.
  rt::Status emptyHuge = rt::checkElementCount({int64_t(1) << 62, 4, 0});
  ASSERT_FALSE(emptyHuge);
  EXPECT_EQ(emptyHuge.message(),
            "shape [4611686018427387904, 4, 0] is too large: its nonzero "
            "dims multiply to more than 68719476736 (2^36), the limit for "
            "one tensor");
  EXPECT_FALSE(rt::checkElementCount({0, int64_t(1) << 62, 4}));
  rt::Status over = rt::checkElementCount({1 << 16, (1 << 20) + 1});
  ASSERT_FALSE(over);
  EXPECT_EQ(over.message(), "shape [65536, 1048577] has more than "
                            "68719476736 (2^36) elements, the limit for one "
                            "tensor");
  // 2^62 x 4 wraps to 0 in int64: still refused.
  EXPECT_FALSE(rt::checkElementCount({int64_t(1) << 62, 4}));
  EXPECT_FALSE(rt::checkElementCount({INT64_MAX, INT64_MAX}));
  rt::Status negative = rt::checkElementCount({2, -3});
  ASSERT_FALSE(negative);
  EXPECT_EQ(negative.message(), "shape [2, -3] has a negative dimension");
}

// Strided views (applyView, schema 2.6's views in fused regions): checked
// against the ops done for real. A "tensor" of element offsets goes through
// the same transposes, reshapes and slices by copying; where applyView
// says the result is a view, enumerating the view's factors must give the
// copied offsets, element for element.
namespace views {

struct Ref {
  Dims shape;
  std::vector<int64_t> data; // the input's element offsets
};

Dims stridesOf(const Dims &shape) {
  Dims s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    s[d - 1] = s[d] * shape[d];
  return s;
}

/// The multi-index of flat element i of `shape`.
Dims unflatten(int64_t i, const Dims &shape) {
  Dims idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = i % shape[d];
    i /= shape[d];
  }
  return idx;
}

Ref iota(const Dims &shape) {
  Ref r{shape, {}};
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  for (int64_t i = 0; i < n; ++i)
    r.data.push_back(i);
  return r;
}

Ref transposed(const Ref &a, const Dims &perm) {
  Ref r;
  for (int64_t p : perm)
    r.shape.push_back(a.shape[size_t(p)]);
  Dims in = stridesOf(a.shape);
  for (size_t i = 0; i < a.data.size(); ++i) {
    Dims idx = unflatten(int64_t(i), r.shape);
    int64_t src = 0;
    for (size_t d = 0; d < perm.size(); ++d)
      src += idx[d] * in[size_t(perm[d])];
    r.data.push_back(a.data[size_t(src)]);
  }
  return r;
}

Ref sliced(const Ref &a, const Dims &start, const Dims &step,
           const Dims &result) {
  Ref r{result, {}};
  Dims in = stridesOf(a.shape);
  int64_t n = 1;
  for (int64_t d : result)
    n *= d;
  for (int64_t i = 0; i < n; ++i) {
    Dims idx = unflatten(i, result);
    int64_t src = 0;
    for (size_t d = 0; d < idx.size(); ++d)
      src += (start[d] + idx[d] * step[d]) * in[d];
    r.data.push_back(a.data[size_t(src)]);
  }
  return r;
}

/// The offsets the view enumerates, row-major over its factors.
std::vector<int64_t> enumerate(const StridedView &v) {
  Dims sizes, strides;
  v.flatten(&sizes, &strides);
  int64_t n = 1;
  for (int64_t s : sizes)
    n *= s;
  std::vector<int64_t> out;
  for (int64_t i = 0; i < n; ++i) {
    Dims idx = unflatten(i, sizes);
    int64_t off = v.offset;
    for (size_t d = 0; d < idx.size(); ++d)
      off += idx[d] * strides[d];
    out.push_back(off);
  }
  return out;
}

rt::OpAttrs permutation(const Dims &p) {
  return rt::OpAttrs{rt::OpAttr::list("permutation", p)};
}
rt::OpAttrs slicing(const Dims &start, const Dims &limit, const Dims &step) {
  return rt::OpAttrs{rt::OpAttr::list("start", start),
                     rt::OpAttr::list("limit", limit),
                     rt::OpAttr::list("strides", step)};
}

} // namespace views

TEST(Shapes, ViewOfMultiheadAttentionsK) {
  using namespace views;
  // k of a packed [S=8, B=2, 3 * D] projection, D = 8 in 2 heads of 4:
  // slice, reshape to [S, B * H, 4], transpose to [B * H, S, 4].
  StridedView v = contiguousView({8, 2, 24});
  ASSERT_EQ(msg(applyView(rt::OpId::Slice,
                          slicing({0, 0, 8}, {8, 2, 16}, {1, 1, 1}),
                          {8, 2, 8}, &v)),
            "ok");
  ASSERT_EQ(msg(applyView(rt::OpId::Reshape, {}, {8, 4, 4}, &v)), "ok");
  ASSERT_EQ(msg(applyView(rt::OpId::Transpose, permutation({1, 0, 2}),
                          {4, 8, 4}, &v)),
            "ok");
  EXPECT_EQ(v.shape(), (Dims{4, 8, 4}));
  Dims sizes, strides;
  v.flatten(&sizes, &strides);
  // [b, h, s, d]: b steps 24, h 4, s 48, d 1; 8 = k's offset.
  EXPECT_EQ(sizes, (Dims{2, 2, 8, 4}));
  EXPECT_EQ(strides, (Dims{24, 4, 48, 1}));
  EXPECT_EQ(v.offset, 8);
  Ref r = iota({8, 2, 24});
  r = sliced(r, {0, 0, 8}, {1, 1, 1}, {8, 2, 8});
  r.shape = {8, 4, 4};
  r = transposed(r, {1, 0, 2});
  EXPECT_EQ(enumerate(v), r.data);
}

TEST(Shapes, ViewRefusesWhatNoStridesDescribe) {
  using namespace views;
  // [4, 2] transposed to [2, 4] and flattened: one dim of two factors
  // (strides 1 and 2); a slice inside it is no strided view.
  StridedView v = contiguousView({4, 2});
  ASSERT_TRUE(applyView(rt::OpId::Transpose, permutation({1, 0}), {2, 4}, &v));
  ASSERT_TRUE(applyView(rt::OpId::Reshape, {}, {8}, &v));
  EXPECT_EQ(msg(applyView(rt::OpId::Slice, slicing({1}, {4}, {1}), {3}, &v)),
            "slicing dim 0 of [8], a merge of strided dims: no view");
  // A slice of 3 of 6, seen as [2, 3]... reshaped to [3, 2]: the factor 3
  // (stride 1) split by 2.
  StridedView w = contiguousView({6});
  ASSERT_TRUE(applyView(rt::OpId::Slice, slicing({0}, {6}, {2}), {3}, &w));
  StridedView u = contiguousView({2, 3});
  ASSERT_TRUE(applyView(rt::OpId::Transpose, permutation({1, 0}), {3, 2}, &u));
  EXPECT_EQ(msg(applyView(rt::OpId::Reshape, {}, {2, 3}, &u)),
            "reshaping [3, 2] to [2, 3] splits a strided dim of 3 by 2: no "
            "view");
  // Attributes that do not give the result, and a slice out of bounds.
  StridedView x = contiguousView({2, 3});
  EXPECT_EQ(msg(applyView(rt::OpId::Transpose, permutation({1, 0}), {2, 3},
                          &x)),
            "transpose of [2, 3] gives [3, 2], not [2, 3]");
  EXPECT_EQ(msg(applyView(rt::OpId::Slice, slicing({1, 0}, {3, 3}, {1, 1}),
                          {2, 3}, &x)),
            "slice [1, step 1] of 2 elements is outside dim 0 of [2, 3]");
  EXPECT_EQ(msg(applyView(rt::OpId::Add, {}, {2, 3}, &x)), "add is not a view");
  // One element starting at the dim's end (step 2 made the bound's
  // arithmetic round to in range).
  StridedView y = contiguousView({3});
  EXPECT_EQ(msg(applyView(rt::OpId::Slice, slicing({3}, {4}, {2}), {1}, &y)),
            "slice [3, step 2] of 1 elements is outside dim 0 of [3]");
}

TEST(Shapes, RandomViewChainsMatchTheOpsDoneByCopying) {
  using namespace views;
  std::mt19937 gen(11);
  auto pick = [&](int64_t n) {
    return int64_t(std::uniform_int_distribution<int64_t>(0, n - 1)(gen));
  };
  int viewed = 0, refused = 0;
  for (int trial = 0; trial < 400; ++trial) {
    Dims shape;
    size_t rank = size_t(1 + pick(4));
    for (size_t d = 0; d < rank; ++d)
      shape.push_back(1 + pick(4));
    Ref ref = iota(shape);
    StridedView v = contiguousView(shape);
    bool ok = true;
    for (int step = 0; step < 4 && ok; ++step) {
      int kind = int(pick(3));
      if (kind == 0) { // transpose
        Dims perm(ref.shape.size());
        for (size_t i = 0; i < perm.size(); ++i)
          perm[i] = int64_t(i);
        std::shuffle(perm.begin(), perm.end(), gen);
        ref = transposed(ref, perm);
        ok = bool(applyView(rt::OpId::Transpose, permutation(perm), ref.shape,
                            &v));
      } else if (kind == 1) { // reshape: regroup the elements
        Dims to;
        int64_t n = int64_t(ref.data.size());
        while (n > 1) {
          int64_t f = 1 + pick(n);
          while (n % f)
            --f;
          to.push_back(f);
          n /= f;
        }
        if (to.empty())
          to.push_back(1);
        std::shuffle(to.begin(), to.end(), gen);
        ref.shape = to;
        ok = bool(applyView(rt::OpId::Reshape, {}, to, &v));
      } else { // slice
        Dims start, limit, st, result;
        for (int64_t n : ref.shape) {
          int64_t b = pick(n), s = 1 + pick(2);
          int64_t len = 1 + pick((n - b + s - 1) / s);
          start.push_back(b);
          st.push_back(s);
          limit.push_back(b + (len - 1) * s + 1);
          result.push_back(len);
        }
        ref = sliced(ref, start, st, result);
        ok = bool(applyView(rt::OpId::Slice, slicing(start, limit, st), result,
                            &v));
      }
    }
    if (!ok) {
      ++refused;
      continue;
    }
    ++viewed;
    ASSERT_EQ(v.shape(), ref.shape) << "trial " << trial;
    ASSERT_EQ(enumerate(v), ref.data) << "trial " << trial;
  }
  // Both outcomes are exercised.
  EXPECT_GT(viewed, 200);
  EXPECT_GT(refused, 10);
}
