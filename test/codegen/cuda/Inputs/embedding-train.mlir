// A bag-of-embeddings classifier's training step, as a traced one looks:
// token ids with a dynamic batch (6 per sample), an embedding table of 50
// rows of 16, the mean over the tokens, a linear head, a squared-error
// loss. Its embedding gradient is an mc.scatter_add of the [?, 6, 16]
// gradient into the [50, 16] table (ids repeat: they sum).
module {
  ml_program.global private @emb(dense<0.25> : tensor<50x16xf32>) : tensor<50x16xf32>
  ml_program.global private @head(dense<-0.125> : tensor<4x16xf32>) : tensor<4x16xf32>
  func.func @forward(%ids: tensor<?x6xi64> {mc.name = "ids"}, %y: tensor<?x4xf32> {mc.name = "y"}) -> (tensor<f32> {mc.name = "loss"})
      attributes {mc.batch = array<i64: 1, 8, 8>} {
    %e = ml_program.global_load_const @emb : tensor<50x16xf32>
    %h = ml_program.global_load_const @head : tensor<4x16xf32>
    %0 = mc.gather %e, %ids, axis = 0 : (tensor<50x16xf32>, tensor<?x6xi64>) -> tensor<?x6x16xf32>
    %1 = mc.reduce_mean %0, dims = [1] : (tensor<?x6x16xf32>) -> tensor<?x16xf32>
    %2 = mc.matmul %1, %h transpose_b : tensor<?x16xf32>, tensor<4x16xf32> -> tensor<?x4xf32>
    %3 = mc.sub %2, %y : tensor<?x4xf32>
    %4 = mc.mul %3, %3 : tensor<?x4xf32>
    %5 = mc.reduce_mean %4, dims = [0, 1] : (tensor<?x4xf32>) -> tensor<f32>
    return %5 : tensor<f32>
  }
}
