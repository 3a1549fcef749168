// RUN: modelc-opt %s --mc-autodiff -split-input-file -verify-diagnostics | FileCheck %s

// A linear layer, relu and a cross-entropy against one-hot targets. The
// function returns the loss and one gradient per parameter, in declaration
// order, named by mc.name; its other result is dropped.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: -> (tensor<f32> {mc.name = "loss"}, tensor<3x4xf32> {mc.name = "grad.w"}, tensor<3xf32> {mc.name = "grad.b"})
// CHECK-DAG: %[[X:.*]] = ml_program.global_load_const @w
// CHECK: %[[PRE:.*]] = mc.add
// CHECK: %[[LSM:.*]] = mc.log_softmax
// CHECK: %[[LOSS:.*]] = mc.neg
// The seed, then the chain backwards.
// CHECK: mc.constant {mc.autodiff_seed} dense<1.000000e+00> : tensor<f32>
// CHECK: mc.constant dense<8.000000e+00> : tensor<8xf32>
// CHECK: mc.exp %[[LSM]]
// relu lets the gradient through where its input is > 0.
// CHECK: %[[ZERO:.*]] = mc.constant dense<0.000000e+00> : tensor<8x3xf32>
// CHECK: %[[POS:.*]] = mc.compare GT, %[[PRE]], %[[ZERO]]
// CHECK: %[[MASK:.*]] = mc.cast %[[POS]] : tensor<8x3xi1> to tensor<8x3xf32>
// CHECK: %[[GPRE:.*]] = mc.mul %{{.*}}, %[[MASK]]
// The bias was broadcast along dim 0: its gradient sums dim 0 back.
// CHECK: %[[GB0:.*]] = mc.reduce_sum %[[GPRE]], dims = [0] keepdim : (tensor<8x3xf32>) -> tensor<1x3xf32>
// CHECK: %[[GB:.*]] = mc.reshape %[[GB0]] : (tensor<1x3xf32>) -> tensor<3xf32>
// x @ w^T: the gradient of w is g^T @ x.
// CHECK: %[[GW:.*]] = mc.matmul %[[GPRE]], %arg0 transpose_a : tensor<8x3xf32>, tensor<8x4xf32> -> tensor<3x4xf32>
// CHECK: return %[[LOSS]], %[[GW]], %[[GB]] : tensor<f32>, tensor<3x4xf32>, tensor<3xf32>
ml_program.global private @w(dense<0.5> : tensor<3x4xf32>) : tensor<3x4xf32>
ml_program.global private @b(dense<0.1> : tensor<3xf32>) : tensor<3xf32>
func.func @forward(%x: tensor<8x4xf32> {mc.name = "x"}, %onehot: tensor<8x3xf32> {mc.name = "target"}) -> (tensor<f32>, tensor<8x3xf32>) {
  %w = ml_program.global_load_const @w : tensor<3x4xf32>
  %b = ml_program.global_load_const @b : tensor<3xf32>
  %0 = mc.matmul %x, %w transpose_b : tensor<8x4xf32>, tensor<3x4xf32> -> tensor<8x3xf32>
  %bb = mc.broadcast_in_dim %b, dims = [1] : (tensor<3xf32>) -> tensor<8x3xf32>
  %1 = mc.add %0, %bb : tensor<8x3xf32>
  %2 = mc.relu %1 : tensor<8x3xf32>
  %3 = mc.log_softmax %2, axis = 1 : tensor<8x3xf32>
  %4 = mc.mul %3, %onehot : tensor<8x3xf32>
  %5 = mc.reduce_sum %4, dims = [1] : (tensor<8x3xf32>) -> tensor<8xf32>
  %6 = mc.reduce_mean %5, dims = [0] : (tensor<8xf32>) -> tensor<f32>
  %7 = mc.neg %6 : tensor<f32>
  return %7, %2 : tensor<f32>, tensor<8x3xf32>
}

// -----

