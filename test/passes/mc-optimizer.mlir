// RUN: modelc-opt %s --mc-optimizer="kind=sgd lr=0.1 momentum=0.9" | FileCheck %s --check-prefix=SGD
// RUN: modelc-opt %s --mc-optimizer="kind=adamw lr=0.001" | FileCheck %s --check-prefix=ADAMW
// RUN: modelc-opt %s --mc-optimizer="kind=adam lr=0.001 weight-decay=0.5" | FileCheck %s --check-prefix=ADAM
// RUN: not modelc-opt %s --mc-optimizer="kind=lamb" 2>&1 | FileCheck %s --check-prefix=KIND
// RUN: not modelc-opt %s --mc-optimizer="kind=sgd nesterov=true" 2>&1 | FileCheck %s --check-prefix=NESTEROV

// The step mc-autodiff makes: (loss, grad.w). mc-optimizer turns w and the
// optimizer state into mutable globals, appends the update and stores, and
// returns the loss alone.

// KIND: error: unknown optimizer kind 'lamb' (expected sgd, adam or adamw)
// NESTEROV: error: nesterov needs momentum > 0 and dampening 0

// SGD: ml_program.global private mutable @w(
// SGD-DAG: ml_program.global private mutable @optimizer.step(dense<0> : tensor<i64>)
// SGD-DAG: ml_program.global private mutable @w.momentum_buffer(dense<0.000000e+00> : tensor<3x4xf32>)
// SGD-LABEL: func.func @forward
// SGD-SAME: -> (tensor<f32> {mc.name = "loss"})
// SGD: %[[W:.*]] = ml_program.global_load @w : tensor<3x4xf32>
// SGD: %[[STEP:.*]] = ml_program.global_load @optimizer.step : tensor<i64>
// The buffer starts at the first gradient (torch.optim.SGD), then runs.
// SGD: mc.compare EQ, %[[STEP]]
// SGD: %[[BUF:.*]] = ml_program.global_load @w.momentum_buffer
// SGD: %[[NEWBUF:.*]] = mc.select
// SGD: ml_program.global_store @w.momentum_buffer = %[[NEWBUF]]
// SGD: %[[LR:.*]] = mc.constant dense<1.000000e-01> : tensor<3x4xf32>
// SGD: %[[DELTA:.*]] = mc.mul %[[NEWBUF]], %[[LR]]
// SGD: %[[NEW:.*]] = mc.sub %[[W]], %[[DELTA]]
// SGD: ml_program.global_store @w = %[[NEW]]
// SGD: ml_program.global_store @optimizer.step
// SGD: return %{{.*}} : tensor<f32>

// ADAMW-DAG: ml_program.global private mutable @w.exp_avg(
// ADAMW-DAG: ml_program.global private mutable @w.exp_avg_sq(
// ADAMW-LABEL: func.func @forward
// Bias corrections 1 - beta^t from the step count t: beta^t = exp(t ln
// beta), ln beta from double (ln 0.9, ln 0.999), and 1 - beta^t near 0 by
// Kahan's expm1 formula (1 - u) * x / log(u), or -x where u rounds to 1;
// built once, before the parameters' updates, which share them.
// ADAMW: %[[LN1:.*]] = mc.constant dense<-0.105360515> : tensor<f32>
// ADAMW: %[[X1:.*]] = mc.mul %[[T:.*]], %[[LN1]] : tensor<f32>
// ADAMW: %[[U1:.*]] = mc.exp %[[X1]]
// ADAMW: %[[OM1:.*]] = mc.sub %{{.*}}, %[[U1]]
// ADAMW: %[[LOG1:.*]] = mc.log %[[U1]]
// ADAMW: %[[R1:.*]] = mc.div %[[X1]], %[[LOG1]]
// ADAMW: %[[K1:.*]] = mc.mul %[[OM1]], %[[R1]]
// ADAMW: mc.compare
// ADAMW: mc.compare
// ADAMW: %[[N1:.*]] = mc.neg %[[X1]]
// ADAMW: %[[S1:.*]] = mc.select %{{.*}}, %[[N1]], %[[K1]]
// ADAMW: mc.select %{{.*}}, %[[S1]], %[[OM1]]
// ADAMW: mc.constant dense<-0.00100050028> : tensor<f32>
// ADAMW: mc.sqrt
// Decoupled weight decay first: w * (1 - lr * 0.01).
// ADAMW: mc.constant dense<0.99998{{[0-9]*}}> : tensor<3x4xf32>
// ADAMW: ml_program.global_store @w.exp_avg =
// ADAMW: ml_program.global_store @w.exp_avg_sq =
// ADAMW: mc.sqrt
// ADAMW: ml_program.global_store @w =
// ADAMW: ml_program.global_store @optimizer.step
// Adam (torch.optim.Adam): the same moments and bias corrections, its
// weight decay an L2 term on the gradient, g + 0.5 w, before the moments;
// the weight itself is not scaled.
// ADAM-DAG: ml_program.global private mutable @w.exp_avg(
// ADAM-DAG: ml_program.global private mutable @w.exp_avg_sq(
// ADAM-LABEL: func.func @forward
// ADAM: %[[W:.*]] = ml_program.global_load @w : tensor<3x4xf32>
// ADAM: %[[G:.*]] = mc.constant dense<2.500000e-01> : tensor<3x4xf32>
// ADAM-NOT: dense<0.99{{[0-9]*}}> : tensor<3x4xf32>
// ADAM: %[[HALF:.*]] = mc.constant dense<5.000000e-01> : tensor<3x4xf32>
// ADAM: %[[L2:.*]] = mc.mul %[[W]], %[[HALF]]
// ADAM: %[[GD:.*]] = mc.add %[[G]], %[[L2]]
// ADAM: mc.mul %[[GD]], %{{.*}}
// ADAM: mc.mul %[[GD]], %[[GD]]
// ADAM: ml_program.global_store @w.exp_avg =
// ADAM: ml_program.global_store @w.exp_avg_sq =
// ADAM: %[[NEW:.*]] = mc.sub %[[W]], %{{.*}}
// ADAM: ml_program.global_store @w = %{{.*}}
ml_program.global private @w(dense<0.5> : tensor<3x4xf32>) : tensor<3x4xf32>
func.func @forward(%x: tensor<2x4xf32>) -> (tensor<f32> {mc.name = "loss"}, tensor<3x4xf32> {mc.name = "grad.w"}) {
  %w = ml_program.global_load_const @w : tensor<3x4xf32>
  %y = mc.matmul %x, %w transpose_b : tensor<2x4xf32>, tensor<3x4xf32> -> tensor<2x3xf32>
  %l = mc.reduce_mean %y, dims = [0, 1] : (tensor<2x3xf32>) -> tensor<f32>
  %g = mc.constant dense<0.25> : tensor<3x4xf32>
  return %l, %g : tensor<f32>, tensor<3x4xf32>
}

