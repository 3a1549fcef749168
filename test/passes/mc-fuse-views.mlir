// RUN: modelc-opt %s -split-input-file --mc-fuse | FileCheck %s
// RUN: modelc-opt %s -split-input-file --mc-fuse="views=false" | FileCheck %s --check-prefix=NOVIEWS

// Views in regions (schema 2.6): the slices, reshapes and transposes that
// make q, k and v out of a packed projection ([S, B, 3D], PyTorch's
// MultiheadAttention: 2 batches, 2 heads of 4) join the attention region,
// which reads the projection itself. k's transpose to [.., d, s] is
// permuted the other way and read with transpose_b (each row of a slice
// is a run of the head dim).

// CHECK-LABEL: func.func @mha
// CHECK: %[[R:.*]] = mc.fused %arg0, %{{.*}} {attention} : (tensor<8x2x24xf32>, tensor<f32>) -> tensor<4x8x4xf32> {
// CHECK-NEXT: ^bb0(%[[P:.*]]: tensor<8x2x24xf32>, %{{.*}}: tensor<f32>):
// CHECK: mc.slice %[[P]], start = [0, 0, 0], limit = [8, 2, 8]
// CHECK: %[[K0:.*]] = mc.slice %[[P]], start = [0, 0, 8], limit = [8, 2, 16]
// CHECK: mc.slice %[[P]], start = [0, 0, 16], limit = [8, 2, 24]
// CHECK: %[[K1:.*]] = mc.reshape %[[K0]]
// CHECK: %[[KT:.*]] = mc.transpose %[[K1]], permutation = [1, 0, 2] : (tensor<8x4x4xf32>) -> tensor<4x8x4xf32>
// CHECK: mc.matmul %{{.*}}, %[[KT]] transpose_b : tensor<4x8x4xf32>, tensor<4x8x4xf32> -> tensor<4x8x8xf32>
// CHECK: mc.softmax
// CHECK: mc.yield
// CHECK-NOT: mc.slice
// CHECK-NOT: mc.transpose
// CHECK: return %[[R]]
// NOVIEWS-LABEL: func.func @mha
// NOVIEWS-COUNT-3: mc.slice
// NOVIEWS-COUNT-3: mc.transpose
// NOVIEWS: mc.fused {{.*}} {attention} : (tensor<f32>, tensor<4x8x4xf32>, tensor<4x4x8xf32>, tensor<4x8x4xf32>)
// NOVIEWS-NOT: transpose_b
func.func @mha(%proj: tensor<8x2x24xf32>) -> tensor<4x8x4xf32> {
  %s = mc.constant dense<2.0> : tensor<f32>
  %q0 = mc.slice %proj, start = [0, 0, 0], limit = [8, 2, 8], strides = [1, 1, 1] : (tensor<8x2x24xf32>) -> tensor<8x2x8xf32>
  %k0 = mc.slice %proj, start = [0, 0, 8], limit = [8, 2, 16], strides = [1, 1, 1] : (tensor<8x2x24xf32>) -> tensor<8x2x8xf32>
  %v0 = mc.slice %proj, start = [0, 0, 16], limit = [8, 2, 24], strides = [1, 1, 1] : (tensor<8x2x24xf32>) -> tensor<8x2x8xf32>
  %q1 = mc.reshape %q0 : (tensor<8x2x8xf32>) -> tensor<8x4x4xf32>
  %k1 = mc.reshape %k0 : (tensor<8x2x8xf32>) -> tensor<8x4x4xf32>
  %v1 = mc.reshape %v0 : (tensor<8x2x8xf32>) -> tensor<8x4x4xf32>
  %q = mc.transpose %q1, permutation = [1, 0, 2] : (tensor<8x4x4xf32>) -> tensor<4x8x4xf32>
  %kt = mc.transpose %k1, permutation = [1, 2, 0] : (tensor<8x4x4xf32>) -> tensor<4x4x8xf32>
  %v = mc.transpose %v1, permutation = [1, 0, 2] : (tensor<8x4x4xf32>) -> tensor<4x8x4xf32>
  %sb = mc.broadcast_in_dim %s, dims = [] : (tensor<f32>) -> tensor<4x8x4xf32>
  %qs = mc.div %q, %sb : tensor<4x8x4xf32>
  %scores = mc.matmul %qs, %kt : tensor<4x8x4xf32>, tensor<4x4x8xf32> -> tensor<4x8x8xf32>
  %p = mc.softmax %scores, axis = 2 : tensor<4x8x8xf32>
  %o = mc.matmul %p, %v : tensor<4x8x8xf32>, tensor<4x8x4xf32> -> tensor<4x8x4xf32>
  return %o : tensor<4x8x4xf32>
}

