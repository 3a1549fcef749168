"""ONNX Resize in the modes PyTorch does not export, against the ONNX
spec's formulas in NumPy (float64): for each coordinate transform
(half_pixel, pytorch_half_pixel, align_corners, asymmetric) nearest with
each nearest_mode, linear, and cubic (PyTorch's A = -0.75, the spec's
default; A = -0.5 with exclude_outside), up and down, on a [2, 3, 5, 7]
input. The cubic reference is a transcription of the spec's reference
implementation (onnx/reference/ops/op_resize.py: the four nearest points of
the edge-padded input, ratio 0 taken as 1). Builds
each one-node model, compiles and runs it with the modelc tools on PATH,
and prints one line per case; exits 1 at the first that differs by more
than 1e-6 (relative).

    resize_modes.py WORK_DIR
"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def source(o, transform, in_size, out_size, scale):
    if transform == "align_corners":
        return o * (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    if transform == "asymmetric":
        return o / scale
    if transform == "pytorch_half_pixel" and out_size == 1:
        return 0.0
    return (o + 0.5) / scale - 0.5


def nearest_index(x, mode):
    if mode == "floor":
        return np.floor(x)
    if mode == "ceil":
        return np.ceil(x)
    if mode == "round_prefer_ceil":
        return np.floor(x + 0.5)
    return np.ceil(x - 0.5)  # round_prefer_floor


def cubic_coeffs(ratio, a):
    return np.array([
        ((a * (ratio + 1) - 5 * a) * (ratio + 1) + 8 * a) * (ratio + 1)
        - 4 * a,
        ((a + 2) * ratio - (a + 3)) * ratio * ratio + 1,
        ((a + 2) * (1 - ratio) - (a + 3)) * (1 - ratio) * (1 - ratio) + 1,
        ((a * ((1 - ratio) + 1) - 5 * a) * ((1 - ratio) + 1) + 8 * a)
        * ((1 - ratio) + 1) - 4 * a])


def cubic_1d(data, x, a, exclude_outside):
    """The spec's interpolate_1d_with_x for cubic, on a 1-D array."""
    ratio = x - np.floor(x)
    if ratio == 0:
        ratio = 1.0
    coeffs = cubic_coeffs(ratio, a)
    pad = 2
    padded = np.pad(data, pad, mode="edge")
    xp = x + pad
    idxes = sorted(range(len(padded)), key=lambda i: (abs(xp - i), i))[:4]
    idxes = np.array(sorted(idxes))
    points = padded[idxes]
    if exclude_outside:
        for k, i in enumerate(idxes - pad):
            if i < 0 or i >= len(data):
                coeffs[k] = 0
        coeffs = coeffs / coeffs.sum()
    return float(np.dot(coeffs, points))


def reference(x, sizes, mode, transform, nearest_mode, a=-0.75,
              exclude_outside=False):
    y = x.astype(np.float64)
    for axis, out in enumerate(sizes):
        n = y.shape[axis]
        if out == n:
            continue
        scale = out / n
        src = np.array([source(o, transform, n, out, scale)
                        for o in range(out)])
        if mode == "nearest":
            idx = np.clip(nearest_index(src, nearest_mode), 0, n - 1)
            y = np.take(y, idx.astype(np.int64), axis=axis)
            continue
        if mode == "cubic":
            y = np.apply_along_axis(
                lambda row: np.array([cubic_1d(row, s, a, exclude_outside)
                                      for s in src]), axis, y)
            continue
        # The spec's linear: the two neighbours of the source coordinate,
        # the input padded with its edge values.
        i0 = np.floor(src)
        lam = src - i0
        a = np.take(y, np.clip(i0, 0, n - 1).astype(np.int64), axis=axis)
        b = np.take(y, np.clip(i0 + 1, 0, n - 1).astype(np.int64),
                    axis=axis)
        shape = [1] * y.ndim
        shape[axis] = out
        lam = lam.reshape(shape)
        y = a * (1 - lam) + b * lam
    return y


