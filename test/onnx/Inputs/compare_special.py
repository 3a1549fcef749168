"""Compares modelc's outputs with PyTorch's where NaN and inf are part of
the answer (modelc compare refuses NaN): the same shapes, NaN in the same
places, the same infinities, bools equal, and finite values within TOL of
max(1, |ref|); with `:signs`, zeros of the same sign too (floor(-0.0) is
-0.0). Prints one line per output; exits 1 if any differs.

    compare_special.py OUT_DIR REF_DIR NAME[:TOL[:signs]] ...   (TOL default 0)
"""
import os
import sys

import numpy as np


def main():
    out, ref = sys.argv[1], sys.argv[2]
    failed = False
    for spec in sys.argv[3:]:
        name, _, rest = spec.partition(":")
        tol, _, mode = rest.partition(":")
        tol = float(tol or 0)
        a = np.load(os.path.join(out, name + ".npy")).astype(np.float64)
        b = np.load(os.path.join(ref, "ref_" + name + ".npy")).astype(
            np.float64)
        ok = a.shape == b.shape
        if ok:
            ok = (np.array_equal(np.isnan(a), np.isnan(b)) and
                  np.array_equal(a[np.isinf(b)], b[np.isinf(b)]))
            finite = np.isfinite(b)
            err = (np.abs(a[finite] - b[finite]) /
                   np.maximum(1.0, np.abs(b[finite])))
            worst = float(err.max()) if err.size else 0.0
            ok = ok and worst <= tol
            if mode == "signs":
                zeros = b == 0
                ok = ok and np.array_equal(np.signbit(a[zeros]),
                                           np.signbit(b[zeros]))
        else:
            worst = float("nan")
        failed |= not ok
        print(f"{name}: {'ok' if ok else 'FAIL'} (max err {worst:.2e}, "
              f"shape {a.shape} vs {b.shape})")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
