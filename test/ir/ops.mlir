// RUN: modelc-opt %s | FileCheck %s
// RUN: modelc-opt %s | modelc-opt | FileCheck %s
// RUN: modelc-opt %s --emit-bytecode | modelc-opt | FileCheck %s

// Every mc op prints and parses back (text, and text -> bytecode -> text).

// CHECK-LABEL: func @elementwise
func.func @elementwise(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>, %i: tensor<2x3xi32>) -> tensor<2x3xf32> {
  // CHECK: mc.add %{{.*}}, %{{.*}} : tensor<2x3xf32>
  %0 = mc.add %a, %b : tensor<2x3xf32>
  // CHECK: mc.sub
  %1 = mc.sub %0, %b : tensor<2x3xf32>
  // CHECK: mc.mul
  %2 = mc.mul %1, %b : tensor<2x3xf32>
  // CHECK: mc.div
  %3 = mc.div %2, %b : tensor<2x3xf32>
  // CHECK: mc.maximum
  %4 = mc.maximum %3, %a : tensor<2x3xf32>
  // CHECK: mc.neg
  %5 = mc.neg %4 : tensor<2x3xf32>
  // CHECK: mc.exp
  %6 = mc.exp %5 : tensor<2x3xf32>
  // CHECK: mc.log
  %7 = mc.log %6 : tensor<2x3xf32>
  // CHECK: mc.tanh
  %8 = mc.tanh %7 : tensor<2x3xf32>
  // CHECK: mc.sigmoid
  %9 = mc.sigmoid %8 : tensor<2x3xf32>
  // CHECK: mc.relu
  %10 = mc.relu %9 : tensor<2x3xf32>
  // CHECK: mc.sqrt
  %11 = mc.sqrt %10 : tensor<2x3xf32>
  // CHECK: mc.add %{{.*}} : tensor<2x3xi32>
  %12 = mc.add %i, %i : tensor<2x3xi32>
  // CHECK: mc.cast %{{.*}} : tensor<2x3xi32> to tensor<2x3xf32>
  %13 = mc.cast %12 : tensor<2x3xi32> to tensor<2x3xf32>
  %14 = mc.add %11, %13 : tensor<2x3xf32>
  return %14 : tensor<2x3xf32>
}

// CHECK-LABEL: func @types
func.func @types(%h: tensor<4xf16>, %b: tensor<4xbf16>, %l: tensor<4xi64>, %p: tensor<4xi1>) -> (tensor<4xf16>, tensor<4xbf16>, tensor<4xi64>, tensor<4xf32>) {
  // CHECK: mc.mul %{{.*}} : tensor<4xf16>
  %0 = mc.mul %h, %h : tensor<4xf16>
  // CHECK: mc.exp %{{.*}} : tensor<4xbf16>
  %1 = mc.exp %b : tensor<4xbf16>
  // CHECK: mc.neg %{{.*}} : tensor<4xi64>
  %2 = mc.neg %l : tensor<4xi64>
  // CHECK: mc.cast %{{.*}} : tensor<4xi1> to tensor<4xf32>
  %3 = mc.cast %p : tensor<4xi1> to tensor<4xf32>
  return %0, %1, %2, %3 : tensor<4xf16>, tensor<4xbf16>, tensor<4xi64>, tensor<4xf32>
}

// CHECK-LABEL: func @shapes
func.func @shapes(%x: tensor<2x3x4xf32>, %v: tensor<3xf32>) -> (tensor<4x3x2xf32>, tensor<6x4xf32>, tensor<5x3xf32>) {
  // CHECK: mc.transpose %{{.*}}, permutation = [2, 1, 0] : (tensor<2x3x4xf32>) -> tensor<4x3x2xf32>
  %0 = mc.transpose %x, permutation = [2, 1, 0] : (tensor<2x3x4xf32>) -> tensor<4x3x2xf32>
  // CHECK: mc.reshape %{{.*}} : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  %1 = mc.reshape %x : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  // CHECK: mc.broadcast_in_dim %{{.*}}, dims = [1] : (tensor<3xf32>) -> tensor<5x3xf32>
  %2 = mc.broadcast_in_dim %v, dims = [1] : (tensor<3xf32>) -> tensor<5x3xf32>
  return %0, %1, %2 : tensor<4x3x2xf32>, tensor<6x4xf32>, tensor<5x3xf32>
}

