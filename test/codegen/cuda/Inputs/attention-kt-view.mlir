// q k.transpose(-2, -1) as ONNX exports it: a transpose of the last two
// dims, then the scores' matmul. bf16 inside, f32 at the edges.
func.func @forward(%qf: tensor<4x64x32xf32>, %kf: tensor<4x64x32xf32>, %vf: tensor<4x64x32xf32>) -> tensor<4x64x32xf32> {
  %q = mc.cast %qf : tensor<4x64x32xf32> to tensor<4x64x32xbf16>
  %k = mc.cast %kf : tensor<4x64x32xf32> to tensor<4x64x32xbf16>
  %v = mc.cast %vf : tensor<4x64x32xf32> to tensor<4x64x32xbf16>
  %kt = mc.transpose %k, permutation = [0, 2, 1] : (tensor<4x64x32xbf16>) -> tensor<4x32x64xbf16>
  %0 = mc.matmul %q, %kt : tensor<4x64x32xbf16>, tensor<4x32x64xbf16> -> tensor<4x64x64xbf16>
  %1 = mc.softmax %0, axis = 2 : tensor<4x64x64xbf16>
  %2 = mc.matmul %1, %v : tensor<4x64x64xbf16>, tensor<4x64x32xbf16> -> tensor<4x64x32xbf16>
  %o = mc.cast %2 : tensor<4x64x32xbf16> to tensor<4x64x32xf32>
  return %o : tensor<4x64x32xf32>
}
