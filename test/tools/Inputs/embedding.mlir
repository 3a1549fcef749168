// An embedding whose ids carry a dynamic batch, trained by the sum of what
// it gathers: gather's gradient scatters a count of 1 per use back to each
// row (negative ids count from the end). Its one-hot matrix has the batch's
// rows (a multiple of it, 6 ids per sample).
module {
  ml_program.global private mutable @emb(dense<[[0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [6.0, 7.0, 8.0], [9.0, 10.0, 11.0], [12.0, 13.0, 14.0]]> : tensor<5x3xf32>) : tensor<5x3xf32>
  func.func @forward(%ids: tensor<?x6xi64> {mc.name = "ids"}) -> (tensor<f32> {mc.name = "loss"}) attributes {mc.batch = array<i64: 1, 16, 16>} {
    %e = ml_program.global_load @emb : tensor<5x3xf32>
    %0 = mc.gather %e, %ids, axis = 0 : (tensor<5x3xf32>, tensor<?x6xi64>) -> tensor<?x6x3xf32>
    %l = mc.reduce_sum %0, dims = [0, 1, 2] : (tensor<?x6x3xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
