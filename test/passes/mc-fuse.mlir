// RUN: modelc-opt %s -split-input-file --mc-fuse | FileCheck %s
// RUN: modelc-opt %s -split-input-file --mc-fuse="epilogues=false" | FileCheck %s --check-prefix=NOEPI
// RUN: modelc-opt %s -split-input-file --mc-fuse="multi-output=false" | FileCheck %s --check-prefix=NOMULTI

// One test per rule of mc-fuse (passes/Passes.td), with the cases that must
// not fuse.

// A chain of elementwise ops, a broadcast load and a splat constant: one
// region; the splat is an input, the broadcast is inside.
// CHECK-LABEL: func.func @chain
// CHECK: %[[C:.*]] = mc.constant dense<2.000000e+00> : tensor<8x4xf32>
// CHECK: %[[F:.*]] = mc.fused %{{.*}}, %[[C]], %{{.*}} : (tensor<8x4xf32>, tensor<8x4xf32>, tensor<4xf32>) -> tensor<8x4xf32> {
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<8x4xf32>, %[[S:.*]]: tensor<8x4xf32>, %[[B:.*]]: tensor<4xf32>):
// CHECK-NEXT:   %[[M:.*]] = mc.mul %[[X]], %[[S]]
// CHECK-NEXT:   %[[BB:.*]] = mc.broadcast_in_dim %[[B]], dims = [1]
// CHECK-NEXT:   %[[A:.*]] = mc.add %[[M]], %[[BB]]
// CHECK-NEXT:   %[[R:.*]] = mc.relu %[[A]]
// CHECK-NEXT:   mc.yield %[[R]] : tensor<8x4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[F]]
func.func @chain(%x: tensor<8x4xf32>, %b: tensor<4xf32>) -> tensor<8x4xf32> {
  %c = mc.constant dense<2.0> : tensor<8x4xf32>
  %0 = mc.mul %x, %c : tensor<8x4xf32>
  %1 = mc.broadcast_in_dim %b, dims = [1] : (tensor<4xf32>) -> tensor<8x4xf32>
  %2 = mc.add %0, %1 : tensor<8x4xf32>
  %3 = mc.relu %2 : tensor<8x4xf32>
  return %3 : tensor<8x4xf32>
}

// -----

// A value used outside the region is not recomputed (never duplicate
// work): it joins the region as a second result, written in the same pass
// (multi-output); without multi-output the region stops there and it stays
// its own op.
// CHECK-LABEL: func.func @shared_producer
// CHECK: %[[F:.*]]:2 = mc.fused %arg0 : (tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>)
// CHECK:   %[[E:.*]] = mc.exp
// CHECK:   %[[N:.*]] = mc.neg %[[E]]
// CHECK:   %[[T:.*]] = mc.tanh %[[N]]
// CHECK:   mc.yield %[[T]], %[[E]]
// CHECK: return %[[F]]#1, %[[F]]#0
// NOMULTI-LABEL: func.func @shared_producer
// NOMULTI: %[[E:.*]] = mc.exp %arg0
// NOMULTI: %[[F:.*]] = mc.fused %[[E]]
// NOMULTI:   mc.neg
// NOMULTI:   mc.tanh
// NOMULTI: }
// NOMULTI: return %[[E]], %[[F]]
func.func @shared_producer(%x: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %0 = mc.exp %x : tensor<16xf32>
  %1 = mc.neg %0 : tensor<16xf32>
  %2 = mc.tanh %1 : tensor<16xf32>
  return %0, %2 : tensor<16xf32>, tensor<16xf32>
}

// -----

// A diamond whose producer's users are all in the region joins it.
// CHECK-LABEL: func.func @diamond
// CHECK: mc.fused %arg0 : (tensor<16xf32>) -> tensor<16xf32>
// CHECK:   mc.sigmoid
// CHECK:   mc.exp
// CHECK:   mc.log
// CHECK:   mc.mul
// CHECK-NOT: mc.fused
func.func @diamond(%x: tensor<16xf32>) -> tensor<16xf32> {
  %0 = mc.sigmoid %x : tensor<16xf32>
  %1 = mc.exp %0 : tensor<16xf32>
  %2 = mc.log %0 : tensor<16xf32>
  %3 = mc.mul %1, %2 : tensor<16xf32>
  return %3 : tensor<16xf32>
}

