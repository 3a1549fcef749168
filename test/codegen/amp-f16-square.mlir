// A square under --amp=f16 stays in f32: `pow` is on AMP's f32 list, and the
// kernels compute a pow by 2 as x * x. (A canonicalization of pow(x, 2) to
// mul(x, x), tried once, made the square follow its f16 input: every value
// above 256 overflowed and this RMS norm returned zeros.)

// RUN: rm -rf %t && mkdir -p %t
// RUN: modelc compile %s --amp=f16 --no-fuse --emit=plan | FileCheck %s
// CHECK: mc.pow ({{.*}}) -> ({{.*}}) {f32: O1: f32 list}
// RUN: %python -c "import numpy as np; r = np.random.default_rng(0); np.save('%t/x.npy', (400 * r.standard_normal((4, 16))).astype(np.float32)); np.save('%t/w.npy', np.eye(16, dtype=np.float32))"
// RUN: modelc compile %s --amp=f16 -o %t/f16.mcpk
// RUN: modelc compile %s -o %t/f32.mcpk
// RUN: modelc-run %t/f16.mcpk --input arg0=%t/x.npy --input arg1=%t/w.npy --output-dir %t/f16
// RUN: modelc-run %t/f32.mcpk --input arg0=%t/x.npy --input arg1=%t/w.npy --output-dir %t/f32
// RUN: modelc compare %t/f16/output0.npy %t/f32/output0.npy --rtol 2e-3
func.func @rms_norm(%x: tensor<4x16xf32>, %w: tensor<16x16xf32>) -> tensor<4x16xf32> {
  %h = mc.matmul %x, %w : tensor<4x16xf32>, tensor<16x16xf32> -> tensor<4x16xf32>
  %two = mc.constant dense<2.0> : tensor<f32>
  %twob = mc.broadcast_in_dim %two, dims = [] : (tensor<f32>) -> tensor<4x16xf32>
  %sq = mc.pow %h, %twob : tensor<4x16xf32>
  %v = mc.reduce_mean %sq, dims = [1] keepdim : (tensor<4x16xf32>) -> tensor<4x1xf32>
  %eps = mc.constant dense<1.0e-6> : tensor<4x1xf32>
  %ve = mc.add %v, %eps : tensor<4x1xf32>
  %s = mc.sqrt %ve : tensor<4x1xf32>
  %sb = mc.broadcast_in_dim %s, dims = [0, 1] : (tensor<4x1xf32>) -> tensor<4x16xf32>
  %n = mc.div %h, %sb : tensor<4x16xf32>
  return %n : tensor<4x16xf32>
}
