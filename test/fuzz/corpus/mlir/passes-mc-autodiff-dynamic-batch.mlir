0

ml_program.global private @w(dense<0.5> : tensor<3x4xf32>) : tensor<3x4xf32>
func.func @mse(%x: tensor<?x4xf32> {mc.name = "x"}, %y: tensor<?x3xf32> {mc.name = "y"}) -> (tensor<f32> {mc.name = "loss"}) attributes {mc.batch = array<i64: 1, 16, 16>} {
  %w = ml_program.global_load_const @w : tensor<3x4xf32>
  %0 = mc.matmul %x, %w transpose_b : tensor<?x4xf32>, tensor<3x4xf32> -> tensor<?x3xf32>
  %1 = mc.relu %0 : tensor<?x3xf32>
  %2 = mc.sub %1, %y : tensor<?x3xf32>
  %3 = mc.mul %2, %2 : tensor<?x3xf32>
  %4 = mc.reduce_mean %3, dims = [0, 1] : (tensor<?x3xf32>) -> tensor<f32>
  return %4 : tensor<f32>
}
