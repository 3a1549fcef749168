0// Two attention patterns whose k is read as [heads, d, s]: %kt1 is made by
// a transpose of k [s, heads, d] (as an exported nn.MultiheadAttention
// makes it), %kt2 is a graph input. bf16 inside, f32 at the edges.
func.func @forward(%qf: tensor<4x64x32xf32>, %kf: tensor<64x4x32xf32>, %vf: tensor<4x64x32xf32>, %kt2f: tensor<4x32x64xf32>) -> (tensor<4x64x32xf32>, tensor<4x64x32xf32>) {
  %q = mc.cast %qf : tensor<4x64x32xf32> to tensor<4x64x32xbf16>
  %k = mc.cast %kf : tensor<64x4x32xf32> to tensor<64x4x32xbf16>
  %v = mc.cast %vf : tensor<4x64x32xf32> to tensor<4x64x32xbf16>
  %kt2 = mc.cast %kt2f : tensor<4x32x64xf32> to tensor<4x32x64xbf16>
  %kt1 = mc.transpose %k, permutation = [1, 2, 0] : (tensor<64x4x32xbf16>) -> tensor<4x32x64xbf16>
  %0 = mc.matmul %q, %kt1 : tensor<4x64x32xbf16>, tensor<4x32x64xbf16> -> tensor<4x64x64xbf16>
  %1 = mc.softmax %0, axis = 2 : tensor<4x64x64xbf16>
  %2 = mc.matmul %1, %v : tensor<4x64x64xbf16>, tensor<4x64x32xbf16> -> tensor<4x64x32xbf16>
  %3 = mc.matmul %q, %kt2 : tensor<4x64x32xbf16>, tensor<4x32x64xbf16> -> tensor<4x64x64xbf16>
  %4 = mc.softmax %3, axis = 2 : tensor<4x64x64xbf16>
  %5 = mc.matmul %4, %v : tensor<4x64x64xbf16>, tensor<4x64x32xbf16> -> tensor<4x64x32xbf16>
  %o1 = mc.cast %2 : tensor<4x64x32xbf16> to tensor<4x64x32xf32>
  %o2 = mc.cast %5 : tensor<4x64x32xbf16> to tensor<4x64x32xf32>
  return %o1, %o2 : tensor<4x64x32xf32>, tensor<4x64x32xf32>
}
