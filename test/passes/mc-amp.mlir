// RUN: modelc-opt %s --mc-amp | FileCheck %s --check-prefix=LEVEL1
// RUN: modelc-opt %s --mc-amp="dtype=f16 level=O2" | FileCheck %s --check-prefix=LEVEL2
// RUN: modelc-opt %s --mc-amp="f32-ops=mc.matmul" | FileCheck %s --check-prefix=OVERRIDE
// RUN: modelc-opt %s --mc-amp="f32-ops=matmul" | FileCheck %s --check-prefix=OVERRIDE
// RUN: not modelc-opt %s --mc-amp="f32-ops=matmull" 2>&1 | FileCheck %s --check-prefix=BADOP
// RUN: modelc-opt %s --mc-amp="locations=nowhere:f32" 2>&1 | FileCheck %s --check-prefix=NOLOC

// BADOP: error: unknown op 'matmull' in an AMP list (expected an mc op such as mc.matmul)
// NOLOC: warning: AMP location override 'nowhere' matches no op
// RUN: modelc-opt %s --mc-amp="locations=fc2:f32" | FileCheck %s --check-prefix=LOC
// RUN: not modelc-opt %s --mc-amp="dtype=fp8" 2>&1 | FileCheck %s --check-prefix=BADTYPE
// RUN: not modelc-opt %s --mc-amp="level=O3" 2>&1 | FileCheck %s --check-prefix=BADLEVEL

// BADTYPE: error: unknown AMP dtype 'fp8' (expected bf16 or f16)
// BADLEVEL: error: unknown AMP level 'O3' (expected O1 or O2)

// A two-layer classifier: x is used by one matmul, w1 by one, the hidden
// activation h by the second matmul and a residual add.

// O1, bf16: matmuls in bf16; the bias add and relu follow their inputs; the
// softmax is on the f32 list; the result is cast back to the signature's f32.
// LEVEL1-LABEL: func.func @forward
// Each value is cast once, right after its definition.
// LEVEL1: %[[XB:.*]] = mc.cast %arg0 : tensor<8x64xf32> to tensor<8x64xbf16>
// LEVEL1-NOT: mc.cast %arg0
// LEVEL1: %[[W1:.*]] = ml_program.global_load_const @w1
// LEVEL1-NEXT: %[[W1B:.*]] = mc.cast %[[W1]] : tensor<32x64xf32> to tensor<32x64xbf16>
// LEVEL1: %[[M1:.*]] = mc.matmul %[[XB]], %[[W1B]] transpose_b {mc.precision = "bf16", mc.precision_reason = "O1: low-precision list"} : tensor<8x64xbf16>, tensor<32x64xbf16> -> tensor<8x32xbf16>
// The bias is f32, the matmul bf16: the widest (f32) wins.
// LEVEL1: %[[M1F:.*]] = mc.cast %[[M1]] : tensor<8x32xbf16> to tensor<8x32xf32>
// LEVEL1: mc.add %[[M1F]], %{{.*}} {mc.precision = "f32", mc.precision_reason = "O1: follows its inputs (widest)"} : tensor<8x32xf32>
// LEVEL1: mc.relu %{{.*}} {mc.precision = "f32", mc.precision_reason = "O1: follows its inputs (widest)"}
// LEVEL1: mc.matmul %{{.*}}, %{{.*}} transpose_b {mc.precision = "bf16", mc.precision_reason = "O1: low-precision list"}
// LEVEL1: mc.softmax %{{.*}}, axis = 1 {mc.precision = "f32", mc.precision_reason = "O1: f32 list"} : tensor<8x10xf32>
// LEVEL1: mc.reduce_sum {{.*}}mc.precision = "f32", mc.precision_reason = "O1: f32 list"
// LEVEL1: return %{{.*}}, %{{.*}} : tensor<8x10xf32>, tensor<8xf32>

// O2, f16: everything in f16 except the norm; the f32 parameters (master
// weights) are cast once after loading; results are cast back.
// LEVEL2-LABEL: func.func @forward
// LEVEL2: mc.cast %arg0 : tensor<8x64xf32> to tensor<8x64xf16>
// LEVEL2: mc.cast %{{.*}} : tensor<32x64xf32> to tensor<32x64xf16>
// LEVEL2: mc.matmul {{.*}}mc.precision = "f16", mc.precision_reason = "O2: whole model in f16"
// LEVEL2: mc.add {{.*}}mc.precision = "f16"
// LEVEL2: mc.layer_norm {{.*}}mc.precision = "f32", mc.precision_reason = "O2: norms stay f32"
// LEVEL2: mc.softmax {{.*}}mc.precision = "f16"
// LEVEL2: %[[BACK:.*]] = mc.cast %{{.*}} : tensor<8x10xf16> to tensor<8x10xf32>
// LEVEL2: return %[[BACK]]

// OVERRIDE-LABEL: func.func @forward
// OVERRIDE-NOT: mc.precision = "bf16"
// OVERRIDE: mc.matmul {{.*}}mc.precision = "f32", mc.precision_reason = "O1: f32 list"

// LOC-LABEL: func.func @forward
// LOC: mc.matmul {{.*}}mc.precision = "bf16", mc.precision_reason = "O1: low-precision list"
// LOC: mc.matmul {{.*}}mc.precision = "f32", mc.precision_reason = "location override (fc2)"
ml_program.global private @w1(dense<0.01> : tensor<32x64xf32>) : tensor<32x64xf32>
ml_program.global private @b1(dense<0.0> : tensor<32xf32>) : tensor<32xf32>
ml_program.global private @w2(dense<0.02> : tensor<10x32xf32>) : tensor<10x32xf32>
ml_program.global private @g(dense<1.0> : tensor<32xf32>) : tensor<32xf32>
func.func @forward(%x: tensor<8x64xf32>) -> (tensor<8x10xf32>, tensor<8xf32>) {
  %w1 = ml_program.global_load_const @w1 : tensor<32x64xf32>
  %b1 = ml_program.global_load_const @b1 : tensor<32xf32>
  %w2 = ml_program.global_load_const @w2 : tensor<10x32xf32>
  %g = ml_program.global_load_const @g : tensor<32xf32>
  %0 = mc.matmul %x, %w1 transpose_b : tensor<8x64xf32>, tensor<32x64xf32> -> tensor<8x32xf32> loc("fc1")
  %b = mc.broadcast_in_dim %b1, dims = [1] : (tensor<32xf32>) -> tensor<8x32xf32>
  %1 = mc.add %0, %b : tensor<8x32xf32>
  %h = mc.relu %1 : tensor<8x32xf32>
  %n = mc.layer_norm %h, %g, %g, axis = 1, epsilon = 1.0e-05 : tensor<8x32xf32>, tensor<32xf32>
  %2 = mc.matmul %n, %w2 transpose_b : tensor<8x32xf32>, tensor<10x32xf32> -> tensor<8x10xf32> loc("fc2")
  %3 = mc.softmax %2, axis = 1 : tensor<8x10xf32>
  %s = mc.reduce_sum %h, dims = [1] : (tensor<8x32xf32>) -> tensor<8xf32>
  return %3, %s : tensor<8x10xf32>, tensor<8xf32>
}
