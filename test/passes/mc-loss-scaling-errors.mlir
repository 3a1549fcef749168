// RUN: modelc-opt %s --split-input-file --mc-loss-scaling -verify-diagnostics

// expected-error @+1 {{has no backward seed (mc.autodiff_seed); run mc-autodiff first}}
func.func @no_seed(%x: tensor<4xf32>) -> (tensor<f32> {mc.name = "loss"}, tensor<4xf32> {mc.name = "grad.w"}) {
  %l = mc.reduce_sum %x, dims = [0] : (tensor<4xf32>) -> tensor<f32>
  return %l, %x : tensor<f32>, tensor<4xf32>
}

// -----

// expected-error @+1 {{returns no grad.<parameter> results; run mc-autodiff first}}
func.func @no_grads(%x: tensor<4xf32>) -> (tensor<f32> {mc.name = "loss"}) {
  %seed = mc.constant {mc.autodiff_seed} dense<1.0> : tensor<f32>
  return %seed : tensor<f32>
}
