// RUN: modelc-opt %s --split-input-file --mc-optimizer -verify-diagnostics

// expected-error @+1 {{result 1 is not named grad.<parameter>; run mc-autodiff first}}
func.func @not_autodiffed(%x: tensor<4xf32>) -> (tensor<f32>, tensor<4xf32>) {
  %l = mc.reduce_sum %x, dims = [0] : (tensor<4xf32>) -> tensor<f32>
  return %l, %x : tensor<f32>, tensor<4xf32>
}

// -----

// expected-error @+1 {{returns 1 values; mc-optimizer expects (loss, grad.<param>...) from mc-autodiff}}
func.func @loss_only(%x: tensor<4xf32>) -> tensor<f32> {
  %l = mc.reduce_sum %x, dims = [0] : (tensor<4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{result 1 is the gradient of 'nothing', which is not a global}}
func.func @unknown(%x: tensor<4xf32>) -> (tensor<f32> {mc.name = "loss"}, tensor<4xf32> {mc.name = "grad.nothing"}) {
  %l = mc.reduce_sum %x, dims = [0] : (tensor<4xf32>) -> tensor<f32>
  return %l, %x : tensor<f32>, tensor<4xf32>
}