// -----

// An elementwise region reads a transpose (the residual add after
// attention's [S, B, D] -> [B, S, D]) as a view: one step.
// CHECK-LABEL: func.func @transpose_add
// CHECK: %[[R:.*]] = mc.fused %arg1, %arg0 : (tensor<8x2x4xf32>, tensor<2x8x4xf32>) -> tensor<2x8x4xf32> {
// CHECK: mc.transpose
// CHECK: mc.add
// CHECK: mc.relu
// CHECK: return %[[R]]
// NOVIEWS-LABEL: func.func @transpose_add
// NOVIEWS: mc.transpose
// NOVIEWS-NEXT: mc.fused
func.func @transpose_add(%x: tensor<2x8x4xf32>, %y: tensor<8x2x4xf32>) -> tensor<2x8x4xf32> {
  %t = mc.transpose %y, permutation = [1, 0, 2] : (tensor<8x2x4xf32>) -> tensor<2x8x4xf32>
  %a = mc.add %x, %t : tensor<2x8x4xf32>
  %r = mc.relu %a : tensor<2x8x4xf32>
  return %r : tensor<2x8x4xf32>
}

// -----

// A strided slice (every other row) is a view too.
// CHECK-LABEL: func.func @strided_slice
// CHECK: mc.fused %arg0, %arg1 : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32> {
// CHECK: mc.slice %{{.*}}, start = [1, 0], limit = [8, 4], strides = [2, 1]
func.func @strided_slice(%x: tensor<8x4xf32>, %y: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %s = mc.slice %x, start = [1, 0], limit = [8, 4], strides = [2, 1] : (tensor<8x4xf32>) -> tensor<4x4xf32>
  %m = mc.mul %s, %y : tensor<4x4xf32>
  return %m : tensor<4x4xf32>
}

// -----

// A reshape of a view the region reads joins with it: an LSTM step adds
// its time step's rows of the input projection (slice, then reshape to
// [B, 4H]) in the state matmul's epilogue, and an elementwise region reads
// a transposed tensor through a reshape.
// CHECK-LABEL: func.func @reshaped_views
// CHECK: %[[M:.*]] = mc.fused %arg1, %arg2, %arg0 : (tensor<2x3xf32>, tensor<3x4xf32>, tensor<5x2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT: ^bb0
// CHECK-NEXT: mc.matmul
// CHECK-NEXT: mc.slice %{{.*}}, start = [1, 0, 0], limit = [2, 2, 4]
// CHECK-NEXT: mc.reshape
// CHECK-NEXT: mc.add
// CHECK: mc.fused %arg3, %arg4 : (tensor<4x6xf32>, tensor<24xf32>) -> tensor<24xf32> {
// CHECK-NEXT: ^bb0
// CHECK-NEXT: mc.transpose
// CHECK-NEXT: mc.reshape
// CHECK-NEXT: mc.mul
// NOVIEWS-LABEL: func.func @reshaped_views
// NOVIEWS: mc.slice
// NOVIEWS: mc.transpose
func.func @reshaped_views(%p: tensor<5x2x4xf32>, %h: tensor<2x3xf32>, %w: tensor<3x4xf32>, %x: tensor<4x6xf32>, %y: tensor<24xf32>) -> (tensor<2x4xf32>, tensor<24xf32>) {
  %s = mc.slice %p, start = [1, 0, 0], limit = [2, 2, 4], strides = [1, 1, 1] : (tensor<5x2x4xf32>) -> tensor<1x2x4xf32>
  %r = mc.reshape %s : (tensor<1x2x4xf32>) -> tensor<2x4xf32>
  %m = mc.matmul %h, %w : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x4xf32>
  %a = mc.add %r, %m : tensor<2x4xf32>
  %t = mc.transpose %x, permutation = [1, 0] : (tensor<4x6xf32>) -> tensor<6x4xf32>
  %f = mc.reshape %t : (tensor<6x4xf32>) -> tensor<24xf32>
  %b = mc.mul %f, %y : tensor<24xf32>
  return %a, %b : tensor<2x4xf32>, tensor<24xf32>
}