// -----

// A broadcast read by a region and by another op is cloned into the
// region and kept for the other reader (a load is cheap to repeat).
// CHECK-LABEL: func.func @shared_broadcast
// CHECK: %[[BB:.*]] = mc.broadcast_in_dim %arg1
// CHECK: mc.fused %arg1, %arg0
// CHECK:   mc.broadcast_in_dim
// CHECK:   mc.add
// CHECK:   mc.relu
// CHECK: }
// CHECK: mc.reduce_sum %[[BB]]
func.func @shared_broadcast(%x: tensor<8x4xf32>, %b: tensor<4xf32>) -> (tensor<8x4xf32>, tensor<4xf32>) {
  %0 = mc.broadcast_in_dim %b, dims = [1] : (tensor<4xf32>) -> tensor<8x4xf32>
  %1 = mc.add %x, %0 : tensor<8x4xf32>
  %2 = mc.relu %1 : tensor<8x4xf32>
  %3 = mc.reduce_sum %0, dims = [0] : (tensor<8x4xf32>) -> tensor<4xf32>
  return %2, %3 : tensor<8x4xf32>, tensor<4xf32>
}

// -----

// A broadcast that every reader cloned disappears.
// CHECK-LABEL: func.func @broadcast_cloned_everywhere
// CHECK-NOT: mc.broadcast_in_dim %arg1,
// CHECK: mc.fused
// CHECK: mc.reduce_sum
// CHECK: mc.fused
// CHECK-NOT: mc.broadcast_in_dim %arg1,
// CHECK: return
func.func @broadcast_cloned_everywhere(%x: tensor<8x4xf32>, %b: tensor<4xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>) {
  %0 = mc.broadcast_in_dim %b, dims = [1] : (tensor<4xf32>) -> tensor<8x4xf32>
  %1 = mc.add %x, %0 : tensor<8x4xf32>
  %2 = mc.relu %1 : tensor<8x4xf32>
  %s = mc.reduce_sum %2, dims = [0] : (tensor<8x4xf32>) -> tensor<4xf32>
  %3 = mc.mul %2, %0 : tensor<8x4xf32>
  %4 = mc.exp %3 : tensor<8x4xf32>
  return %2, %4 : tensor<8x4xf32>, tensor<8x4xf32>
}

// -----

// Epilogue: matmul + bias + gelu is one region led by the matmul. Without
// epilogues the matmul stays a step and the rest fuses.
// CHECK-LABEL: func.func @matmul_epilogue
// CHECK: mc.fused %arg0, %arg1, %arg2 : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   mc.matmul
// CHECK-NEXT:   mc.broadcast_in_dim
// CHECK-NEXT:   mc.add
// CHECK-NEXT:   mc.gelu
// NOEPI-LABEL: func.func @matmul_epilogue
// NOEPI: %[[MM:.*]] = mc.matmul
// NOEPI: mc.fused %arg2, %[[MM]]
func.func @matmul_epilogue(%x: tensor<8x16xf32>, %w: tensor<16x4xf32>, %b: tensor<4xf32>) -> tensor<8x4xf32> {
  %0 = mc.matmul %x, %w : tensor<8x16xf32>, tensor<16x4xf32> -> tensor<8x4xf32>
  %1 = mc.broadcast_in_dim %b, dims = [1] : (tensor<4xf32>) -> tensor<8x4xf32>
  %2 = mc.add %0, %1 : tensor<8x4xf32>
  %3 = mc.gelu %2 : tensor<8x4xf32>
  return %3 : tensor<8x4xf32>
}

// -----

