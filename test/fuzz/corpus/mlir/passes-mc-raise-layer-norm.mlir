0
func.func @exported(%x: tensor<2x4x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %m = mc.reduce_mean %x, dims = [2] keepdim : (tensor<2x4x8xf32>) -> tensor<2x4x1xf32>
  %mb = mc.broadcast_in_dim %m, dims = [0, 1, 2] : (tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %d = mc.sub %x, %mb : tensor<2x4x8xf32>
  %two = mc.constant dense<2.0> : tensor<f32>
  %twob = mc.broadcast_in_dim %two, dims = [] : (tensor<f32>) -> tensor<2x4x8xf32>
  %sq = mc.pow %d, %twob : tensor<2x4x8xf32>
  %v = mc.reduce_mean %sq, dims = [2] keepdim : (tensor<2x4x8xf32>) -> tensor<2x4x1xf32>
  %eps = mc.constant dense<9.99999974E-6> : tensor<f32>
  %epsb = mc.broadcast_in_dim %eps, dims = [] : (tensor<f32>) -> tensor<2x4x1xf32>
  %ve = mc.add %v, %epsb : tensor<2x4x1xf32>
  %s = mc.sqrt %ve : tensor<2x4x1xf32>
  %sb = mc.broadcast_in_dim %s, dims = [0, 1, 2] : (tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %n = mc.div %d, %sb : tensor<2x4x8xf32>
  %gb = mc.broadcast_in_dim %g, dims = [2] : (tensor<8xf32>) -> tensor<2x4x8xf32>
  %scaled = mc.mul %n, %gb : tensor<2x4x8xf32>
  %bb = mc.broadcast_in_dim %b, dims = [2] : (tensor<8xf32>) -> tensor<2x4x8xf32>
  %y = mc.add %scaled, %bb : tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}
