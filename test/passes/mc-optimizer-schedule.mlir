// RUN: modelc-opt %s --mc-optimizer="kind=adamw lr=0.01 lr-schedule=linear warmup-steps=4 total-steps=100" | FileCheck %s
// RUN: modelc-opt %s --mc-optimizer="kind=sgd lr=0.1 lr-schedule=cosine total-steps=50" | FileCheck %s --check-prefix=COSINE
// RUN: modelc-opt %s --mc-optimizer="kind=sgd lr=0.1" | FileCheck %s --check-prefix=CONSTANT
// RUN: not modelc-opt %s --mc-optimizer="kind=sgd lr-schedule=step" 2>&1 | FileCheck %s --check-prefix=KIND
// RUN: not modelc-opt %s --mc-optimizer="kind=sgd lr-schedule=linear warmup-steps=10 total-steps=10" 2>&1 | FileCheck %s --check-prefix=BADTOTAL
// RUN: not modelc-opt %s --mc-optimizer="kind=sgd total-steps=10" 2>&1 | FileCheck %s --check-prefix=CONSTTOTAL
// RUN: not modelc-opt %s --mc-optimizer="kind=sgd warmup-steps=-1" 2>&1 | FileCheck %s --check-prefix=RANGE

// Learning-rate schedules (Hugging Face's get_*_schedule_with_warmup):
// step t's rate is lr * factor(t), t = optimizer.step before the update,
// stored in optimizer.lr; AdamW's step size and its decoupled decay
// factor 1 - lr * weight_decay use it.

// KIND: error: unknown --lr-schedule 'step' (expected constant, linear or cosine)
// BADTOTAL: error: --lr-schedule=linear needs --total-steps greater than --warmup-steps (10), got 10
// CONSTTOTAL: error: --total-steps=10 has no effect with a constant learning rate (give --lr-schedule=linear or cosine)
// RANGE: error: --warmup-steps=-1 and --total-steps=0 must be in [0, 2^24] (the schedule counts in f32)

// CHECK-DAG: ml_program.global private mutable @optimizer.lr(dense<0.000000e+00> : tensor<f32>)
// CHECK-LABEL: func.func @forward
// CHECK: %[[STEP:.*]] = ml_program.global_load @optimizer.step : tensor<i64>
// CHECK: %[[T:.*]] = mc.cast %[[STEP]] : tensor<i64> to tensor<f32>
// Linear decay after the warmup: max(0, (100 - t) / 96).
// CHECK: %[[SPAN:.*]] = mc.constant dense<9.600000e+01> : tensor<f32>
// CHECK: %[[TOTAL:.*]] = mc.constant dense<1.000000e+02> : tensor<f32>
// CHECK: %[[LEFT:.*]] = mc.sub %[[TOTAL]], %[[T]]
// CHECK: %[[FRAC:.*]] = mc.div %[[LEFT]], %[[SPAN]]
// CHECK: %[[DECAY:.*]] = mc.maximum %{{.*}}, %[[FRAC]]
// Warmup: t / 4 while t < 4.
// CHECK: %[[WARM:.*]] = mc.div %[[T]], %{{.*}}
// CHECK: %[[WARMING:.*]] = mc.compare LT, %[[T]]
// CHECK: %[[FACTOR:.*]] = mc.select %[[WARMING]], %[[WARM]], %[[DECAY]]
// CHECK: %[[LR:.*]] = mc.mul %{{.*}}, %[[FACTOR]] : tensor<f32>
// CHECK: ml_program.global_store @optimizer.lr = %[[LR]]
// CHECK: mc.div %[[LR]], %{{.*}} : tensor<f32>
// CHECK: %[[WD:.*]] = mc.constant dense<0.00999999977> : tensor<f32>
// CHECK: mc.mul %[[LR]], %[[WD]]

// COSINE: %[[T:.*]] = mc.cast
// COSINE: %[[P:.*]] = mc.div
// COSINE: %[[PI:.*]] = mc.constant dense<3.14159274> : tensor<f32>
// COSINE: mc.cos
// COSINE-NOT: mc.compare LT
// COSINE: %[[F:.*]] = mc.maximum
// COSINE: %[[LR:.*]] = mc.mul %{{.*}}, %[[F]] : tensor<f32>
// COSINE: ml_program.global_store @optimizer.lr = %[[LR]]
// COSINE: mc.broadcast_in_dim %[[LR]]

// CONSTANT-NOT: optimizer.lr
// CONSTANT-NOT: mc.cos
ml_program.global private @w(dense<0.5> : tensor<3x4xf32>) : tensor<3x4xf32>
func.func @forward(%x: tensor<2x4xf32>) -> (tensor<f32> {mc.name = "loss"}, tensor<3x4xf32> {mc.name = "grad.w"}) {
  %w = ml_program.global_load_const @w : tensor<3x4xf32>
  %y = mc.matmul %x, %w transpose_b : tensor<2x4xf32>, tensor<3x4xf32> -> tensor<2x3xf32>
  %l = mc.reduce_mean %y, dims = [0, 1] : (tensor<2x3xf32>) -> tensor<f32>
  %g = mc.constant dense<0.25> : tensor<3x4xf32>
  return %l, %g : tensor<f32>, tensor<3x4xf32>
}
