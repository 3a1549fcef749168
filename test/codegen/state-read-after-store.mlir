// A value loaded from a global keeps the global's value as the step began,
// even where it is used after the global's store: loads read the State
// buffer in place, so codegen copies such a value to the arena before the
// store (snapshotStaleReads, codegen/MCToPlan.cpp). Without the copy the
// mul read the stored w + x ([2, 6, 12, 20] for x = [1, 2, 3, 4]) and the
// returned %w the new state.

// RUN: rm -rf %t && mkdir -p %t
// RUN: modelc compile %s --emit=plan | FileCheck %s
// RUN: modelc compile %s --target cuda --emit=plan | FileCheck %s
// RUN: modelc compile %s -o %t/m.mcpk
// RUN: %python -c "import numpy as np; np.save('%t/x.npy', np.array([1, 2, 3, 4], np.float32))"
// RUN: modelc-run %t/m.mcpk --input arg0=%t/x.npy --output-dir %t/out
// RUN: %python -c "import numpy as np; print(np.load('%t/out/output0.npy').tolist(), np.load('%t/out/output1.npy').tolist())" | FileCheck %s --check-prefix=VALUES

// CHECK-DAG: #[[X:[0-9]+]] f32[4] arena+{{.*}}  arg0
// CHECK-DAG: #[[W:[0-9]+]] f32[4] state+{{.*}}  w
// CHECK-DAG: #[[OLD:[0-9]+]] f32[4] arena+{{.*}}  %w (before @w's store)
// CHECK: outputs: output0=#[[R:[0-9]+]] output1=#[[OLD]]
// CHECK: steps:
// CHECK-NEXT: mc.add (#[[W]], #[[X]]) -> (#[[A:[0-9]+]])
// CHECK-NEXT: mc.copy (#[[W]]) -> (#[[OLD]])
// CHECK-NEXT: mc.copy (#[[A]]) -> (#[[W]])
// CHECK-NEXT: mc.mul (#[[OLD]], #[[X]]) -> (#[[R]])

// VALUES: [1.0, 2.0, 3.0, 4.0] [1.0, 1.0, 1.0, 1.0]
ml_program.global private mutable @w(dense<1.0> : tensor<4xf32>) : tensor<4xf32>
func.func @forward(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %w = ml_program.global_load @w : tensor<4xf32>
  %a = mc.add %w, %x : tensor<4xf32>
  ml_program.global_store @w = %a : tensor<4xf32>
  %r = mc.mul %w, %x : tensor<4xf32>
  return %r, %w : tensor<4xf32>, tensor<4xf32>
}
