// RUN: modelc-opt %s --mc-grad-accum=steps=3 | FileCheck %s
// RUN: modelc-opt %s --mc-grad-accum=steps=3 --mc-optimizer="kind=sgd lr=0.1" | FileCheck %s --check-prefix=OPT
// RUN: modelc-opt %s --mc-grad-accum=steps=2 --mc-loss-scaling --mc-optimizer="kind=sgd lr=0.1" | FileCheck %s --check-prefix=SCALE
// RUN: modelc-opt %s --mc-grad-accum=steps=1 | FileCheck %s --check-prefix=ONE
// RUN: not modelc-opt %s --mc-grad-accum=steps=0 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not modelc-opt %s --mc-grad-accum=steps=2 --mc-grad-accum=steps=2 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not modelc-opt %s --mc-loss-scaling --mc-grad-accum=steps=2 2>&1 | FileCheck %s --check-prefix=ORDER

// Gradient accumulation: every call adds its gradient to w.grad_accum and
// returns the group's mean so far; the third call of a group
// (optimizer.micro_step == 2) is due (update_due) and restarts the sum.

// ZERO: error: --grad-accum=0 must be in [1, 2^24]
// TWICE: error: 'func.func' op already accumulates gradients (it returns update_due); run mc-grad-accum once
// ORDER: error: 'func.func' op already has loss scaling (grads_finite): run mc-grad-accum before mc-loss-scaling
// ONE-NOT: micro_step
// ONE-NOT: grad_accum
// ONE-NOT: update_due

// CHECK-DAG: ml_program.global private mutable @optimizer.micro_step(dense<0> : tensor<i64>)
// CHECK-DAG: ml_program.global private mutable @w.grad_accum(dense<0.000000e+00> : tensor<3x4xf32>)
// CHECK-LABEL: func.func @forward
// CHECK-SAME: -> (tensor<f32> {mc.name = "loss"}, tensor<3x4xf32> {mc.name = "grad.w"}, tensor<i1> {mc.name = "update_due"})
// CHECK: %[[G:.*]] = mc.constant dense<2.500000e-01> : tensor<3x4xf32>
// CHECK: %[[MICRO:.*]] = ml_program.global_load @optimizer.micro_step
// CHECK: %[[LAST:.*]] = mc.constant dense<2> : tensor<i64>
// CHECK: %[[DUE:.*]] = mc.compare EQ, %[[MICRO]], %[[LAST]]
// CHECK: %[[NEXT:.*]] = mc.select %[[DUE]], %{{.*}}, %{{.*}} : tensor<i1>, tensor<i64>
// CHECK: ml_program.global_store @optimizer.micro_step = %[[NEXT]]
// CHECK: %[[ACC:.*]] = ml_program.global_load @w.grad_accum
// CHECK: %[[SUM:.*]] = mc.add %[[ACC]], %[[G]]
// CHECK: %[[RESTART:.*]] = mc.broadcast_in_dim %[[DUE]]
// CHECK: %[[ZEROS:.*]] = mc.constant dense<0.000000e+00> : tensor<3x4xf32>
// CHECK: %[[KEPT:.*]] = mc.select %[[RESTART]], %[[ZEROS]], %[[SUM]]
// CHECK: ml_program.global_store @w.grad_accum = %[[KEPT]]
// CHECK: %[[THIRD:.*]] = mc.constant dense<0.333333343> : tensor<3x4xf32>
// CHECK: %[[MEAN:.*]] = mc.mul %[[SUM]], %[[THIRD]]
// CHECK: return %{{.*}}, %[[MEAN]], %[[DUE]]