// A value used twice (y * y) and a parameter loaded twice: the adjoints
// add up.
// CHECK-LABEL: func.func @twice
// CHECK-SAME: -> (tensor<f32> {mc.name = "loss"}, tensor<3x4xf32> {mc.name = "grad.w"})
// CHECK: %[[Y:.*]] = mc.matmul %arg0, %w transpose_b
// CHECK: %[[G:.*]] = mc.broadcast_in_dim %{{.*}}, dims = [0, 1] : (tensor<1x1xf32>) -> tensor<2x3xf32>
// Through the transpose of the second load.
// CHECK: %[[GT0:.*]] = mc.matmul %arg0, %[[G]] transpose_a
// CHECK: %[[GT:.*]] = mc.transpose %[[GT0]], permutation = [1, 0]
// Both operands of y * y.
// CHECK: %[[L:.*]] = mc.mul %[[G]], %[[Y]]
// CHECK: %[[R:.*]] = mc.mul %[[G]], %[[Y]]
// CHECK: %[[GY:.*]] = mc.add %[[L]], %[[R]]
// CHECK: %[[GW0:.*]] = mc.matmul %[[GY]], %arg0 transpose_a
// Both loads of @w.
// CHECK: %[[GW:.*]] = mc.add %[[GW0]], %[[GT]]
// CHECK: return %{{.*}}, %[[GW]]
ml_program.global private @w(dense<0.5> : tensor<3x4xf32>) : tensor<3x4xf32>
func.func @twice(%x: tensor<2x4xf32>) -> tensor<f32> {
  %w0 = ml_program.global_load_const @w : tensor<3x4xf32>
  %w1 = ml_program.global_load_const @w : tensor<3x4xf32>
  %y = mc.matmul %x, %w0 transpose_b : tensor<2x4xf32>, tensor<3x4xf32> -> tensor<2x3xf32>
  %sq = mc.mul %y, %y : tensor<2x3xf32>
  %t = mc.transpose %w1, permutation = [1, 0] : (tensor<3x4xf32>) -> tensor<4x3xf32>
  %m = mc.matmul %x, %t : tensor<2x4xf32>, tensor<4x3xf32> -> tensor<2x3xf32>
  %s = mc.add %sq, %m : tensor<2x3xf32>
  %r = mc.reduce_sum %s, dims = [0, 1] : (tensor<2x3xf32>) -> tensor<f32>
  return %r : tensor<f32>
}

// -----

// maximum splits ties evenly; a broadcast whose dims do not increase is
// undone by a reduction, a reshape and a transpose. A one-element loss of
// rank 1 is accepted.
// CHECK-LABEL: func.func @ties_and_transposed_broadcast
// CHECK: mc.constant {mc.autodiff_seed} dense<1.000000e+00> : tensor<1xf32>
// CHECK: mc.compare GT, %[[A:.*]], %[[B:.*]] :
// CHECK: %[[EQ:.*]] = mc.compare EQ, %[[A]], %[[B]] :
// CHECK: %[[TIES:.*]] = mc.cast %[[EQ]]
// CHECK: %[[HALF:.*]] = mc.constant dense<5.000000e-01> : tensor<2x5x3xf32>
// CHECK: mc.mul %[[TIES]], %[[HALF]]
// CHECK: %[[SUM:.*]] = mc.reduce_sum %{{.*}}, dims = [1] keepdim : (tensor<2x5x3xf32>) -> tensor<2x1x3xf32>
// CHECK: %[[COMPACT:.*]] = mc.reshape %[[SUM]] : (tensor<2x1x3xf32>) -> tensor<2x3xf32>
// CHECK: %[[GM:.*]] = mc.transpose %[[COMPACT]], permutation = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>
// CHECK: return %{{.*}}, %[[GM]]
ml_program.global private @m(dense<0.5> : tensor<3x2xf32>) : tensor<3x2xf32>
func.func @ties_and_transposed_broadcast(%x: tensor<2x5x3xf32>) -> tensor<1xf32> {
  %m = ml_program.global_load_const @m : tensor<3x2xf32>
  %0 = mc.broadcast_in_dim %m, dims = [2, 0] : (tensor<3x2xf32>) -> tensor<2x5x3xf32>
  %1 = mc.maximum %0, %x : tensor<2x5x3xf32>
  %2 = mc.reduce_sum %1, dims = [0, 1, 2] keepdim : (tensor<2x5x3xf32>) -> tensor<1x1x1xf32>
  %3 = mc.reshape %2 : (tensor<1x1x1xf32>) -> tensor<1xf32>
  return %3 : tensor<1xf32>
}

// -----

