// A pairwise squared distance: a region of 2^32 values reduced to 2^22 (test/codegen/cuda/index-bits.test).
func.func @forward(%x: tensor<2048x1x1024xf32> {mc.name = "x"}, %y: tensor<1x2048x1024xf32> {mc.name = "y"}) -> (tensor<2048x2048xf32> {mc.name = "d"}) {
  %bx = mc.broadcast_in_dim %x, dims = [0, 1, 2] : (tensor<2048x1x1024xf32>) -> tensor<2048x2048x1024xf32>
  %by = mc.broadcast_in_dim %y, dims = [0, 1, 2] : (tensor<1x2048x1024xf32>) -> tensor<2048x2048x1024xf32>
  %d = mc.sub %bx, %by : tensor<2048x2048x1024xf32>
  %s = mc.mul %d, %d : tensor<2048x2048x1024xf32>
  %r = mc.reduce_sum %s, dims = [2] : (tensor<2048x2048x1024xf32>) -> tensor<2048x2048xf32>
  return %r : tensor<2048x2048xf32>
}
