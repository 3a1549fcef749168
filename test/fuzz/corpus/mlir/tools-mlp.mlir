0module {
  ml_program.global private @"0.weight"(dense<[[0.1, -0.2, 0.3, 0.4], [0.5, 0.6, -0.7, 0.8], [-0.9, 1.0, 1.1, 1.2]]> : tensor<3x4xf32>) : tensor<3x4xf32>
  ml_program.global private @"0.bias"(dense<[0.01, 0.02, 0.03]> : tensor<3xf32>) : tensor<3xf32>
  func.func @forward(%x: tensor<2x4xf32> {mc.name = "x"}) -> (tensor<2x3xf32> {mc.name = "probs"}) {
    %w = ml_program.global_load_const @"0.weight" : tensor<3x4xf32>
    %b = ml_program.global_load_const @"0.bias" : tensor<3xf32>
    %0 = mc.matmul %x, %w transpose_b : tensor<2x4xf32>, tensor<3x4xf32> -> tensor<2x3xf32>
    %1 = mc.broadcast_in_dim %b, dims = [1] : (tensor<3xf32>) -> tensor<2x3xf32>
    %2 = mc.add %0, %1 : tensor<2x3xf32>
    %3 = mc.relu %2 : tensor<2x3xf32>
    %4 = mc.softmax %3, axis = 1 : tensor<2x3xf32>
    return %4 : tensor<2x3xf32>
  }
}
