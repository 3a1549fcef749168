// RUN: modelc-opt %s -split-input-file --mc-raise-layer-norm --canonicalize | FileCheck %s

// PyTorch's ONNX export of nn.LayerNorm below opset 17, as imported:
// ReduceMean, Sub, Pow by 2, ReduceMean, Add eps, Sqrt, Div, Mul gamma,
// Add beta. One mc.layer_norm with the parameters as gamma and beta.
// CHECK-LABEL: func @exported
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32>, %[[G:.*]]: tensor<8xf32>, %[[B:.*]]: tensor<8xf32>)
// CHECK-NEXT: %[[Y:.*]] = mc.layer_norm %[[X]], %[[G]], %[[B]], axis = 2, epsilon = 9.9999997473787516E-6 : tensor<2x4x8xf32>, tensor<8xf32>
// CHECK-NEXT: return %[[Y]]
func.func @exported(%x: tensor<2x4x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %m = mc.reduce_mean %x, dims = [2] keepdim : (tensor<2x4x8xf32>) -> tensor<2x4x1xf32>
  %mb = mc.broadcast_in_dim %m, dims = [0, 1, 2] : (tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %d = mc.sub %x, %mb : tensor<2x4x8xf32>
  %two = mc.constant dense<2.0> : tensor<f32>
  %twob = mc.broadcast_in_dim %two, dims = [] : (tensor<f32>) -> tensor<2x4x8xf32>
  %sq = mc.pow %d, %twob : tensor<2x4x8xf32>
  %v = mc.reduce_mean %sq, dims = [2] keepdim : (tensor<2x4x8xf32>) -> tensor<2x4x1xf32>
  %eps = mc.constant dense<9.99999974E-6> : tensor<f32>
  %epsb = mc.broadcast_in_dim %eps, dims = [] : (tensor<f32>) -> tensor<2x4x1xf32>
  %ve = mc.add %v, %epsb : tensor<2x4x1xf32>
  %s = mc.sqrt %ve : tensor<2x4x1xf32>
  %sb = mc.broadcast_in_dim %s, dims = [0, 1, 2] : (tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %n = mc.div %d, %sb : tensor<2x4x8xf32>
  %gb = mc.broadcast_in_dim %g, dims = [2] : (tensor<8xf32>) -> tensor<2x4x8xf32>
  %scaled = mc.mul %n, %gb : tensor<2x4x8xf32>
  %bb = mc.broadcast_in_dim %b, dims = [2] : (tensor<8xf32>) -> tensor<2x4x8xf32>
  %y = mc.add %scaled, %bb : tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// The square as mul(d, d), epsilon a splat of the variance's shape and on
// the left, normalized over the last two dims, no gamma or beta: the norm
// gets ones and zeros.
// CHECK-LABEL: func @no_affine
// CHECK-SAME: (%[[X:.*]]: tensor<3x4x8xf32>)
// CHECK-DAG: %[[ONE:.*]] = mc.constant dense<1.000000e+00> : tensor<4x8xf32>
// CHECK-DAG: %[[ZERO:.*]] = mc.constant dense<0.000000e+00> : tensor<4x8xf32>
// CHECK: %[[Y:.*]] = mc.layer_norm %[[X]], %[[ONE]], %[[ZERO]], axis = 1, epsilon = 0.0010000000474974513 : tensor<3x4x8xf32>, tensor<4x8xf32>
// CHECK-NEXT: return %[[Y]]
func.func @no_affine(%x: tensor<3x4x8xf32>) -> tensor<3x4x8xf32> {
  %m = mc.reduce_mean %x, dims = [2, 1] keepdim : (tensor<3x4x8xf32>) -> tensor<3x1x1xf32>
  %mb = mc.broadcast_in_dim %m, dims = [0, 1, 2] : (tensor<3x1x1xf32>) -> tensor<3x4x8xf32>
  %d = mc.sub %x, %mb : tensor<3x4x8xf32>
  %sq = mc.mul %d, %d : tensor<3x4x8xf32>
  %v = mc.reduce_mean %sq, dims = [1, 2] keepdim : (tensor<3x4x8xf32>) -> tensor<3x1x1xf32>
  %eps = mc.constant dense<1.0e-3> : tensor<3x1x1xf32>
  %ve = mc.add %eps, %v : tensor<3x1x1xf32>
  %s = mc.sqrt %ve : tensor<3x1x1xf32>
  %sb = mc.broadcast_in_dim %s, dims = [0, 1, 2] : (tensor<3x1x1xf32>) -> tensor<3x4x8xf32>
  %n = mc.div %d, %sb : tensor<3x4x8xf32>
  return %n : tensor<3x4x8xf32>
}

// -----

// Gamma and beta on the left of their mul and add, in bf16 (epsilon is the
// bf16 constant's value, which the ops it replaces added).
// CHECK-LABEL: func @commuted_bf16
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xbf16>, %[[G:.*]]: tensor<8xbf16>, %[[B:.*]]: tensor<8xbf16>)
// CHECK-NEXT: %[[Y:.*]] = mc.layer_norm %[[X]], %[[G]], %[[B]], axis = 1, epsilon = 1.0013580322265625E-5 : tensor<4x8xbf16>, tensor<8xbf16>
// CHECK-NEXT: return %[[Y]]
func.func @commuted_bf16(%x: tensor<4x8xbf16>, %g: tensor<8xbf16>, %b: tensor<8xbf16>) -> tensor<4x8xbf16> {
  %m = mc.reduce_mean %x, dims = [1] keepdim : (tensor<4x8xbf16>) -> tensor<4x1xbf16>
  %mb = mc.broadcast_in_dim %m, dims = [0, 1] : (tensor<4x1xbf16>) -> tensor<4x8xbf16>
  %d = mc.sub %x, %mb : tensor<4x8xbf16>
  %sq = mc.mul %d, %d : tensor<4x8xbf16>
  %v = mc.reduce_mean %sq, dims = [1] keepdim : (tensor<4x8xbf16>) -> tensor<4x1xbf16>
  %eps = mc.constant dense<1.0e-5> : tensor<4x1xbf16>
  %ve = mc.add %v, %eps : tensor<4x1xbf16>
  %s = mc.sqrt %ve : tensor<4x1xbf16>
  %sb = mc.broadcast_in_dim %s, dims = [0, 1] : (tensor<4x1xbf16>) -> tensor<4x8xbf16>
  %n = mc.div %d, %sb : tensor<4x8xbf16>
  %gb = mc.broadcast_in_dim %g, dims = [1] : (tensor<8xbf16>) -> tensor<4x8xbf16>
  %scaled = mc.mul %gb, %n : tensor<4x8xbf16>
  %bb = mc.broadcast_in_dim %b, dims = [1] : (tensor<8xbf16>) -> tensor<4x8xbf16>
  %y = mc.add %bb, %scaled : tensor<4x8xbf16>
  return %y : tensor<4x8xbf16>
}

// -----

// The shift before the scale, (n + b) * g: the scale cannot fold into a
// norm that already has a beta (it would scale beta too), so it stays.
// CHECK-LABEL: func @shift_then_scale
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[G:.*]]: tensor<8xf32>, %[[B:.*]]: tensor<8xf32>)
// CHECK: %[[N:.*]] = mc.layer_norm %[[X]], %{{.*}}, %[[B]], axis = 1
// CHECK: %[[GB:.*]] = mc.broadcast_in_dim %[[G]]
// CHECK: %[[Y:.*]] = mc.mul %[[N]], %[[GB]]
// CHECK-NEXT: return %[[Y]]
func.func @shift_then_scale(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %m = mc.reduce_mean %x, dims = [1] keepdim : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %mb = mc.broadcast_in_dim %m, dims = [0, 1] : (tensor<4x1xf32>) -> tensor<4x8xf32>
  %d = mc.sub %x, %mb : tensor<4x8xf32>
  %sq = mc.mul %d, %d : tensor<4x8xf32>
  %v = mc.reduce_mean %sq, dims = [1] keepdim : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %eps = mc.constant dense<1.0e-5> : tensor<4x1xf32>
  %ve = mc.add %v, %eps : tensor<4x1xf32>
  %s = mc.sqrt %ve : tensor<4x1xf32>
  %sb = mc.broadcast_in_dim %s, dims = [0, 1] : (tensor<4x1xf32>) -> tensor<4x8xf32>
  %n = mc.div %d, %sb : tensor<4x8xf32>
  %bb = mc.broadcast_in_dim %b, dims = [1] : (tensor<8xf32>) -> tensor<4x8xf32>
  %shifted = mc.add %n, %bb : tensor<4x8xf32>
  %gb = mc.broadcast_in_dim %g, dims = [1] : (tensor<8xf32>) -> tensor<4x8xf32>
  %y = mc.mul %shifted, %gb : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Left as they are: the centered value has a third user (it is returned);
// the means are over a leading dim; the square is of x, not of x - mean;
// the two means are over different dims.
// CHECK-LABEL: func @not_a_layer_norm
// CHECK-NOT: mc.layer_norm
// CHECK: return
func.func @not_a_layer_norm(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %eps = mc.constant dense<1.0e-5> : tensor<4x1xf32>
  // A third user of d.
  %m = mc.reduce_mean %x, dims = [1] keepdim : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %mb = mc.broadcast_in_dim %m, dims = [0, 1] : (tensor<4x1xf32>) -> tensor<4x8xf32>
  %d = mc.sub %x, %mb : tensor<4x8xf32>
  %sq = mc.mul %d, %d : tensor<4x8xf32>
  %v = mc.reduce_mean %sq, dims = [1] keepdim : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %ve = mc.add %v, %eps : tensor<4x1xf32>
  %s = mc.sqrt %ve : tensor<4x1xf32>
  %sb = mc.broadcast_in_dim %s, dims = [0, 1] : (tensor<4x1xf32>) -> tensor<4x8xf32>
  %n = mc.div %d, %sb : tensor<4x8xf32>
  // Means over dim 0 (a batch norm's statistics, not a layer norm's).
  %m2 = mc.reduce_mean %x, dims = [0] keepdim : (tensor<4x8xf32>) -> tensor<1x8xf32>
  %mb2 = mc.broadcast_in_dim %m2, dims = [0, 1] : (tensor<1x8xf32>) -> tensor<4x8xf32>
  %d2 = mc.sub %x, %mb2 : tensor<4x8xf32>
  %sq2 = mc.mul %d2, %d2 : tensor<4x8xf32>
  %v2 = mc.reduce_mean %sq2, dims = [0] keepdim : (tensor<4x8xf32>) -> tensor<1x8xf32>
  %eps2 = mc.constant dense<1.0e-5> : tensor<1x8xf32>
  %ve2 = mc.add %v2, %eps2 : tensor<1x8xf32>
  %s2 = mc.sqrt %ve2 : tensor<1x8xf32>
  %sb2 = mc.broadcast_in_dim %s2, dims = [0, 1] : (tensor<1x8xf32>) -> tensor<4x8xf32>
  %n2 = mc.div %d2, %sb2 : tensor<4x8xf32>
  // The variance of x itself (a root-mean-square norm of x - mean).
  %m3 = mc.reduce_mean %x, dims = [1] keepdim : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %mb3 = mc.broadcast_in_dim %m3, dims = [0, 1] : (tensor<4x1xf32>) -> tensor<4x8xf32>
  %d3 = mc.sub %x, %mb3 : tensor<4x8xf32>
  %sq3 = mc.mul %x, %x : tensor<4x8xf32>
  %v3 = mc.reduce_mean %sq3, dims = [1] keepdim : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %ve3 = mc.add %v3, %eps : tensor<4x1xf32>
  %s3 = mc.sqrt %ve3 : tensor<4x1xf32>
  %sb3 = mc.broadcast_in_dim %s3, dims = [0, 1] : (tensor<4x1xf32>) -> tensor<4x8xf32>
  %n3 = mc.div %d3, %sb3 : tensor<4x8xf32>
  // Mean over dims [0, 1], variance over [1].
  %m4 = mc.reduce_mean %x, dims = [0, 1] keepdim : (tensor<4x8xf32>) -> tensor<1x1xf32>
  %mb4 = mc.broadcast_in_dim %m4, dims = [0, 1] : (tensor<1x1xf32>) -> tensor<4x8xf32>
  %d4 = mc.sub %x, %mb4 : tensor<4x8xf32>
  %sq4 = mc.mul %d4, %d4 : tensor<4x8xf32>
  %v4 = mc.reduce_mean %sq4, dims = [1] keepdim : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %ve4 = mc.add %v4, %eps : tensor<4x1xf32>
  %s4 = mc.sqrt %ve4 : tensor<4x1xf32>
  %sb4 = mc.broadcast_in_dim %s4, dims = [0, 1] : (tensor<4x1xf32>) -> tensor<4x8xf32>
  %n4 = mc.div %d4, %sb4 : tensor<4x8xf32>
  return %n, %d, %n2, %n3, %n4 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// An epsilon mc.layer_norm cannot hold (negative, or inf) leaves the ops as
// they are: the graph stays valid.
// CHECK-LABEL: func @bad_epsilon
// CHECK-NOT: mc.layer_norm
// CHECK: return
func.func @bad_epsilon(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %m = mc.reduce_mean %x, dims = [1] keepdim : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %mb = mc.broadcast_in_dim %m, dims = [0, 1] : (tensor<4x1xf32>) -> tensor<4x8xf32>
  %d = mc.sub %x, %mb : tensor<4x8xf32>
  %sq = mc.mul %d, %d : tensor<4x8xf32>
  %v = mc.reduce_mean %sq, dims = [1] keepdim : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %eps = mc.constant dense<-0.5> : tensor<4x1xf32>
  %ve = mc.add %v, %eps : tensor<4x1xf32>
  %s = mc.sqrt %ve : tensor<4x1xf32>
  %sb = mc.broadcast_in_dim %s, dims = [0, 1] : (tensor<4x1xf32>) -> tensor<4x8xf32>
  %n = mc.div %d, %sb : tensor<4x8xf32>
  %m2 = mc.reduce_mean %x, dims = [1] keepdim : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %mb2 = mc.broadcast_in_dim %m2, dims = [0, 1] : (tensor<4x1xf32>) -> tensor<4x8xf32>
  %d2 = mc.sub %x, %mb2 : tensor<4x8xf32>
  %sq2 = mc.mul %d2, %d2 : tensor<4x8xf32>
  %v2 = mc.reduce_mean %sq2, dims = [1] keepdim : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %inf = mc.constant dense<0x7F800000> : tensor<4x1xf32>
  %ve2 = mc.add %v2, %inf : tensor<4x1xf32>
  %s2 = mc.sqrt %ve2 : tensor<4x1xf32>
  %sb2 = mc.broadcast_in_dim %s2, dims = [0, 1] : (tensor<4x1xf32>) -> tensor<4x8xf32>
  %n2 = mc.div %d2, %sb2 : tensor<4x8xf32>
  return %n, %n2 : tensor<4x8xf32>, tensor<4x8xf32>
}