// A parameter that does not reach the loss gets no gradient at all (as in
// PyTorch), so no optimizer decays it or updates moments for it.
// CHECK-LABEL: func.func @off_the_path
// CHECK-SAME: -> (tensor<f32> {mc.name = "loss"}, tensor<4xf32> {mc.name = "grad.w"})
// CHECK-NOT: grad.gate
// CHECK: mc.select
// The backward select: w gets g where gate <= 0.
// CHECK: mc.select
// CHECK: return %{{.*}}, %{{.*}} : tensor<f32>, tensor<4xf32>
ml_program.global private @w(dense<0.5> : tensor<4xf32>) : tensor<4xf32>
ml_program.global private @gate(dense<0.5> : tensor<4xf32>) : tensor<4xf32>
func.func @off_the_path(%x: tensor<4xf32>) -> tensor<f32> {
  %w = ml_program.global_load_const @w : tensor<4xf32>
  // expected-warning @+1 {{parameter 'gate' does not reach the loss; it gets no gradient and is not updated}}
  %g = ml_program.global_load_const @gate : tensor<4xf32>
  %z = mc.constant dense<0.0> : tensor<4xf32>
  %p = mc.compare GT, %g, %z : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %s = mc.select %p, %x, %w : tensor<4xi1>, tensor<4xf32>
  %r = mc.reduce_sum %s, dims = [0] : (tensor<4xf32>) -> tensor<f32>
  return %r : tensor<f32>
}

// -----

// A buffer (mc.buffer: BatchNorm's running statistics) is state, not a
// parameter: no gradient, no warning, even where it reaches the loss; its
// store (the running update) stays.
// CHECK-LABEL: func.func @buffer_is_no_parameter
// CHECK-SAME: -> (tensor<f32> {mc.name = "loss"}, tensor<4xf32> {mc.name = "grad.w"})
// CHECK: ml_program.global_store @running_mean
ml_program.global private @w(dense<0.5> : tensor<4xf32>) : tensor<4xf32>
ml_program.global private mutable @running_mean(dense<0.0> : tensor<4xf32>) : tensor<4xf32> {mc.buffer}
func.func @buffer_is_no_parameter(%x: tensor<4xf32>) -> tensor<f32> {
  %w = ml_program.global_load_const @w : tensor<4xf32>
  %m = ml_program.global_load @running_mean : tensor<4xf32>
  %c = mc.sub %x, %m : tensor<4xf32>
  %y = mc.mul %c, %w : tensor<4xf32>
  %r = mc.reduce_sum %y, dims = [0] : (tensor<4xf32>) -> tensor<f32>
  %n = mc.add %m, %x : tensor<4xf32>
  ml_program.global_store @running_mean = %n : tensor<4xf32>
  return %r : tensor<f32>
}

// -----

