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
