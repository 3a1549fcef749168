0



ml_program.global private @w(dense<1.0> : tensor<3x8xf32>) : tensor<3x8xf32>
ml_program.global private @unused(dense<1.0> : tensor<3xf32>) : tensor<3xf32>
func.func private @helper(%a: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %z = mc.constant dense<0.0> : tensor<4x3xf32>
  %0 = mc.add %a, %z : tensor<4x3xf32>
  %1 = mc.relu %0 : tensor<4x3xf32>
  return %1 : tensor<4x3xf32>
}
func.func @forward(%x: tensor<4x8xf32>) -> (tensor<4x3xf32>, tensor<4x3xf32>) {
  %w = ml_program.global_load_const @w : tensor<3x8xf32>
  %0 = mc.matmul %x, %w transpose_b : tensor<4x8xf32>, tensor<3x8xf32> -> tensor<4x3xf32>
  %1 = func.call @helper(%0) : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %2 = mc.relu %0 : tensor<4x3xf32>
  return %1, %2 : tensor<4x3xf32>, tensor<4x3xf32>
}
