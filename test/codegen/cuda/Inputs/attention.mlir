// Attention as a traced multi-head block leaves it: q scaled by a splat
// constant, q k with k transposed, a causal mask added, softmax over the
// last dim, p v; [heads, s, d] = [4, 64, 32].
func.func @forward(%q: tensor<4x64x32xf32>, %k: tensor<4x64x32xf32>, %v: tensor<4x64x32xf32>, %mask: tensor<64x64xf32>) -> tensor<4x64x32xf32> {
  %s = mc.constant dense<0.176776695> : tensor<4x64x32xf32>
  %0 = mc.mul %q, %s : tensor<4x64x32xf32>
  %1 = mc.matmul %0, %k transpose_b : tensor<4x64x32xf32>, tensor<4x64x32xf32> -> tensor<4x64x64xf32>
  %m = mc.broadcast_in_dim %mask, dims = [1, 2] : (tensor<64x64xf32>) -> tensor<4x64x64xf32>
  %2 = mc.add %1, %m : tensor<4x64x64xf32>
  %3 = mc.softmax %2, axis = 2 : tensor<4x64x64xf32>
  %4 = mc.matmul %3, %v : tensor<4x64x64xf32>, tensor<4x64x32xf32> -> tensor<4x64x32xf32>
  return %4 : tensor<4x64x32xf32>
}
