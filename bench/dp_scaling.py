#!/usr/bin/python3
"""Data-parallel scaling on the CPU: step time of `modelc-run --train` with 1
process on the global batch and with `mpirun -np 2` (each rank half of it,
gradients averaged by the MPI all-reduce), the scaling efficiency, and the
share of the all-reduce time hidden behind the backward pass. Prints a table.

    bench/dp_scaling.py [--build DIR] [--steps N] [--models digits,wide] [--repeat R]

Models (MLPs with cross-entropy, SGD): `digits` is the 64-128-64-10 MLP of
the tests (17k parameters, 69 KB of gradients, global batch 50); `wide` is
64-1024-1024-1024-10 (2.2M parameters, 8.7 MB, global batch 256), with
2 MB buckets, so three buckets overlap the rest of the backward pass.

Every run is single-threaded per process (MODELC_NUM_THREADS=1), so 2 ranks
use 2 cores where 1 process uses one: efficiency = t1 / t2, the speedup
over 2 (strong scaling, same global batch; 1.0 is perfect).

The all-reduce time comes from the runtime's profile (MODELC_PROFILE=1):
each rank prints the time it was blocked in the all-reduce pair. A second
2-rank run with MODELC_DP_OVERLAP=0 finishes every all-reduce as soon as it
starts, which exposes all of it: hidden = 1 - blocked / blocked(no overlap).

With --repeat R every run is made R times, interleaved (1 rank, half batch,
2 ranks, 2 ranks without overlap, then again), and the table shows medians:
on a machine shared with other jobs single runs vary by 2x.
"""
import argparse
import os
import platform
import re
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODELS = {
    # name: (layer widths, global batch, bucket MB)
    "digits": ([64, 128, 64, 10], 50, 25.0),
    "wide": ([64, 1024, 1024, 1024, 10], 256, 2.0),
}


def run(cmd, env=None):
    e = dict(os.environ)
    e.update(env or {})
    r = subprocess.run(cmd, capture_output=True, text=True, env=e)
    if r.returncode != 0:
        sys.exit(f"dp_scaling.py: {' '.join(cmd)} failed:\n{r.stdout}{r.stderr}")
    return r.stdout + r.stderr


def hexdense(a):
    return '"0x' + a.astype("<f4").tobytes().hex().upper() + '"'


def mlp_mlir(widths, batch, seed=0):
    """A traced-style training graph: relu MLP, cross-entropy on i64 labels."""
    rng = np.random.default_rng(seed)
    lines, body = [], []
    t = lambda *s: "tensor<" + "x".join(map(str, s)) + "xf32>"
    h = "%x"
    for k, (i, o) in enumerate(zip(widths[:-1], widths[1:])):
        bound = 1 / np.sqrt(i)
        w = rng.uniform(-bound, bound, (o, i)).astype(np.float32)
        b = rng.uniform(-bound, bound, (o,)).astype(np.float32)
        lines.append(f'  ml_program.global private @"{k}.weight"(dense<{hexdense(w)}> : {t(o, i)}) : {t(o, i)}')
        lines.append(f'  ml_program.global private @"{k}.bias"(dense<{hexdense(b)}> : {t(o)}) : {t(o)}')
        body += [
            f'    %w{k} = ml_program.global_load_const @"{k}.weight" : {t(o, i)}',
            f'    %m{k} = mc.matmul {h}, %w{k} transpose_b : {t(batch, i)}, {t(o, i)} -> {t(batch, o)}',
            f'    %b{k} = ml_program.global_load_const @"{k}.bias" : {t(o)}',
            f'    %bb{k} = mc.broadcast_in_dim %b{k}, dims = [1] : ({t(o)}) -> {t(batch, o)}',
            f'    %a{k} = mc.add %m{k}, %bb{k} : {t(batch, o)}',
        ]
        h = f"%a{k}"
        if k < len(widths) - 2:
            body.append(f'    %r{k} = mc.relu %a{k} : {t(batch, o)}')
            h = f"%r{k}"
    c = widths[-1]
    cls = ", ".join(map(str, range(c)))
    body += [
        f'    %y1 = mc.reshape %y : (tensor<{batch}xi64>) -> tensor<{batch}x1xi64>',
        f'    %yb = mc.broadcast_in_dim %y1, dims = [0, 1] : (tensor<{batch}x1xi64>) -> tensor<{batch}x{c}xi64>',
        f'    %cl = mc.constant dense<[[{cls}]]> : tensor<1x{c}xi64>',
        f'    %clb = mc.broadcast_in_dim %cl, dims = [0, 1] : (tensor<1x{c}xi64>) -> tensor<{batch}x{c}xi64>',
        f'    %eq = mc.compare EQ, %yb, %clb : (tensor<{batch}x{c}xi64>, tensor<{batch}x{c}xi64>) -> tensor<{batch}x{c}xi1>',
        f'    %oh = mc.cast %eq : tensor<{batch}x{c}xi1> to {t(batch, c)}',
        f'    %ls = mc.log_softmax {h}, axis = 1 : {t(batch, c)}',
        f'    %pr = mc.mul %ls, %oh : {t(batch, c)}',
        f'    %rs = mc.reduce_sum %pr, dims = [1] : ({t(batch, c)}) -> {t(batch)}',
        f'    %mn = mc.reduce_mean %rs, dims = [0] : ({t(batch)}) -> tensor<f32>',
        f'    %loss = mc.neg %mn : tensor<f32>',
        f'    return %loss : tensor<f32>',
    ]
    return "\n".join(
        ["module {"] + lines +
        [f'  func.func @forward(%x: {t(batch, widths[0])} {{mc.name = "x"}}, '
         f'%y: tensor<{batch}xi64> {{mc.name = "y"}}) -> (tensor<f32> {{mc.name = "loss"}}) {{']
        + body + ["  }", "}"]) + "\n"


