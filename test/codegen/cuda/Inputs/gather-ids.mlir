// An embedding lookup by token ids (a graph input), and one by ids the
// graph computes (ids + 1): the cuda target gathers by the first (the
// runtime checks the input's values when it is set) and refuses the second.
func.func @forward(%ids: tensor<2x3xi64> {mc.name = "ids"}) -> (tensor<2x3x4xf32> {mc.name = "emb"}) {
  %w = mc.constant dense<[[0.0, 0.1, 0.2, 0.3], [1.0, 1.1, 1.2, 1.3], [2.0, 2.1, 2.2, 2.3], [3.0, 3.1, 3.2, 3.3], [4.0, 4.1, 4.2, 4.3]]> : tensor<5x4xf32>
  %0 = mc.gather %w, %ids, axis = 0 : (tensor<5x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}
