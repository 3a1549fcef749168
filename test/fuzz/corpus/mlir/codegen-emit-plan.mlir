0

ml_program.global private @w(dense<0.5> : tensor<3x4xf32>) : tensor<3x4xf32>
ml_program.global private @b(dense<[1.0, 2.0, 3.0]> : tensor<3xf32>) : tensor<3xf32>
func.func @forward(%x: tensor<2x4xf32> {mc.name = "x"}) -> (tensor<2x3xf32> {mc.name = "y"}, tensor<6xf32> {mc.name = "flat"}) {
  %w = ml_program.global_load_const @w : tensor<3x4xf32>
  %b = ml_program.global_load_const @b : tensor<3xf32>
  %0 = mc.matmul %x, %w transpose_b : tensor<2x4xf32>, tensor<3x4xf32> -> tensor<2x3xf32>
  %1 = mc.broadcast_in_dim %b, dims = [1] : (tensor<3xf32>) -> tensor<2x3xf32>
  %2 = mc.add %0, %1 : tensor<2x3xf32>
  %3 = mc.exp %2 : tensor<2x3xf32>
  %4 = mc.reduce_sum %3, dims = [1] keepdim : (tensor<2x3xf32>) -> tensor<2x1xf32>
  %5 = mc.broadcast_in_dim %4, dims = [0, 1] : (tensor<2x1xf32>) -> tensor<2x3xf32>
  %6 = mc.div %3, %5 : tensor<2x3xf32>
  %7 = mc.reshape %6 : (tensor<2x3xf32>) -> tensor<6xf32>
  return %6, %7 : tensor<2x3xf32>, tensor<6xf32>
}
