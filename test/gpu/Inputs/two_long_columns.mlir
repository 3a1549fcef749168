// Two columns of 65536 rows: one thread each, beyond llvmpipe's loop limit at any grid (test/onnx/cuda-kernels-lavapipe.test).
module {
  func.func @forward(%x: tensor<65536x2xf32> {mc.name = "x"}) -> (tensor<2xf32> {mc.name = "y"}) {
    %1 = mc.reduce_sum %x, dims = [0] : (tensor<65536x2xf32>) -> tensor<2xf32>
    return %1 : tensor<2xf32>
  }
}
