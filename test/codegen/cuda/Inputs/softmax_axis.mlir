// Softmax over dim 0 (test/codegen/cuda/softmax-axis.test): few pairs along a long axis, and many.
module {
  func.func @forward(%x: tensor<4096x8xf32> {mc.name = "x"}, %y: tensor<8x4096xf32> {mc.name = "y"}) -> (tensor<4096x8xf32> {mc.name = "a"}, tensor<8x4096xf32> {mc.name = "b"}) {
    %0 = mc.softmax %x, axis = 0 : tensor<4096x8xf32>
    %1 = mc.log_softmax %y, axis = 0 : tensor<8x4096xf32>
    return %0, %1 : tensor<4096x8xf32>, tensor<8x4096xf32>
  }
}
