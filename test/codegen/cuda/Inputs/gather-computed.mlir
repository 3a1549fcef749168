func.func @forward(%ids: tensor<2x3xi64> {mc.name = "ids"}) -> (tensor<2x3x4xf32> {mc.name = "emb"}) {
  %w = mc.constant dense<1.0> : tensor<5x4xf32>
  %one = mc.constant dense<1> : tensor<2x3xi64>
  %j = mc.add %ids, %one : tensor<2x3xi64>
  %0 = mc.gather %w, %j, axis = 0 : (tensor<5x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}
