// Every optimizer option is checked, by the name of its flag and the value
// given: finite (in f32, the update's precision) and in range. The same
// checks run for modelc compile --train (test/tools/train-options.test).
// RUN: not modelc-opt %s --mc-optimizer="kind=adamw lr=-0.1" 2>&1 | FileCheck %s --check-prefix=LR
// RUN: not modelc-opt %s --mc-optimizer="kind=adamw lr=nan" 2>&1 | FileCheck %s --check-prefix=LRNAN
// RUN: not modelc-opt %s --mc-optimizer="kind=adamw lr=inf" 2>&1 | FileCheck %s --check-prefix=LRINF
// RUN: not modelc-opt %s --mc-optimizer="kind=adamw lr=1e39" 2>&1 | FileCheck %s --check-prefix=LRF32
// RUN: not modelc-opt %s --mc-optimizer="kind=sgd momentum=-0.9" 2>&1 | FileCheck %s --check-prefix=MOMENTUM
// RUN: not modelc-opt %s --mc-optimizer="kind=sgd momentum=0.9 dampening=-1" 2>&1 | FileCheck %s --check-prefix=DAMPENING
// RUN: not modelc-opt %s --mc-optimizer="kind=sgd weight-decay=-0.5" 2>&1 | FileCheck %s --check-prefix=DECAY
// RUN: not modelc-opt %s --mc-optimizer="kind=adamw weight-decay=-1" 2>&1 | FileCheck %s --check-prefix=DECAY1
// RUN: not modelc-opt %s --mc-optimizer="kind=adamw weight-decay=nan" 2>&1 | FileCheck %s --check-prefix=DECAYNAN
// RUN: not modelc-opt %s --mc-optimizer="kind=adamw beta1=1" 2>&1 | FileCheck %s --check-prefix=BETA1
// RUN: not modelc-opt %s --mc-optimizer="kind=adamw beta1=0.99999999" 2>&1 | FileCheck %s --check-prefix=BETA1F32
// RUN: not modelc-opt %s --mc-optimizer="kind=adamw beta2=-0.1" 2>&1 | FileCheck %s --check-prefix=BETA2
// RUN: not modelc-opt %s --mc-optimizer="kind=adamw eps=0" 2>&1 | FileCheck %s --check-prefix=EPS
// RUN: not modelc-opt %s --mc-optimizer="kind=adamw eps=1e-50" 2>&1 | FileCheck %s --check-prefix=EPSF32
// RUN: not modelc-opt %s --mc-optimizer="kind=adamw weight-decay=fast" 2>&1 | FileCheck %s --check-prefix=DECAYTEXT
// The training pipeline's weight-decay is "not given" or a checked value too.
// RUN: not modelc-opt %s --mc-train-pipeline="weight-decay=-0.5" 2>&1 | FileCheck %s --check-prefix=DECAY

// LR: error: optimizer option --lr=-0.1 is out of range: lr must be >= 0
// LRNAN: error: optimizer option --lr=nan is not a finite number
// LRINF: error: optimizer option --lr=inf is not a finite number
// LRF32: error: optimizer option --lr=1e+39 is not a finite f32 number (the update computes in f32)
// MOMENTUM: error: optimizer option --momentum=-0.9 is out of range: momentum must be >= 0
// DAMPENING: error: optimizer option --dampening=-1 is out of range: dampening must be >= 0
// DECAY: error: optimizer option --weight-decay=-0.5 is out of range: weight decay must be >= 0
// DECAY1: error: optimizer option --weight-decay=-1 is out of range: weight decay must be >= 0
// DECAYNAN: error: optimizer option --weight-decay=nan is not a finite number
// BETA1: error: optimizer option --beta1=1 is out of range: beta1 must be in [0, 1)
// BETA1F32: error: optimizer option --beta1=0.99999999 is out of range: beta1 must be in [0, 1) (it is 1 in f32)
// BETA2: error: optimizer option --beta2=-0.1 is out of range: beta2 must be in [0, 1)
// EPS: error: optimizer option --eps=0 is out of range: eps must be > 0
// EPSF32: error: optimizer option --eps=1e-50 is out of range: eps must be > 0 (it is 0 in f32)
// DECAYTEXT: 'fast' value invalid for floating point argument

// Weight decay: not given is the optimizer's default (AdamW 0.01: the
// parameter is scaled by 1 - lr * 0.01); 0 is a value, distinct from it
// (no decay factor at all); 0.5 is used as given.
// RUN: modelc-opt %s --mc-optimizer="kind=adamw lr=0.1" | FileCheck %s --check-prefix=DEFAULT
// RUN: modelc-opt %s --mc-optimizer="kind=adamw lr=0.1 weight-decay=0" | FileCheck %s --check-prefix=ZERO
// RUN: modelc-opt %s --mc-optimizer="kind=adamw lr=0.1 weight-decay=0.5" | FileCheck %s --check-prefix=HALF
// RUN: modelc-opt %s --mc-optimizer="kind=sgd lr=0.1" | FileCheck %s --check-prefix=SGDDEFAULT
// DEFAULT: %[[W:.*]] = ml_program.global_load @w : tensor<3x4xf32>
// DEFAULT: %[[FACTOR:.*]] = mc.constant dense<9.990000e-01> : tensor<3x4xf32>
// DEFAULT: mc.mul %[[W]], %[[FACTOR]]
// ZERO: %[[W:.*]] = ml_program.global_load @w : tensor<3x4xf32>
// ZERO-NOT: mc.mul %[[W]],
// ZERO: ml_program.global_store @w
// HALF: %[[W:.*]] = ml_program.global_load @w : tensor<3x4xf32>
// HALF: %[[FACTOR:.*]] = mc.constant dense<0.949999988> : tensor<3x4xf32>
// HALF: mc.mul %[[W]], %[[FACTOR]]
// SGD's default is 0: the gradient goes to the update as it is.
// SGDDEFAULT: %[[W:.*]] = ml_program.global_load @w : tensor<3x4xf32>
// SGDDEFAULT: %[[GW:.*]] = mc.matmul %{{.*}} transpose_a
// SGDDEFAULT: %[[RATE:.*]] = mc.constant dense<1.000000e-01> : tensor<3x4xf32>
// SGDDEFAULT-NEXT: %[[STEP:.*]] = mc.mul %[[GW]], %[[RATE]]
// SGDDEFAULT-NEXT: mc.sub %[[W]], %[[STEP]]
ml_program.global private @w(dense<0.5> : tensor<3x4xf32>) : tensor<3x4xf32>
func.func @forward(%x: tensor<2x4xf32>) -> (tensor<f32> {mc.name = "loss"}, tensor<3x4xf32> {mc.name = "grad.w"}) {
  %w = ml_program.global_load_const @w : tensor<3x4xf32>
  %y = mc.matmul %x, %w transpose_b : tensor<2x4xf32>, tensor<3x4xf32> -> tensor<2x3xf32>
  %l = mc.reduce_mean %y, dims = [0, 1] : (tensor<2x3xf32>) -> tensor<f32>
  %c = mc.constant dense<0.1666666> : tensor<2x3xf32>
  %gw = mc.matmul %c, %x transpose_a : tensor<2x3xf32>, tensor<2x4xf32> -> tensor<3x4xf32>
  return %l, %gw : tensor<f32>, tensor<3x4xf32>
}
