// RUN: modelc-opt %s --mc-optimizer="kind=sgd lr=0.1 max-grad-norm=1.5" | FileCheck %s
// RUN: not modelc-opt %s --mc-optimizer="kind=sgd max-grad-norm=-1" 2>&1 | FileCheck %s --check-prefix=NEG
// RUN: modelc-opt %s --mc-optimizer="kind=sgd lr=0.1" | FileCheck %s --check-prefix=OFF

// Gradient clipping (torch.nn.utils.clip_grad_norm_): the L2 norm of every
// gradient together, the sum of each one's sum of squares in parameter
// order, kept in optimizer.grad_norm; each gradient scaled by
// min(1, 1.5 / (norm + 1e-6)) before the update reads it.

// NEG: error: optimizer option --max-grad-norm=-1 is out of range: max-grad-norm must be >= 0 (0: no clipping)
// OFF-NOT: grad_norm
// OFF-NOT: mc.minimum

// CHECK-DAG: ml_program.global private mutable @optimizer.grad_norm(dense<0.000000e+00> : tensor<f32>)
// CHECK-LABEL: func.func @forward
// CHECK: %[[GW:.*]] = mc.constant dense<2.500000e-01> : tensor<3x4xf32>
// CHECK: %[[GB:.*]] = mc.constant dense<-1.000000e+00> : tensor<3xf32>
// CHECK: %[[SQW:.*]] = mc.mul %[[GW]], %[[GW]] : tensor<3x4xf32>
// CHECK: %[[SW:.*]] = mc.reduce_sum %[[SQW]], dims = [0, 1]
// CHECK: %[[SQB:.*]] = mc.mul %[[GB]], %[[GB]] : tensor<3xf32>
// CHECK: %[[SB:.*]] = mc.reduce_sum %[[SQB]], dims = [0]
// CHECK: %[[TOTAL:.*]] = mc.add %[[SW]], %[[SB]] : tensor<f32>
// CHECK: %[[NORM:.*]] = mc.sqrt %[[TOTAL]] : tensor<f32>
// CHECK: ml_program.global_store @optimizer.grad_norm = %[[NORM]]
// CHECK: %[[EPS:.*]] = mc.constant dense<9.99999997E-7> : tensor<f32>
// CHECK: %[[PADDED:.*]] = mc.add %[[NORM]], %[[EPS]]
// CHECK: %[[MAX:.*]] = mc.constant dense<1.500000e+00> : tensor<f32>
// CHECK: %[[COEF:.*]] = mc.div %[[MAX]], %[[PADDED]]
// CHECK: %[[CLAMPED:.*]] = mc.minimum %[[COEF]], %{{.*}} : tensor<f32>
// CHECK: %[[CW:.*]] = mc.broadcast_in_dim %[[CLAMPED]]{{.*}} -> tensor<3x4xf32>
// CHECK: %[[CGW:.*]] = mc.mul %[[GW]], %[[CW]]
// CHECK: %[[CB:.*]] = mc.broadcast_in_dim %[[CLAMPED]]{{.*}} -> tensor<3xf32>
// CHECK: %[[CGB:.*]] = mc.mul %[[GB]], %[[CB]]
// CHECK: mc.mul %[[CGW]], %{{.*}} : tensor<3x4xf32>
// CHECK: ml_program.global_store @w =
// CHECK: mc.mul %[[CGB]], %{{.*}} : tensor<3xf32>
// CHECK: ml_program.global_store @b =
ml_program.global private @w(dense<0.5> : tensor<3x4xf32>) : tensor<3x4xf32>
ml_program.global private @b(dense<0.0> : tensor<3xf32>) : tensor<3xf32>
func.func @forward(%x: tensor<2x4xf32>) -> (tensor<f32> {mc.name = "loss"}, tensor<3x4xf32> {mc.name = "grad.w"}, tensor<3xf32> {mc.name = "grad.b"}) {
  %w = ml_program.global_load_const @w : tensor<3x4xf32>
  %b = ml_program.global_load_const @b : tensor<3xf32>
  %y = mc.matmul %x, %w transpose_b : tensor<2x4xf32>, tensor<3x4xf32> -> tensor<2x3xf32>
  %l = mc.reduce_mean %y, dims = [0, 1] : (tensor<2x3xf32>) -> tensor<f32>
  %gw = mc.constant dense<0.25> : tensor<3x4xf32>
  %gb = mc.constant dense<-1.0> : tensor<3xf32>
  return %l, %gw, %gb : tensor<f32>, tensor<3x4xf32>, tensor<3xf32>
}
