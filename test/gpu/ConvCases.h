// The convolutions the CUDA device's cuDNN tests run (CudnnConvTest.cpp,
// on a GPU) and plan without one (CudnnPlanTest.cpp).
#ifndef MODELC_TEST_GPU_CONVCASES_H
#define MODELC_TEST_GPU_CONVCASES_H

#include "modelc/kernels.h"
#include "modelc/shapes.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace mc::test {

struct ConvCase {
  const char *name;
  rt::Shape x, w;
  std::vector<int64_t> strides, padding, dilation;
  int64_t groups;
};

inline const ConvCase kCases[] = {
    {"3x3 pad 1", {2, 8, 16, 16}, {16, 8, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
    {"stride 2, asymmetric padding", {2, 6, 15, 13}, {8, 6, 3, 3}, {2, 2},
     {1, 0, 2, 1}, {1, 1}, 1},
    {"dilation 2", {1, 4, 20, 20}, {8, 4, 3, 3}, {1, 1}, {2, 2, 2, 2}, {2, 2}, 1},
    {"groups 4", {2, 16, 12, 12}, {32, 4, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 4},
    {"depthwise stride 2", {2, 8, 10, 10}, {8, 1, 3, 3}, {2, 2}, {1, 1, 1, 1},
     {1, 1}, 8},
    {"1x1", {4, 32, 7, 7}, {64, 32, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
    {"7x7 stride 2 pad 3 (a ResNet stem)", {1, 3, 32, 32}, {8, 3, 7, 7}, {2, 2},
     {3, 3, 3, 3}, {1, 1}, 1},
};

inline rt::OpAttrs convAttrs(const ConvCase &c) {
  return {rt::OpAttr::list("strides", c.strides),
          rt::OpAttr::list("padding", c.padding),
          rt::OpAttr::list("dilation", c.dilation),
          rt::OpAttr::integer("groups", c.groups)};
}

inline rt::Shape outShape(const ConvCase &c) {
  rt::Shape out;
  EXPECT_TRUE(rt::shapes::conv2d(c.x, c.w, c.strides, c.padding, c.dilation,
                                 c.groups, &out));
  return out;
}

inline rt::Conv2dParams convParams(const ConvCase &c) {
  rt::Conv2dParams p;
  p.strideH = c.strides[0], p.strideW = c.strides[1];
  p.padTop = c.padding[0], p.padLeft = c.padding[1];
  p.padBottom = c.padding[2], p.padRight = c.padding[3];
  p.dilationH = c.dilation[0], p.dilationW = c.dilation[1];
  p.groups = c.groups;
  return p;
}

} // namespace mc::test

#endif // MODELC_TEST_GPU_CONVCASES_H
