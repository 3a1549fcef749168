// RUN: modelc-opt %s -split-input-file --mc-fold-constants | FileCheck %s
// RUN: modelc-opt %s -split-input-file --mc-fold-constants="max-bytes=16" | FileCheck %s --check-prefix=SMALL
// RUN: modelc-opt %s -split-input-file --mc-fold-constants="globals=false" | FileCheck %s --check-prefix=NOGLOBALS

// Slices of a frozen weight become constants (computed by the runtime's
// slice kernel); the op reading the input stays.
// CHECK-LABEL: func.func @slices
// CHECK-NOT: mc.slice
// CHECK: %[[Q:.*]] = mc.constant dense<{{\[\[}}1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>
// CHECK: mc.matmul %arg0, %[[Q]]
// SMALL-LABEL: func.func @slices
// SMALL: mc.slice
// The train pipeline (globals=false): the weight is a parameter, and a
// folded slice of it would get no gradient.
// NOGLOBALS-LABEL: func.func @slices
// NOGLOBALS: mc.slice
ml_program.global private @w(dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]> : tensor<3x2xf32>) : tensor<3x2xf32>
func.func @slices(%x: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %w = ml_program.global_load_const @w : tensor<3x2xf32>
  %0 = mc.slice %w, start = [0, 0], limit = [2, 2], strides = [1, 1] : (tensor<3x2xf32>) -> tensor<2x2xf32>
  %1 = mc.matmul %x, %0 : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  return %1 : tensor<2x2xf32>
}

// -----

// A causal mask from constants: broadcasts, compare (i1) and select fold
// into one constant; a broadcast on its own is left for fusion.
// CHECK-LABEL: func.func @mask
// CHECK-DAG: mc.constant dense<{{\[\[}}0.000000e+00, -1.000000e+09], [0.000000e+00, 0.000000e+00]]> : tensor<2x2xf32>
// CHECK-DAG: %[[B:.*]] = mc.broadcast_in_dim %arg1
// CHECK-NOT: mc.compare
// CHECK-NOT: mc.select
func.func @mask(%x: tensor<2x2xf32>, %b: tensor<2xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>) {
  %row = mc.constant dense<[[0], [1]]> : tensor<2x1xi64>
  %col = mc.constant dense<[[0, 1]]> : tensor<1x2xi64>
  %r = mc.broadcast_in_dim %row, dims = [0, 1] : (tensor<2x1xi64>) -> tensor<2x2xi64>
  %c = mc.broadcast_in_dim %col, dims = [0, 1] : (tensor<1x2xi64>) -> tensor<2x2xi64>
  %gt = mc.compare GT, %c, %r : (tensor<2x2xi64>, tensor<2x2xi64>) -> tensor<2x2xi1>
  %neg = mc.constant dense<-1.0e9> : tensor<2x2xf32>
  %zero = mc.constant dense<0.0> : tensor<2x2xf32>
  %m = mc.select %gt, %neg, %zero : tensor<2x2xi1>, tensor<2x2xf32>
  %0 = mc.add %x, %m : tensor<2x2xf32>
  %bb = mc.broadcast_in_dim %b, dims = [1] : (tensor<2xf32>) -> tensor<2x2xf32>
  return %0, %bb : tensor<2x2xf32>, tensor<2x2xf32>
}

// -----

// Not folded: a trained (mutable) weight, and a gather whose index is out
// of range (a run-time error stays one).
// CHECK-LABEL: func.func @not_folded
// CHECK: mc.slice
// CHECK: mc.gather
ml_program.global private mutable @t(dense<1.0> : tensor<3x2xf32>) : tensor<3x2xf32>
func.func @not_folded() -> (tensor<2x2xf32>, tensor<1x2xf32>) {
  %t = ml_program.global_load @t : tensor<3x2xf32>
  %0 = mc.slice %t, start = [0, 0], limit = [2, 2], strides = [1, 1] : (tensor<3x2xf32>) -> tensor<2x2xf32>
  %w = mc.constant dense<1.0> : tensor<3x2xf32>
  %i = mc.constant dense<[7]> : tensor<1xi64>
  %1 = mc.gather %w, %i, axis = 0 : (tensor<3x2xf32>, tensor<1xi64>) -> tensor<1x2xf32>
  return %0, %1 : tensor<2x2xf32>, tensor<1x2xf32>
}

// -----

// Over max-bytes, an op still folds when it alone reads its constants and
// is no larger: mc-amp's cast of a weight to bf16 (32 bytes of bf16 for 64
// of f32). A weight something else reads too stays, and so does its cast.
// The bf16 values are the runtime cast kernel's (round to nearest even):
// 1.00390625 is halfway between 1.0 and 1.0078125 and rounds to 1.0.
// SMALL-LABEL: func.func @weight_casts
// SMALL: %[[W:.*]] = mc.constant dense<1.000000e+00> : tensor<4x4xbf16>
// SMALL-NEXT: mc.matmul %arg0, %[[W]]
// SMALL: %[[U:.*]] = ml_program.global_load_const @u
// SMALL-NEXT: %[[UC:.*]] = mc.cast %[[U]] : tensor<4x4xf32> to tensor<4x4xbf16>
// SMALL-NEXT: mc.matmul %arg0, %[[UC]]
// SMALL: mc.add %{{.*}}, %[[U]]
ml_program.global private @w(dense<1.00390625> : tensor<4x4xf32>) : tensor<4x4xf32>
ml_program.global private @u(dense<2.0> : tensor<4x4xf32>) : tensor<4x4xf32>
func.func @weight_casts(%x: tensor<4x4xbf16>) -> (tensor<4x4xbf16>, tensor<4x4xf32>) {
  %w = ml_program.global_load_const @w : tensor<4x4xf32>
  %wc = mc.cast %w : tensor<4x4xf32> to tensor<4x4xbf16>
  %0 = mc.matmul %x, %wc : tensor<4x4xbf16>, tensor<4x4xbf16> -> tensor<4x4xbf16>
  %u = ml_program.global_load_const @u : tensor<4x4xf32>
  %uc = mc.cast %u : tensor<4x4xf32> to tensor<4x4xbf16>
  %1 = mc.matmul %x, %uc : tensor<4x4xbf16>, tensor<4x4xbf16> -> tensor<4x4xbf16>
  %2 = mc.cast %1 : tensor<4x4xbf16> to tensor<4x4xf32>
  %3 = mc.add %2, %u : tensor<4x4xf32>
  %4 = mc.add %0, %1 : tensor<4x4xbf16>
  return %4, %3 : tensor<4x4xbf16>, tensor<4x4xf32>
}
