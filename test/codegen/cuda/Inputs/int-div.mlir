func.func @forward(%a: tensor<4x8xi32> {mc.name = "a"}, %b: tensor<4x8xi32> {mc.name = "b"}) -> (tensor<4x8xf32> {mc.name = "q"}) {
  %0 = mc.div %a, %b : tensor<4x8xi32>
  %1 = mc.cast %0 : tensor<4x8xi32> to tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}
