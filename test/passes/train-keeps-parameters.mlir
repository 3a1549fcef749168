// RUN: modelc compile %s --train --optimizer=sgd --emit=plan -o - | FileCheck %s

// Training folds no op on a parameter: the slice of w (as MultiheadAttention
// slices in_proj_weight) stays an op, so w gets a gradient and is trained.
// Folded (mc-fold-constants with its default globals=true, as the train
// pipeline ran it before), the slice became a constant and w no parameter:
// `returns 1 values; mc-optimizer expects (loss, grad.<param>...)`.
// CHECK: #[[W:[0-9]+]] f32[3, 2] state+{{[0-9]+}} (24 B)  w{{$}}
// CHECK: steps:
// CHECK: mc.slice (#[[W]])
ml_program.global private @w(dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]> : tensor<3x2xf32>) : tensor<3x2xf32>
func.func @forward(%x: tensor<2x2xf32>) -> tensor<f32> {
  %w = ml_program.global_load_const @w : tensor<3x2xf32>
  %0 = mc.slice %w, start = [0, 0], limit = [2, 2], strides = [1, 1] : (tensor<3x2xf32>) -> tensor<2x2xf32>
  %1 = mc.matmul %x, %0 : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  %2 = mc.reduce_sum %1, dims = [0, 1] : (tensor<2x2xf32>) -> tensor<f32>
  return %2 : tensor<f32>
}
