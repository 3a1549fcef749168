// RUN: modelc-opt %s --mc-loss-scaling="init=1024 interval=3" | FileCheck %s
// RUN: modelc-opt %s --mc-loss-scaling --mc-optimizer="kind=sgd lr=0.1" | FileCheck %s --check-prefix=GUARD
// RUN: not modelc-opt %s --mc-loss-scaling="backoff=2" 2>&1 | FileCheck %s --check-prefix=OPTS

// OPTS: error: loss scaling needs init > 0, growth >= 1 (finite), 0 < backoff <= 1 and interval >= 1

// A step as mc-autodiff makes it: the backward pass is seeded by the tagged
// constant; grad.w is returned next to the loss.

// CHECK-DAG: ml_program.global private mutable @loss_scale(dense<1.024000e+03> : tensor<f32>)
// CHECK-DAG: ml_program.global private mutable @loss_scale.growth_tracker(dense<0.000000e+00> : tensor<f32>)
// CHECK-LABEL: func.func @forward
// CHECK-SAME: -> (tensor<f32> {mc.name = "loss"}, tensor<3x4xf32> {mc.name = "grad.w"}, tensor<i1> {mc.name = "grads_finite"})
// CHECK: %[[SCALE:.*]] = ml_program.global_load @loss_scale
// The seed is the scale now, not 1.
// CHECK-NOT: mc.autodiff_seed
// CHECK: mc.broadcast_in_dim %[[SCALE]], dims = [] : (tensor<f32>) -> tensor<2x3xf32>
// Unscale by 1 / scale, then the finiteness check (x - x == 0).
// CHECK: %[[INV:.*]] = mc.div %{{.*}}, %[[SCALE]] : tensor<f32>
// CHECK: %[[UNSCALED:.*]] = mc.mul %{{.*}}, %{{.*}} : tensor<3x4xf32>
// CHECK: mc.sub %[[UNSCALED]], %[[UNSCALED]]
// CHECK: mc.compare EQ
// CHECK: mc.reduce_min
// CHECK: %[[FINITE:.*]] = mc.compare EQ, %{{.*}}, %{{.*}} : (tensor<f32>, tensor<f32>) -> tensor<i1>
// Growth after `interval` clean steps, backoff on overflow.
// CHECK: mc.constant dense<3.000000e+00> : tensor<f32>
// CHECK: mc.constant dense<2.000000e+00> : tensor<f32>
// CHECK: mc.constant dense<5.000000e-01> : tensor<f32>
// CHECK: ml_program.global_store @loss_scale =
// CHECK: ml_program.global_store @loss_scale.growth_tracker =
// CHECK: return %{{.*}}, %[[UNSCALED]], %[[FINITE]]

// GUARD-LABEL: func.func @forward
// GUARD-SAME: -> (tensor<f32> {mc.name = "loss"})
// With grads_finite, the optimizer's stores keep the old state on overflow.
// GUARD: %[[NEW:.*]] = mc.sub %w, %{{.*}} : tensor<3x4xf32>
// GUARD: %[[OLD:.*]] = ml_program.global_load @w
// GUARD: %[[PRED:.*]] = mc.broadcast_in_dim %{{.*}}, dims = [] : (tensor<i1>) -> tensor<3x4xi1>
// GUARD: %[[KEPT:.*]] = mc.select %[[PRED]], %[[NEW]], %[[OLD]]
// GUARD: ml_program.global_store @w = %[[KEPT]]
// The step counter does not advance on a skipped step either.
// GUARD: mc.select
// GUARD: ml_program.global_store @optimizer.step
ml_program.global private @w(dense<0.5> : tensor<3x4xf32>) : tensor<3x4xf32>
func.func @forward(%x: tensor<2x4xf32>) -> (tensor<f32> {mc.name = "loss"}, tensor<3x4xf32> {mc.name = "grad.w"}) {
  %w = ml_program.global_load_const @w : tensor<3x4xf32>
  %y = mc.matmul %x, %w transpose_b : tensor<2x4xf32>, tensor<3x4xf32> -> tensor<2x3xf32>
  %l = mc.reduce_mean %y, dims = [0, 1] : (tensor<2x3xf32>) -> tensor<f32>
  %seed = mc.constant {mc.autodiff_seed} dense<1.0> : tensor<f32>
  %s = mc.broadcast_in_dim %seed, dims = [] : (tensor<f32>) -> tensor<2x3xf32>
  %c = mc.constant dense<0.1666666> : tensor<2x3xf32>
  %gy = mc.mul %s, %c : tensor<2x3xf32>
  %gw = mc.matmul %gy, %x transpose_a : tensor<2x3xf32>, tensor<2x4xf32> -> tensor<3x4xf32>
  return %l, %gw : tensor<f32>, tensor<3x4xf32>
}
