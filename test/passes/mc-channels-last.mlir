// RUN: modelc-opt %s -split-input-file --mc-channels-last | FileCheck %s
// RUN: modelc-opt %s -split-input-file --mc-compile-pipeline=fuse=false | FileCheck %s --check-prefix=PIPE
// RUN: modelc-opt %s -split-input-file --mc-compile-pipeline="fuse=false channels-last=false" | FileCheck %s --check-prefix=OFF
// RUN: modelc-opt %s -split-input-file --mc-channels-last=f16=true | FileCheck %s --check-prefix=F16
// RUN: modelc-opt %s -split-input-file --mc-compile-pipeline="fuse=false target=cuda" | FileCheck %s --check-prefix=F16

// A residual block: conv + bias + relu, conv + bias + the block's input,
// relu, max pool, global average pool, flatten. One transpose into NHWC at
// the input; the biases broadcast along dim 3; the residual add, the relus
// and the pool stay NHWC; the global pool reduces dims [1, 2] and its
// [N, 1, 1, C] -> [N, C, 1, 1] transpose became a reshape, which folds into
// the flatten's.
// CHECK-LABEL: func.func @block
// CHECK: %[[X:.*]] = mc.transpose %arg0, permutation = [0, 2, 3, 1] : (tensor<2x8x6x6xf32>) -> tensor<2x6x6x8xf32>
// CHECK: %[[C0:.*]] = mc.conv2d %[[X]], %arg1, {{.*}} groups = 1 channels_last : (tensor<2x6x6x8xf32>, tensor<8x8x3x3xf32>) -> tensor<2x6x6x8xf32>
// CHECK: %[[B0:.*]] = mc.broadcast_in_dim %arg2, dims = [3] : (tensor<8xf32>) -> tensor<2x6x6x8xf32>
// CHECK: %[[A0:.*]] = mc.add %[[C0]], %[[B0]] : tensor<2x6x6x8xf32>
// CHECK: %[[R0:.*]] = mc.relu %[[A0]] : tensor<2x6x6x8xf32>
// CHECK: %[[C1:.*]] = mc.conv2d %[[R0]], %arg1, {{.*}} channels_last
// CHECK: %[[A1:.*]] = mc.add %[[C1]], %{{.*}} : tensor<2x6x6x8xf32>
// CHECK: %[[A2:.*]] = mc.add %[[A1]], %[[X]] : tensor<2x6x6x8xf32>
// CHECK: %[[R1:.*]] = mc.relu %[[A2]] : tensor<2x6x6x8xf32>
// CHECK: %[[P:.*]] = mc.max_pool2d %[[R1]], kernel = [2, 2], {{.*}} channels_last : (tensor<2x6x6x8xf32>) -> tensor<2x3x3x8xf32>
// CHECK: %[[M:.*]] = mc.reduce_mean %[[P]], dims = [1, 2] keepdim : (tensor<2x3x3x8xf32>) -> tensor<2x1x1x8xf32>
// CHECK-NOT: mc.transpose
// CHECK: %[[F:.*]] = mc.reshape %[[M]] : (tensor<2x1x1x8xf32>) -> tensor<2x8xf32>
// CHECK: return %[[F]]
// PIPE-LABEL: func.func @block
// PIPE-COUNT-1: mc.transpose
// PIPE-NOT: mc.transpose
// PIPE: return
// OFF-LABEL: func.func @block
// OFF-NOT: channels_last
// OFF: return
func.func @block(%x: tensor<2x8x6x6xf32>, %w: tensor<8x8x3x3xf32>, %b: tensor<8xf32>) -> tensor<2x8xf32> {
  %0 = mc.conv2d %x, %w, strides = [1, 1], padding = [1, 1, 1, 1], dilation = [1, 1], groups = 1 : (tensor<2x8x6x6xf32>, tensor<8x8x3x3xf32>) -> tensor<2x8x6x6xf32>
  %bb = mc.broadcast_in_dim %b, dims = [1] : (tensor<8xf32>) -> tensor<2x8x6x6xf32>
  %1 = mc.add %0, %bb : tensor<2x8x6x6xf32>
  %2 = mc.relu %1 : tensor<2x8x6x6xf32>
  %3 = mc.conv2d %2, %w, strides = [1, 1], padding = [1, 1, 1, 1], dilation = [1, 1], groups = 1 : (tensor<2x8x6x6xf32>, tensor<8x8x3x3xf32>) -> tensor<2x8x6x6xf32>
  %4 = mc.add %3, %bb : tensor<2x8x6x6xf32>
  %5 = mc.add %4, %x : tensor<2x8x6x6xf32>
  %6 = mc.relu %5 : tensor<2x8x6x6xf32>
  %7 = mc.max_pool2d %6, kernel = [2, 2], strides = [2, 2], padding = [0, 0, 0, 0], dilation = [1, 1] : (tensor<2x8x6x6xf32>) -> tensor<2x8x3x3xf32>
  %8 = mc.reduce_mean %7, dims = [2, 3] keepdim : (tensor<2x8x3x3xf32>) -> tensor<2x8x1x1xf32>
  %9 = mc.reshape %8 : (tensor<2x8x1x1xf32>) -> tensor<2x8xf32>
  return %9 : tensor<2x8xf32>
}