// A Linear on [B, S, D]: the matmul runs on [B*S, D] and is reshaped back
// before its bias. The reshape keeps the elements' order, so the matmul
// still leads the region, its reshape right after it.
// CHECK-LABEL: func.func @reshaped_anchor
// CHECK: mc.fused %arg0, %arg1, %arg2
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   mc.matmul
// CHECK-NEXT:   mc.reshape
// CHECK-NEXT:   mc.broadcast_in_dim
// CHECK-NEXT:   mc.add
// CHECK-NEXT:   mc.relu
func.func @reshaped_anchor(%x: tensor<8x16xf32>, %w: tensor<16x4xf32>, %b: tensor<4xf32>) -> tensor<2x4x4xf32> {
  %0 = mc.matmul %x, %w : tensor<8x16xf32>, tensor<16x4xf32> -> tensor<8x4xf32>
  %1 = mc.reshape %0 : (tensor<8x4xf32>) -> tensor<2x4x4xf32>
  %2 = mc.broadcast_in_dim %b, dims = [2] : (tensor<4xf32>) -> tensor<2x4x4xf32>
  %3 = mc.add %1, %2 : tensor<2x4x4xf32>
  %4 = mc.relu %3 : tensor<2x4x4xf32>
  return %4 : tensor<2x4x4xf32>
}

// -----

