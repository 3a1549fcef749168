// RUN: modelc-opt %s --mc-optimizer="kind=sgd lr=0.1 grad-accum=3" | FileCheck %s
// RUN: not modelc-opt %s --mc-optimizer="kind=sgd grad-accum=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: modelc-opt %s --mc-optimizer="kind=sgd lr=0.1" | FileCheck %s --check-prefix=ONE

// Gradient accumulation: every call adds its gradient to w.grad_accum;
// the third call of a group (optimizer.micro_step == 2) updates w with the
// mean and starts the next group; the update's stores keep the old values
// on the other calls.

// ZERO: error: --grad-accum=0 must be in [1, 2^24]
// ONE-NOT: micro_step
// ONE-NOT: grad_accum

// CHECK-DAG: ml_program.global private mutable @optimizer.micro_step(dense<0> : tensor<i64>)
// CHECK-DAG: ml_program.global private mutable @w.grad_accum(dense<0.000000e+00> : tensor<3x4xf32>)
// CHECK-LABEL: func.func @forward
// CHECK: %[[G:.*]] = mc.constant dense<2.500000e-01> : tensor<3x4xf32>
// CHECK: %[[MICRO:.*]] = ml_program.global_load @optimizer.micro_step
// CHECK: %[[LAST:.*]] = mc.constant dense<2> : tensor<i64>
// CHECK: %[[APPLIES:.*]] = mc.compare EQ, %[[MICRO]], %[[LAST]]
// CHECK: %[[NEXT:.*]] = mc.select %[[APPLIES]], %{{.*}}, %{{.*}} : tensor<i1>, tensor<i64>
// CHECK: ml_program.global_store @optimizer.micro_step = %[[NEXT]]
// CHECK: %[[ACC:.*]] = ml_program.global_load @w.grad_accum
// CHECK: %[[SUM:.*]] = mc.add %[[ACC]], %[[G]]
// CHECK: %[[RESTART:.*]] = mc.broadcast_in_dim %[[APPLIES]]
// CHECK: %[[KEPT:.*]] = mc.select %[[RESTART]], %{{.*}}, %[[SUM]]
// CHECK: ml_program.global_store @w.grad_accum = %[[KEPT]]
// CHECK: %[[THIRD:.*]] = mc.constant dense<0.333333343> : tensor<3x4xf32>
// CHECK: %[[MEAN:.*]] = mc.mul %[[SUM]], %[[THIRD]]
// CHECK: %[[DELTA:.*]] = mc.mul %[[MEAN]], %{{.*}}
// CHECK: %[[NEW:.*]] = mc.sub %[[W:.*]], %[[DELTA]]
// CHECK: %[[OLD:.*]] = ml_program.global_load @w
// CHECK: %[[WHEN:.*]] = mc.broadcast_in_dim %[[APPLIES]]
// CHECK: %[[STORED:.*]] = mc.select %[[WHEN]], %[[NEW]], %[[OLD]]
// CHECK: ml_program.global_store @w = %[[STORED]]
// CHECK: %[[KEEPSTEP:.*]] = ml_program.global_load @optimizer.step
// CHECK: %[[STEPNEW:.*]] = mc.select %[[APPLIES]], %{{.*}}, %[[KEEPSTEP]]
// CHECK: ml_program.global_store @optimizer.step = %[[STEPNEW]]
ml_program.global private @w(dense<0.5> : tensor<3x4xf32>) : tensor<3x4xf32>
func.func @forward(%x: tensor<2x4xf32>) -> (tensor<f32> {mc.name = "loss"}, tensor<3x4xf32> {mc.name = "grad.w"}) {
  %w = ml_program.global_load_const @w : tensor<3x4xf32>
  %y = mc.matmul %x, %w transpose_b : tensor<2x4xf32>, tensor<3x4xf32> -> tensor<2x3xf32>
  %l = mc.reduce_mean %y, dims = [0, 1] : (tensor<2x3xf32>) -> tensor<f32>
  %g = mc.constant dense<0.25> : tensor<3x4xf32>
  return %l, %g : tensor<f32>, tensor<3x4xf32>
}
