// RUN: modelc-opt %s --mc-loss-scaling="init=1e38 interval=1" | FileCheck %s
// RUN: not modelc-opt %s --mc-loss-scaling="init=1e39" 2>&1 | FileCheck %s --check-prefix=INF
// RUN: not modelc-opt %s --mc-loss-scaling="init=1e-50" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not modelc-opt %s --mc-loss-scaling="init=-2" 2>&1 | FileCheck %s --check-prefix=NEG
// RUN: not modelc-opt %s --mc-loss-scaling="init=1e-39" 2>&1 | FileCheck %s --check-prefix=SUBNORMAL
// RUN: not modelc-opt %s --mc-loss-scaling="backoff=1e-50" 2>&1 | FileCheck %s --check-prefix=ZEROBACKOFF
// RUN: not modelc-opt %s --mc-loss-scaling="interval=16777217" 2>&1 | FileCheck %s --check-prefix=LONGINTERVAL
// RUN: modelc-opt %s --mc-loss-scaling="init=1.2e-38 interval=16777216" > /dev/null

// The scale is an f32 global: an initial scale that is not a normal
// positive f32 (1e39 is inf in f32, 1e-50 is 0, and gradients divided by a
// subnormal 1e-39 are inf) is refused by name and value; so is a backoff
// that is 0 in f32, and an interval the f32 clean-step counter cannot
// reach (it counts exactly to 2^24).
// INF: error: loss scaling: --loss-scale-init=1e+39 (the pass's init) is not a normal positive f32 number; the initial scale must be in [1.17549435e-38, 3.40282347e+38] (gradients are divided by it)
// ZERO: error: loss scaling: --loss-scale-init=1e-50 (the pass's init) is not a normal positive f32 number
// NEG: error: loss scaling: --loss-scale-init=-2 (the pass's init) is not a normal positive f32 number
// SUBNORMAL: error: loss scaling: --loss-scale-init=1e-39 (the pass's init) is not a normal positive f32 number
// ZEROBACKOFF: error: loss scaling: --loss-scale-backoff=1e-50 is 0 in f32 (the scale's type); the first overflow would set the scale to 0 for good
// LONGINTERVAL: error: loss scaling: --loss-scale-interval=16777217 is above 16777216 (2^24): the clean-step counter is an f32 and could never reach it

// The growth keeps a grown scale only if it is finite
// (torch._amp_update_scale_): scale * growth is compared with FLT_MAX
// (false for inf and NaN) and the old scale is kept otherwise, so a scale
// never becomes inf (an inf scale unscales every gradient to NaN and skips
// every step from then on).
// CHECK-DAG: ml_program.global private mutable @loss_scale(dense<9.99999968E+37> : tensor<f32>)
// CHECK-LABEL: func.func @forward
// CHECK: %[[SCALE:.*]] = ml_program.global_load @loss_scale
// CHECK: %[[FINITE:.*]] = mc.compare EQ, %{{.*}}, %{{.*}} : (tensor<f32>, tensor<f32>) -> tensor<i1>
// CHECK: %[[DUE:.*]] = mc.compare GE
// CHECK: %[[GROWTH:.*]] = mc.constant dense<2.000000e+00> : tensor<f32>
// CHECK: %[[GROWN:.*]] = mc.mul %[[SCALE]], %[[GROWTH]] : tensor<f32>
// CHECK: %[[MAX:.*]] = mc.constant dense<3.40282347E+38> : tensor<f32>
// CHECK: %[[OK:.*]] = mc.compare LE, %[[GROWN]], %[[MAX]] : (tensor<f32>, tensor<f32>) -> tensor<i1>
// CHECK: %[[KEPT:.*]] = mc.select %[[OK]], %[[GROWN]], %[[SCALE]] : tensor<i1>, tensor<f32>
// CHECK: %[[CLEAN:.*]] = mc.select %[[DUE]], %[[KEPT]], %[[SCALE]] : tensor<i1>, tensor<f32>
// CHECK: %[[BACKOFF:.*]] = mc.mul %[[SCALE]], %{{.*}} : tensor<f32>
// CHECK: %[[NEW:.*]] = mc.select %[[FINITE]], %[[CLEAN]], %[[BACKOFF]] : tensor<i1>, tensor<f32>
// CHECK: ml_program.global_store @loss_scale = %[[NEW]] : tensor<f32>
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
