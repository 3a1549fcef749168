// RUN: modelc-opt %s --canonicalize --split-input-file | FileCheck %s

// Folders and canonicalization patterns of the mc ops.

// CHECK-LABEL: func @add_zero
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>)
// CHECK-NOT: mc.add
// CHECK: return %[[X]], %[[X]]
func.func @add_zero(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %z = mc.constant dense<0.0> : tensor<4xf32>
  %0 = mc.add %x, %z : tensor<4xf32>
  %1 = mc.add %z, %x : tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}

// -----

// CHECK-LABEL: func @add_zero_int
// CHECK-SAME: (%[[X:.*]]: tensor<4xi32>)
// CHECK: return %[[X]]
func.func @add_zero_int(%x: tensor<4xi32>) -> tensor<4xi32> {
  %z = mc.constant dense<0> : tensor<4xi32>
  %0 = mc.add %x, %z : tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

// A non-zero constant is not folded away.
// CHECK-LABEL: func @add_nonzero
// CHECK: mc.add
func.func @add_nonzero(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = mc.constant dense<1.0> : tensor<4xf32>
  %0 = mc.add %x, %c : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// CHECK-LABEL: func @sub_zero
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>)
// CHECK: return %[[X]]
func.func @sub_zero(%x: tensor<4xf32>) -> tensor<4xf32> {
  %z = mc.constant dense<0.0> : tensor<4xf32>
  %0 = mc.sub %x, %z : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// CHECK-LABEL: func @mul_div_one
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>)
// CHECK-NOT: mc.mul
// CHECK-NOT: mc.div
// CHECK: return %[[X]], %[[X]], %[[X]]
func.func @mul_div_one(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %one = mc.constant dense<1.0> : tensor<4xf32>
  %0 = mc.mul %x, %one : tensor<4xf32>
  %1 = mc.mul %one, %x : tensor<4xf32>
  %2 = mc.div %x, %one : tensor<4xf32>
  return %0, %1, %2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// 1 / x is not x.
// CHECK-LABEL: func @one_div
// CHECK: mc.div
func.func @one_div(%x: tensor<4xf32>) -> tensor<4xf32> {
  %one = mc.constant dense<1.0> : tensor<4xf32>
  %0 = mc.div %one, %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// CHECK-LABEL: func @cast_identity
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>)
// CHECK: return %[[X]]
func.func @cast_identity(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = mc.cast %x : tensor<4xf32> to tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// f16 -> f32 is exact, so f16 -> f32 -> bf16 is one cast f16 -> bf16, and
// f16 -> f32 -> f16 is no cast at all.
// CHECK-LABEL: func @cast_lossless_chain
// CHECK-SAME: (%[[X:.*]]: tensor<4xf16>)
// CHECK: %[[C:.*]] = mc.cast %[[X]] : tensor<4xf16> to tensor<4xbf16>
// CHECK-NOT: mc.cast
// CHECK: return %[[C]], %[[X]]
func.func @cast_lossless_chain(%x: tensor<4xf16>) -> (tensor<4xbf16>, tensor<4xf16>) {
  %0 = mc.cast %x : tensor<4xf16> to tensor<4xf32>
  %1 = mc.cast %0 : tensor<4xf32> to tensor<4xbf16>
  %2 = mc.cast %0 : tensor<4xf32> to tensor<4xf16>
  return %1, %2 : tensor<4xbf16>, tensor<4xf16>
}

// -----

// f32 -> f16 rounds, so the chain back to f32 must stay.
// CHECK-LABEL: func @cast_lossy_chain
// CHECK: mc.cast %{{.*}} : tensor<4xf32> to tensor<4xf16>
// CHECK: mc.cast %{{.*}} : tensor<4xf16> to tensor<4xf32>
func.func @cast_lossy_chain(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = mc.cast %x : tensor<4xf32> to tensor<4xf16>
  %1 = mc.cast %0 : tensor<4xf16> to tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// CHECK-LABEL: func @transpose_chain
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK: %[[T:.*]] = mc.transpose %[[X]], permutation = [1, 2, 0] : (tensor<2x3x4xf32>) -> tensor<3x4x2xf32>
// CHECK-NOT: mc.transpose
// CHECK: return %[[T]], %[[X]]
func.func @transpose_chain(%x: tensor<2x3x4xf32>) -> (tensor<3x4x2xf32>, tensor<2x3x4xf32>) {
  %0 = mc.transpose %x, permutation = [2, 0, 1] : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  %1 = mc.transpose %0, permutation = [2, 0, 1] : (tensor<4x2x3xf32>) -> tensor<3x4x2xf32>
  %2 = mc.transpose %x, permutation = [1, 0, 2] : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
  %3 = mc.transpose %2, permutation = [1, 0, 2] : (tensor<3x2x4xf32>) -> tensor<2x3x4xf32>
  return %1, %3 : tensor<3x4x2xf32>, tensor<2x3x4xf32>
}

// -----

// CHECK-LABEL: func @reshape_chain
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK: %[[R:.*]] = mc.reshape %[[X]] : (tensor<2x3x4xf32>) -> tensor<4x6xf32>
// CHECK-NOT: mc.reshape
// CHECK: return %[[R]], %[[X]]
func.func @reshape_chain(%x: tensor<2x3x4xf32>) -> (tensor<4x6xf32>, tensor<2x3x4xf32>) {
  %0 = mc.reshape %x : (tensor<2x3x4xf32>) -> tensor<24xf32>
  %1 = mc.reshape %0 : (tensor<24xf32>) -> tensor<4x6xf32>
  %2 = mc.reshape %x : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  %3 = mc.reshape %2 : (tensor<6x4xf32>) -> tensor<2x3x4xf32>
  return %1, %3 : tensor<4x6xf32>, tensor<2x3x4xf32>
}

// -----

// CHECK-LABEL: func @broadcast_identity
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>)
// CHECK: return %[[X]]
func.func @broadcast_identity(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = mc.broadcast_in_dim %x, dims = [0, 1] : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}


// -----

// A narrowing cast moves above a transpose or reshape only it reads (the
// data movement then carries half the bytes), and meets the widening cast
// before it: bf16 -> f32 -> transpose -> reshape -> bf16 is one bf16
// transpose and reshape.
// CHECK-LABEL: func @narrow_before_data_movement
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xbf16>, %[[Y:.*]]: tensor<2x3xf32>)
// CHECK-NEXT: %[[T:.*]] = mc.transpose %[[X]], permutation = [1, 0] : (tensor<2x3xbf16>) -> tensor<3x2xbf16>
// CHECK-NEXT: %[[R:.*]] = mc.reshape %[[T]] : (tensor<3x2xbf16>) -> tensor<6xbf16>
// CHECK-NEXT: %[[C:.*]] = mc.cast %[[Y]] : tensor<2x3xf32> to tensor<2x3xf16>
// CHECK-NEXT: %[[T2:.*]] = mc.transpose %[[C]], permutation = [1, 0] : (tensor<2x3xf16>) -> tensor<3x2xf16>
// CHECK-NEXT: return %[[R]], %[[T2]]
func.func @narrow_before_data_movement(%x: tensor<2x3xbf16>, %y: tensor<2x3xf32>) -> (tensor<6xbf16>, tensor<3x2xf16>) {
  %w = mc.cast %x : tensor<2x3xbf16> to tensor<2x3xf32>
  %t = mc.transpose %w, permutation = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %r = mc.reshape %t : (tensor<3x2xf32>) -> tensor<6xf32>
  %n = mc.cast %r : tensor<6xf32> to tensor<6xbf16>
  %t2 = mc.transpose %y, permutation = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %n2 = mc.cast %t2 : tensor<3x2xf32> to tensor<3x2xf16>
  return %n, %n2 : tensor<6xbf16>, tensor<3x2xf16>
}

// -----

// It stays where the transpose has another user (moving it would keep both
// the f32 and the bf16 transpose), and a widening cast does not move.
// CHECK-LABEL: func @cast_stays
// CHECK: mc.transpose %{{.*}} : (tensor<2x3xf32>) -> tensor<3x2xf32>
// CHECK: mc.cast %{{.*}} : tensor<3x2xf32> to tensor<3x2xbf16>
// CHECK: mc.transpose %{{.*}} : (tensor<2x3xbf16>) -> tensor<3x2xbf16>
// CHECK: mc.cast %{{.*}} : tensor<3x2xbf16> to tensor<3x2xf32>
func.func @cast_stays(%y: tensor<2x3xf32>, %z: tensor<2x3xbf16>) -> (tensor<3x2xbf16>, tensor<3x2xf32>, tensor<3x2xf32>) {
  %t = mc.transpose %y, permutation = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %n = mc.cast %t : tensor<3x2xf32> to tensor<3x2xbf16>
  %t2 = mc.transpose %z, permutation = [1, 0] : (tensor<2x3xbf16>) -> tensor<3x2xbf16>
  %w = mc.cast %t2 : tensor<3x2xbf16> to tensor<3x2xf32>
  return %n, %t, %w : tensor<3x2xbf16>, tensor<3x2xf32>, tensor<3x2xf32>
}

// -----

// A pad of nothing is its input (PyTorch's AvgPool2d exports one before
// the pool); a pad of anything stays.
// CHECK-LABEL: func @pad_nothing
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>)
// CHECK-NEXT: %[[P:.*]] = mc.pad %[[X]], low = [0, 1]
// CHECK-NEXT: return %[[X]], %[[P]]
func.func @pad_nothing(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x4xf32>) {
  %0 = mc.pad %x, low = [0, 0], high = [0, 0], value = 0.0 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = mc.pad %x, low = [0, 1], high = [0, 0], value = 0.0 : (tensor<2x3xf32>) -> tensor<2x4xf32>
  return %0, %1 : tensor<2x3xf32>, tensor<2x4xf32>
}
