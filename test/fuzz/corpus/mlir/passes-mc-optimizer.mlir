0



ml_program.global private @w(dense<0.5> : tensor<3x4xf32>) : tensor<3x4xf32>
func.func @forward(%x: tensor<2x4xf32>) -> (tensor<f32> {mc.name = "loss"}, tensor<3x4xf32> {mc.name = "grad.w"}) {
  %w = ml_program.global_load_const @w : tensor<3x4xf32>
  %y = mc.matmul %x, %w transpose_b : tensor<2x4xf32>, tensor<3x4xf32> -> tensor<2x3xf32>
  %l = mc.reduce_mean %y, dims = [0, 1] : (tensor<2x3xf32>) -> tensor<f32>
  %g = mc.constant dense<0.25> : tensor<3x4xf32>
  return %l, %g : tensor<f32>, tensor<3x4xf32>
}

