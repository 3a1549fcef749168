// Reductions of many elements into few outputs (test/codegen/cuda/split-reductions.test).
module {
  func.func @forward(%g: tensor<1024x1024xf32> {mc.name = "g"}, %x: tensor<8x16x32x32xf32> {mc.name = "x"}) -> (tensor<f32> {mc.name = "finite"}, tensor<16xf32> {mc.name = "mean"}) {
    %d = mc.sub %g, %g : tensor<1024x1024xf32>
    %z = mc.constant dense<0.0> : tensor<1024x1024xf32>
    %ok = mc.compare EQ, %d, %z : (tensor<1024x1024xf32>, tensor<1024x1024xf32>) -> tensor<1024x1024xi1>
    %f = mc.cast %ok : tensor<1024x1024xi1> to tensor<1024x1024xf32>
    %m = mc.reduce_min %f, dims = [0, 1] : (tensor<1024x1024xf32>) -> tensor<f32>
    %s = mc.reduce_mean %x, dims = [0, 2, 3] : (tensor<8x16x32x32xf32>) -> tensor<16xf32>
    return %m, %s : tensor<f32>, tensor<16xf32>
  }
}
