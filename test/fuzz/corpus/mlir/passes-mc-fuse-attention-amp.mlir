0func.func @forward(%q: tensor<4x16x32xbf16>, %kt: tensor<4x32x16xbf16>, %v: tensor<4x16x32xbf16>, %mask: tensor<16x16xf32>) -> tensor<4x16x32xbf16> {
  %s = mc.constant dense<0.176776695> : tensor<4x16x16xf32>
  %0 = mc.matmul %q, %kt : tensor<4x16x32xbf16>, tensor<4x32x16xbf16> -> tensor<4x16x16xbf16>
  %1 = mc.cast %0 : tensor<4x16x16xbf16> to tensor<4x16x16xf32>
  %2 = mc.mul %1, %s : tensor<4x16x16xf32>
  %m = mc.broadcast_in_dim %mask, dims = [1, 2] : (tensor<16x16xf32>) -> tensor<4x16x16xf32>
  %3 = mc.add %2, %m : tensor<4x16x16xf32>
  %4 = mc.softmax %3, axis = 2 : tensor<4x16x16xf32>
  %5 = mc.cast %4 : tensor<4x16x16xf32> to tensor<4x16x16xbf16>
  %6 = mc.matmul %5, %v : tensor<4x16x16xbf16>, tensor<4x16x32xbf16> -> tensor<4x16x32xbf16>
  return %6 : tensor<4x16x32xbf16>
}
