// RUN: modelc compile %s --no-fuse --emit=plan | FileCheck %s

// A global_store is a copy into the global's State buffer, unless the op
// computing the stored value writes the buffer itself (writeStoresInPlace,
// codegen/MCToPlan.cpp). Each case below keeps the copy when writing in
// place would change a result:
//   @v: stored from mul(v, x), nothing else reads v: the mul runs in place;
//   @w: the mul reads the old w after the add that makes the new one, so
//       the add writes the arena and a copy follows the mul;
//   @u: stored twice, and the first stored value is read after the second
//       store: both stay copies, and the add reads the sub's own buffer.

// CHECK-DAG: #[[X:[0-9]+]] f32[4] arena+{{.*}}  arg0
// CHECK-DAG: #[[W:[0-9]+]] f32[4] state+{{.*}}  w
// CHECK-DAG: #[[U:[0-9]+]] f32[4] state+{{.*}}  u
// CHECK-DAG: #[[V:[0-9]+]] f32[4] state+{{.*}}  v
// CHECK: steps:
// CHECK-NEXT: mc.mul (#[[V]], #[[X]]) -> (#[[V]])
// CHECK-NEXT: mc.add (#[[W]], #[[X]]) -> (#[[A:[0-9]+]])
// CHECK-NEXT: mc.mul (#[[W]], #[[X]]) -> (#[[B:[0-9]+]])
// CHECK-NEXT: mc.copy (#[[A]]) -> (#[[W]])
// CHECK-NEXT: mc.sub (#[[U]], #[[X]]) -> (#[[C:[0-9]+]])
// CHECK-NEXT: mc.copy (#[[C]]) -> (#[[U]])
// CHECK-NEXT: mc.copy (#[[B]]) -> (#[[U]])
// CHECK-NEXT: mc.add (#[[C]], #[[A]])
ml_program.global private mutable @w(dense<1.0> : tensor<4xf32>) : tensor<4xf32>
ml_program.global private mutable @u(dense<2.0> : tensor<4xf32>) : tensor<4xf32>
ml_program.global private mutable @v(dense<3.0> : tensor<4xf32>) : tensor<4xf32>
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  %v = ml_program.global_load @v : tensor<4xf32>
  %v1 = mc.mul %v, %x : tensor<4xf32>
  ml_program.global_store @v = %v1 : tensor<4xf32>
  %w = ml_program.global_load @w : tensor<4xf32>
  %u = ml_program.global_load @u : tensor<4xf32>
  %a = mc.add %w, %x : tensor<4xf32>
  %b = mc.mul %w, %x : tensor<4xf32>
  ml_program.global_store @w = %a : tensor<4xf32>
  %c = mc.sub %u, %x : tensor<4xf32>
  ml_program.global_store @u = %c : tensor<4xf32>
  ml_program.global_store @u = %b : tensor<4xf32>
  %r = mc.add %c, %a : tensor<4xf32>
  return %r : tensor<4xf32>
}
