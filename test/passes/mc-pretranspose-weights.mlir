// RUN: modelc-opt %s -split-input-file --mc-pretranspose-weights | FileCheck %s
// RUN: modelc-opt %s -split-input-file --mc-compile-pipeline=fuse=false | FileCheck %s --check-prefix=PIPE
// RUN: modelc-opt %s -split-input-file --mc-compile-pipeline="fuse=false pretranspose-weights=false" | FileCheck %s --check-prefix=OFF

// A global [N, K] = [3, 2] weight read transposed: stored as [K, N] = [2, 3]
// (the values moved, rows become columns), the load and the global go.
// CHECK-LABEL: func.func @linear
// CHECK-NOT: ml_program.global_load_const
// CHECK: %[[W:.*]] = mc.constant dense<{{\[\[}}1.000000e+00, 3.000000e+00, 5.000000e+00], [2.000000e+00, 4.000000e+00, 6.000000e+00]]> : tensor<2x3xf32>
// CHECK: mc.matmul %arg0, %[[W]] : tensor<8x2xf32>, tensor<2x3xf32> -> tensor<8x3xf32>
// PIPE-NOT: ml_program.global
// PIPE-LABEL: func.func @linear
// PIPE-NOT: transpose_b
// PIPE: mc.matmul %arg0, %{{.*}} : tensor<8x2xf32>, tensor<2x3xf32>
// OFF: ml_program.global private @w
// OFF-LABEL: func.func @linear
// OFF: mc.matmul %arg0, %{{.*}} transpose_b : tensor<8x2xf32>, tensor<3x2xf32>
ml_program.global private @w(dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]> : tensor<3x2xf32>) : tensor<3x2xf32>
func.func @linear(%x: tensor<8x2xf32>) -> tensor<8x3xf32> {
  %w = ml_program.global_load_const @w : tensor<3x2xf32>
  %0 = mc.matmul %x, %w transpose_b : tensor<8x2xf32>, tensor<3x2xf32> -> tensor<8x3xf32>
  return %0 : tensor<8x3xf32>
}

// -----

// Read through a reshape (an imported LSTM's [1, 4H, I] weight) by two
// matmuls (two time steps), of 8 rows and of a dynamic batch: one
// transposed constant for both; batched [2, 2, 3] f16 transposes each
// matrix.
// CHECK-LABEL: func.func @shared
// CHECK-NOT: mc.reshape
// CHECK: %[[W:.*]] = mc.constant dense<{{\[\[}}1.000000e+00, 3.000000e+00], [2.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>
// CHECK: mc.matmul %arg0, %[[W]] : tensor<8x2xf32>, tensor<2x2xf32>
// CHECK: mc.matmul %arg2, %[[W]] : tensor<?x2xf32>, tensor<2x2xf32>
// CHECK: %[[B:.*]] = mc.constant dense<{{\[\[\[}}1.000000e+00, 4.000000e+00], [2.000000e+00, 5.000000e+00], [3.000000e+00, 6.000000e+00]], {{\[\[}}7.000000e+00, 1.000000e+01], [8.000000e+00, 1.100000e+01], [9.000000e+00, 1.200000e+01]]]> : tensor<2x3x2xf16>
// CHECK: mc.matmul %arg1, %[[B]] : tensor<2x8x3xf16>, tensor<2x3x2xf16>
ml_program.global private @lstm(dense<[[[1.0, 2.0], [3.0, 4.0]]]> : tensor<1x2x2xf32>) : tensor<1x2x2xf32>
func.func @shared(%x: tensor<8x2xf32>, %y: tensor<2x8x3xf16>, %d: tensor<?x2xf32>) -> (tensor<8x2xf32>, tensor<?x2xf32>, tensor<2x8x2xf16>) attributes {mc.batch = array<i64: 1, 16, 16>} {
  %g = ml_program.global_load_const @lstm : tensor<1x2x2xf32>
  %w = mc.reshape %g : (tensor<1x2x2xf32>) -> tensor<2x2xf32>
  %0 = mc.matmul %x, %w transpose_b : tensor<8x2xf32>, tensor<2x2xf32> -> tensor<8x2xf32>
  %1 = mc.matmul %d, %w transpose_b : tensor<?x2xf32>, tensor<2x2xf32> -> tensor<?x2xf32>
  %b = mc.constant dense<[[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], [[7.0, 8.0, 9.0], [10.0, 11.0, 12.0]]]> : tensor<2x2x3xf16>
  %2 = mc.matmul %y, %b transpose_b : tensor<2x8x3xf16>, tensor<2x2x3xf16> -> tensor<2x8x2xf16>
  return %0, %1, %2 : tensor<8x2xf32>, tensor<?x2xf32>, tensor<2x8x2xf16>
}

// -----

