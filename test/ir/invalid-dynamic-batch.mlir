// RUN: modelc-opt %s -split-input-file -verify-diagnostics

// One negative test per way an op can misuse the dynamic batch (`?`): the
// shape rules refuse what would need its size.

func.func @slice_inside_batch(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+2 {{dimension 0 of size [?] is sliced from 1 to [?] by 1; the batch (?) can only be taken whole (start 0, limit -1, stride 1)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.slice %x, start = [1, 0], limit = [-1, 8], strides = [1, 1] : (tensor<?x8xf32>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

func.func @pad_batch(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+2 {{dimension 0 is the batch (?), which cannot be padded}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.pad %x, low = [1, 0], high = [0, 0], value = 0.0 : (tensor<?x8xf32>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

func.func @concat_batch(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+2 {{the concatenation axis 0 of input 0 cannot be the batch (?): its size is only known at run time}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.concat %x, %x axis = 0 : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

func.func @reshape_drops_batch(%x: tensor<?x8xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{cannot reshape [?, 8] to [8, 8]: the element counts differ}}
  %0 = mc.reshape %x : (tensor<?x8xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

func.func @reshape_two_batches(%x: tensor<?x8xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{cannot reshape [?, 8] to [?, ?]: a shape holds the batch (?) at most once}}
  %0 = mc.reshape %x : (tensor<?x8xf32>) -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}

// -----

func.func @conv_batch_channels(%x: tensor<1x?x9x9xf32>, %w: tensor<8x2x3x3xf32>) -> tensor<1x8x7x7xf32> {
  // expected-error @+2 {{input channels ? and weight input channels 2 must both be the batch or both be static}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.conv2d %x, %w, strides = [1, 1], padding = [0, 0, 0, 0], dilation = [1, 1], groups = 1 : (tensor<1x?x9x9xf32>, tensor<8x2x3x3xf32>) -> tensor<1x8x7x7xf32>
  return %0 : tensor<1x8x7x7xf32>
}

// -----

func.func @pool_batch_rows(%x: tensor<1x4x?x9xf32>) -> tensor<1x4x4x4xf32> {
  // expected-error @+2 {{input dimension 2 cannot be the batch (?): its size is only known at run time}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.max_pool2d %x, kernel = [2, 2], strides = [2, 2], padding = [0, 0, 0, 0], dilation = [1, 1] : (tensor<1x4x?x9xf32>) -> tensor<1x4x4x4xf32>
  return %0 : tensor<1x4x4x4xf32>
}

// -----

func.func @batch_norm_on_batch(%x: tensor<?x8xf32>, %c: tensor<8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{feature_axis 0 is the batch (?), whose size is only known at run time}}
  %0 = mc.batch_norm %x, %c, %c, %c, %c, epsilon = 1.0e-05, feature_axis = 0 : tensor<?x8xf32>, tensor<8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

func.func @broadcast_static_into_batch(%x: tensor<8x4xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{input dimension 0 of size 8 cannot broadcast to result dimension 0 of size ?}}
  %0 = mc.broadcast_in_dim %x, dims = [0, 1] : (tensor<8x4xf32>) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

// expected-error @+1 {{batch bounds [8, 4] with opt 4 must satisfy 1 <= min <= opt <= max <= 2147483647}}
func.func @bad_bounds(%x: tensor<?x4xf32>) -> tensor<?x4xf32> attributes {mc.batch = array<i64: 8, 4, 4>} {
  return %x : tensor<?x4xf32>
}

// -----

// expected-error @+1 {{attribute 'mc.batch' must be array<i64: MIN, MAX, OPT>, got array<i64: 1, 4>}}
func.func @short_bounds(%x: tensor<?x4xf32>) -> tensor<?x4xf32> attributes {mc.batch = array<i64: 1, 4>} {
  return %x : tensor<?x4xf32>
}

// -----

func.func @multiple_mismatch(%x: tensor<?x8x64xf32>) -> tensor<?x64xf32, #mc.batch<[4]>> {
  // expected-error @+1 {{cannot reshape [?, 8, 64] to [4*?, 64]: the element counts differ}}
  %0 = mc.reshape %x : (tensor<?x8x64xf32>) -> tensor<?x64xf32, #mc.batch<[4]>>
  return %0 : tensor<?x64xf32, #mc.batch<[4]>>
}

// -----

func.func @multiple_against_batch(%x: tensor<?x64xf32, #mc.batch<[8]>>, %y: tensor<?x64xf32>) -> tensor<?x64xf32, #mc.batch<[8]>> {
  // expected-error @+1 {{requires the same encoding for all operands and results}}
  %0 = "mc.add"(%x, %y) : (tensor<?x64xf32, #mc.batch<[8]>>, tensor<?x64xf32>) -> tensor<?x64xf32, #mc.batch<[8]>>
  return %0 : tensor<?x64xf32, #mc.batch<[8]>>
}

// -----

// expected-error @+1 {{#mc.batch with every multiple 1 is a plain `?`; drop the encoding}}
func.func @plain_encoding(%x: tensor<?x64xf32, #mc.batch<[1]>>) -> tensor<?x64xf32, #mc.batch<[1]>> {
  return %x : tensor<?x64xf32, #mc.batch<[1]>>
}

// -----

// expected-error @+1 {{#mc.batch multiples must be >= 1, got 0}}
func.func @zero_multiple(%x: tensor<?x64xf32, #mc.batch<[0]>>) -> tensor<?x64xf32, #mc.batch<[0]>> {
  return %x : tensor<?x64xf32, #mc.batch<[0]>>
}
