0






ml_program.global private @w1(dense<0.01> : tensor<32x64xf32>) : tensor<32x64xf32>
ml_program.global private @b1(dense<0.0> : tensor<32xf32>) : tensor<32xf32>
ml_program.global private @w2(dense<0.02> : tensor<10x32xf32>) : tensor<10x32xf32>
ml_program.global private @g(dense<1.0> : tensor<32xf32>) : tensor<32xf32>
func.func @forward(%x: tensor<8x64xf32>) -> (tensor<8x10xf32>, tensor<8xf32>) {
  %w1 = ml_program.global_load_const @w1 : tensor<32x64xf32>
  %b1 = ml_program.global_load_const @b1 : tensor<32xf32>
  %w2 = ml_program.global_load_const @w2 : tensor<10x32xf32>
  %g = ml_program.global_load_const @g : tensor<32xf32>
  %0 = mc.matmul %x, %w1 transpose_b : tensor<8x64xf32>, tensor<32x64xf32> -> tensor<8x32xf32> loc("fc1")
  %b = mc.broadcast_in_dim %b1, dims = [1] : (tensor<32xf32>) -> tensor<8x32xf32>
  %1 = mc.add %0, %b : tensor<8x32xf32>
  %h = mc.relu %1 : tensor<8x32xf32>
  %n = mc.layer_norm %h, %g, %g, axis = 1, epsilon = 1.0e-05 : tensor<8x32xf32>, tensor<32xf32>
  %2 = mc.matmul %n, %w2 transpose_b : tensor<8x32xf32>, tensor<10x32xf32> -> tensor<8x10xf32> loc("fc2")
  %3 = mc.softmax %2, axis = 1 : tensor<8x10xf32>
  %s = mc.reduce_sum %h, dims = [1] : (tensor<8x32xf32>) -> tensor<8xf32>
  return %3, %s : tensor<8x10xf32>, tensor<8xf32>
}