// Left as they are: a weight also read otherwise (a tied embedding: the
// gather would need the original beside the copy), also read untransposed
// by another matmul, read through a reshape whose input is read elsewhere,
// a mutable global (a trained parameter), a transposed left operand, an
// operand that is no constant, a splat, and a weight only matrix-vector
// products read (fewer than 8 rows: they read [N, K] faster).
// CHECK-LABEL: func.func @left
// CHECK-NOT: mc.constant dense<{{.*}}> : tensor<8x5xf32>
// CHECK: mc.matmul %arg0, %{{.*}} transpose_b : tensor<9x8xf32>, tensor<5x8xf32>
// CHECK: mc.matmul %arg2, %{{.*}} transpose_b : tensor<9x3xf32>, tensor<3x3xf32>
// CHECK: mc.matmul %arg2, %{{.*}} : tensor<9x3xf32>, tensor<3x3xf32>
// CHECK: mc.matmul %arg2, %{{.*}} transpose_b : tensor<9x3xf32>, tensor<3x3xf32>
// CHECK: mc.matmul %arg2, %{{.*}} transpose_b : tensor<9x3xf32>, tensor<3x3xf32>
// CHECK: mc.matmul %{{.*}}, %arg3 transpose_a : tensor<3x3xf32>, tensor<3x3xf32>
// CHECK: mc.matmul %arg2, %arg3 transpose_b : tensor<9x3xf32>, tensor<3x3xf32>
// CHECK: mc.matmul %arg2, %{{.*}} transpose_b : tensor<9x3xf32>, tensor<4x3xf32>
// CHECK: mc.matmul %arg4, %{{.*}} transpose_b : tensor<7x3xf32>, tensor<2x3xf32>
// CHECK: mc.matmul %arg5, %{{.*}} transpose_b : tensor<1x3xf32>, tensor<2x3xf32>
ml_program.global private @emb(dense<1.0> : tensor<5x8xf32>) : tensor<5x8xf32>
ml_program.global private mutable @p(dense<1.0> : tensor<3x3xf32>) : tensor<3x3xf32>
func.func @left(%x: tensor<9x8xf32>, %ids: tensor<2xi64>, %z: tensor<9x3xf32>, %v: tensor<3x3xf32>, %r3: tensor<7x3xf32>, %r1: tensor<1x3xf32>) -> (tensor<9x5xf32>, tensor<2x8xf32>, tensor<9x3xf32>, tensor<9x3xf32>, tensor<9x3xf32>, tensor<9x3xf32>, tensor<3x3xf32>, tensor<9x3xf32>, tensor<1x3x3xf32>, tensor<9x4xf32>, tensor<7x2xf32>, tensor<1x2xf32>) {
  %e = ml_program.global_load_const @emb : tensor<5x8xf32>
  %0 = mc.matmul %x, %e transpose_b : tensor<9x8xf32>, tensor<5x8xf32> -> tensor<9x5xf32>
  %1 = mc.gather %e, %ids, axis = 0 : (tensor<5x8xf32>, tensor<2xi64>) -> tensor<2x8xf32>
  %c = mc.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]> : tensor<3x3xf32>
  %2 = mc.matmul %z, %c transpose_b : tensor<9x3xf32>, tensor<3x3xf32> -> tensor<9x3xf32>
  %3 = mc.matmul %z, %c : tensor<9x3xf32>, tensor<3x3xf32> -> tensor<9x3xf32>
  %d = mc.constant dense<[[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]]> : tensor<1x3x3xf32>
  %r = mc.reshape %d : (tensor<1x3x3xf32>) -> tensor<3x3xf32>
  %4 = mc.matmul %z, %r transpose_b : tensor<9x3xf32>, tensor<3x3xf32> -> tensor<9x3xf32>
  %pw = ml_program.global_load @p : tensor<3x3xf32>
  %5 = mc.matmul %z, %pw transpose_b : tensor<9x3xf32>, tensor<3x3xf32> -> tensor<9x3xf32>
  %a = mc.constant dense<2.0> : tensor<3x3xf32>
  %6 = mc.matmul %a, %v transpose_a : tensor<3x3xf32>, tensor<3x3xf32> -> tensor<3x3xf32>
  %7 = mc.matmul %z, %v transpose_b : tensor<9x3xf32>, tensor<3x3xf32> -> tensor<9x3xf32>
  %s = mc.constant dense<0.25> : tensor<4x3xf32>
  %8 = mc.matmul %z, %s transpose_b : tensor<9x3xf32>, tensor<4x3xf32> -> tensor<9x4xf32>
  %mv = mc.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %9 = mc.matmul %r3, %mv transpose_b : tensor<7x3xf32>, tensor<2x3xf32> -> tensor<7x2xf32>
  %10 = mc.matmul %r1, %mv transpose_b : tensor<1x3xf32>, tensor<2x3xf32> -> tensor<1x2xf32>
  return %0, %1, %2, %3, %4, %5, %6, %7, %d, %8, %9, %10 : tensor<9x5xf32>, tensor<2x8xf32>, tensor<9x3xf32>, tensor<9x3xf32>, tensor<9x3xf32>, tensor<9x3xf32>, tensor<3x3xf32>, tensor<9x3xf32>, tensor<1x3x3xf32>, tensor<9x4xf32>, tensor<7x2xf32>, tensor<1x2xf32>
}

// -----

// A dynamic batch is judged at the size it favours (mc.batch's OPT): at 1
// row the product is near matrix-vector, and the weight stays.
// CHECK-LABEL: func.func @serving
// CHECK: mc.matmul %arg0, %{{.*}} transpose_b : tensor<?x3xf32>, tensor<2x3xf32>
func.func @serving(%x: tensor<?x3xf32>) -> tensor<?x2xf32> attributes {mc.batch = array<i64: 1, 16, 1>} {
  %w = mc.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %0 = mc.matmul %x, %w transpose_b : tensor<?x3xf32>, tensor<2x3xf32> -> tensor<?x2xf32>
  return %0 : tensor<?x2xf32>
}
