// mc-amp and the constants it would cast: a finite f32 constant that is inf
// in the low type (a 1e5 scale, a -1e9 mask at O2), or one so far below
// f16's normal range that the cast keeps a few bits (a batch norm with a
// tiny gamma folded into a conv's weight), keeps its reader in f32 with a
// warning; constants that fit are cast as before, and a view of a constant
// leaves the decision to its readers.
// RUN: modelc-opt %s --mc-amp="dtype=f16 level=O2" --split-input-file 2>&1 | FileCheck %s --check-prefix=F16
// RUN: modelc-opt %s --mc-amp="dtype=bf16 level=O2" --split-input-file 2>&1 | FileCheck %s --check-prefix=BF16
// RUN: modelc-opt %s --mc-amp="dtype=f16" --split-input-file 2>&1 | FileCheck %s --check-prefix=O1

// F16: warning: mc-amp: kept in f32: its constant operand 1 holds 100000, which is inf in f16
// F16: warning: mc-amp: kept in f32: its constant operand 1 is below f16's normal range (largest |x| 4e-06): the cast's error could reach
// F16-LABEL: func.func @scale
// F16: mc.broadcast_in_dim {{.*}}mc.precision = "f32", mc.precision_reason = "O2: a view of a constant (its readers' precision decides)"
// F16: mc.div {{.*}}mc.precision = "f32", mc.precision_reason = "O2: kept f32, constant operand 1 holds 100000, which is inf in f16"
// F16: mc.mul {{.*}}mc.precision = "f16", mc.precision_reason = "O2: whole model in f16"
// BF16-LABEL: func.func @scale
// BF16-NOT: kept f32
// BF16: mc.div {{.*}}mc.precision = "bf16"
func.func @scale(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %big = mc.constant dense<1.0e+05> : tensor<f32>
  %b = mc.broadcast_in_dim %big, dims = [] : (tensor<f32>) -> tensor<4x8xf32>
  %y = mc.div %x, %b : tensor<4x8xf32>
  %half = mc.constant dense<0.5> : tensor<4x8xf32>
  %z = mc.mul %y, %half : tensor<4x8xf32>
  return %z : tensor<4x8xf32>
}

// -----

// F16-LABEL: func.func @tiny_weight
// F16: mc.conv2d {{.*}}mc.precision = "f32", mc.precision_reason = "O2: kept f32, constant operand 1 is below f16's normal range
// F16: mc.conv2d {{.*}}mc.precision = "f16"
// O1-LABEL: func.func @tiny_weight
// O1: mc.conv2d {{.*}}mc.precision = "f32", mc.precision_reason = "O1: kept f32, constant operand 1 is below f16's normal range
// O1: mc.conv2d {{.*}}mc.precision = "f16", mc.precision_reason = "O1: low-precision list"
func.func @tiny_weight(%x: tensor<1x2x4x4xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) {
  %tiny = mc.constant dense<[[[[4.0e-06]], [[-3.0e-06]]], [[[2.5e-06]], [[1.0e-06]]]]> : tensor<2x2x1x1xf32>
  %a = mc.conv2d %x, %tiny, strides = [1, 1], padding = [0, 0, 0, 0], dilation = [1, 1], groups = 1 : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x4x4xf32>
  %fits = mc.constant dense<[[[[0.25]], [[-0.5]]], [[[1.5]], [[3.0e-06]]]]> : tensor<2x2x1x1xf32>
  %b = mc.conv2d %x, %fits, strides = [1, 1], padding = [0, 0, 0, 0], dilation = [1, 1], groups = 1 : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x4x4xf32>
  return %a, %b : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
}

// -----

// Zeros cast exactly: a sparse constant whose one nonzero is in range (a
// pruned weight) is cast, not kept f32 (zeros were charged a subnormal's
// error each).
// F16-LABEL: func.func @sparse
// F16: mc.mul {{.*}}mc.precision = "f16", mc.precision_reason = "O2: whole model in f16"
func.func @sparse(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %w = mc.constant dense<[[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [0.0, 1.0e-04, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]]> : tensor<8x8xf32>
  %y = mc.mul %x, %w : tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}
