// Views in fused regions (schema 2.6, docs/fusion.md "Views") compute what
// the steps they replace compute: MultiheadAttention's q, k and v sliced,
// reshaped and transposed out of a packed projection, a transpose read by
// an elementwise region, a strided slice, a matmul's epilogue adding a
// reshaped and transposed input (a view right after the anchor, which is
// not the anchor's reshape), x + x.T of a computed x, a sum over a
// transposed input, a matmul's epilogue adding a reshaped slice (an LSTM
// step's rows of its input projection), a reshaped transpose. The fused artifact reads the projection in place (no
// slice or transpose step), agrees bit for bit with --no-fuse (one step
// per op; the attention output within 1e-6, see Inputs/fused_views_ref.py),
// and both match NumPy.
// RUN: rm -rf %t && mkdir -p %t
// RUN: modelc compile %s --emit=plan -o - | FileCheck %s --check-prefix=PLAN
// PLAN: steps:
// PLAN-NEXT: 0: mc.fused (#0, #{{[0-9]+}}) -> (#{{[0-9]+}}) {attention}
// PLAN: mc.slice(%0)
// PLAN: mc.transpose
// PLAN: mc.matmul({{.*}}) : f32 {transpose_b}
// PLAN: 1: mc.fused
// PLAN: mc.transpose
// PLAN: mc.add
// PLAN: 2: mc.fused
// PLAN: mc.slice
// PLAN: mc.matmul
// PLAN-NEXT: mc.reshape(%2)
// PLAN-NEXT: mc.transpose
// PLAN-NOT: {{^ +[0-9]+: mc.(transpose|slice)}}
// RUN: modelc compile %s -o %t/fused.mcpk
// RUN: modelc compile %s --no-fuse -o %t/unfused.mcpk
// RUN: %python -c "import numpy as np; r = np.random.default_rng(3); [np.save('%t/' + n + '.npy', r.standard_normal(s).astype(np.float32)) for n, s in (('proj', (8, 2, 24)), ('x', (2, 8, 4)), ('y', (8, 2, 4)), ('m', (8, 4)), ('n', (4, 4)), ('a', (8, 4)), ('w', (4, 6)), ('p', (48,)), ('z', (5, 5)), ('u', (3, 6, 4)))]"
// RUN: modelc-run %t/fused.mcpk --input arg0=%t/proj.npy --input arg1=%t/x.npy --input arg2=%t/y.npy --input arg3=%t/m.npy --input arg4=%t/n.npy --input arg5=%t/a.npy --input arg6=%t/w.npy --input arg7=%t/p.npy --input arg8=%t/z.npy --input arg9=%t/u.npy --output-dir %t/f > /dev/null
// RUN: modelc-run %t/unfused.mcpk --input arg0=%t/proj.npy --input arg1=%t/x.npy --input arg2=%t/y.npy --input arg3=%t/m.npy --input arg4=%t/n.npy --input arg5=%t/a.npy --input arg6=%t/w.npy --input arg7=%t/p.npy --input arg8=%t/z.npy --input arg9=%t/u.npy --output-dir %t/u > /dev/null
// RUN: %python %S/Inputs/fused_views_ref.py %t | FileCheck %s --check-prefix=VALUES
// VALUES: output0: fused {{==|~=}} unfused, rel err vs numpy {{[0-9.e-]+}}: ok
// VALUES: output1: fused == unfused, rel err vs numpy {{[0-9.e-]+}}: ok
// VALUES: output2: fused == unfused, rel err vs numpy {{[0-9.e-]+}}: ok
// VALUES: output3: fused == unfused, rel err vs numpy {{[0-9.e-]+}}: ok
// VALUES: output4: fused == unfused, rel err vs numpy {{[0-9.e-]+}}: ok
// VALUES: output5: fused == unfused, rel err vs numpy {{[0-9.e-]+}}: ok
// VALUES: output6: fused == unfused, rel err vs numpy {{[0-9.e-]+}}: ok
// VALUES: output7: fused == unfused, rel err vs numpy {{[0-9.e-]+}}: ok
func.func @views(%proj: tensor<8x2x24xf32>, %x: tensor<2x8x4xf32>, %y: tensor<8x2x4xf32>, %m: tensor<8x4xf32>, %n: tensor<4x4xf32>, %a0: tensor<8x4xf32>, %w: tensor<4x6xf32>, %p0: tensor<48xf32>, %z: tensor<5x5xf32>, %u: tensor<3x6x4xf32>) -> (tensor<4x8x4xf32>, tensor<2x8x4xf32>, tensor<4x4xf32>, tensor<8x6xf32>, tensor<5x5xf32>, tensor<3x4xf32>, tensor<4x4xf32>, tensor<25xf32>) {
  %s = mc.constant dense<2.0> : tensor<f32>
  %q0 = mc.slice %proj, start = [0, 0, 0], limit = [8, 2, 8], strides = [1, 1, 1] : (tensor<8x2x24xf32>) -> tensor<8x2x8xf32>
  %k0 = mc.slice %proj, start = [0, 0, 8], limit = [8, 2, 16], strides = [1, 1, 1] : (tensor<8x2x24xf32>) -> tensor<8x2x8xf32>
  %v0 = mc.slice %proj, start = [0, 0, 16], limit = [8, 2, 24], strides = [1, 1, 1] : (tensor<8x2x24xf32>) -> tensor<8x2x8xf32>
  %q1 = mc.reshape %q0 : (tensor<8x2x8xf32>) -> tensor<8x4x4xf32>
  %k1 = mc.reshape %k0 : (tensor<8x2x8xf32>) -> tensor<8x4x4xf32>
  %v1 = mc.reshape %v0 : (tensor<8x2x8xf32>) -> tensor<8x4x4xf32>
  %q = mc.transpose %q1, permutation = [1, 0, 2] : (tensor<8x4x4xf32>) -> tensor<4x8x4xf32>
  %kt = mc.transpose %k1, permutation = [1, 2, 0] : (tensor<8x4x4xf32>) -> tensor<4x4x8xf32>
  %v = mc.transpose %v1, permutation = [1, 0, 2] : (tensor<8x4x4xf32>) -> tensor<4x8x4xf32>
  %sb = mc.broadcast_in_dim %s, dims = [] : (tensor<f32>) -> tensor<4x8x4xf32>
  %qs = mc.div %q, %sb : tensor<4x8x4xf32>
  %scores = mc.matmul %qs, %kt : tensor<4x8x4xf32>, tensor<4x4x8xf32> -> tensor<4x8x8xf32>
  %p = mc.softmax %scores, axis = 2 : tensor<4x8x8xf32>
  %o = mc.matmul %p, %v : tensor<4x8x8xf32>, tensor<4x8x4xf32> -> tensor<4x8x4xf32>
  %t = mc.transpose %y, permutation = [1, 0, 2] : (tensor<8x2x4xf32>) -> tensor<2x8x4xf32>
  %a = mc.add %x, %t : tensor<2x8x4xf32>
  %r = mc.relu %a : tensor<2x8x4xf32>
  %ms = mc.slice %m, start = [1, 0], limit = [8, 4], strides = [2, 1] : (tensor<8x4xf32>) -> tensor<4x4xf32>
  %mn = mc.mul %ms, %n : tensor<4x4xf32>
  %mm = mc.matmul %a0, %w : tensor<8x4xf32>, tensor<4x6xf32> -> tensor<8x6xf32>
  %pr = mc.reshape %p0 : (tensor<48xf32>) -> tensor<6x8xf32>
  %pt = mc.transpose %pr, permutation = [1, 0] : (tensor<6x8xf32>) -> tensor<8x6xf32>
  %e = mc.add %mm, %pt : tensor<8x6xf32>
  %er = mc.relu %e : tensor<8x6xf32>
  %zs = mc.sigmoid %z : tensor<5x5xf32>
  %zt = mc.transpose %zs, permutation = [1, 0] : (tensor<5x5xf32>) -> tensor<5x5xf32>
  %zz = mc.add %zs, %zt : tensor<5x5xf32>
  %ut = mc.transpose %u, permutation = [0, 2, 1] : (tensor<3x6x4xf32>) -> tensor<3x4x6xf32>
  %ue = mc.exp %ut : tensor<3x4x6xf32>
  %us = mc.reduce_sum %ue, dims = [2] : (tensor<3x4x6xf32>) -> tensor<3x4xf32>
  %ps = mc.slice %p0, start = [16], limit = [32], strides = [1] : (tensor<48xf32>) -> tensor<16xf32>
  %psr = mc.reshape %ps : (tensor<16xf32>) -> tensor<4x4xf32>
  %nn = mc.matmul %n, %n : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %ep = mc.add %psr, %nn : tensor<4x4xf32>
  %zt2 = mc.transpose %z, permutation = [1, 0] : (tensor<5x5xf32>) -> tensor<5x5xf32>
  %ztr = mc.reshape %zt2 : (tensor<5x5xf32>) -> tensor<25xf32>
  %zr = mc.reshape %z : (tensor<5x5xf32>) -> tensor<25xf32>
  %zm = mc.mul %ztr, %zr : tensor<25xf32>
  return %o, %r, %mn, %er, %zz, %us, %ep, %zm : tensor<4x8x4xf32>, tensor<2x8x4xf32>, tensor<4x4xf32>, tensor<8x6xf32>, tensor<5x5xf32>, tensor<3x4xf32>, tensor<4x4xf32>, tensor<25xf32>
}
