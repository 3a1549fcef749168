// With a dynamic batch, reductions whose row (or axis) holds the batch: a
// sum of every element of [B, 10] (one row) and a softmax over the batch
// axis (10 units). Their unit counts do not scale with the batch: at most
// 64 they had divided to 0 per batch, a grid of 0, and a step the device
// skipped, its output left as it was.
module {
  func.func @forward(%x: tensor<?x10xf32> {mc.name = "x"}) -> (tensor<f32> {mc.name = "total"}, tensor<?x10xf32> {mc.name = "p"}) attributes {mc.batch = array<i64: 1, 64, 64>} {
    %0 = mc.reduce_sum %x, dims = [0, 1] : (tensor<?x10xf32>) -> tensor<f32>
    %1 = mc.softmax %x, axis = 0 : tensor<?x10xf32>
    return %0, %1 : tensor<f32>, tensor<?x10xf32>
  }
}