// CHECK-LABEL: func @reductions
func.func @reductions(%x: tensor<2x3x4xf32>) -> (tensor<2xf32>, tensor<2x1x4xf32>, tensor<3x4xf32>) {
  // CHECK: mc.reduce_sum %{{.*}}, dims = [1, 2] : (tensor<2x3x4xf32>) -> tensor<2xf32>
  %0 = mc.reduce_sum %x, dims = [1, 2] : (tensor<2x3x4xf32>) -> tensor<2xf32>
  // CHECK: mc.reduce_mean %{{.*}}, dims = [1] keepdim : (tensor<2x3x4xf32>) -> tensor<2x1x4xf32>
  %1 = mc.reduce_mean %x, dims = [1] keepdim : (tensor<2x3x4xf32>) -> tensor<2x1x4xf32>
  // CHECK: mc.reduce_max %{{.*}}, dims = [0] : (tensor<2x3x4xf32>) -> tensor<3x4xf32>
  %2 = mc.reduce_max %x, dims = [0] : (tensor<2x3x4xf32>) -> tensor<3x4xf32>
  return %0, %1, %2 : tensor<2xf32>, tensor<2x1x4xf32>, tensor<3x4xf32>
}

// CHECK-LABEL: func @nn
func.func @nn(%a: tensor<2x4x8xf32>, %b: tensor<2x5x8xf32>) -> (tensor<2x4x5xf32>, tensor<2x8x8xf32>, tensor<2x4x5xf32>) {
  // CHECK: mc.matmul %{{.*}}, %{{.*}} transpose_b : tensor<2x4x8xf32>, tensor<2x5x8xf32> -> tensor<2x4x5xf32>
  %0 = mc.matmul %a, %b transpose_b : tensor<2x4x8xf32>, tensor<2x5x8xf32> -> tensor<2x4x5xf32>
  // CHECK: mc.matmul %{{.*}}, %{{.*}} transpose_a : tensor<2x4x8xf32>, tensor<2x4x8xf32> -> tensor<2x8x8xf32>
  %1 = mc.matmul %a, %a transpose_a : tensor<2x4x8xf32>, tensor<2x4x8xf32> -> tensor<2x8x8xf32>
  // CHECK: mc.softmax %{{.*}}, axis = 2 : tensor<2x4x5xf32>
  %2 = mc.softmax %0, axis = 2 : tensor<2x4x5xf32>
  return %0, %1, %2 : tensor<2x4x5xf32>, tensor<2x8x8xf32>, tensor<2x4x5xf32>
}

// CHECK-LABEL: func @constants
func.func @constants() -> (tensor<2xf32>, tensor<2x2xi1>) {
  // CHECK: mc.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
  %0 = mc.constant dense<[1.0, 2.0]> : tensor<2xf32>
  // CHECK: mc.constant dense<{{\[\[}}true, false], [false, true]]> : tensor<2x2xi1>
  %1 = mc.constant dense<[[true, false], [false, true]]> : tensor<2x2xi1>
  return %0, %1 : tensor<2xf32>, tensor<2x2xi1>
}

