// RUN: modelc-opt %s -split-input-file --mc-split-reductions="max-outputs=1 min-reduced=65537" --mc-fuse | FileCheck %s
// RUN: modelc-opt %s -split-input-file --mc-fuse | FileCheck %s --check-prefix=NOSPLIT
// RUN: modelc-opt %s -split-input-file --mc-fuse="max-full-reduction=200000" | FileCheck %s --check-prefix=LONG

// mc-split-reductions with the CPU target's limits (full reductions of
// more than mc-fuse's max-full-reduction) and the regions mc-fuse makes of
// what it leaves, as the compile pipeline runs them.
// A reduction of more than 65536 elements to one value becomes two (its
// one row would be one tile: out of cache, one thread; one block on a
// GPU): over rows of its trailing dims, which ends the elementwise ops'
// region, then over the partials, a step of its own. Long rows with more
// than one of them (threads share them), and a full reduction of 65536,
// still end one.
// CHECK-LABEL: func.func @full_reductions
// CHECK: %[[F:.*]] = mc.fused %arg0, %arg1 : (tensor<8x16384xf32>, tensor<8x16384xf32>) -> tensor<8xf32> {
// CHECK:   mc.sub
// CHECK:   mc.mul
// CHECK:   mc.reduce_mean %{{.*}}, dims = [1] : (tensor<8x16384xf32>) -> tensor<8xf32>
// CHECK:   mc.yield
// CHECK: mc.reduce_mean %[[F]], dims = [0] : (tensor<8xf32>) -> tensor<f32>
// CHECK: mc.fused %arg0, %arg1 : (tensor<8x16384xf32>, tensor<8x16384xf32>) -> tensor<8xf32> {
// CHECK:   mc.reduce_sum
// CHECK: mc.fused %arg2 : (tensor<4x16384xf32>) -> tensor<f32> {
// CHECK:   mc.exp
// CHECK:   mc.reduce_sum
// Not split, mc-fuse leaves the reduction out of the region (one row of
// 131072 would be one tile) and it is a step of its own; with
// max-full-reduction above the count, the region ends in it again.
// NOSPLIT-LABEL: func.func @full_reductions
// NOSPLIT: mc.fused %arg0, %arg1 : (tensor<8x16384xf32>, tensor<8x16384xf32>) -> tensor<8x16384xf32> {
// NOSPLIT: mc.reduce_mean %{{.*}}, dims = [0, 1] : (tensor<8x16384xf32>) -> tensor<f32>
// LONG-LABEL: func.func @full_reductions
// LONG: mc.fused %arg0, %arg1 : (tensor<8x16384xf32>, tensor<8x16384xf32>) -> tensor<f32> {
// LONG:   mc.reduce_mean
func.func @full_reductions(%x: tensor<8x16384xf32>, %y: tensor<8x16384xf32>, %z: tensor<4x16384xf32>) -> (tensor<f32>, tensor<8xf32>, tensor<f32>) {
  %0 = mc.sub %x, %y : tensor<8x16384xf32>
  %1 = mc.mul %0, %0 : tensor<8x16384xf32>
  %2 = mc.reduce_mean %1, dims = [0, 1] : (tensor<8x16384xf32>) -> tensor<f32>
  %a = mc.sub %x, %y : tensor<8x16384xf32>
  %b = mc.mul %a, %a : tensor<8x16384xf32>
  %c = mc.reduce_sum %b, dims = [1] : (tensor<8x16384xf32>) -> tensor<8xf32>
  %3 = mc.exp %z : tensor<4x16384xf32>
  %4 = mc.reduce_sum %3, dims = [0, 1] : (tensor<4x16384xf32>) -> tensor<f32>
  return %2, %c, %4 : tensor<f32>, tensor<8xf32>, tensor<f32>
}

// -----

// A full reduction of one long dim is split through a [rows, 4096]
// reshape (a divisor of its count: the reshape keeps the elementwise op
// out of the first half's region); with keepdim the result is reshaped
// back.
// CHECK-LABEL: func.func @full_reduction_of_one_dim
// CHECK: mc.abs
// CHECK: mc.reshape %{{.*}} : (tensor<1048576xf32>) -> tensor<256x4096xf32>
// CHECK: mc.reduce_max %{{.*}}, dims = [1] : (tensor<256x4096xf32>) -> tensor<256xf32>
// CHECK: mc.reduce_max %{{.*}}, dims = [0] : (tensor<256xf32>) -> tensor<f32>
// CHECK: mc.reshape %{{.*}} : (tensor<f32>) -> tensor<1xf32>
func.func @full_reduction_of_one_dim(%x: tensor<1048576xf32>) -> tensor<1xf32> {
  %0 = mc.abs %x : tensor<1048576xf32>
  %1 = mc.reduce_max %0, dims = [0] keepdim : (tensor<1048576xf32>) -> tensor<1xf32>
  return %1 : tensor<1xf32>
}

// -----

// A sum of f16 adds its partials in f32: in f16 they would round (rows
// of 65536 ones and of -1s sum to +-inf, the whole to 0), so the split
// widens first and narrows the total once. The cast fuses into the first
// half's region.
// CHECK-LABEL: func.func @f16_sum_in_f32
// CHECK: mc.fused %arg0 : (tensor<2x65536xf16>) -> tensor<2xf32> {
// CHECK:   mc.cast
// CHECK:   mc.reduce_sum %{{.*}}, dims = [1] : (tensor<2x65536xf32>) -> tensor<2xf32>
// CHECK: mc.reduce_sum %{{.*}}, dims = [0] : (tensor<2xf32>) -> tensor<f32>
// CHECK: mc.cast %{{.*}} : tensor<f32> to tensor<f16>
func.func @f16_sum_in_f32(%x: tensor<2x65536xf16>) -> tensor<f16> {
  %0 = mc.reduce_sum %x, dims = [0, 1] : (tensor<2x65536xf16>) -> tensor<f16>
  return %0 : tensor<f16>
}
