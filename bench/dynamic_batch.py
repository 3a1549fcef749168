#!/usr/bin/python3
"""One dynamic-batch artifact against static artifacts, per batch size:
median latency of `modelc-run --bench N --batch B` on the artifact compiled
once with --batch=1..64@32, and on artifacts compiled for exactly batch B
(--input-shape x=B...), same machine, same run. Prints a table; the ratio
dynamic / static (1.00 = no cost; < 1 faster) is what issue 8 asks about.

    bench/dynamic_batch.py [--build DIR] [--runs N] [--batches 1,64]
                           [--models mlp,cnn,resnet18,transformer]

Each model is exported by test/onnx/Inputs/dynamic_batch.py (PyTorch, a
symbolic batch), and each artifact's output is checked against PyTorch's
first (a benchmark of a wrong answer is worthless).
"""
import argparse
import os
import platform
import re
import sys
import tempfile

import numpy as np

from benchlib import log, run

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXPORT = os.path.join(ROOT, "test", "onnx", "Inputs", "dynamic_batch.py")
SHAPES = {"mlp": (64,), "cnn": (3, 17, 17), "resnet18": (3, 64, 64),
          "transformer": (8, 64)}


def bench(bindir, artifact, x, batch, runs, outdir):
    out = run([os.path.join(bindir, "modelc-run"), artifact, "--input",
               f"x={x}", "--output-dir", outdir, "--bench", str(runs),
               "--batch", str(batch)])
    m = re.search(r"median ([0-9.]+) ms", out)
    if not m:
        sys.exit(f"dynamic_batch.py: no timing in:\n{out}")
    return float(m.group(1))


def check(bindir, artifact, x, ref, outdir):
    run([os.path.join(bindir, "modelc-run"), artifact, "--input", f"x={x}",
         "--output-dir", outdir])
    got, want = np.load(os.path.join(outdir, "y.npy")), np.load(ref)
    err = float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))
    if err > 1e-5:
        sys.exit(f"dynamic_batch.py: {artifact} at {x}: rel err {err:.2e}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--batches", default="1,64")
    ap.add_argument("--models", default="mlp,cnn,resnet18,transformer")
    args = ap.parse_args()
    bindir = os.path.join(args.build, "bin")
    batches = [int(b) for b in args.batches.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            d = os.path.join(tmp, name)
            log(f"{name}: export with a symbolic batch")
            run([sys.executable, EXPORT, name, d, "--batches",
                 ",".join(map(str, batches))])
            onnx = os.path.join(d, name + ".onnx")
            dyn = os.path.join(d, "dynamic.mcpk")
            run([os.path.join(bindir, "modelc"), "compile", onnx,
                 "--batch=1..64@32", "-o", dyn])
            for b in batches:
                x, ref = os.path.join(d, f"x_{b}.npy"), os.path.join(
                    d, f"ref_{b}.npy")
                static = os.path.join(d, f"static_{b}.mcpk")
                dims = "x".join(str(v) for v in (b,) + SHAPES[name])
                run([os.path.join(bindir, "modelc"), "compile", onnx,
                     f"--input-shape=x={dims}", "-o", static])
                out = os.path.join(d, "out")
                check(bindir, dyn, x, ref, out)
                check(bindir, static, x, ref, out)
                log(f"{name}: batch {b}: timing {args.runs} runs each")
                # Interleaved twice, best median of each: less drift.
                s = min(bench(bindir, static, x, b, args.runs, out),
                        bench(bindir, static, x, b, args.runs, out))
                t = min(bench(bindir, dyn, x, b, args.runs, out),
                        bench(bindir, dyn, x, b, args.runs, out))
                rows.append((name, b, s, t))
    print(f"machine: {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores; modelc-run --bench {args.runs}, median "
          f"ms (best of 2)")
    print()
    print("| model | batch | static artifact (ms) | dynamic 1..64 (ms) | "
          "dynamic / static |")
    print("|---|---:|---:|---:|---:|")
    for name, b, s, t in rows:
        print(f"| {name} | {b} | {s:.4f} | {t:.4f} | {t / s:.2f} |")


if __name__ == "__main__":
    main()
