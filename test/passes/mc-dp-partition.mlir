// RUN: modelc-opt %s --mc-dp-partition="ranks=2" | FileCheck %s
// RUN: modelc-opt %s --mc-dp-partition="ranks=4 bucket-mb=0.0001" | FileCheck %s --check-prefix=SMALL
// RUN: modelc-opt %s --mc-dp-partition="ranks=1" | FileCheck %s --check-prefix=ONE
// RUN: modelc-opt %s --mc-dp-partition="ranks=2" --mc-loss-scaling --mc-optimizer="kind=sgd lr=0.1" | FileCheck %s --check-prefix=PIPE
// RUN: not modelc-opt %s --mc-dp-partition="ranks=0" 2>&1 | FileCheck %s --check-prefix=RANKS
// RUN: not modelc-opt %s --mc-dp-partition="ranks=2 bucket-mb=0" 2>&1 | FileCheck %s --check-prefix=BUCKET

// RANKS: error: mc-dp-partition: ranks must be >= 1, got 0
// BUCKET: error: mc-dp-partition: bucket-mb must be > 0, got 0

// A two-layer step as mc-autodiff makes it. The backward pass produces the
// gradients in the order grad.b2, grad.w2, grad.b1, grad.w1 (the last layer
// first), not in the result order.

module {
  ml_program.global private @w1(dense<0.1> : tensor<8x4xf32>) : tensor<8x4xf32>
  ml_program.global private @b1(dense<0.0> : tensor<8xf32>) : tensor<8xf32>
  ml_program.global private @w2(dense<0.1> : tensor<3x8xf32>) : tensor<3x8xf32>
  ml_program.global private @b2(dense<0.0> : tensor<3xf32>) : tensor<3xf32>
  func.func @forward(%x: tensor<2x4xf32> {mc.name = "x"}, %d2: tensor<2x3xf32> {mc.name = "d2"})
      -> (tensor<f32> {mc.name = "loss"}, tensor<8x4xf32> {mc.name = "grad.w1"},
          tensor<8xf32> {mc.name = "grad.b1"}, tensor<3x8xf32> {mc.name = "grad.w2"},
          tensor<3xf32> {mc.name = "grad.b2"}) {
    %seed = mc.constant {mc.autodiff_seed} dense<1.0> : tensor<f32>
    %w1 = ml_program.global_load_const @w1 : tensor<8x4xf32>
    %w2 = ml_program.global_load_const @w2 : tensor<3x8xf32>
    %h = mc.matmul %x, %w1 transpose_b : tensor<2x4xf32>, tensor<8x4xf32> -> tensor<2x8xf32>
    %loss = mc.reduce_sum %h, dims = [0, 1] : (tensor<2x8xf32>) -> tensor<f32>
    %s = mc.broadcast_in_dim %seed, dims = [] : (tensor<f32>) -> tensor<2x3xf32>
    %d = mc.mul %d2, %s : tensor<2x3xf32>
    %gb2 = mc.reduce_sum %d, dims = [0] : (tensor<2x3xf32>) -> tensor<3xf32>
    %gw2 = mc.matmul %d, %h transpose_a : tensor<2x3xf32>, tensor<2x8xf32> -> tensor<3x8xf32>
    %dh = mc.matmul %d, %w2 : tensor<2x3xf32>, tensor<3x8xf32> -> tensor<2x8xf32>
    %gb1 = mc.reduce_sum %dh, dims = [0] : (tensor<2x8xf32>) -> tensor<8xf32>
    %gw1 = mc.matmul %dh, %x transpose_a : tensor<2x8xf32>, tensor<2x4xf32> -> tensor<8x4xf32>
    return %loss, %gw1, %gb1, %gw2, %gb2 : tensor<f32>, tensor<8x4xf32>, tensor<8xf32>, tensor<3x8xf32>, tensor<3xf32>
  }
}

