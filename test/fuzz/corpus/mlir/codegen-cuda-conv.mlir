0module {
  func.func @forward(%x: tensor<1x4x8x8xbf16> {mc.name = "x"}, %w: tensor<4x4x3x3xbf16> {mc.name = "w"}, %b: tensor<4xbf16> {mc.name = "b"}) -> (tensor<1x4x8x8xbf16> {mc.name = "y"}) {
    %0 = mc.conv2d %x, %w, strides = [1, 1], padding = [1, 1, 1, 1], dilation = [1, 1], groups = 1 : (tensor<1x4x8x8xbf16>, tensor<4x4x3x3xbf16>) -> tensor<1x4x8x8xbf16>
    %1 = mc.broadcast_in_dim %b, dims = [1] : (tensor<4xbf16>) -> tensor<1x4x8x8xbf16>
    %2 = mc.add %0, %1 : tensor<1x4x8x8xbf16>
    %3 = mc.relu %2 : tensor<1x4x8x8xbf16>
    return %3 : tensor<1x4x8x8xbf16>
  }
}