ml_program.global private @w(dense<0.5> : tensor<4xf32>) : tensor<4xf32>
// expected-error @+1 {{'func.func' op result 0 must be a scalar float loss (rank 0 or one element), got 'tensor<4xf32>'}}
func.func @vector_loss(%x: tensor<4xf32>) -> tensor<4xf32> {
  %w = ml_program.global_load_const @w : tensor<4xf32>
  %0 = mc.mul %x, %w : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A loss that reads no parameter: nothing to train, said as such (the
// optimizer found no gradients to pair before).
// expected-error @+1 {{'func.func' op reads no parameters (float ml_program globals, not mc.buffer ones): a training step has nothing to train}}
func.func @no_parameters(%x: tensor<4xf32>) -> tensor<f32> {
  %0 = mc.reduce_sum %x, dims = [0] : (tensor<4xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// A trained convolution: the weight's gradient is itself a conv2d, the
// input (batch 1) moved to the channels and the result's gradient used as
// the kernel (ir/DerivativeRules.h).
// CHECK-LABEL: func.func @conv_on_the_path
// CHECK-SAME: -> (tensor<f32> {mc.name = "loss"}, tensor<2x1x3x3xf32> {mc.name = "grad.w"})
// CHECK: %[[XT:.*]] = mc.transpose %arg0, permutation = [1, 0, 2, 3]
// CHECK: %[[GT:.*]] = mc.transpose %{{.*}}, permutation = [1, 0, 2, 3] : (tensor<1x2x2x2xf32>) -> tensor<2x1x2x2xf32>
// CHECK: %[[GW:.*]] = mc.conv2d %[[XT]], %[[GT]], strides = [1, 1], padding = [0, 0, 0, 0], dilation = [1, 1], groups = 1 : (tensor<1x1x4x4xf32>, tensor<2x1x2x2xf32>) -> tensor<1x2x3x3xf32>
// CHECK: mc.transpose %[[GW]], permutation = [1, 0, 2, 3] : (tensor<1x2x3x3xf32>) -> tensor<2x1x3x3xf32>
ml_program.global private @w(dense<0.5> : tensor<2x1x3x3xf32>) : tensor<2x1x3x3xf32>
func.func @conv_on_the_path(%x: tensor<1x1x4x4xf32>) -> tensor<f32> {
  %w = ml_program.global_load_const @w : tensor<2x1x3x3xf32>
  %0 = mc.conv2d %x, %w, strides = [1, 1], padding = [0, 0, 0, 0], dilation = [1, 1], groups = 1
      : (tensor<1x1x4x4xf32>, tensor<2x1x3x3xf32>) -> tensor<1x2x2x2xf32>
  %1 = mc.reduce_sum %0, dims = [0, 1, 2, 3] : (tensor<1x2x2x2xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// A strided slice: its gradient is put back with zeros between, by
// reshape, pad and reshape (zero insertion), then cut to the input.
// CHECK-LABEL: func.func @strided_slice
// CHECK: %[[SPLIT:.*]] = mc.reshape %{{.*}} : (tensor<4xf32>) -> tensor<4x1xf32>
// CHECK: %[[PAD:.*]] = mc.pad %[[SPLIT]], low = [0, 0], high = [0, 1], value = 0.000000e+00 : (tensor<4x1xf32>) -> tensor<4x2xf32>
// CHECK: %[[MERGED:.*]] = mc.reshape %[[PAD]] : (tensor<4x2xf32>) -> tensor<8xf32>
// CHECK: %[[CUT:.*]] = mc.slice %[[MERGED]], start = [0], limit = [7], strides = [1] : (tensor<8xf32>) -> tensor<7xf32>
// CHECK: mc.pad %[[CUT]], low = [0], high = [1], value = 0.000000e+00 : (tensor<7xf32>) -> tensor<8xf32>
ml_program.global private @w(dense<0.5> : tensor<8xf32>) : tensor<8xf32>
func.func @strided_slice(%x: tensor<8xf32>) -> tensor<f32> {
  %w = ml_program.global_load_const @w : tensor<8xf32>
  %0 = mc.slice %w, start = [0], limit = [8], strides = [2] : (tensor<8xf32>) -> tensor<4xf32>
  %1 = mc.reduce_sum %0, dims = [0] : (tensor<4xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

ml_program.global private @w(dense<0.5> : tensor<4xf32>) : tensor<4xf32>
func.func @foreign_op(%x: tensor<4xf32>) -> tensor<f32> {
  %w = ml_program.global_load_const @w : tensor<4xf32>
  // expected-error @+1 {{'arith.addf' op lies between a parameter and the loss but has no derivative (it does not implement DifferentiableOpInterface)}}
  %0 = arith.addf %x, %w : tensor<4xf32>
  %1 = mc.reduce_sum %0, dims = [0] : (tensor<4xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// channels_last is an inference layout (mc-channels-last): not
// differentiated.
ml_program.global private @w(dense<0.5> : tensor<2x2x1x1xf32>) : tensor<2x2x1x1xf32>
func.func @channels_last(%x: tensor<1x4x4x2xf32>) -> tensor<f32> {
  %w = ml_program.global_load_const @w : tensor<2x2x1x1xf32>
  // expected-error @+1 {{'mc.conv2d' op has channels_last, which autodiff does not differentiate (training graphs keep NCHW; mc-channels-last is an inference pass)}}
  %0 = mc.conv2d %x, %w, strides = [1, 1], padding = [0, 0, 0, 0], dilation = [1, 1], groups = 1 channels_last : (tensor<1x4x4x2xf32>, tensor<2x2x1x1xf32>) -> tensor<1x4x4x2xf32>
  %1 = mc.reduce_sum %0, dims = [0, 1, 2, 3] : (tensor<1x4x4x2xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// A gather along the dynamic batch (picking samples): its gradient would sum
// into a tensor of the batch's size, which is not static; refused by name
// (it crashed the compiler before).
ml_program.global private @w(dense<0.5> : tensor<4xf32>) : tensor<4xf32>
func.func @gather_batch(%x: tensor<?x4xf32>, %i: tensor<2xi64>) -> tensor<f32> attributes {mc.batch = array<i64: 1, 8, 8>} {
  %w = ml_program.global_load_const @w : tensor<4xf32>
  %wb = mc.broadcast_in_dim %w, dims = [1] : (tensor<4xf32>) -> tensor<?x4xf32>
  %y = mc.mul %x, %wb : tensor<?x4xf32>
  // expected-error @+1 {{'mc.gather' op gathers along the dynamic batch dimension (axis 0), whose gradient autodiff does not build (it sums into a tensor of the axis's size, which must be static); give the model a static batch (no --batch range)}}
  %g = mc.gather %y, %i, axis = 0 : (tensor<?x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
  %l = mc.reduce_sum %g, dims = [0, 1] : (tensor<2x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{no public func.func to compile}}
module {
  func.func private @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}
