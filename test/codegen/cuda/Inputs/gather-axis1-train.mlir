// A gather along axis 1 of an activation with a dynamic batch ([?, 6, 4],
// three of its 6 rows): its gradient, an mc.scatter_add into [?, 6, 4],
// keeps the batch in its leading dims, so the kernel's units scale with it.
module {
  ml_program.global private @w(dense<0.5> : tensor<4xf32>) : tensor<4xf32>
  func.func @forward(%x: tensor<?x6x4xf32> {mc.name = "x"}, %i: tensor<3xi64> {mc.name = "i"}) -> (tensor<f32> {mc.name = "loss"}) attributes {mc.batch = array<i64: 1, 8, 8>} {
    %w = ml_program.global_load_const @w : tensor<4xf32>
    %wb = mc.broadcast_in_dim %w, dims = [2] : (tensor<4xf32>) -> tensor<?x6x4xf32>
    %y = mc.mul %x, %wb : tensor<?x6x4xf32>
    %g = mc.gather %y, %i, axis = 1 : (tensor<?x6x4xf32>, tensor<3xi64>) -> tensor<?x3x4xf32>
    %s = mc.mul %g, %g : tensor<?x3x4xf32>
    %l = mc.reduce_sum %s, dims = [0, 1, 2] : (tensor<?x3x4xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