def run_resize(work, name, node, x, sizes, elem):
    """Saves a one-node Resize model of `x` (ONNX type `elem`) to `sizes`,
    compiles and runs it with the modelc tools; returns y in float64."""
    graph = helper.make_graph(
        [node], "resize",
        [helper.make_tensor_value_info("x", elem, list(x.shape))],
        [helper.make_tensor_value_info("y", elem, list(sizes))],
        [numpy_helper.from_array(np.array(sizes, np.int64), "sizes")])
    path = os.path.join(work, name + ".onnx")
    onnx.save(helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    data = os.path.join(work, name + "-x.npy")
    np.save(data, x)
    artifact = os.path.join(work, name + ".mcpk")
    out = os.path.join(work, name)
    for cmd in (["modelc", "compile", path, "-o", artifact],
                ["modelc-run", artifact, "--input", "x=" + data,
                 "--output-dir", out]):
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            sys.exit(f"{name}: {' '.join(cmd)} failed:\n{r.stderr}")
    return np.load(os.path.join(out, "y.npy")).astype(np.float64)


def main():
    work = sys.argv[1]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 5, 7)).astype(np.float32)
    cases = []
    for transform in ("half_pixel", "pytorch_half_pixel", "align_corners",
                      "asymmetric"):
        for nearest_mode in ("round_prefer_floor", "round_prefer_ceil",
                             "floor", "ceil"):
            cases.append(("nearest", transform, nearest_mode))
        cases.append(("linear", transform, "round_prefer_floor"))
        cases.append(("cubic", transform, "round_prefer_floor"))
        cases.append(("cubic", transform, "exclude_outside"))
    for sizes in ((2, 3, 9, 4), (2, 3, 1, 13)):
        for mode, transform, nearest_mode in cases:
            name = f"{mode}-{transform}-{nearest_mode}-{sizes[2]}x{sizes[3]}"
            exclude = nearest_mode == "exclude_outside"
            extra = dict(cubic_coeff_a=-0.5, exclude_outside=1) \
                if exclude else {}
            node = helper.make_node(
                "Resize", ["x", "", "", "sizes"], ["y"], mode=mode,
                coordinate_transformation_mode=transform,
                nearest_mode="round_prefer_floor" if exclude else nearest_mode,
                **extra)
            got = run_resize(work, name, node, x, sizes, TensorProto.FLOAT)
            want = reference(x, sizes, mode, transform, nearest_mode,
                             a=-0.5 if exclude else -0.75,
                             exclude_outside=exclude)
            err = np.linalg.norm(got - want) / np.linalg.norm(want)
            print(f"{name}: rel err {err:.2e}")
            if got.shape != want.shape or not err < 1e-6:
                sys.exit(f"{name}: differs from the ONNX formulas")
    # f16 (resized in f32, rounded once): a constant image near f16's
    # largest value stays itself (cubic's partial sums pass it: summed in
    # f16 they overflowed to inf, then NaN), and a random one is within an
    # ulp of the spec's values rounded to f16.
    for name, x16 in (("cubic-f16-60000", np.full((1, 1, 4, 4), 60000,
                                                 np.float16)),
                      ("cubic-f16-random", (rng.random((1, 2, 5, 6)) *
                                            100).astype(np.float16))):
        sizes = (x16.shape[0], x16.shape[1], 11, 9)
        node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"],
                                mode="cubic")
        got = run_resize(work, name, node, x16, sizes, TensorProto.FLOAT16)
        want = reference(x16.astype(np.float32), sizes, "cubic",
                         "half_pixel", "")
        want16 = want.astype(np.float16).astype(np.float64)
        ulp = np.spacing(np.abs(want16).astype(np.float16)).astype(
            np.float64)
        worst = float(np.max(np.abs(got - want16) / ulp))
        print(f"{name}: worst {worst:.1f} f16 ulp")
        if not np.all(np.isfinite(got)) or worst > 1:
            sys.exit(f"{name}: differs from the ONNX formulas")
    print(f"resize_modes: {2 * len(cases) + 2} cases ok")


if __name__ == "__main__":
    main()
