// The dialect's shape inference (ir/ShapeInference) is a thin adaptor over
// the shape library (modelc/shapes.h): the same shapes come out, and the
// same messages, so `modelc-opt`, the artifact verifier, the kernels and
// the eager frontend cannot drift apart again.
#include "ir/ShapeInference.h"
#include "modelc/shapes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/MLIRContext.h"

#include <functional>
#include <gtest/gtest.h>

namespace shapes = mc::rt::shapes;

namespace {

/// An MLIR context whose errors land in `last`.
struct Diagnostics {
  mlir::MLIRContext ctx;
  std::string last;
  mlir::ScopedDiagnosticHandler handler{&ctx, [this](mlir::Diagnostic &d) {
                                          last = d.str();
                                          return mlir::success();
                                        }};
  std::function<mlir::InFlightDiagnostic()> emit = [this] {
    return mlir::emitError(mlir::UnknownLoc::get(&ctx));
  };
};

shapes::Dims dims(const mlir::FailureOr<llvm::SmallVector<int64_t>> &r) {
  return shapes::Dims(r->begin(), r->end());
}

TEST(ShapeRules, DialectAndLibraryAgreeOnConcat) {
  Diagnostics d;
  llvm::SmallVector<llvm::ArrayRef<int64_t>> in;
  std::vector<int64_t> a{2, 3}, b{2, 5};
  in.push_back(a);
  in.push_back(b);
  shapes::Dims lib;
  ASSERT_TRUE(shapes::concat({a, b}, 1, &lib));
  auto ir = mc::inferConcatShape(in, 1, d.emit);
  ASSERT_TRUE(succeeded(ir));
  EXPECT_EQ(dims(ir), lib);
  EXPECT_EQ(lib, (shapes::Dims{2, 8}));
  // A negative axis: refused by both, in the same words.
  mc::rt::Status s = shapes::concat({a, b}, -1, &lib);
  ASSERT_FALSE(s);
  EXPECT_TRUE(failed(mc::inferConcatShape(in, -1, d.emit)));
  EXPECT_EQ(d.last, s.message());
  EXPECT_EQ(d.last, "axis -1 is out of range for rank 2");
}

TEST(ShapeRules, DialectAndLibraryAgreeOnConvAndPool) {
  Diagnostics d;
  std::vector<int64_t> x{1, 4, 9, 9}, w{8, 2, 3, 3};
  shapes::Dims lib;
  ASSERT_TRUE(shapes::conv2d(x, w, {2, 2}, {1, 1, 0, 0}, {1, 1}, 2, &lib));
  auto ir = mc::inferConv2dShape(x, w, {2, 2}, {1, 1, 0, 0}, {1, 1}, 2, false,
                                 d.emit);
  ASSERT_TRUE(succeeded(ir));
  EXPECT_EQ(dims(ir), lib);
  EXPECT_EQ(lib, (shapes::Dims{1, 8, 4, 4})); // as test/ir/ops.mlir
  // Pooling in ceil mode: 8 -> kernel 3, stride 2: 4 (floor would be 3).
  std::vector<int64_t> p{1, 2, 8, 8};
  ASSERT_TRUE(
      shapes::pool2d(p, {3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, true, &lib));
  ir = mc::inferPool2dShape(p, {3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, true,
                            false, d.emit);
  ASSERT_TRUE(succeeded(ir));
  EXPECT_EQ(dims(ir), lib);
  EXPECT_EQ(lib, (shapes::Dims{1, 2, 4, 4}));
  // An error: the same message.
  mc::rt::Status s = shapes::conv2d(x, w, {1, 1}, {0, 0, 0, 0}, {1, 1}, 3, &lib);
  ASSERT_FALSE(s);
  EXPECT_TRUE(failed(mc::inferConv2dShape(x, w, {1, 1}, {0, 0, 0, 0}, {1, 1}, 3,
                                          false, d.emit)));
  EXPECT_EQ(d.last, s.message());
}

TEST(ShapeRules, ChannelsLastIsNchwWithTheChannelsLast) {
  Diagnostics d;
  shapes::Dims lib;
  // [1, 4, 9, 9] NCHW is [1, 9, 9, 4] NHWC; the result [1, 8, 4, 4] is
  // [1, 4, 4, 8].
  std::vector<int64_t> x{1, 9, 9, 4}, w{8, 2, 3, 3};
  ASSERT_TRUE(shapes::conv2d(x, w, {2, 2}, {1, 1, 0, 0}, {1, 1}, 2, &lib,
                             /*channelsLast=*/true));
  EXPECT_EQ(lib, (shapes::Dims{1, 4, 4, 8}));
  auto ir =
      mc::inferConv2dShape(x, w, {2, 2}, {1, 1, 0, 0}, {1, 1}, 2, true, d.emit);
  ASSERT_TRUE(succeeded(ir));
  EXPECT_EQ(dims(ir), lib);
  ASSERT_TRUE(shapes::pool2d({1, 8, 8, 2}, {3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1},
                             true, &lib, true));
  EXPECT_EQ(lib, (shapes::Dims{1, 4, 4, 2}));
  // A batch-scaled N stays first.
  ASSERT_TRUE(shapes::pool2d({-1, 8, 8, 2}, {2, 2}, {2, 2}, {0, 0, 0, 0},
                             {1, 1}, false, &lib, true));
  EXPECT_EQ(lib, (shapes::Dims{-1, 4, 4, 2}));
  // Errors name the layout: 3 channels (last) do not split into 2 groups.
  mc::rt::Status s = shapes::conv2d({1, 9, 9, 3}, w, {1, 1}, {0, 0, 0, 0},
                                    {1, 1}, 2, &lib, true);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("the channels_last input [1, 9, 9, 3] read as "
                             "NCHW"),
            std::string::npos)
      << s.message();
  EXPECT_TRUE(failed(mc::inferConv2dShape({1, 9, 9, 3}, w, {1, 1}, {0, 0, 0, 0},
                                          {1, 1}, 2, true, d.emit)));
  EXPECT_EQ(d.last, s.message());
}

TEST(ShapeRules, DialectAndLibraryAgreeOnMatmulAndBroadcast) {
  Diagnostics d;
  shapes::Dims lib;
  ASSERT_TRUE(shapes::matmul({5, 3, 2}, {5, 3, 4}, true, false, &lib));
  auto ir = mc::inferMatmulShape({5, 3, 2}, {5, 3, 4}, true, false, d.emit);
  ASSERT_TRUE(succeeded(ir));
  EXPECT_EQ(dims(ir), lib);
  EXPECT_EQ(lib, (shapes::Dims{5, 2, 4}));
  mc::rt::Status s = shapes::broadcastInDim({2}, {1}, {2, 3});
  ASSERT_FALSE(s);
  EXPECT_TRUE(failed(mc::verifyBroadcastInDim({2}, {1}, {2, 3}, d.emit)));
  EXPECT_EQ(d.last, s.message());
}

} // namespace
