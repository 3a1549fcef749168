// RUN: modelc-opt %s --mc-optimizer="kind=adamw lr=0.1 weight-decay=0.5 no-weight-decay=*.bias" | FileCheck %s
// RUN: modelc-opt %s --mc-optimizer="kind=sgd lr=0.1 weight-decay=0.5 no-weight-decay=*.bias" | FileCheck %s --check-prefix=SGD
// RUN: not modelc-opt %s --mc-optimizer="kind=adamw no-weight-decay=*.gamma" 2>&1 | FileCheck %s --check-prefix=NOMATCH
// RUN: not modelc-opt %s --mc-optimizer="kind=adamw no-weight-decay=[a" 2>&1 | FileCheck %s --check-prefix=GLOB

// --no-weight-decay: parameters matching a glob get no weight decay (a
// PyTorch parameter group with weight_decay 0): AdamW's w * (1 - lr * 0.5)
// for fc.weight only, SGD's g + 0.5 * w likewise.

// NOMATCH: error: --no-weight-decay '*.gamma' matches no trained parameter; they are: fc.weight fc.bias
// GLOB: error: --no-weight-decay '[a' is not a glob pattern: invalid glob pattern, unmatched '['

// CHECK-LABEL: func.func @forward
// CHECK: %[[DECAY:.*]] = mc.constant dense<0.949999988> : tensor<3x4xf32>
// CHECK: mc.mul %{{.*}}, %[[DECAY]] : tensor<3x4xf32>
// CHECK: ml_program.global_store @fc.weight =
// CHECK-NOT: dense<0.949999988> : tensor<3xf32>
// CHECK: ml_program.global_store @fc.bias =

// SGD-LABEL: func.func @forward
// SGD: mc.constant dense<5.000000e-01> : tensor<3x4xf32>
// SGD: ml_program.global_store @fc.weight =
// SGD-NOT: dense<5.000000e-01> : tensor<3xf32>
// SGD: ml_program.global_store @fc.bias =
ml_program.global private @fc.weight(dense<0.5> : tensor<3x4xf32>) : tensor<3x4xf32>
ml_program.global private @fc.bias(dense<0.1> : tensor<3xf32>) : tensor<3xf32>
func.func @forward(%x: tensor<2x4xf32>) -> (tensor<f32> {mc.name = "loss"}, tensor<3x4xf32> {mc.name = "grad.fc.weight"}, tensor<3xf32> {mc.name = "grad.fc.bias"}) {
  %w = ml_program.global_load_const @fc.weight : tensor<3x4xf32>
  %y = mc.matmul %x, %w transpose_b : tensor<2x4xf32>, tensor<3x4xf32> -> tensor<2x3xf32>
  %l = mc.reduce_mean %y, dims = [0, 1] : (tensor<2x3xf32>) -> tensor<f32>
  %g = mc.constant dense<0.25> : tensor<3x4xf32>
  %gb = mc.constant dense<0.5> : tensor<3xf32>
  return %l, %g, %gb : tensor<f32>, tensor<3x4xf32>, tensor<3xf32>
}
