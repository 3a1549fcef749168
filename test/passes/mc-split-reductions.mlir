// RUN: modelc-opt %s -split-input-file --mc-split-reductions | FileCheck %s
// RUN: not modelc-opt %s --mc-split-reductions="max-outputs=0" 2>&1 | FileCheck %s --check-prefix=BADOPT

// BADOPT: mc-split-reductions: max-outputs must be at least 1

// Loss scaling's non-finite check of a [4096, 4096] gradient: rows of
// 4096 first (4096 blocks), then the 4096 partials.
// CHECK-LABEL: func.func @full
// CHECK: %[[R:.*]] = mc.reduce_min %arg0, dims = [1] : (tensor<4096x4096xf32>) -> tensor<4096xf32>
// CHECK-NEXT: %[[T:.*]] = mc.reduce_min %[[R]], dims = [0] : (tensor<4096xf32>) -> tensor<f32>
// CHECK-NEXT: return %[[T]]
func.func @full(%g: tensor<4096x4096xf32>) -> tensor<f32> {
  %0 = mc.reduce_min %g, dims = [0, 1] : (tensor<4096x4096xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// A batch norm's statistics over N, H and W: rows of H * W, then the
// batch (a column reduction).
// CHECK-LABEL: func.func @nchw
// CHECK: %[[R:.*]] = mc.reduce_mean %arg0, dims = [2, 3] : (tensor<32x64x56x56xf32>) -> tensor<32x64xf32>
// CHECK-NEXT: %[[T:.*]] = mc.reduce_mean %[[R]], dims = [0] : (tensor<32x64xf32>) -> tensor<64xf32>
// CHECK-NEXT: return %[[T]]
func.func @nchw(%x: tensor<32x64x56x56xf32>) -> tensor<64xf32> {
  %0 = mc.reduce_mean %x, dims = [0, 2, 3] : (tensor<32x64x56x56xf32>) -> tensor<64xf32>
  return %0 : tensor<64xf32>
}

// -----

// keepdim: both parts drop the dims, a reshape restores them.
// CHECK-LABEL: func.func @keepdim
// CHECK: %[[R:.*]] = mc.reduce_sum %arg0, dims = [2, 3] : (tensor<32x64x56x56xf32>) -> tensor<32x64xf32>
// CHECK-NEXT: %[[T:.*]] = mc.reduce_sum %[[R]], dims = [0] : (tensor<32x64xf32>) -> tensor<64xf32>
// CHECK-NEXT: %[[K:.*]] = mc.reshape %[[T]] : (tensor<64xf32>) -> tensor<1x64x1x1xf32>
// CHECK-NEXT: return %[[K]]
func.func @keepdim(%x: tensor<32x64x56x56xf32>) -> tensor<1x64x1x1xf32> {
  %0 = mc.reduce_sum %x, dims = [0, 2, 3] keepdim : (tensor<32x64x56x56xf32>) -> tensor<1x64x1x1xf32>
  return %0 : tensor<1x64x1x1xf32>
}

// -----

// One long dim: 2^24 = [4096, 4096] by a reshape, and again for the 4096
// partials? No: 4096 is under min-reduced (8192).
// CHECK-LABEL: func.func @one_dim
// CHECK: %[[V:.*]] = mc.reshape %arg0 : (tensor<16777216xf32>) -> tensor<4096x4096xf32>
// CHECK-NEXT: %[[R:.*]] = mc.reduce_max %[[V]], dims = [1] : (tensor<4096x4096xf32>) -> tensor<4096xf32>
// CHECK-NEXT: %[[T:.*]] = mc.reduce_max %[[R]], dims = [0] : (tensor<4096xf32>) -> tensor<f32>
// CHECK-NEXT: return %[[T]]
func.func @one_dim(%x: tensor<16777216xf32>) -> tensor<f32> {
  %0 = mc.reduce_max %x, dims = [0] : (tensor<16777216xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Each new reduction is looked at again: [2, 2^24] over everything is
// rows of 2^24 first ([2]), each of them split by a reshape.
// CHECK-LABEL: func.func @twice
// CHECK: %[[V:.*]] = mc.reshape %arg0 : (tensor<2x16777216xf32>) -> tensor<2x4096x4096xf32>
// CHECK-NEXT: %[[A:.*]] = mc.reduce_sum %[[V]], dims = [2] : (tensor<2x4096x4096xf32>) -> tensor<2x4096xf32>
// CHECK-NEXT: %[[B:.*]] = mc.reduce_sum %[[A]], dims = [1] : (tensor<2x4096xf32>) -> tensor<2xf32>
// CHECK-NEXT: %[[C:.*]] = mc.reduce_sum %[[B]], dims = [0] : (tensor<2xf32>) -> tensor<f32>
// CHECK-NEXT: return %[[C]]
func.func @twice(%x: tensor<2x16777216xf32>) -> tensor<f32> {
  %0 = mc.reduce_sum %x, dims = [0, 1] : (tensor<2x16777216xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// f16 sums add their partials in f32, rounded to f16 once at the end.
// CHECK-LABEL: func.func @half
// CHECK: %[[W:.*]] = mc.cast %arg0 : tensor<4096x4096xf16> to tensor<4096x4096xf32>
// CHECK-NEXT: %[[R:.*]] = mc.reduce_sum %[[W]], dims = [1] : (tensor<4096x4096xf32>) -> tensor<4096xf32>
// CHECK-NEXT: %[[T:.*]] = mc.reduce_sum %[[R]], dims = [0] : (tensor<4096xf32>) -> tensor<f32>
// CHECK-NEXT: %[[N:.*]] = mc.cast %[[T]] : tensor<f32> to tensor<f16>
// CHECK-NEXT: return %[[N]]
func.func @half(%x: tensor<4096x4096xf16>) -> tensor<f16> {
  %0 = mc.reduce_sum %x, dims = [0, 1] : (tensor<4096x4096xf16>) -> tensor<f16>
  return %0 : tensor<f16>
}

// -----

// The last dim kept: a thread per output walked 4096 elements one after
// another; now 64, twice (64 = sqrt(4096)).
// CHECK-LABEL: func.func @columns
// CHECK: %[[V:.*]] = mc.reshape %arg0 : (tensor<4096x10xf32>) -> tensor<64x64x10xf32>
// CHECK-NEXT: %[[R:.*]] = mc.reduce_sum %[[V]], dims = [1] : (tensor<64x64x10xf32>) -> tensor<64x10xf32>
// CHECK-NEXT: %[[T:.*]] = mc.reduce_sum %[[R]], dims = [0] : (tensor<64x10xf32>) -> tensor<10xf32>
// CHECK-NEXT: return %[[T]]
func.func @columns(%x: tensor<4096x10xf32>) -> tensor<10xf32> {
  %0 = mc.reduce_sum %x, dims = [0] : (tensor<4096x10xf32>) -> tensor<10xf32>
  return %0 : tensor<10xf32>
}

// -----

// Left alone: many outputs (a row per output is a block each), a short
// reduction, a prime length with no boundary to split at, integers' max of
// a short row.
// CHECK-LABEL: func.func @left
// CHECK-COUNT-4: mc.reduce_
// CHECK-NOT: mc.reduce_
// CHECK-NOT: mc.reshape
func.func @left(%a: tensor<4096x4096xf32>, %b: tensor<8x512xf32>,
                %c: tensor<1000003xf32>, %d: tensor<4x16xi32>)
    -> (tensor<4096xf32>, tensor<8xf32>, tensor<f32>, tensor<4xi32>) {
  %0 = mc.reduce_sum %a, dims = [1] : (tensor<4096x4096xf32>) -> tensor<4096xf32>
  %1 = mc.reduce_sum %b, dims = [1] : (tensor<8x512xf32>) -> tensor<8xf32>
  %2 = mc.reduce_sum %c, dims = [0] : (tensor<1000003xf32>) -> tensor<f32>
  %3 = mc.reduce_max %d, dims = [1] : (tensor<4x16xi32>) -> tensor<4xi32>
  return %0, %1, %2, %3 : tensor<4096xf32>, tensor<8xf32>, tensor<f32>, tensor<4xi32>
}

// -----

// A dynamic batch: the batch dim is sized at OPT (256) and never
// reshaped; the mean over [?, 4096] is rows first, then the batch.
// CHECK-LABEL: func.func @dynamic
// CHECK: %[[R:.*]] = mc.reduce_mean %arg0, dims = [1] : (tensor<?x4096xf32>) -> tensor<?xf32>
// CHECK-NEXT: %[[T:.*]] = mc.reduce_mean %[[R]], dims = [0] : (tensor<?xf32>) -> tensor<f32>
func.func @dynamic(%x: tensor<?x4096xf32>) -> tensor<f32> attributes {mc.batch = array<i64: 1, 1024, 256>} {
  %0 = mc.reduce_mean %x, dims = [0, 1] : (tensor<?x4096xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// A reduction inside a region (an earlier mc-fuse made it) ends the
// region and stays.
// CHECK-LABEL: func.func @in_region
// CHECK: mc.fused
// CHECK: mc.exp
// CHECK-NEXT: mc.reduce_sum %{{.*}}, dims = [0, 1] : (tensor<4096x4096xf32>) -> tensor<f32>
func.func @in_region(%x: tensor<4096x4096xf32>) -> tensor<f32> {
  %0 = mc.fused %x : (tensor<4096x4096xf32>) -> tensor<f32> {
  ^bb0(%a: tensor<4096x4096xf32>):
    %1 = mc.exp %a : tensor<4096x4096xf32>
    %2 = mc.reduce_sum %1, dims = [0, 1] : (tensor<4096x4096xf32>) -> tensor<f32>
    mc.yield %2 : tensor<f32>
  }
  return %0 : tensor<f32>
}

// -----

// A shape that holds the batch twice cannot be reshaped (a reshape holds
// it at most once): with the last dim kept, the only rule is a reshape,
// so it stays one reduction.
// CHECK-LABEL: func.func @batch_twice
// CHECK-NOT: mc.reshape
// CHECK: mc.reduce_sum %arg0, dims = [0, 1, 2] : (tensor<?x?x4096x10xf32>) -> tensor<10xf32>
func.func @batch_twice(%x: tensor<?x?x4096x10xf32>) -> tensor<10xf32> attributes {mc.batch = array<i64: 1, 64, 8>} {
  %0 = mc.reduce_sum %x, dims = [0, 1, 2] : (tensor<?x?x4096x10xf32>) -> tensor<10xf32>
  return %0 : tensor<10xf32>
}

// -----

// Divisors are searched up to sqrt(L): a dim of 2^40 splits at once
// (2^20 = its square root), where a search up to L / 2 took minutes.
// CHECK-LABEL: func.func @huge_dim
// CHECK: mc.reshape %arg0 : (tensor<1099511627776x2xf32>) -> tensor<1048576x1048576x2xf32>
func.func @huge_dim(%x: tensor<1099511627776x2xf32>) -> tensor<2xf32> {
  %0 = mc.reduce_max %x, dims = [0] : (tensor<1099511627776x2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}
