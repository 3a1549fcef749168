// RUN: modelc-opt %s --mc-autodiff | FileCheck %s

// mc-autodiff with a dynamic batch: scalars next to `?` tensors are rank-0
// constants broadcast to the dynamic type (a constant cannot have a `?`),
// and the gradient of a mean over the batch divides by the static count and
// by the run-time batch size (the sum of a batch of ones), so the loss of a
// partial batch is the mean over its real samples.

// CHECK-LABEL: func @mse
// CHECK-DAG: %[[THREE:.*]] = mc.constant dense<3.000000e+00> : tensor<f32>
// CHECK-DAG: %[[ONE:.*]] = mc.constant {{.*}}dense<1.000000e+00> : tensor<f32>
// CHECK: %[[SPLAT3:.*]] = mc.broadcast_in_dim %[[THREE]], dims = [] : (tensor<f32>) -> tensor<?x3xf32>
// CHECK: %[[MEAN:.*]] = mc.div %{{.*}}, %[[SPLAT3]] : tensor<?x3xf32>
// CHECK: %[[ONES:.*]] = mc.broadcast_in_dim %{{.*}}, dims = [] : (tensor<f32>) -> tensor<?xf32>
// CHECK: %[[N:.*]] = mc.reduce_sum %[[ONES]], dims = [0] : (tensor<?xf32>) -> tensor<f32>
// CHECK: %[[SPLATN:.*]] = mc.broadcast_in_dim %[[N]], dims = [] : (tensor<f32>) -> tensor<?x3xf32>
// CHECK: mc.div %[[MEAN]], %[[SPLATN]] : tensor<?x3xf32>
// The weight gradient contracts over the batch: a static result.
// CHECK: mc.matmul %{{.*}}, %arg0 transpose_a : tensor<?x3xf32>, tensor<?x4xf32> -> tensor<3x4xf32>
ml_program.global private @w(dense<0.5> : tensor<3x4xf32>) : tensor<3x4xf32>
func.func @mse(%x: tensor<?x4xf32> {mc.name = "x"}, %y: tensor<?x3xf32> {mc.name = "y"}) -> (tensor<f32> {mc.name = "loss"}) attributes {mc.batch = array<i64: 1, 16, 16>} {
  %w = ml_program.global_load_const @w : tensor<3x4xf32>
  %0 = mc.matmul %x, %w transpose_b : tensor<?x4xf32>, tensor<3x4xf32> -> tensor<?x3xf32>
  %1 = mc.relu %0 : tensor<?x3xf32>
  %2 = mc.sub %1, %y : tensor<?x3xf32>
  %3 = mc.mul %2, %2 : tensor<?x3xf32>
  %4 = mc.reduce_mean %3, dims = [0, 1] : (tensor<?x3xf32>) -> tensor<f32>
  return %4 : tensor<f32>
}
