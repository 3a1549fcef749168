"""Checks the activations that the ONNX importer builds from other ops
(models.py's `activations`) element by element against float64 formulas:
relative error below TOL wherever the exact value is a normal float, and
the same infs and zeros, for every finite x; at x = +-inf, PyTorch's
values (its NaN for softsign and for mish at -inf included). PyTorch is no
reference near 0: its CPU ELU family computes exp(x) - 1 and is off by 20%
at x = -1e-7.

    check_activations.py DIR   (DIR holds x.npy, ref_NAME.npy, out/NAME.npy)
"""
import os
import sys

import numpy as np

TOL = 2e-6


def softplus(x):
    return np.logaddexp(0.0, x)


def elu(x, alpha):
    return np.where(x < 0, alpha * np.expm1(np.minimum(x, 0)), x)


EXACT = {
    "hardsigmoid": lambda x: np.clip(x / 6 + 0.5, 0, 1),
    "elu": lambda x: elu(x, 0.7),
    "selu": lambda x: 1.0507009873554804934193349852946 * elu(
        x, 1.6732632423543772848170429916717),
    "celu": lambda x: np.where(x < 0, 1.3 * np.expm1(np.minimum(x, 0) / 1.3),
                               x),
    "softplus": softplus,
    "mish": lambda x: x * np.tanh(softplus(x)),
    "softsign": lambda x: x / (1 + np.abs(x)),
}


def main():
    d = sys.argv[1]
    x = np.load(os.path.join(d, "x.npy")).astype(np.float64)
    failed = False
    with np.errstate(all="ignore"):
        for name, f in EXACT.items():
            got = np.load(os.path.join(d, "out", name + ".npy")).astype(
                np.float64)
            want = f(x)
            ref = np.load(os.path.join(d, "ref_" + name + ".npy"))
            infinite = ~np.isfinite(x)
            want[infinite] = ref[infinite]
            normal = np.isfinite(want) & (np.abs(want) >= 1.2e-38)
            rel = np.abs(got[normal] - want[normal]) / np.abs(want[normal])
            special = ~normal
            same = np.all((got[special] == want[special]) |
                          np.isnan(got[special]) & np.isnan(want[special]) |
                          (np.abs(want[special]) < 1.2e-38) &
                          (np.abs(got[special]) < 1.2e-38))
            worst = float(rel.max())
            ok = worst < TOL and same
            failed |= not ok
            print(f"{name}: max rel err {worst:.2e}, specials "
                  f"{'equal' if same else 'DIFFER'}: "
                  f"{'ok' if ok else 'FAIL'}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
