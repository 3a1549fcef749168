func.func @forward(%x: tensor<2x4xf32> {mc.name = "x"}, %w: tensor<3x4xf32> {mc.name = "w"}) -> (tensor<f32> {mc.name = "loss"}) {
  %y = mc.matmul %x, %w transpose_b : tensor<2x4xf32>, tensor<3x4xf32> -> tensor<2x3xf32>
  %l = mc.reduce_mean %y, dims = [0, 1] : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
