0

func.func @epilogue(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf32>) -> tensor<1x4x6x6xf32> {
  %0 = mc.fused %x, %w, %b : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x6x6xf32> {
  ^bb0(%a: tensor<1x3x8x8xf32>, %k: tensor<4x3x3x3xf32>, %c: tensor<4xf32>):
    %1 = mc.conv2d %a, %k, strides = [1, 1], padding = [0, 0, 0, 0], dilation = [1, 1], groups = 1
        : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
    %2 = mc.broadcast_in_dim %c, dims = [1] : (tensor<4xf32>) -> tensor<1x4x6x6xf32>
    %3 = mc.add %1, %2 : tensor<1x4x6x6xf32>
    %4 = mc.relu %3 : tensor<1x4x6x6xf32>
    mc.yield %4 : tensor<1x4x6x6xf32>
  }
  return %0 : tensor<1x4x6x6xf32>
}

func.func @scalar(%x: tensor<4xf32>, %s: tensor<f32>) -> tensor<4xf32> {
  %0 = mc.fused %x, %s : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>, %c: tensor<f32>):
    %1 = mc.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %2 = mc.mul %a, %1 : tensor<4xf32>
    mc.yield %2 : tensor<4xf32>
  }
  return %0 : tensor<4xf32>
}
