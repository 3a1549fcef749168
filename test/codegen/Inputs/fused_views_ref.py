"""fused-views.mlir's check: the fused and unfused outputs are the same bits,
and both match NumPy's computation of the function (rel err < 1e-5).

Output 0, the attention region, may differ from the unfused steps in the
last bits: its products read q, k and v through views (k transposed, rows
strided), the unfused matmuls read copies, and oneDNN's sgemm picks its
kernel by layout (on AVX-512 hosts the two round differently; with
MODELC_GEMM=openblas, or on AVX2, they agree bit for bit). There it must
agree within 1e-6 of the output's largest magnitude, and says "~=" when
not bit for bit."""
import os
import sys

import numpy as np

d = sys.argv[1]
ld = lambda n: np.load(os.path.join(d, n + ".npy")).astype(np.float64)
proj, x, y, m, n, a, w, p0, z, u = (
    ld(k) for k in ("proj", "x", "y", "m", "n", "a", "w", "p", "z", "u"))
heads = lambda t: t.reshape(8, 4, 4).transpose(1, 0, 2)  # [S, B*H, d] -> [B*H, S, d]
q, k, v = heads(proj[:, :, 0:8]), heads(proj[:, :, 8:16]), heads(proj[:, :, 16:24])
s = (q / 2.0) @ k.transpose(0, 2, 1)
p = np.exp(s - s.max(-1, keepdims=True))
p /= p.sum(-1, keepdims=True)
zs = 1 / (1 + np.exp(-z))
refs = [p @ v, np.maximum(x + y.transpose(1, 0, 2), 0), m[1:8:2] * n,
        np.maximum(a @ w + p0.reshape(6, 8).T, 0), zs + zs.T,
        np.exp(u.transpose(0, 2, 1)).sum(-1),
        p0[16:32].reshape(4, 4) + n @ n, z.T.reshape(25) * z.reshape(25)]
ok = True
for i, ref in enumerate(refs):
    f = np.load(os.path.join(d, "f", f"output{i}.npy"))
    u = np.load(os.path.join(d, "u", f"output{i}.npy"))
    same = f.shape == u.shape and np.array_equal(f, u)
    close = (i == 0 and f.shape == u.shape and
             float(np.abs(f - u).max()) <= 1e-6 * float(np.abs(u).max()))
    err = float(np.linalg.norm(f - ref) / np.linalg.norm(ref))
    good = (same or close) and err < 1e-5
    ok &= good
    rel = "==" if same else "~=" if close else "!="
    print(f"output{i}: fused {rel} unfused, rel err vs numpy {err:.1e}: "
          f"{'ok' if good else 'FAIL'}")
sys.exit(0 if ok else 1)