// -----

// What follows the convolutions without a rule keeps NCHW: a flatten of a
// whole map reads NCHW order, so the transpose back stays before it; a
// splat operand is rebuilt in NHWC; a reduction without keepdim over
// [2, 3] needs no transpose after it; channels concatenate along dim 3.
// CHECK-LABEL: func.func @boundaries
// CHECK: %[[S:.*]] = mc.constant dense<5.000000e-01> : tensor<1x4x4x3xf32>
// CHECK: %[[C:.*]] = mc.conv2d %{{.*}} channels_last : (tensor<1x4x4x2xf32>, tensor<3x2x1x1xf32>) -> tensor<1x4x4x3xf32>
// CHECK: %[[M:.*]] = mc.mul %[[C]], %[[S]] : tensor<1x4x4x3xf32>
// CHECK: %[[T:.*]] = mc.transpose %[[M]], permutation = [0, 3, 1, 2] : (tensor<1x4x4x3xf32>) -> tensor<1x3x4x4xf32>
// CHECK: mc.reshape %[[T]] : (tensor<1x3x4x4xf32>) -> tensor<1x48xf32>
// CHECK: mc.reduce_sum %[[M]], dims = [1, 2] : (tensor<1x4x4x3xf32>) -> tensor<1x3xf32>
// CHECK: %[[K:.*]] = mc.concat %[[M]], %[[M]] axis = 3 : (tensor<1x4x4x3xf32>, tensor<1x4x4x3xf32>) -> tensor<1x4x4x6xf32>
// CHECK: mc.transpose %[[K]], permutation = [0, 3, 1, 2]
func.func @boundaries(%x: tensor<1x2x4x4xf32>, %w: tensor<3x2x1x1xf32>) -> (tensor<1x48xf32>, tensor<1x3xf32>, tensor<1x6x4x4xf32>) {
  %0 = mc.conv2d %x, %w, strides = [1, 1], padding = [0, 0, 0, 0], dilation = [1, 1], groups = 1 : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>) -> tensor<1x3x4x4xf32>
  %half = mc.constant dense<0.5> : tensor<1x3x4x4xf32>
  %1 = mc.mul %0, %half : tensor<1x3x4x4xf32>
  %2 = mc.reshape %1 : (tensor<1x3x4x4xf32>) -> tensor<1x48xf32>
  %3 = mc.reduce_sum %1, dims = [2, 3] : (tensor<1x3x4x4xf32>) -> tensor<1x3xf32>
  %4 = mc.concat %1, %1 axis = 1 : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x6x4x4xf32>
  return %2, %3, %4 : tensor<1x48xf32>, tensor<1x3xf32>, tensor<1x6x4x4xf32>
}

// -----