// 25 MB holds all four gradients (3 + 24 + 8 + 32 = 67 f32): one bucket,
// in backward order, started right after the last one (grad.w1) exists;
// the wait (the mean: scale 1/2) just before the return.
// CHECK-LABEL: func.func @forward
// CHECK: %[[GB2:.*]] = mc.reduce_sum %{{.*}}, dims = [0] : (tensor<2x3xf32>) -> tensor<3xf32>
// CHECK: %[[GW2:.*]] = mc.matmul
// CHECK: %[[GB1:.*]] = mc.reduce_sum
// CHECK: %[[GW1:.*]] = mc.matmul
// CHECK-NEXT: %[[B:.*]] = mc.all_reduce_start %[[GB2]], %[[GW2]], %[[GB1]], %[[GW1]] ranks = 2 : (tensor<3xf32>, tensor<3x8xf32>, tensor<8xf32>, tensor<8x4xf32>) -> tensor<67xf32>
// CHECK-NEXT: %[[S:.*]] = mc.all_reduce_wait %[[B]] scale = 5.000000e-01 : tensor<67xf32>
// CHECK-NEXT: %[[C0:.*]] = mc.slice %[[S]], start = [0], limit = [3], strides = [1]
// CHECK-NEXT: %[[C1:.*]] = mc.slice %[[S]], start = [3], limit = [27], strides = [1]
// CHECK-NEXT: %[[R1:.*]] = mc.reshape %[[C1]] : (tensor<24xf32>) -> tensor<3x8xf32>
// CHECK-NEXT: %[[C2:.*]] = mc.slice %[[S]], start = [27], limit = [35], strides = [1]
// CHECK-NEXT: %[[C3:.*]] = mc.slice %[[S]], start = [35], limit = [67], strides = [1]
// CHECK-NEXT: %[[R3:.*]] = mc.reshape %[[C3]] : (tensor<32xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: return %{{.*}}, %[[R3]], %[[C2]], %[[R1]], %[[C0]]

// A tiny bucket (about 105 bytes): each gradient closes its own bucket (3
// floats are 12 bytes, then 24 more make 108), so grad.b2 and grad.w2 share
// the first, and each start comes right after its last gradient, before the
// rest of the backward pass: that is the overlap.
// SMALL-LABEL: func.func @forward
// SMALL: %[[GB2:.*]] = mc.reduce_sum %{{.*}}, dims = [0] : (tensor<2x3xf32>) -> tensor<3xf32>
// SMALL: %[[GW2:.*]] = mc.matmul
// SMALL-NEXT: %[[B0:.*]] = mc.all_reduce_start %[[GB2]], %[[GW2]] ranks = 4 : (tensor<3xf32>, tensor<3x8xf32>) -> tensor<27xf32>
// SMALL-NEXT: mc.matmul
// SMALL-NEXT: %[[GB1:.*]] = mc.reduce_sum
// SMALL-NEXT: %[[GW1:.*]] = mc.matmul
// SMALL-NEXT: %[[B1:.*]] = mc.all_reduce_start %[[GB1]], %[[GW1]] ranks = 4 : (tensor<8xf32>, tensor<8x4xf32>) -> tensor<40xf32>
// SMALL-NEXT: mc.all_reduce_wait %[[B0]] scale = 2.500000e-01 : tensor<27xf32>
// SMALL: mc.all_reduce_wait %[[B1]] scale = 2.500000e-01 : tensor<40xf32>
// SMALL: return

// ONE-LABEL: func.func @forward
// ONE-NOT: mc.all_reduce
// ONE: return

// Loss scaling and the optimizer come after and use the reduced gradients.
// PIPE-LABEL: func.func @forward
// PIPE: mc.all_reduce_start
// PIPE: %[[S:.*]] = mc.all_reduce_wait
// PIPE: mc.slice %[[S]]
// PIPE: mc.compare EQ
// PIPE: ml_program.global_store @loss_scale
// PIPE: ml_program.global_store @w1
