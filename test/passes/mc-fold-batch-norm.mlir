// RUN: modelc-opt %s -split-input-file --mc-fold-batch-norm | FileCheck %s

// conv2d + batch_norm with constant parameters: the weight is scaled per
// output channel and the norm becomes a bias. scale = [2, 1], var + eps = 1
// (so s = scale), mean = [1, 0], offset = [0.5, 0]: W' = W * s and
// b' = (0 - mean) * s + offset = [-1.5, 0].
// CHECK-LABEL: func.func @conv_bn
// CHECK-NOT: mc.batch_norm
// CHECK-DAG: %[[W:.*]] = mc.constant dense<{{\[\[\[\[}}2.000000e+00]]], {{\[\[\[}}3.000000e+00]]]]> : tensor<2x1x1x1xf32>
// CHECK-DAG: %[[B:.*]] = mc.constant dense<[-1.500000e+00, 0.000000e+00]> : tensor<2xf32>
// CHECK: %[[C:.*]] = mc.conv2d %arg0, %[[W]]
// CHECK: %[[BB:.*]] = mc.broadcast_in_dim %[[B]], dims = [1]
// CHECK: %[[R:.*]] = mc.add %[[C]], %[[BB]]
// CHECK: return %[[R]]
ml_program.global private @w(dense<[[[[1.0]]], [[[3.0]]]]> : tensor<2x1x1x1xf32>) : tensor<2x1x1x1xf32>
func.func @conv_bn(%x: tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %w = ml_program.global_load_const @w : tensor<2x1x1x1xf32>
  %s = mc.constant dense<[2.0, 1.0]> : tensor<2xf32>
  %o = mc.constant dense<[0.5, 0.0]> : tensor<2xf32>
  %m = mc.constant dense<[1.0, 0.0]> : tensor<2xf32>
  %v = mc.constant dense<[0.0, 0.0]> : tensor<2xf32>
  %0 = mc.conv2d %x, %w, strides = [1, 1], padding = [0, 0, 0, 0], dilation = [1, 1], groups = 1 : (tensor<1x1x4x4xf32>, tensor<2x1x1x1xf32>) -> tensor<1x2x4x4xf32>
  %1 = mc.batch_norm %0, %s, %o, %m, %v, epsilon = 1.0, feature_axis = 1 : tensor<1x2x4x4xf32>, tensor<2xf32>
  return %1 : tensor<1x2x4x4xf32>
}

// -----

// With a conv bias: b' = (b - mean) * s + offset = ([1, 1] - [1, 0]) * [2, 1] + [0.5, 0] = [0.5, 1].
// CHECK-LABEL: func.func @conv_bias_bn
// CHECK-DAG: mc.constant dense<[5.000000e-01, 1.000000e+00]> : tensor<2xf32>
// CHECK-NOT: mc.batch_norm
func.func @conv_bias_bn(%x: tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %w = mc.constant dense<1.0> : tensor<2x1x1x1xf32>
  %b = mc.constant dense<1.0> : tensor<2xf32>
  %s = mc.constant dense<[2.0, 1.0]> : tensor<2xf32>
  %o = mc.constant dense<[0.5, 0.0]> : tensor<2xf32>
  %m = mc.constant dense<[1.0, 0.0]> : tensor<2xf32>
  %v = mc.constant dense<[0.0, 0.0]> : tensor<2xf32>
  %0 = mc.conv2d %x, %w, strides = [1, 1], padding = [0, 0, 0, 0], dilation = [1, 1], groups = 1 : (tensor<1x1x4x4xf32>, tensor<2x1x1x1xf32>) -> tensor<1x2x4x4xf32>
  %1 = mc.broadcast_in_dim %b, dims = [1] : (tensor<2xf32>) -> tensor<1x2x4x4xf32>
  %2 = mc.add %0, %1 : tensor<1x2x4x4xf32>
  %3 = mc.batch_norm %2, %s, %o, %m, %v, epsilon = 1.0, feature_axis = 1 : tensor<1x2x4x4xf32>, tensor<2xf32>
  return %3 : tensor<1x2x4x4xf32>
}