// Conv epilogue with a residual add: conv, bias, residual, relu in one
// region (ResNet's basic block tail).
// CHECK-LABEL: func.func @conv_residual
// CHECK: mc.fused %arg0, %arg1, %arg2, %arg3
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   mc.conv2d
// CHECK-NEXT:   mc.broadcast_in_dim
// CHECK-NEXT:   mc.add
// CHECK-NEXT:   mc.add
// CHECK-NEXT:   mc.relu
func.func @conv_residual(%x: tensor<1x4x8x8xf32>, %w: tensor<4x4x3x3xf32>, %b: tensor<4xf32>, %r: tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32> {
  %0 = mc.conv2d %x, %w, strides = [1, 1], padding = [1, 1, 1, 1], dilation = [1, 1], groups = 1 : (tensor<1x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<1x4x8x8xf32>
  %1 = mc.broadcast_in_dim %b, dims = [1] : (tensor<4xf32>) -> tensor<1x4x8x8xf32>
  %2 = mc.add %0, %1 : tensor<1x4x8x8xf32>
  %3 = mc.add %2, %r : tensor<1x4x8x8xf32>
  %4 = mc.relu %3 : tensor<1x4x8x8xf32>
  return %4 : tensor<1x4x8x8xf32>
}

// -----

// Only one anchor per region: the second matmul's output feeds the first
// region as an input; a matmul whose result is also returned stays alone.
// CHECK-LABEL: func.func @anchor_used_outside
// CHECK: %[[MM:.*]] = mc.matmul
// CHECK: mc.fused %[[MM]]
// CHECK-NOT: mc.matmul
// CHECK: return
func.func @anchor_used_outside(%x: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %0 = mc.matmul %x, %x : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  %1 = mc.relu %0 : tensor<8x8xf32>
  %2 = mc.neg %1 : tensor<8x8xf32>
  return %0, %2 : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

// Boundaries: softmax, layer_norm and reductions stay single steps, never
// split; integer arithmetic stays unfused; a lone op stays itself.
// CHECK-LABEL: func.func @boundaries
// CHECK-NOT: mc.fused
// CHECK: mc.softmax
// CHECK: mc.add %{{.*}} : tensor<4xi32>
// CHECK: mc.relu %{{.*}} : tensor<4xi32>
// CHECK: mc.exp
// CHECK: mc.reduce_sum
func.func @boundaries(%x: tensor<4x8xf32>, %i: tensor<4xi32>) -> (tensor<4x8xf32>, tensor<4xi32>, tensor<4xf32>) {
  %0 = mc.softmax %x, axis = 1 : tensor<4x8xf32>
  %1 = mc.add %i, %i : tensor<4xi32>
  %2 = mc.relu %1 : tensor<4xi32>
  %3 = mc.exp %x : tensor<4x8xf32>
  %4 = mc.reduce_sum %3, dims = [1] : (tensor<4x8xf32>) -> tensor<4xf32>
  return %0, %2, %4 : tensor<4x8xf32>, tensor<4xi32>, tensor<4xf32>
}

// -----

// Casts and compare/select fuse (AMP's casts are memory traffic too); the
// i1 mask stays inside the region.
// CHECK-LABEL: func.func @mixed_types
// CHECK: mc.fused
// CHECK:   mc.cast
// CHECK:   mc.compare
// CHECK:   mc.select
// CHECK:   mc.cast
// CHECK: }
// CHECK-NOT: mc.compare
func.func @mixed_types(%x: tensor<16xf32>, %y: tensor<16xf32>) -> tensor<16xf32> {
  %0 = mc.cast %x : tensor<16xf32> to tensor<16xbf16>
  %1 = mc.cast %y : tensor<16xf32> to tensor<16xbf16>
  %2 = mc.compare GT, %0, %1 : (tensor<16xbf16>, tensor<16xbf16>) -> tensor<16xi1>
  %3 = mc.select %2, %0, %1 : tensor<16xi1>, tensor<16xbf16>
  %4 = mc.cast %3 : tensor<16xbf16> to tensor<16xf32>
  return %4 : tensor<16xf32>
}

// -----

// Globals and their stores are boundaries: the update's math fuses, the
// store reads the region's result (state updates alias, so they stay
// outside).
// CHECK-LABEL: func.func @state_update
// CHECK: %[[W:.*]] = ml_program.global_load @w
// CHECK: %[[F:.*]] = mc.fused %arg0, %{{.*}}, %[[W]]
// CHECK: ml_program.global_store @w = %[[F]]
ml_program.global private mutable @w(dense<1.0> : tensor<4xf32>) : tensor<4xf32>
func.func @state_update(%g: tensor<4xf32>) -> tensor<4xf32> {
  %w = ml_program.global_load @w : tensor<4xf32>
  %lr = mc.constant dense<0.1> : tensor<4xf32>
  %0 = mc.mul %g, %lr : tensor<4xf32>
  %1 = mc.sub %w, %0 : tensor<4xf32>
  ml_program.global_store @w = %1 : tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// A dynamic batch fuses like a static one.
// CHECK-LABEL: func.func @dynamic
// CHECK: mc.fused %arg0 : (tensor<?x4xf32>) -> tensor<?x4xf32>
func.func @dynamic(%x: tensor<?x4xf32>) -> tensor<?x4xf32> attributes {mc.batch = array<i64: 1, 8, 8>} {
  %0 = mc.neg %x : tensor<?x4xf32>
  %1 = mc.exp %0 : tensor<?x4xf32>
  return %1 : tensor<?x4xf32>
}

// -----

// Attention: q scaled, q k^T, a mask, softmax over the last dim, p v: one
// region marked attention; the scale is a splat input, the mask's
// broadcast is cloned in.
// CHECK-LABEL: func.func @attention
// CHECK: %[[A:.*]] = mc.fused %{{.*}} {attention} : (tensor<4x16x32xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>, tensor<16x16xf32>, tensor<4x16x32xf32>) -> tensor<4x16x32xf32> {
// CHECK:   mc.mul
// CHECK:   mc.matmul
// CHECK:   mc.broadcast_in_dim
// CHECK:   mc.add
// CHECK:   mc.softmax
// CHECK:   mc.matmul
// CHECK:   mc.yield
// CHECK: return %[[A]]
// NOEPI-LABEL: func.func @attention
// NOEPI: {attention}
func.func @attention(%q: tensor<4x16x32xf32>, %kt: tensor<4x32x16xf32>, %v: tensor<4x16x32xf32>, %mask: tensor<16x16xf32>) -> tensor<4x16x32xf32> {
  %s = mc.constant dense<0.176776695> : tensor<4x16x32xf32>
  %0 = mc.mul %q, %s : tensor<4x16x32xf32>
  %1 = mc.matmul %0, %kt : tensor<4x16x32xf32>, tensor<4x32x16xf32> -> tensor<4x16x16xf32>
  %m = mc.broadcast_in_dim %mask, dims = [1, 2] : (tensor<16x16xf32>) -> tensor<4x16x16xf32>
  %2 = mc.add %1, %m : tensor<4x16x16xf32>
  %3 = mc.softmax %2, axis = 2 : tensor<4x16x16xf32>
  %4 = mc.matmul %3, %v : tensor<4x16x16xf32>, tensor<4x16x32xf32> -> tensor<4x16x32xf32>
  return %4 : tensor<4x16x32xf32>
}

// -----

// Attention as mc-amp (O1) leaves it: the matmuls in bf16, the scores cast
// to f32 for the softmax and the probabilities cast back. The casts join
// the region: one attention region, as without AMP.
// CHECK-LABEL: func.func @attention_amp
// CHECK: %[[A:.*]] = mc.fused %{{.*}} {attention} : (tensor<4x16x32xbf16>, tensor<4x32x16xbf16>, tensor<4x16x32xbf16>) -> tensor<4x16x32xbf16> {
// CHECK:   mc.matmul
// CHECK:   mc.cast {{.*}} to tensor<4x16x16xf32>
// CHECK:   mc.softmax
// CHECK:   mc.cast {{.*}} to tensor<4x16x16xbf16>
// CHECK:   mc.matmul
// CHECK:   mc.yield
// CHECK: return %[[A]]
func.func @attention_amp(%q: tensor<4x16x32xbf16>, %kt: tensor<4x32x16xbf16>, %v: tensor<4x16x32xbf16>) -> tensor<4x16x32xbf16> {
  %0 = mc.matmul %q, %kt : tensor<4x16x32xbf16>, tensor<4x32x16xbf16> -> tensor<4x16x16xbf16>
  %1 = mc.cast %0 : tensor<4x16x16xbf16> to tensor<4x16x16xf32>
  %2 = mc.softmax %1, axis = 2 : tensor<4x16x16xf32>
  %3 = mc.cast %2 : tensor<4x16x16xf32> to tensor<4x16x16xbf16>
  %4 = mc.matmul %3, %v : tensor<4x16x16xbf16>, tensor<4x16x32xbf16> -> tensor<4x16x32xbf16>
  return %4 : tensor<4x16x32xbf16>
}

// -----

// Not attention: the scores are used twice (returned), and a softmax over
// another dim.
// CHECK-LABEL: func.func @not_attention
// CHECK-NOT: attention
// CHECK: return
func.func @not_attention(%q: tensor<4x16x32xf32>, %kt: tensor<4x32x16xf32>, %v: tensor<4x16x32xf32>) -> (tensor<4x16x32xf32>, tensor<4x16x16xf32>, tensor<4x16x32xf32>) {
  %0 = mc.matmul %q, %kt : tensor<4x16x32xf32>, tensor<4x32x16xf32> -> tensor<4x16x16xf32>
  %1 = mc.softmax %0, axis = 2 : tensor<4x16x16xf32>
  %2 = mc.matmul %1, %v : tensor<4x16x16xf32>, tensor<4x16x32xf32> -> tensor<4x16x32xf32>
  %3 = mc.matmul %q, %kt : tensor<4x16x32xf32>, tensor<4x32x16xf32> -> tensor<4x16x16xf32>
  %4 = mc.softmax %3, axis = 1 : tensor<4x16x16xf32>
  %5 = mc.matmul %4, %v : tensor<4x16x16xf32>, tensor<4x16x32xf32> -> tensor<4x16x32xf32>
  return %2, %0, %5 : tensor<4x16x32xf32>, tensor<4x16x16xf32>, tensor<4x16x32xf32>
}

// -----

// A trailing reduction ends a region: exp, mul and the row sum run in one
// pass (the region's values have the reduction's operand shape). A
// reduction over a leading dim does not.
// CHECK-LABEL: func.func @trailing_reduction
// CHECK: %[[F:.*]] = mc.fused %arg0 : (tensor<4x8xf32>) -> tensor<4xf32> {
// CHECK:   mc.exp
// CHECK:   mc.mul
// CHECK:   mc.reduce_sum
// CHECK:   mc.yield
// CHECK: %[[E:.*]] = mc.exp %arg0
// CHECK: mc.reduce_sum %[[E]], dims = [0]
func.func @trailing_reduction(%x: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<8xf32>) {
  %0 = mc.exp %x : tensor<4x8xf32>
  %1 = mc.mul %0, %0 : tensor<4x8xf32>
  %2 = mc.reduce_sum %1, dims = [1] : (tensor<4x8xf32>) -> tensor<4xf32>
  %3 = mc.exp %x : tensor<4x8xf32>
  %4 = mc.reduce_sum %3, dims = [0] : (tensor<4x8xf32>) -> tensor<8xf32>
  return %2, %4 : tensor<4xf32>, tensor<8xf32>
}

// -----

// An optimizer's update (AdamW's shape): the new moment is stored and read
// by the parameter's update. It joins that region as a second result, and
// its store, which came before the region, moves after it.
// CHECK-LABEL: func.func @moment_and_parameter
// CHECK: %[[R:.*]]:2 = mc.fused
// CHECK:   %[[M:.*]] = mc.add
// CHECK:   %[[P:.*]] = mc.sub
// CHECK:   mc.yield %[[P]], %[[M]]
// CHECK-NEXT: }
// CHECK-NEXT: ml_program.global_store @m = %[[R]]#1
// CHECK-NEXT: ml_program.global_store @p = %[[R]]#0
ml_program.global private mutable @m(dense<0.0> : tensor<8xf32>) : tensor<8xf32>
ml_program.global private mutable @p(dense<1.0> : tensor<8xf32>) : tensor<8xf32>
func.func @moment_and_parameter(%g: tensor<8xf32>) -> tensor<8xf32> {
  %m = ml_program.global_load @m : tensor<8xf32>
  %p = ml_program.global_load @p : tensor<8xf32>
  %m1 = mc.add %m, %g : tensor<8xf32>
  ml_program.global_store @m = %m1 : tensor<8xf32>
  %p1 = mc.sub %p, %m1 : tensor<8xf32>
  ml_program.global_store @p = %p1 : tensor<8xf32>
  return %g : tensor<8xf32>
}

// -----

// A store that cannot move past the region (a load of its global sits
// between) keeps the value its own: the region stops there.
// CHECK-LABEL: func.func @store_cannot_move
// CHECK: %[[M:.*]] = mc.add
// CHECK-NEXT: ml_program.global_store @m = %[[M]]
// CHECK: mc.fused {{.*}} -> tensor<8xf32>
ml_program.global private mutable @m(dense<0.0> : tensor<8xf32>) : tensor<8xf32>
func.func @store_cannot_move(%g: tensor<8xf32>) -> tensor<8xf32> {
  %m = ml_program.global_load @m : tensor<8xf32>
  %m1 = mc.add %m, %g : tensor<8xf32>
  ml_program.global_store @m = %m1 : tensor<8xf32>
  %again = ml_program.global_load @m : tensor<8xf32>
  %0 = mc.mul %m1, %again : tensor<8xf32>
  %1 = mc.neg %0 : tensor<8xf32>
  return %1 : tensor<8xf32>
}

// -----

// A value read outside before the region's last op (here by a reduction
// whose result the region reads) would make a cycle: it stays out.
// CHECK-LABEL: func.func @user_before_root
// CHECK: %[[E:.*]] = mc.exp %arg0
// CHECK: mc.reduce_sum %[[E]]
// CHECK: mc.fused {{.*}} -> tensor<4x8xf32>
func.func @user_before_root(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = mc.exp %x : tensor<4x8xf32>
  %1 = mc.reduce_sum %0, dims = [1] keepdim : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %2 = mc.broadcast_in_dim %1, dims = [0, 1] : (tensor<4x1xf32>) -> tensor<4x8xf32>
  %3 = mc.div %0, %2 : tensor<4x8xf32>
  %4 = mc.neg %3 : tensor<4x8xf32>
  return %4 : tensor<4x8xf32>
}

// -----

// A region with an anchor takes no extra result, and a value computed
// from an anchor's result stays out of a region below it rather than keep
// the anchor from leading its epilogue (bias, activation): the matmul's
// region ends at the relu read outside; the neg is its own op.
// CHECK-LABEL: func.func @anchor_no_extra
// CHECK: %[[A:.*]] = mc.fused %arg0, %arg1, %arg2 : {{.*}} -> tensor<4x4xf32>
// CHECK:   mc.matmul
// CHECK:   mc.add
// CHECK:   mc.relu
// CHECK-NOT: mc.yield {{.*}},
// CHECK: mc.neg %[[A]]
func.func @anchor_no_extra(%x: tensor<4x2xf32>, %w: tensor<2x4xf32>, %b: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %0 = mc.matmul %x, %w : tensor<4x2xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
  %1 = mc.add %0, %b : tensor<4x4xf32>
  %2 = mc.relu %1 : tensor<4x4xf32>
  %3 = mc.neg %2 : tensor<4x4xf32>
  return %2, %3 : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// A broadcast that a view in the region reads stays outside: the view
// reads only region inputs (joined, the transpose would read a value the
// region computes, which mc.fused refuses). The sub, exposed for the
// second result, brought the transpose in.
// CHECK-LABEL: func.func @view_of_a_broadcast
// CHECK: %[[B:.*]] = mc.broadcast_in_dim %arg1
// CHECK: %[[R:.*]]:2 = mc.fused %[[B]], %arg0 : (tensor<8x8xf32>, tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>)
// CHECK:   mc.transpose
// CHECK:   mc.sub
// CHECK:   mc.add
// CHECK: return %[[R]]#0, %[[R]]#1
func.func @view_of_a_broadcast(%x: tensor<8x8xf32>, %r: tensor<8x1xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %b = mc.broadcast_in_dim %r, dims = [0, 1] : (tensor<8x1xf32>) -> tensor<8x8xf32>
  %t = mc.transpose %b, permutation = [1, 0] : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %s = mc.sub %x, %t : tensor<8x8xf32>
  %c = mc.add %s, %b : tensor<8x8xf32>
  return %c, %s : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

// A matmul can lead its epilogue only through values that can join: %g is
// read before the root by a reduction (AMP's finite check over a
// gradient), so the matmul cannot come in through it, and the update
// chain after it is one region of two results (the matmul and its
// multiply are a region of their own).
// CHECK-LABEL: func.func @anchor_behind_an_earlier_reader
// CHECK: %[[G:.*]] = mc.fused %arg0, %arg1, %arg2 : {{.*}} -> tensor<4x8xf32>
// CHECK:   mc.matmul
// CHECK: mc.reduce_sum %[[G]]
// CHECK: mc.fused %arg3, %[[G]], %arg2 : {{.*}} -> (tensor<4x8xf32>, tensor<4x8xf32>)
func.func @anchor_behind_an_earlier_reader(%a: tensor<4x8xf32>, %b: tensor<8x8xf32>, %s: tensor<4x8xf32>, %m: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<f32>) {
  %0 = mc.matmul %a, %b : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %g = mc.mul %0, %s : tensor<4x8xf32>
  %c = mc.reduce_sum %g, dims = [0, 1] : (tensor<4x8xf32>) -> tensor<f32>
  %m1 = mc.add %m, %g : tensor<4x8xf32>
  %m2 = mc.mul %m1, %s : tensor<4x8xf32>
  %r = mc.sub %m2, %m1 : tensor<4x8xf32>
  return %r, %m2, %c : tensor<4x8xf32>, tensor<4x8xf32>, tensor<f32>
}
