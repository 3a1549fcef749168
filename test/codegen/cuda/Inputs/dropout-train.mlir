// A training step with dropout, as jit::trace writes one: the generator's
// state rng.seed / rng.offset as mc.buffer globals, the step's dropout at
// rng.offset and the offset it stores (rng.offset + 1); a hidden layer,
// dropout 0.25, a squared-mean loss; a dynamic batch.
module {
  ml_program.global private @rng.seed(dense<-5> : tensor<i64>) : tensor<i64> {mc.buffer}
  ml_program.global private mutable @rng.offset(dense<3> : tensor<i64>) : tensor<i64> {mc.buffer}
  ml_program.global private @w1(dense<0.125> : tensor<32x8xf32>) : tensor<32x8xf32>
  ml_program.global private @b1(dense<0.0625> : tensor<32xf32>) : tensor<32xf32>
  ml_program.global private @w2(dense<-0.25> : tensor<4x32xf32>) : tensor<4x32xf32>
  func.func @forward(%x: tensor<?x8xf32> {mc.name = "x"}) -> (tensor<f32> {mc.name = "loss"})
      attributes {mc.batch = array<i64: 1, 8, 8>} {
    %seed = ml_program.global_load_const @rng.seed : tensor<i64>
    %offset = ml_program.global_load @rng.offset : tensor<i64>
    %one = mc.constant dense<1> : tensor<i64>
    %next = mc.add %offset, %one : tensor<i64>
    %w1 = ml_program.global_load_const @w1 : tensor<32x8xf32>
    %b1 = ml_program.global_load_const @b1 : tensor<32xf32>
    %w2 = ml_program.global_load_const @w2 : tensor<4x32xf32>
    %h = mc.matmul %x, %w1 transpose_b : tensor<?x8xf32>, tensor<32x8xf32> -> tensor<?x32xf32>
    %bb = mc.broadcast_in_dim %b1, dims = [1] : (tensor<32xf32>) -> tensor<?x32xf32>
    %hb = mc.add %h, %bb : tensor<?x32xf32>
    %r = mc.relu %hb : tensor<?x32xf32>
    %d = mc.dropout %r, %seed, %offset, p = 0.25 : tensor<?x32xf32>
    %o = mc.matmul %d, %w2 transpose_b : tensor<?x32xf32>, tensor<4x32xf32> -> tensor<?x4xf32>
    %sq = mc.mul %o, %o : tensor<?x4xf32>
    %loss = mc.reduce_mean %sq, dims = [0, 1] : (tensor<?x4xf32>) -> tensor<f32>
    ml_program.global_store @rng.offset = %next : tensor<i64>
    return %loss : tensor<f32>
  }
}