// -----

// Not folded: statistics that are inputs (not constants), a conv whose
// result is used elsewhere too, and a mutable (trained) weight.
// CHECK-LABEL: func.func @not_folded
// CHECK: mc.batch_norm
// CHECK: mc.batch_norm
// CHECK: mc.batch_norm
ml_program.global private mutable @tw(dense<1.0> : tensor<2x1x1x1xf32>) : tensor<2x1x1x1xf32>
func.func @not_folded(%x: tensor<1x1x4x4xf32>, %m: tensor<2xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) {
  %w = mc.constant dense<1.0> : tensor<2x1x1x1xf32>
  %c = mc.constant dense<1.0> : tensor<2xf32>
  %0 = mc.conv2d %x, %w, strides = [1, 1], padding = [0, 0, 0, 0], dilation = [1, 1], groups = 1 : (tensor<1x1x4x4xf32>, tensor<2x1x1x1xf32>) -> tensor<1x2x4x4xf32>
  %1 = mc.batch_norm %0, %c, %c, %m, %c, epsilon = 1.0e-05, feature_axis = 1 : tensor<1x2x4x4xf32>, tensor<2xf32>
  %2 = mc.conv2d %x, %w, strides = [1, 1], padding = [0, 0, 0, 0], dilation = [1, 1], groups = 1 : (tensor<1x1x4x4xf32>, tensor<2x1x1x1xf32>) -> tensor<1x2x4x4xf32>
  %3 = mc.batch_norm %2, %c, %c, %c, %c, epsilon = 1.0e-05, feature_axis = 1 : tensor<1x2x4x4xf32>, tensor<2xf32>
  %tw = ml_program.global_load @tw : tensor<2x1x1x1xf32>
  %4 = mc.conv2d %x, %tw, strides = [1, 1], padding = [0, 0, 0, 0], dilation = [1, 1], groups = 1 : (tensor<1x1x4x4xf32>, tensor<2x1x1x1xf32>) -> tensor<1x2x4x4xf32>
  %5 = mc.batch_norm %4, %c, %c, %c, %c, epsilon = 1.0e-05, feature_axis = 1 : tensor<1x2x4x4xf32>, tensor<2xf32>
  return %1, %2, %3, %5 : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
}

// -----

// A channels_last conv (mc-channels-last runs after this pass, but a graph
// may carry the attribute already): the NCHW rule would scale along H; the
// norm stays.
// CHECK-LABEL: func.func @channels_last
// CHECK: mc.batch_norm
ml_program.global private @w(dense<[[[[1.0]]], [[[3.0]]]]> : tensor<2x1x1x1xf32>) : tensor<2x1x1x1xf32>
func.func @channels_last(%x: tensor<1x2x2x1xf32>) -> tensor<1x2x2x2xf32> {
  %w = ml_program.global_load_const @w : tensor<2x1x1x1xf32>
  %s = mc.constant dense<[2.0, 1.0]> : tensor<2xf32>
  %o = mc.constant dense<[0.5, 0.0]> : tensor<2xf32>
  %m = mc.constant dense<[1.0, 0.0]> : tensor<2xf32>
  %v = mc.constant dense<[0.0, 0.0]> : tensor<2xf32>
  %0 = mc.conv2d %x, %w, strides = [1, 1], padding = [0, 0, 0, 0], dilation = [1, 1], groups = 1 channels_last : (tensor<1x2x2x1xf32>, tensor<2x1x1x1xf32>) -> tensor<1x2x2x2xf32>
  %1 = mc.batch_norm %0, %s, %o, %m, %v, epsilon = 1.0, feature_axis = 1 : tensor<1x2x2x2xf32>, tensor<2xf32>
  return %1 : tensor<1x2x2x2xf32>
}
