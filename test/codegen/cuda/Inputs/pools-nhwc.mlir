// Pooling over NHWC activations (channels_last, as mc-channels-last leaves
// the pools after a convolution): H 9, W 7, C 5, so that a swapped H and W
// or a channel read as a pixel reads the wrong element; a dynamic batch.
module {
  func.func @forward(%x: tensor<?x9x7x5xf32> {mc.name = "x"}, %h: tensor<?x9x7x5xbf16> {mc.name = "h"}, %g: tensor<?x9x7x5xf16> {mc.name = "g"})
      -> (tensor<?x5x4x5xf32> {mc.name = "max"}, tensor<?x9x7x5xf32> {mc.name = "avg_pad"},
          tensor<?x5x4x5xf32> {mc.name = "avg_ceil"}, tensor<?x5x3x5xf32> {mc.name = "max_dilated"},
          tensor<?x5x4x5xbf16> {mc.name = "max_bf16"}, tensor<?x9x7x5xf16> {mc.name = "avg_f16"})
      attributes {mc.batch = array<i64: 1, 8, 8>} {
    %0 = mc.max_pool2d %x, kernel = [3, 3], strides = [2, 2], padding = [1, 1, 1, 1], dilation = [1, 1] channels_last : (tensor<?x9x7x5xf32>) -> tensor<?x5x4x5xf32>
    %1 = mc.avg_pool2d %x, kernel = [3, 3], strides = [1, 1], padding = [1, 1, 1, 1], dilation = [1, 1] count_include_pad channels_last : (tensor<?x9x7x5xf32>) -> tensor<?x9x7x5xf32>
    %2 = mc.avg_pool2d %x, kernel = [2, 2], strides = [2, 2], padding = [0, 0, 0, 0], dilation = [1, 1] ceil_mode channels_last : (tensor<?x9x7x5xf32>) -> tensor<?x5x4x5xf32>
    %3 = mc.max_pool2d %x, kernel = [2, 2], strides = [2, 2], padding = [1, 0, 1, 0], dilation = [2, 2] channels_last : (tensor<?x9x7x5xf32>) -> tensor<?x5x3x5xf32>
    %4 = mc.max_pool2d %h, kernel = [3, 3], strides = [2, 2], padding = [1, 1, 1, 1], dilation = [1, 1] channels_last : (tensor<?x9x7x5xbf16>) -> tensor<?x5x4x5xbf16>
    %5 = mc.avg_pool2d %g, kernel = [3, 3], strides = [1, 1], padding = [1, 1, 1, 1], dilation = [1, 1] channels_last : (tensor<?x9x7x5xf16>) -> tensor<?x9x7x5xf16>
    return %0, %1, %2, %3, %4, %5 : tensor<?x5x4x5xf32>, tensor<?x9x7x5xf32>, tensor<?x5x4x5xf32>, tensor<?x5x3x5xf32>, tensor<?x5x4x5xbf16>, tensor<?x9x7x5xf16>
  }
}
