0

func.func @cnn(%x: tensor<?x4x9x9xf32>, %w: tensor<8x2x3x3xf32>, %v: tensor<72x10xf32>, %c: tensor<8xf32>) -> (tensor<?x10xf32>, tensor<10xf32>, tensor<?x8x4x4xf32>) attributes {mc.batch = array<i64: 1, 64, 32>} {
  %0 = mc.conv2d %x, %w, strides = [2, 2], padding = [1, 1, 0, 0], dilation = [1, 1], groups = 2 : (tensor<?x4x9x9xf32>, tensor<8x2x3x3xf32>) -> tensor<?x8x4x4xf32>
  %1 = mc.batch_norm %0, %c, %c, %c, %c, epsilon = 1.0e-05, feature_axis = 1 : tensor<?x8x4x4xf32>, tensor<8xf32>
  %2 = mc.max_pool2d %1, kernel = [2, 2], strides = [1, 1], padding = [0, 0, 0, 0], dilation = [1, 1] : (tensor<?x8x4x4xf32>) -> tensor<?x8x3x3xf32>
  %3 = mc.reshape %2 : (tensor<?x8x3x3xf32>) -> tensor<?x72xf32>
  %4 = mc.matmul %3, %v : tensor<?x72xf32>, tensor<72x10xf32> -> tensor<?x10xf32>
  %5 = mc.softmax %4, axis = 1 : tensor<?x10xf32>
  %6 = mc.slice %5, start = [0, 0], limit = [-1, 5], strides = [1, 1] : (tensor<?x10xf32>) -> tensor<?x5xf32>
  %7 = mc.reduce_sum %5, dims = [0] : (tensor<?x10xf32>) -> tensor<10xf32>
  %8 = mc.transpose %5, permutation = [1, 0] : (tensor<?x10xf32>) -> tensor<10x?xf32>
  %one = mc.constant dense<1.0> : tensor<f32>
  %9 = mc.broadcast_in_dim %one, dims = [] : (tensor<f32>) -> tensor<?x10xf32>
  %10 = mc.add %5, %9 : tensor<?x10xf32>
  return %10, %7, %1 : tensor<?x10xf32>, tensor<10xf32>, tensor<?x8x4x4xf32>
}

func.func @flatten(%x: tensor<?x8x64xf32>, %w: tensor<64x32xf32>) -> tensor<8x?x32xf32> attributes {mc.batch = array<i64: 1, 64, 64>} {
  %0 = mc.reshape %x : (tensor<?x8x64xf32>) -> tensor<?x64xf32, #mc.batch<[8]>>
  %1 = mc.matmul %0, %w : tensor<?x64xf32, #mc.batch<[8]>>, tensor<64x32xf32> -> tensor<?x32xf32, #mc.batch<[8]>>
  %2 = mc.relu %1 : tensor<?x32xf32, #mc.batch<[8]>>
  %3 = mc.reshape %2 : (tensor<?x32xf32, #mc.batch<[8]>>) -> tensor<?x8x32xf32>
  %4 = mc.transpose %3, permutation = [1, 0, 2] : (tensor<?x8x32xf32>) -> tensor<8x?x32xf32>
  return %4 : tensor<8x?x32xf32>
}
