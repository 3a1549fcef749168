// RUN: modelc compile %s --no-fuse --emit=plan | FileCheck %s

// The CPU plan: one step per op, weights as constants, the reshape as a view
// (no copy), and arena reuse: the broadcast's buffer is dead after the add,
// so a later buffer takes its offset.

// CHECK: plan @forward (targets: cpu)
// CHECK: buffers:
// CHECK: #0 f32[2, 4] arena+{{[0-9]+}} (32 B)  x
// CHECK: #1 f32[3, 4] const+0 (48 B)  w
// CHECK: #2 f32[3] const+64 (12 B)  b
// CHECK: #10 f32[6] arena+[[OFF:[0-9]+]] (24 B) view of #9
// CHECK: #11 f32[6] arena+{{[0-9]+}} (24 B)  flat
// CHECK: inputs: x=#0
// CHECK: outputs: y=#{{[0-9]+}} flat=#{{[0-9]+}}
// CHECK: steps:
// CHECK-NEXT: 0: mc.matmul (#0, #1) -> (#3) {transpose_b}
// CHECK-NEXT: 1: mc.broadcast_in_dim (#2) -> (#4) {dims = [1]}
// CHECK-NEXT: 2: mc.add (#3, #4) -> (#5)
// CHECK-NEXT: 3: mc.exp (#5) -> (#6)
// CHECK-NEXT: 4: mc.reduce_sum (#6) -> (#7) {dims = [1], keepdim}
// CHECK-NEXT: 5: mc.broadcast_in_dim (#7) -> (#8) {dims = [0, 1]}
// CHECK-NEXT: 6: mc.div (#6, #8) -> (#9)
// The reshaped output is a view, so the plan copies it into its own buffer.
// CHECK-NEXT: 7: mc.copy (#10) -> (#11)
// CHECK-NOT: 8:
ml_program.global private @w(dense<0.5> : tensor<3x4xf32>) : tensor<3x4xf32>
ml_program.global private @b(dense<[1.0, 2.0, 3.0]> : tensor<3xf32>) : tensor<3xf32>
func.func @forward(%x: tensor<2x4xf32> {mc.name = "x"}) -> (tensor<2x3xf32> {mc.name = "y"}, tensor<6xf32> {mc.name = "flat"}) {
  %w = ml_program.global_load_const @w : tensor<3x4xf32>
  %b = ml_program.global_load_const @b : tensor<3xf32>
  %0 = mc.matmul %x, %w transpose_b : tensor<2x4xf32>, tensor<3x4xf32> -> tensor<2x3xf32>
  %1 = mc.broadcast_in_dim %b, dims = [1] : (tensor<3xf32>) -> tensor<2x3xf32>
  %2 = mc.add %0, %1 : tensor<2x3xf32>
  %3 = mc.exp %2 : tensor<2x3xf32>
  %4 = mc.reduce_sum %3, dims = [1] keepdim : (tensor<2x3xf32>) -> tensor<2x1xf32>
  %5 = mc.broadcast_in_dim %4, dims = [0, 1] : (tensor<2x1xf32>) -> tensor<2x3xf32>
  %6 = mc.div %3, %5 : tensor<2x3xf32>
  %7 = mc.reshape %6 : (tensor<2x3xf32>) -> tensor<6xf32>
  return %6, %7 : tensor<2x3xf32>, tensor<6xf32>
}
