"""fused-views.mlir's check: the fused and unfused outputs are the same bits,
and both match NumPy's computation of the function (rel err < 1e-5)."""
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
        np.exp(u.transpose(0, 2, 1)).sum(-1)]
ok = True
for i, ref in enumerate(refs):
    f = np.load(os.path.join(d, "f", f"output{i}.npy"))
    u = np.load(os.path.join(d, "u", f"output{i}.npy"))
    same = f.shape == u.shape and np.array_equal(f, u)
    err = float(np.linalg.norm(f - ref) / np.linalg.norm(ref))
    good = same and err < 1e-5
    ok &= good
    print(f"output{i}: fused {'==' if same else '!='} unfused, rel err vs "
          f"numpy {err:.1e}: {'ok' if good else 'FAIL'}")
sys.exit(0 if ok else 1)
