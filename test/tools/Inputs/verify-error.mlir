func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = mc.softmax %x, axis = 3 : tensor<4xf32>
  return %0 : tensor<4xf32>
}