// CHECK-LABEL: func @real_model_elementwise
func.func @real_model_elementwise(%a: tensor<4xf32>, %b: tensor<4xf32>, %p: tensor<4xi1>) -> (tensor<4xf32>, tensor<4xi1>) {
  // CHECK: mc.abs %{{.*}} : tensor<4xf32>
  %0 = mc.abs %a : tensor<4xf32>
  // CHECK: mc.erf
  %1 = mc.erf %0 : tensor<4xf32>
  // CHECK: mc.sin %{{.*}} : tensor<4xf32>
  %sin = mc.sin %1 : tensor<4xf32>
  // CHECK: mc.cos %{{.*}} : tensor<4xf32>
  %cos = mc.cos %sin : tensor<4xf32>
  // CHECK: mc.tan %{{.*}} : tensor<4xf32>
  %tan = mc.tan %cos : tensor<4xf32>
  // CHECK: mc.asin %{{.*}} : tensor<4xf32>
  %asin = mc.asin %tan : tensor<4xf32>
  // CHECK: mc.acos %{{.*}} : tensor<4xf32>
  %acos = mc.acos %asin : tensor<4xf32>
  // CHECK: mc.atan %{{.*}} : tensor<4xf32>
  %atan = mc.atan %acos : tensor<4xf32>
  // CHECK: mc.sinh %{{.*}} : tensor<4xf32>
  %sinh = mc.sinh %atan : tensor<4xf32>
  // CHECK: mc.cosh %{{.*}} : tensor<4xf32>
  %cosh = mc.cosh %sinh : tensor<4xf32>
  // CHECK: mc.asinh %{{.*}} : tensor<4xf32>
  %asinh = mc.asinh %cosh : tensor<4xf32>
  // CHECK: mc.acosh %{{.*}} : tensor<4xf32>
  %acosh = mc.acosh %asinh : tensor<4xf32>
  // CHECK: mc.atanh %{{.*}} : tensor<4xf32>
  %atanh = mc.atanh %acosh : tensor<4xf32>
  // CHECK: mc.hardswish %{{.*}} : tensor<4xf32>
  %hs = mc.hardswish %1 : tensor<4xf32>
  // CHECK: mc.gelu %{{.*}} : tensor<4xf32>
  %2 = mc.gelu %1 : tensor<4xf32>
  // CHECK: mc.gelu %{{.*}} tanh_approximation : tensor<4xf32>
  %3 = mc.gelu %2 tanh_approximation : tensor<4xf32>
  // CHECK: mc.pow
  %4 = mc.pow %3, %b : tensor<4xf32>
  // CHECK: mc.minimum
  %5 = mc.minimum %4, %b : tensor<4xf32>
  // CHECK: mc.clamp %{{.*}}, min = 0.000000e+00, max = 6.000000e+00 : tensor<4xf32>
  %6 = mc.clamp %5, min = 0.0, max = 6.0 : tensor<4xf32>
  // CHECK: mc.compare LT, %{{.*}}, %{{.*}} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %7 = mc.compare LT, %6, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  // CHECK: mc.not %{{.*}} : tensor<4xi1>
  %8 = mc.not %7 : tensor<4xi1>
  // CHECK: mc.select %{{.*}}, %{{.*}}, %{{.*}} : tensor<4xi1>, tensor<4xf32>
  %9 = mc.select %8, %6, %a : tensor<4xi1>, tensor<4xf32>
  return %9, %p : tensor<4xf32>, tensor<4xi1>
}

// CHECK-LABEL: func @real_model_shapes
func.func @real_model_shapes(%x: tensor<2x8xf32>, %t: tensor<10x4xf32>, %i: tensor<2x3xi64>) -> (tensor<2x11xf32>, tensor<2x3xf32>, tensor<2x3x4xf32>, tensor<4x10xf32>, tensor<2xf32>, tensor<2x8xf32>) {
  // CHECK: mc.concat %{{.*}}, %{{.*}} axis = 1 : (tensor<2x8xf32>, tensor<2x3xf32>) -> tensor<2x11xf32>
  %s = mc.slice %x, start = [0, 1], limit = [2, 7], strides = [1, 2] : (tensor<2x8xf32>) -> tensor<2x3xf32>
  %0 = mc.concat %x, %s axis = 1 : (tensor<2x8xf32>, tensor<2x3xf32>) -> tensor<2x11xf32>
  // CHECK: mc.gather %{{.*}}, %{{.*}}, axis = 0 : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %1 = mc.gather %t, %i, axis = 0 : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  // CHECK: mc.pad %{{.*}}, low = [1, 0], high = [2, 1], value = 0.000000e+00 : (tensor<2x8xf32>) -> tensor<5x9xf32>
  %2 = mc.pad %x, low = [1, 0], high = [2, 1], value = 0.0 : (tensor<2x8xf32>) -> tensor<5x9xf32>
  // CHECK: mc.reduce_min %{{.*}}, dims = [1] : (tensor<2x8xf32>) -> tensor<2xf32>
  %3 = mc.reduce_min %x, dims = [1] : (tensor<2x8xf32>) -> tensor<2xf32>
  // CHECK: mc.log_softmax %{{.*}}, axis = 1 : tensor<2x8xf32>
  %4 = mc.log_softmax %x, axis = 1 : tensor<2x8xf32>
  %5 = mc.transpose %t, permutation = [1, 0] : (tensor<10x4xf32>) -> tensor<4x10xf32>
  return %0, %s, %1, %5, %3, %4 : tensor<2x11xf32>, tensor<2x3xf32>, tensor<2x3x4xf32>, tensor<4x10xf32>, tensor<2xf32>, tensor<2x8xf32>
}

