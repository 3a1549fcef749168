// RUN: modelc compile %s --emit=plan -v 2>&1 | FileCheck %s
// RUN: modelc compile %s --emit=mc-fused | FileCheck %s --check-prefix=IR

// The fused plan of an MLP layer: matmul + bias + relu is one step whose
// body lists the region's ops on value numbers (%0..%2 are the step's
// inputs); softmax stays its own step. --verbose counts what fusion saved.

// CHECK: modelc: plan: 2 steps (1 fused regions; one step per op: 5), 24 bytes of intermediates written per run (one step per op: 96), arena 128 bytes (one step per op: 192)
// CHECK: steps:
// CHECK-NEXT: 0: mc.fused (#0, #1, #2) -> (#3)
// CHECK-NEXT:   %3 = mc.matmul(%0, %1) : f32 {transpose_b}
// CHECK-NEXT:   %4 = mc.broadcast_in_dim(%2) : f32 {dims = [1]}
// CHECK-NEXT:   %5 = mc.add(%3, %4) : f32
// CHECK-NEXT:   %6 = mc.relu(%5) : f32
// CHECK-NEXT: 1: mc.softmax (#3) -> (#4) {axis = 1}

// IR: mc.fused
// IR: mc.matmul
// IR: mc.yield
// IR: mc.softmax

module {
  ml_program.global private @w(dense<[[0.1, -0.2, 0.3, 0.4], [0.5, 0.6, -0.7, 0.8], [-0.9, 1.0, 1.1, 1.2]]> : tensor<3x4xf32>) : tensor<3x4xf32>
  ml_program.global private @b(dense<[0.01, 0.02, 0.03]> : tensor<3xf32>) : tensor<3xf32>
  func.func @forward(%x: tensor<2x4xf32> {mc.name = "x"}) -> (tensor<2x3xf32> {mc.name = "probs"}) {
    %w = ml_program.global_load_const @w : tensor<3x4xf32>
    %b = ml_program.global_load_const @b : tensor<3xf32>
    %0 = mc.matmul %x, %w transpose_b : tensor<2x4xf32>, tensor<3x4xf32> -> tensor<2x3xf32>
    %1 = mc.broadcast_in_dim %b, dims = [1] : (tensor<3xf32>) -> tensor<2x3xf32>
    %2 = mc.add %0, %1 : tensor<2x3xf32>
    %3 = mc.relu %2 : tensor<2x3xf32>
    %4 = mc.softmax %3, axis = 1 : tensor<2x3xf32>
    return %4 : tensor<2x3xf32>
  }
}
