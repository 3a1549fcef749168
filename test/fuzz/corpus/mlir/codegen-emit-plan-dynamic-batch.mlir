0

module {
  ml_program.global private @w1(dense<0.5> : tensor<4x8xf32>) : tensor<4x8xf32>
  ml_program.global private @b1(dense<0.1> : tensor<8xf32>) : tensor<8xf32>
  func.func @mlp(%x: tensor<?x4xf32> {mc.name = "x"}) -> (tensor<?x8xf32> {mc.name = "y"}, tensor<8xf32> {mc.name = "m"}) {
    %w = ml_program.global_load_const @w1 : tensor<4x8xf32>
    %b = ml_program.global_load_const @b1 : tensor<8xf32>
    %0 = mc.matmul %x, %w : tensor<?x4xf32>, tensor<4x8xf32> -> tensor<?x8xf32>
    %1 = mc.broadcast_in_dim %b, dims = [1] : (tensor<8xf32>) -> tensor<?x8xf32>
    %2 = mc.add %0, %1 : tensor<?x8xf32>
    %3 = mc.relu %2 : tensor<?x8xf32>
    %4 = mc.reduce_mean %3, dims = [0] : (tensor<?x8xf32>) -> tensor<8xf32>
    return %3, %4 : tensor<?x8xf32>, tensor<8xf32>
  }
}
