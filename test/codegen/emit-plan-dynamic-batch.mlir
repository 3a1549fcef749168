// RUN: modelc compile %s --batch=1..64@32 --no-fuse --emit=plan | FileCheck %s

// A dynamic batch: `?` buffers are planned at the upper bound (64 rows), the
// plan records the bounds, and constants stay static.

// CHECK: plan @mlp (targets: cpu), arena {{[0-9]+}} bytes, batch 1..64 (opt 32)
// CHECK: #0 f32[?, 4] arena+{{[0-9]+}} (1024 B)  x
// CHECK: #1 f32[4, 8] const+0 (128 B)  w1
// CHECK: #3 f32[?, 8] arena+{{[0-9]+}} (2048 B)
// CHECK: #7 f32[8] arena+{{[0-9]+}} (32 B)
// CHECK: inputs: x=#0
// CHECK: outputs: y=#6 m=#7
// CHECK: 4: mc.reduce_mean (#6) -> (#7) {dims = [0]}
module {
  ml_program.global private @w1(dense<0.5> : tensor<4x8xf32>) : tensor<4x8xf32>
  ml_program.global private @b1(dense<0.1> : tensor<8xf32>) : tensor<8xf32>
  func.func @mlp(%x: tensor<?x4xf32> {mc.name = "x"}) -> (tensor<?x8xf32> {mc.name = "y"}, tensor<8xf32> {mc.name = "m"}) {
    %w = ml_program.global_load_const @w1 : tensor<4x8xf32>
    %b = ml_program.global_load_const @b1 : tensor<8xf32>
    %0 = mc.matmul %x, %w : tensor<?x4xf32>, tensor<4x8xf32> -> tensor<?x8xf32>
    %1 = mc.broadcast_in_dim %b, dims = [1] : (tensor<8xf32>) -> tensor<?x8xf32>
    %2 = mc.add %0, %1 : tensor<?x8xf32>
    %3 = mc.relu %2 : tensor<?x8xf32>
    %4 = mc.reduce_mean %3, dims = [0] : (tensor<?x8xf32>) -> tensor<8xf32>
    return %3, %4 : tensor<?x8xf32>, tensor<8xf32>
  }
}