def profile(out, rank0_only=True):
    """(ms per run, blocked ms per step) of rank 0 from MODELC_PROFILE."""
    runs = [float(m) for m in re.findall(r"runs, ([0-9.]+) ms per run", out)]
    blocked = {int(r): float(b) for r, b in
               re.findall(r"rank (\d+): all-reduce: .* \(([0-9.]+) ms per step\)", out)}
    return runs, blocked


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--models", default="digits,wide")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    bins = os.path.join(args.build, "bin")
    modelc, mrun = os.path.join(bins, "modelc"), os.path.join(bins, "modelc-run")
    mpirun = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2"]
    one = {"MODELC_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MODELC_PROFILE": "1"}
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for name in args.models.split(","):
            widths, batch, bucket = MODELS[name]
            rng = np.random.default_rng(1)
            n = batch * args.steps
            np.save(f"{d}/x.npy", rng.standard_normal((n, widths[0])).astype(np.float32))
            np.save(f"{d}/y.npy", rng.integers(0, widths[-1], n).astype(np.int64))
            data = ["--data", f"x={d}/x.npy", "--data", f"y={d}/y.npy",
                    "--batch", str(batch), "--epochs", "1", "--quiet"]
            for b, ranks in ((batch, 1), (batch // 2, 2)):
                with open(f"{d}/{name}{ranks}.mlir", "w") as f:
                    f.write(mlp_mlir(widths, b))
                cmd = [modelc, "compile", f"{d}/{name}{ranks}.mlir", "--train",
                       "--optimizer=sgd", "--lr=0.01", "-o", f"{d}/{name}{ranks}.mcpk"]
                if ranks > 1:
                    cmd += [f"--dp-ranks={ranks}", f"--dp-bucket-mb={bucket}"]
                run(cmd)
            # One rank's compute alone: the per-rank step without collectives.
            run([modelc, "compile", f"{d}/{name}2.mlir", "--train", "--optimizer=sgd",
                 "--lr=0.01", "-o", f"{d}/{name}h.mcpk"])
            half = list(data)
            half[half.index("--batch") + 1] = str(batch // 2)
            s1, sh, s2, s2n, bo, bn = [], [], [], [], [], []
            for _ in range(args.repeat):
                t1, _ = profile(run([mrun, "--train", f"{d}/{name}1.mcpk"] + data, one))
                th, _ = profile(run([mrun, "--train", f"{d}/{name}h.mcpk"] + half, one))
                t2, blocked = profile(run(mpirun + [mrun, "--train", f"{d}/{name}2.mcpk"] + data, one))
                t2n, blockedn = profile(run(mpirun + [mrun, "--train", f"{d}/{name}2.mcpk"] + data,
                                            dict(one, MODELC_DP_OVERLAP="0")))
                s1.append(t1[0]); sh.append(th[0]); s2.append(max(t2)); s2n.append(max(t2n))
                bo.append(np.mean(list(blocked.values()))); bn.append(np.mean(list(blockedn.values())))
            buckets = run([modelc, "compile", f"{d}/{name}2.mlir", "--train",
                     f"--dp-ranks=2", f"--dp-bucket-mb={bucket}",
                     "--emit=mc-opt"]).count("mc.all_reduce_start")
            params = sum(i * o + o for i, o in zip(widths[:-1], widths[1:]))
            med = lambda v: float(np.median(v))
            step1, step2, step2n = med(s1), med(s2), med(s2n)
            b_ov, b_no = med(bo), med(bn)
            rows.append((name, params, batch, buckets, step1, med(sh), step2, step2n,
                         step1 / step2, b_ov, b_no, 1 - b_ov / b_no if b_no > 0 else float("nan")))
    print(f"machine: {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores; {args.steps} steps per run, 1 thread per process"
          + (f"; medians of {args.repeat} interleaved runs" if args.repeat > 1 else ""))
    print("| model | params | global batch | buckets | 1 rank ms/step | 1 rank, half batch "
          "| 2 ranks ms/step | 2 ranks, no overlap | efficiency t1/(2 t2) | all-reduce blocked "
          "ms/step (overlap / none) | hidden |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for (name, params, batch, buckets, s1, sh, s2, s2n, speed, bo, bn, hid) in rows:
        print(f"| {name} | {params:,} | {batch} | {buckets} | {s1:.3f} | {sh:.3f} | {s2:.3f} | {s2n:.3f} "
              f"| {speed / 2:.2f} (speedup {speed:.2f}) | {bo:.3f} / {bn:.3f} | {hid:.0%} |")


if __name__ == "__main__":
    main()