// Left alone: an f16 convolution (the CPU's f16 conv is its NCHW
// reference on most hosts), a pool with no f32 or bf16 convolution in the
// function, and the model's own transposes (attention's) before
// elementwise ops.
// CHECK-LABEL: func.func @untouched
// CHECK-NOT: channels_last
// CHECK: %[[T:.*]] = mc.transpose %arg2, permutation = [0, 2, 1, 3]
// CHECK: mc.relu %[[T]]
// CHECK-NOT: channels_last
// CHECK: return
// With f16 (the cuda target), the f16 convolution and the pool after it
// switch.
// F16-LABEL: func.func @untouched
// F16: mc.conv2d %{{.*}} channels_last : (tensor<1x4x4x2xf16>, tensor<3x2x1x1xf16>) -> tensor<1x4x4x3xf16>
// F16: mc.max_pool2d %{{.*}} channels_last : (tensor<1x4x4x3xf16>) -> tensor<1x2x2x3xf16>
func.func @untouched(%x: tensor<1x2x4x4xf16>, %w: tensor<3x2x1x1xf16>, %q: tensor<1x4x2x8xf32>) -> (tensor<1x3x4x4xf16>, tensor<1x3x2x2xf16>, tensor<1x2x4x8xf32>) {
  %0 = mc.conv2d %x, %w, strides = [1, 1], padding = [0, 0, 0, 0], dilation = [1, 1], groups = 1 : (tensor<1x2x4x4xf16>, tensor<3x2x1x1xf16>) -> tensor<1x3x4x4xf16>
  %1 = mc.max_pool2d %0, kernel = [2, 2], strides = [2, 2], padding = [0, 0, 0, 0], dilation = [1, 1] : (tensor<1x3x4x4xf16>) -> tensor<1x3x2x2xf16>
  %2 = mc.transpose %q, permutation = [0, 2, 1, 3] : (tensor<1x4x2x8xf32>) -> tensor<1x2x4x8xf32>
  %3 = mc.relu %2 : tensor<1x2x4x8xf32>
  return %0, %1, %3 : tensor<1x3x4x4xf16>, tensor<1x3x2x2xf16>, tensor<1x2x4x8xf32>
}

// -----

// A dynamic batch: the batch stays the leading, symbolic dim.
// CHECK-LABEL: func.func @dynamic
// CHECK: mc.transpose %arg0, permutation = [0, 2, 3, 1] : (tensor<?x2x4x4xf32>) -> tensor<?x4x4x2xf32>
// CHECK: mc.conv2d %{{.*}} channels_last : (tensor<?x4x4x2xf32>, tensor<3x2x3x3xf32>) -> tensor<?x4x4x3xf32>
// CHECK: mc.relu %{{.*}} : tensor<?x4x4x3xf32>
// CHECK: mc.transpose %{{.*}}, permutation = [0, 3, 1, 2] : (tensor<?x4x4x3xf32>) -> tensor<?x3x4x4xf32>
func.func @dynamic(%x: tensor<?x2x4x4xf32>, %w: tensor<3x2x3x3xf32>) -> tensor<?x3x4x4xf32> attributes {mc.batch = array<i64: 1, 8, 8>} {
  %0 = mc.conv2d %x, %w, strides = [1, 1], padding = [1, 1, 1, 1], dilation = [1, 1], groups = 1 : (tensor<?x2x4x4xf32>, tensor<3x2x3x3xf32>) -> tensor<?x3x4x4xf32>
  %1 = mc.relu %0 : tensor<?x3x4x4xf32>
  return %1 : tensor<?x3x4x4xf32>
}

// -----

// bf16 convolutions switch too (oneDNN's AVX512_BF16 kernels).
// An f16 pool beside them stays NCHW (no f16 convolution moved).
// CHECK-LABEL: func.func @bf16
// CHECK: mc.conv2d %{{.*}} channels_last : (tensor<1x4x4x2xbf16>, tensor<3x2x1x1xbf16>) -> tensor<1x4x4x3xbf16>
// CHECK: mc.max_pool2d %arg2, {{.*}} : (tensor<1x2x4x4xf16>) -> tensor<1x2x2x2xf16>
func.func @bf16(%x: tensor<1x2x4x4xbf16>, %w: tensor<3x2x1x1xbf16>, %h: tensor<1x2x4x4xf16>) -> (tensor<1x3x4x4xbf16>, tensor<1x2x2x2xf16>) {
  %0 = mc.conv2d %x, %w, strides = [1, 1], padding = [0, 0, 0, 0], dilation = [1, 1], groups = 1 : (tensor<1x2x4x4xbf16>, tensor<3x2x1x1xbf16>) -> tensor<1x3x4x4xbf16>
  %1 = mc.max_pool2d %h, kernel = [2, 2], strides = [2, 2], padding = [0, 0, 0, 0], dilation = [1, 1] : (tensor<1x2x4x4xf16>) -> tensor<1x2x2x2xf16>
  return %0, %1 : tensor<1x3x4x4xbf16>, tensor<1x2x2x2xf16>
}