// -----

// Not views: a transpose with another user (it stays a step, read by the
// region as an input), and a slice inside a dim that a reshape merged from
// two strided dims (no strided view of the transpose's operand: the chain
// stops at the slice, which reads the reshape's result as a view).
// CHECK-LABEL: func.func @not_views
// CHECK: %[[T:.*]] = mc.transpose
// CHECK: mc.fused %{{.*}}, %[[T]] : (tensor<2x8xf32>, tensor<2x8xf32>)
// CHECK: mc.transpose
// CHECK: %[[ZR:.*]] = mc.reshape
// CHECK: mc.fused %[[ZR]], %{{.*}} : (tensor<8xf32>, tensor<3xf32>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: mc.slice
func.func @not_views(%x: tensor<8x2xf32>, %y: tensor<2x8xf32>, %z: tensor<4x2xf32>, %w: tensor<3xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<3xf32>) {
  %t = mc.transpose %x, permutation = [1, 0] : (tensor<8x2xf32>) -> tensor<2x8xf32>
  %a = mc.add %y, %t : tensor<2x8xf32>
  %b = mc.relu %a : tensor<2x8xf32>
  %zt = mc.transpose %z, permutation = [1, 0] : (tensor<4x2xf32>) -> tensor<2x4xf32>
  %zr = mc.reshape %zt : (tensor<2x4xf32>) -> tensor<8xf32>
  %s = mc.slice %zr, start = [1], limit = [4], strides = [1] : (tensor<8xf32>) -> tensor<3xf32>
  %c = mc.mul %s, %w : tensor<3xf32>
  %d = mc.exp %c : tensor<3xf32>
  return %b, %t, %d : tensor<2x8xf32>, tensor<2x8xf32>, tensor<3xf32>
}

// -----

// A view starts from a value outside the region: x + x.T of a computed x
// keeps the sigmoid out of the region (the region reads it as an input, as
// such and transposed).
// CHECK-LABEL: func.func @symmetric
// CHECK: %[[S:.*]] = mc.sigmoid
// CHECK: mc.fused %[[S]], %{{.*}} : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32> {
// CHECK: mc.transpose
// CHECK: mc.add
func.func @symmetric(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %s = mc.sigmoid %x : tensor<4x4xf32>
  %t = mc.transpose %s, permutation = [1, 0] : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %a = mc.add %s, %t : tensor<4x4xf32>
  %h = mc.constant dense<0.5> : tensor<f32>
  %hb = mc.broadcast_in_dim %h, dims = [] : (tensor<f32>) -> tensor<4x4xf32>
  %m = mc.mul %a, %hb : tensor<4x4xf32>
  return %m : tensor<4x4xf32>
}

// -----

// No view of a splat constant: a region reads a splat as its rank-0 scalar.
// CHECK-LABEL: func.func @splat_transpose
// CHECK: %[[T:.*]] = mc.transpose
// CHECK: mc.fused %arg0, %[[T]]
func.func @splat_transpose(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %c = mc.constant dense<1.0> : tensor<4x2xf32>
  %t = mc.transpose %c, permutation = [1, 0] : (tensor<4x2xf32>) -> tensor<2x4xf32>
  %a = mc.add %x, %t : tensor<2x4xf32>
  %r = mc.relu %a : tensor<2x4xf32>
  return %r : tensor<2x4xf32>
}