// gather's adjoint: the result has `size` rows along the axis; a dynamic
// batch in the indices leaves a static result (an embedding's gradient).
// CHECK-LABEL: func @scatter_add
func.func @scatter_add(%g: tensor<2x3x4xf32>, %i: tensor<2x3xi64>, %gb: tensor<?x3x4xf32>, %ib: tensor<?x3xi32>, %h: tensor<5x3x2xf32>, %j: tensor<3xi64>) -> (tensor<10x4xf32>, tensor<10x4xf32>, tensor<5x7x2xf32>) {
  // CHECK: mc.scatter_add %{{.*}}, %{{.*}}, axis = 0, size = 10 : (tensor<2x3x4xf32>, tensor<2x3xi64>) -> tensor<10x4xf32>
  %0 = mc.scatter_add %g, %i, axis = 0, size = 10 : (tensor<2x3x4xf32>, tensor<2x3xi64>) -> tensor<10x4xf32>
  // CHECK: mc.scatter_add %{{.*}}, %{{.*}}, axis = 0, size = 10 : (tensor<?x3x4xf32>, tensor<?x3xi32>) -> tensor<10x4xf32>
  %1 = mc.scatter_add %gb, %ib, axis = 0, size = 10 : (tensor<?x3x4xf32>, tensor<?x3xi32>) -> tensor<10x4xf32>
  // CHECK: mc.scatter_add %{{.*}}, %{{.*}}, axis = 1, size = 7 : (tensor<5x3x2xf32>, tensor<3xi64>) -> tensor<5x7x2xf32>
  %2 = mc.scatter_add %h, %j, axis = 1, size = 7 : (tensor<5x3x2xf32>, tensor<3xi64>) -> tensor<5x7x2xf32>
  return %0, %1, %2 : tensor<10x4xf32>, tensor<10x4xf32>, tensor<5x7x2xf32>
}

