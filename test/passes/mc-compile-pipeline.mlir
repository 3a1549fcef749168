// RUN: modelc-opt %s --mc-compile-pipeline=fuse=false | FileCheck %s
// RUN: modelc-opt %s --mc-compile-pipeline="entry=forward fuse=false" | FileCheck %s
// RUN: modelc-opt %s --mc-compile-pipeline | FileCheck %s --check-prefix=FUSED
// RUN: modelc-opt %s --mc-compile-pipeline="amp=bf16 fuse=false" | FileCheck %s --check-prefix=AMP
// RUN: not modelc-opt %s --mc-compile-pipeline=entry=missing 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not modelc-opt %s --mc-compile-pipeline=target=tpu 2>&1 | FileCheck %s --check-prefix=TARGET

// The inference pipeline: inline, fold, CSE, drop dead symbols, fold batch
// norms, fuse, check the contract.

// With fusion (the default), the relu is the matmul's epilogue: one region.
// FUSED-LABEL: func.func @forward
// FUSED: %[[F:.*]] = mc.fused
// FUSED-NEXT: ^bb0
// FUSED-NEXT: mc.matmul
// FUSED-NEXT: mc.relu
// FUSED-NEXT: mc.yield
// FUSED: return %[[F]], %[[F]]

// With AMP, the weight's cast to bf16 is folded: the module holds the
// bf16 weight, and only the input is cast at run time.
// AMP-NOT: ml_program.global
// AMP-LABEL: func.func @forward
// AMP-DAG: %[[W:.*]] = mc.constant dense<1.000000e+00> : tensor<3x8xbf16>
// AMP-DAG: %[[X:.*]] = mc.cast %arg0 : tensor<4x8xf32> to tensor<4x8xbf16>
// AMP: mc.matmul %[[X]], %[[W]] transpose_b
// AMP-NOT: ml_program.global_load_const

// MISSING: error: entry function 'missing' not found
// TARGET: error: unknown target 'tpu'; known targets: cpu

// The helper is inlined and removed, x + 0 folds, the duplicate relu is
// computed once, and the unused global disappears.
// CHECK-NOT: @unused
// CHECK: ml_program.global private @w
// CHECK-NOT: @helper
// CHECK-LABEL: func.func @forward
// CHECK: %[[W:.*]] = ml_program.global_load_const @w
// CHECK: %[[M:.*]] = mc.matmul %{{.*}}, %[[W]] transpose_b
// CHECK: %[[R:.*]] = mc.relu %[[M]]
// CHECK-NOT: mc.relu
// CHECK-NOT: mc.add
// CHECK: return %[[R]], %[[R]]
ml_program.global private @w(dense<1.0> : tensor<3x8xf32>) : tensor<3x8xf32>
ml_program.global private @unused(dense<1.0> : tensor<3xf32>) : tensor<3xf32>
func.func private @helper(%a: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %z = mc.constant dense<0.0> : tensor<4x3xf32>
  %0 = mc.add %a, %z : tensor<4x3xf32>
  %1 = mc.relu %0 : tensor<4x3xf32>
  return %1 : tensor<4x3xf32>
}
func.func @forward(%x: tensor<4x8xf32>) -> (tensor<4x3xf32>, tensor<4x3xf32>) {
  %w = ml_program.global_load_const @w : tensor<3x8xf32>
  %0 = mc.matmul %x, %w transpose_b : tensor<4x8xf32>, tensor<3x8xf32> -> tensor<4x3xf32>
  %1 = func.call @helper(%0) : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %2 = mc.relu %0 : tensor<4x3xf32>
  return %1, %2 : tensor<4x3xf32>, tensor<4x3xf32>
}
