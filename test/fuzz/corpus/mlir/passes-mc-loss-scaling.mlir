0



ml_program.global private @w(dense<0.5> : tensor<3x4xf32>) : tensor<3x4xf32>
func.func @forward(%x: tensor<2x4xf32>) -> (tensor<f32> {mc.name = "loss"}, tensor<3x4xf32> {mc.name = "grad.w"}) {
  %w = ml_program.global_load_const @w : tensor<3x4xf32>
  %y = mc.matmul %x, %w transpose_b : tensor<2x4xf32>, tensor<3x4xf32> -> tensor<2x3xf32>
  %l = mc.reduce_mean %y, dims = [0, 1] : (tensor<2x3xf32>) -> tensor<f32>
  %seed = mc.constant {mc.autodiff_seed} dense<1.0> : tensor<f32>
  %s = mc.broadcast_in_dim %seed, dims = [] : (tensor<f32>) -> tensor<2x3xf32>
  %c = mc.constant dense<0.1666666> : tensor<2x3xf32>
  %gy = mc.mul %s, %c : tensor<2x3xf32>
  %gw = mc.matmul %gy, %x transpose_a : tensor<2x3xf32>, tensor<2x4xf32> -> tensor<3x4xf32>
  return %l, %gw : tensor<f32>, tensor<3x4xf32>
}
