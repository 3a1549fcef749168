// RUN: modelc-opt %s --mc-autodiff="freeze=enc" | FileCheck %s
// RUN: modelc-opt %s --mc-autodiff="freeze=enc.weight,head.bias" | FileCheck %s --check-prefix=NAMES
// RUN: not modelc-opt %s --mc-autodiff="freeze=en" 2>&1 | FileCheck %s --check-prefix=NOMATCH
// RUN: not modelc-opt %s --mc-autodiff="freeze=enc,head,encoder" 2>&1 | FileCheck %s --check-prefix=ALL
// RUN: modelc-opt %s --mc-train-pipeline="freeze=enc optimizer=adamw" | FileCheck %s --check-prefix=STEP

// --freeze: parameters left untrained, as requires_grad=False in PyTorch. A
// module path (`enc`) freezes every parameter under it (enc.weight,
// enc.bias, not encoder.*); a name freezes that one. Frozen parameters get
// no gradient, so no optimizer state either, and stay constants.

// CHECK-LABEL: func.func @forward
// CHECK-SAME: -> (tensor<f32> {mc.name = "loss"}, tensor<2x4xf32> {mc.name = "grad.head.weight"}, tensor<2xf32> {mc.name = "grad.head.bias"}, tensor<4x4xf32> {mc.name = "grad.encoder.weight"})

// NAMES-LABEL: func.func @forward
// NAMES-SAME: -> (tensor<f32> {mc.name = "loss"}, tensor<4xf32> {mc.name = "grad.enc.bias"}, tensor<2x4xf32> {mc.name = "grad.head.weight"}, tensor<4x4xf32> {mc.name = "grad.encoder.weight"})

// NOMATCH: error: --freeze 'en' names no parameter (a parameter's name, or a module path before a '.'); parameters: enc.weight enc.bias head.weight head.bias encoder.weight
// ALL: error: 'func.func' op reads no parameters (float ml_program globals, not mc.buffer ones, not frozen by --freeze): a training step has nothing to train

// STEP-DAG: ml_program.global private @enc.weight(
// STEP-DAG: ml_program.global private @enc.bias(
// STEP-DAG: ml_program.global private mutable @head.weight(
// STEP-DAG: ml_program.global private mutable @head.weight.exp_avg(
// STEP-DAG: ml_program.global private mutable @encoder.weight(
// STEP-NOT: @enc.weight.exp_avg
// STEP-NOT: @enc.bias.exp_avg
// STEP-NOT: global_store @enc.
ml_program.global private @enc.weight(dense<0.5> : tensor<4x4xf32>) : tensor<4x4xf32>
ml_program.global private @enc.bias(dense<0.1> : tensor<4xf32>) : tensor<4xf32>
ml_program.global private @head.weight(dense<0.25> : tensor<2x4xf32>) : tensor<2x4xf32>
ml_program.global private @head.bias(dense<0.0> : tensor<2xf32>) : tensor<2xf32>
ml_program.global private @encoder.weight(dense<1.0> : tensor<4x4xf32>) : tensor<4x4xf32>
func.func @forward(%x: tensor<3x4xf32>) -> tensor<f32> {
  %we = ml_program.global_load_const @enc.weight : tensor<4x4xf32>
  %be = ml_program.global_load_const @enc.bias : tensor<4xf32>
  %wh = ml_program.global_load_const @head.weight : tensor<2x4xf32>
  %bh = ml_program.global_load_const @head.bias : tensor<2xf32>
  %w3 = ml_program.global_load_const @encoder.weight : tensor<4x4xf32>
  %x3 = mc.matmul %x, %w3 transpose_b : tensor<3x4xf32>, tensor<4x4xf32> -> tensor<3x4xf32>
  %h = mc.matmul %x3, %we transpose_b : tensor<3x4xf32>, tensor<4x4xf32> -> tensor<3x4xf32>
  %bb = mc.broadcast_in_dim %be, dims = [1] : (tensor<4xf32>) -> tensor<3x4xf32>
  %hb = mc.add %h, %bb : tensor<3x4xf32>
  %o = mc.matmul %hb, %wh transpose_b : tensor<3x4xf32>, tensor<2x4xf32> -> tensor<3x2xf32>
  %ob = mc.broadcast_in_dim %bh, dims = [1] : (tensor<2xf32>) -> tensor<3x2xf32>
  %y = mc.add %o, %ob : tensor<3x2xf32>
  %sq = mc.mul %y, %y : tensor<3x2xf32>
  %l = mc.reduce_mean %sq, dims = [0, 1] : (tensor<3x2xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