// CHECK-LABEL: func @real_model_nn
func.func @real_model_nn(%x: tensor<1x4x9x9xf32>, %w: tensor<8x2x3x3xf32>, %c: tensor<8xf32>, %s: tensor<2x5x16xf32>, %g: tensor<16xf32>) -> (tensor<1x8x4x4xf32>, tensor<1x4x5x5xf32>, tensor<1x4x4x4xf32>, tensor<1x8x4x4xf32>, tensor<2x5x16xf32>) {
  // CHECK: mc.conv2d %{{.*}}, %{{.*}}, strides = [2, 2], padding = [1, 1, 0, 0], dilation = [1, 1], groups = 2 : (tensor<1x4x9x9xf32>, tensor<8x2x3x3xf32>) -> tensor<1x8x4x4xf32>
  %0 = mc.conv2d %x, %w, strides = [2, 2], padding = [1, 1, 0, 0], dilation = [1, 1], groups = 2 : (tensor<1x4x9x9xf32>, tensor<8x2x3x3xf32>) -> tensor<1x8x4x4xf32>
  // CHECK: mc.max_pool2d %{{.*}}, kernel = [3, 3], strides = [2, 2], padding = [1, 1, 1, 1], dilation = [1, 1] : (tensor<1x4x9x9xf32>) -> tensor<1x4x5x5xf32>
  %1 = mc.max_pool2d %x, kernel = [3, 3], strides = [2, 2], padding = [1, 1, 1, 1], dilation = [1, 1] : (tensor<1x4x9x9xf32>) -> tensor<1x4x5x5xf32>
  // CHECK: mc.avg_pool2d %{{.*}}, kernel = [2, 2], strides = [2, 2], padding = [0, 0, 0, 0], dilation = [1, 1] ceil_mode count_include_pad : (tensor<1x4x9x9xf32>) -> tensor<1x4x5x5xf32>
  %2 = mc.avg_pool2d %x, kernel = [2, 2], strides = [2, 2], padding = [0, 0, 0, 0], dilation = [1, 1] ceil_mode count_include_pad : (tensor<1x4x9x9xf32>) -> tensor<1x4x5x5xf32>
  // Floor mode: 4 windows fit.
  %3 = mc.avg_pool2d %x, kernel = [2, 2], strides = [2, 2], padding = [0, 0, 0, 0], dilation = [1, 1] : (tensor<1x4x9x9xf32>) -> tensor<1x4x4x4xf32>
  // CHECK: mc.batch_norm %{{.*}}, epsilon = 1.000000e-05, feature_axis = 1 : tensor<1x8x4x4xf32>, tensor<8xf32>
  %4 = mc.batch_norm %0, %c, %c, %c, %c, epsilon = 1.0e-05, feature_axis = 1 : tensor<1x8x4x4xf32>, tensor<8xf32>
  // CHECK: mc.layer_norm %{{.*}}, axis = 2, epsilon = 1.000000e-05 : tensor<2x5x16xf32>, tensor<16xf32>
  %5 = mc.layer_norm %s, %g, %g, axis = 2, epsilon = 1.0e-05 : tensor<2x5x16xf32>, tensor<16xf32>
  return %4, %1, %3, %4, %5 : tensor<1x8x4x4xf32>, tensor<1x4x5x5xf32>, tensor<1x4x4x4xf32>, tensor<1x8x4x4xf32>, tensor<2x5x16xf32>
}

// CHECK-LABEL: func @copy
func.func @copy(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // CHECK: mc.copy %{{.*}} : tensor<2x3xf32>
  %0 = mc.copy %x : tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// CHECK-LABEL: func @fused
func.func @fused(%x: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
  // CHECK: mc.fused %{{.*}}, %{{.*}} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32> {
  // CHECK: mc.yield %{{.*}} : tensor<2x3xf32>
  %0 = mc.fused %x, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32> {
  ^bb0(%a: tensor<2x3xf32>, %c: tensor<3xf32>):
    %1 = mc.broadcast_in_dim %c, dims = [1] : (tensor<3xf32>) -> tensor<2x3xf32>
    %2 = mc.add %a, %1 : tensor<2x3xf32>
    mc.yield %2 : tensor<2x3xf32>
  }
  return %0 : tensor<2x3xf32>
}

// CHECK-LABEL: func @all_reduce
func.func @all_reduce(%g: tensor<4x3xf32>, %b: tensor<4xf32>) -> tensor<16xf32> {
  // CHECK: %[[B:.*]] = mc.all_reduce_start %{{.*}}, %{{.*}} ranks = 2 : (tensor<4x3xf32>, tensor<4xf32>) -> tensor<16xf32>
  // CHECK: mc.all_reduce_wait %[[B]] scale = 5.000000e-01 : tensor<16xf32>
  %0 = mc.all_reduce_start %g, %b ranks = 2 : (tensor<4x3xf32>, tensor<4xf32>) -> tensor<16xf32>
  %1 = mc.all_reduce_wait %0 scale = 5.000000e-01 : tensor<16xf32>
  return %1 : tensor<16xf32>
}

// CHECK-LABEL: func.func @random
func.func @random(%x: tensor<2x8xbf16>, %seed: tensor<i64>, %offset: tensor<i64>) -> tensor<2x8xbf16> {
  // CHECK: mc.dropout %{{.*}}, %{{.*}}, %{{.*}}, p = 1.000000e-01 : tensor<2x8xbf16>
  %0 = mc.dropout %x, %seed, %offset, p = 0.1 : tensor<2x8xbf16>
  return %0 : tensor<2x8xbf16>
}