// mc-optimizer updates with the mean on due calls only, and drops
// update_due from the results.
// OPT-LABEL: func.func @forward
// OPT-SAME: -> (tensor<f32> {mc.name = "loss"})
// OPT: %[[DUE:.*]] = mc.compare EQ
// OPT: %[[SUM:.*]] = mc.add %{{.*}}, %{{.*}} : tensor<3x4xf32>
// OPT: %[[MEAN:.*]] = mc.mul %[[SUM]], %{{.*}}
// OPT: %[[DELTA:.*]] = mc.mul %[[MEAN]], %{{.*}}
// OPT: %[[NEW:.*]] = mc.sub %[[W:.*]], %[[DELTA]]
// OPT: %[[OLD:.*]] = ml_program.global_load @w
// OPT: %[[WHEN:.*]] = mc.broadcast_in_dim %[[DUE]]
// OPT: %[[STORED:.*]] = mc.select %[[WHEN]], %[[NEW]], %[[OLD]]
// OPT: ml_program.global_store @w = %[[STORED]]
// OPT: %[[KEEPSTEP:.*]] = ml_program.global_load @optimizer.step
// OPT: %[[STEPNEW:.*]] = mc.select %[[DUE]], %{{.*}}, %[[KEEPSTEP]]
// OPT: ml_program.global_store @optimizer.step = %[[STEPNEW]]
// OPT: return %{{.*}} : tensor<f32>

// With loss scaling: the group's mean is unscaled and checked; the scale
// and its tracker change on due calls only (GradScaler's update() once per
// optimizer step); the update needs due and finite.
// SCALE-LABEL: func.func @forward
// SCALE: %[[SCALE:.*]] = ml_program.global_load @loss_scale : tensor<f32>
// SCALE: %[[TRACKER:.*]] = ml_program.global_load @loss_scale.growth_tracker
// SCALE: %[[DUE:.*]] = mc.compare EQ
// SCALE: %[[SUM:.*]] = mc.add %{{.*}}, %{{.*}} : tensor<3x4xf32>
// SCALE: %[[MEAN:.*]] = mc.mul %[[SUM]], %{{.*}}
// SCALE: %[[UNSCALED:.*]] = mc.mul %[[MEAN]], %{{.*}}
// SCALE: %[[DIFF:.*]] = mc.sub %[[UNSCALED]], %[[UNSCALED]]
// SCALE: %[[FINITE:.*]] = mc.compare EQ, %{{.*}}, %{{.*}} : (tensor<f32>, tensor<f32>) -> tensor<i1>
// SCALE: %[[NEWSCALE:.*]] = mc.select %[[FINITE]], %{{.*}}, %{{.*}} : tensor<i1>, tensor<f32>
// SCALE: %[[NEWTRACKER:.*]] = mc.select %[[FINITE]], %{{.*}}, %{{.*}} : tensor<i1>, tensor<f32>
// SCALE: %[[DUESCALE:.*]] = mc.select %[[DUE]], %[[NEWSCALE]], %[[SCALE]]
// SCALE: %[[DUETRACKER:.*]] = mc.select %[[DUE]], %[[NEWTRACKER]], %[[TRACKER]]
// SCALE: ml_program.global_store @loss_scale = %[[DUESCALE]]
// SCALE: ml_program.global_store @loss_scale.growth_tracker = %[[DUETRACKER]]
// SCALE: %[[APPLIES:.*]] = mc.select %[[DUE]], %[[FINITE]], %[[DUE]] : tensor<i1>, tensor<i1>
// SCALE: %[[DELTA:.*]] = mc.mul %[[UNSCALED]], %{{.*}}
// SCALE: %[[WHEN:.*]] = mc.broadcast_in_dim %[[APPLIES]]
// SCALE: mc.select %[[WHEN]]
// SCALE: ml_program.global_store @w =
// SCALE: mc.select %[[APPLIES]]
// SCALE: ml_program.global_store @optimizer.step =
ml_program.global private @w(dense<0.5> : tensor<3x4xf32>) : tensor<3x4xf32>
func.func @forward(%x: tensor<2x4xf32>) -> (tensor<f32> {mc.name = "loss"}, tensor<3x4xf32> {mc.name = "grad.w"}) {
  %w = ml_program.global_load_const @w : tensor<3x4xf32>
  %y = mc.matmul %x, %w transpose_b : tensor<2x4xf32>, tensor<3x4xf32> -> tensor<2x3xf32>
  %l = mc.reduce_mean %y, dims = [0, 1] : (tensor<2x3xf32>) -> tensor<f32>
  %seed = mc.constant {mc.autodiff_seed} dense<1.0> : tensor<f32>
  %g = mc.constant dense<0.25> : tensor<3x4xf32>
  return %l, %g : tensor<f32>, tensor<3x4xf32>
}
