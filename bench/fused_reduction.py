#!/usr/bin/python3
"""Regions ending in a reduction over long rows, in one run on this
machine: modelc's default plan (mc-fuse splits a reduction of more than
65536 elements to one value in two: over rows of its trailing dims, which
end the region, then over the partials: max-full-reduction), the plan
without that rule (the reduction ends the region: its tiles hold whole
rows, here one), modelc --no-fuse, and PyTorch eager. Median latency
of `modelc-run --bench N`, and of N PyTorch calls; the ratio to the
default plan.

    bench/fused_reduction.py [--build DIR] [--runs N]

Cases: the mean squared error of two image batches (one row of 9.6M
elements: a loss, the case of the rule), the same over 8 rows of 1.2M and
a row sum of exp over 4096 rows of 512 (rows the rule leaves fused: the
same plan both ways, a control of the noise). Each plan's
result is checked against PyTorch first.
"""
import argparse
import os
import platform
import re
import sys
import tempfile
import time

import numpy as np

from benchlib import log, run

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# name, shape, reduced dims, body ("mse": mean((x - y)^2), "expsum": sum(exp(x)))
CASES = [
    ("mse, one row of 9.6M", (64, 3, 224, 224), (0, 1, 2, 3), "mse"),
    ("mse, 8 rows of 1.2M", (8, 3, 224, 224 * 8), (1, 2, 3), "mse"),
    ("sum(exp), 4096 rows of 512", (4096, 512), (1,), "expsum"),
]


def mlir(shape, dims, body):
    t = "tensor<" + "x".join(map(str, shape)) + "xf32>"
    kept = [d for i, d in enumerate(shape) if i not in dims]
    r = "tensor<" + "".join(f"{d}x" for d in kept) + "f32>"
    dl = ", ".join(map(str, dims))
    if body == "mse":
        return (f'func.func @forward(%x: {t} {{mc.name = "x"}}, %y: {t} '
                f'{{mc.name = "y"}}) -> ({r} {{mc.name = "out"}}) {{\n'
                f"  %d = mc.sub %x, %y : {t}\n"
                f"  %s = mc.mul %d, %d : {t}\n"
                f"  %l = mc.reduce_mean %s, dims = [{dl}] : ({t}) -> {r}\n"
                f"  return %l : {r}\n}}\n")
    return (f'func.func @forward(%x: {t} {{mc.name = "x"}}) -> ({r} '
            f'{{mc.name = "out"}}) {{\n'
            f"  %e = mc.exp %x : {t}\n"
            f"  %l = mc.reduce_sum %e, dims = [{dl}] : ({t}) -> {r}\n"
            f"  return %l : {r}\n}}\n")


def torch_fn(body, dims):
    import torch
    if body == "mse":
        return lambda x, y: ((x - y) ** 2).mean(dim=dims)
    return lambda x: torch.exp(x).sum(dim=dims)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--runs", type=int, default=20)
    a = ap.parse_args()
    bindir = os.path.join(a.build, "bin")
    modelc, opt = os.path.join(bindir, "modelc"), os.path.join(bindir, "modelc-opt")
    import torch
    torch.set_num_threads(os.cpu_count())
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, shape, dims, body in CASES:
            log(f"fused_reduction.py: {name}")
            rng = np.random.default_rng(1)
            names = ["x", "y"] if body == "mse" else ["x"]
            arrays = {n: rng.random(shape, dtype=np.float32) for n in names}
            inputs = []
            for n, v in arrays.items():
                np.save(os.path.join(tmp, f"{n}.npy"), v)
                inputs += ["--input", f"{n}={os.path.join(tmp, n + '.npy')}"]
            src = os.path.join(tmp, "m.mlir")
            open(src, "w").write(mlir(shape, dims, body))
            # The plan before the rule: mc-fuse with no limit, then compile
            # (the regions are made already).
            before = os.path.join(tmp, "before.mlir")
            run([opt, src, "--mc-fuse=max-full-reduction=9223372036854775807",
                 "-o", before])
            plans = {
                "default": [modelc, "compile", src],
                "without the rule": [modelc, "compile", before],
                "--no-fuse": [modelc, "compile", src, "--no-fuse"],
            }
            fn = torch_fn(body, dims)
            targs = [torch.from_numpy(v) for v in arrays.values()]
            want = fn(*targs).numpy()
            times = {}
            for label, cmd in plans.items():
                art = os.path.join(tmp, "a.mcpk")
                run(cmd + ["-o", art])
                out = os.path.join(tmp, "out")
                run([os.path.join(bindir, "modelc-run"), art, *inputs,
                     "--output-dir", out])
                got = np.load(os.path.join(out, "out.npy"))
                err = float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))
                if err > 1e-4:
                    sys.exit(f"fused_reduction.py: {name}, {label}: rel err {err:.2e}")
                m = re.search(r"median ([0-9.]+) ms",
                              run([os.path.join(bindir, "modelc-run"), art, *inputs,
                                   "--bench", str(a.runs)]))
                times[label] = float(m.group(1))
            fn(*targs)  # warm-up
            samples = []
            for _ in range(a.runs):
                t0 = time.perf_counter()
                fn(*targs)
                samples.append((time.perf_counter() - t0) * 1e3)
            times["PyTorch eager"] = float(np.median(samples))
            rows.append((name, times))
    print(f"\nmachine: {platform.node()}, {os.cpu_count()} cores; "
          f"PyTorch {torch.__version__}; median of {a.runs} runs, ms "
          f"(ratio to modelc's default plan; > 1 is slower)\n")
    labels = list(rows[0][1])
    print("| case | " + " | ".join(labels) + " |")
    print("|---|" + "---:|" * len(labels))
    for name, times in rows:
        base = times["default"]
        cells = [f"{times[l]:.2f} ({times[l] / base:.2f}x)" for l in labels]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
