#!/usr/bin/python3
"""modelc vs PyTorch on CPU: median latency of the same model, same weights,
same machine, same thread count, measured in one run. Prints a table.

    bench/cpu_vs_pytorch.py [--build DIR] [--threads N] [--runs N] [--quick]

For each model: build it in PyTorch with random weights (seeded), export it to
ONNX, `modelc import` + `modelc compile` it, check modelc's output against
PyTorch's (a benchmark of a wrong answer is worthless), then time
`modelc-run --bench N` and PyTorch eager (torch.no_grad, eval) with N runs
after warm-up, and report medians and the ratio modelc / PyTorch (< 1 means
modelc is faster).

Needs Debian's python3-torch, python3-torchvision, python3-onnx, python3-numpy.
"""
import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torchvision


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class LstmModel(torch.nn.Module):
    """nn.LSTM's output sequence, as a speech or text encoder uses it (ONNX
    LSTM, which modelc unrolls over the sequence at import)."""

    def __init__(self, input_size, hidden_size, num_layers):
        super().__init__()
        self.lstm = torch.nn.LSTM(input_size, hidden_size, num_layers,
                                  batch_first=True)

    def forward(self, x):
        return self.lstm(x)[0]


class MlpModel(torch.nn.Module):
    """Linear + ReLU layers of one width, then a 10-way head: the small-batch
    serving case, where each product has a few rows and the weights are
    all the memory traffic."""

    def __init__(self, width, layers):
        super().__init__()
        mods = []
        for _ in range(layers - 1):
            mods += [torch.nn.Linear(width, width), torch.nn.ReLU()]
        mods.append(torch.nn.Linear(width, 10))
        self.net = torch.nn.Sequential(*mods)

    def forward(self, x):
        return self.net(x)


def models(quick):
    torch.manual_seed(0)
    resnet = torchvision.models.resnet18(weights=None).eval()
    layer = torch.nn.TransformerEncoderLayer(
        d_model=128, nhead=4, dim_feedforward=512, dropout=0.0,
        batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, num_layers=2).eval()
    mlp = MlpModel(1024, 3).eval()
    seq = 32 if quick else 128
    return [
        ("resnet18", resnet, 1, (1, 3, 224, 224)),
        ("resnet18", resnet, 8, (8, 3, 224, 224)),
        (f"transformer-encoder (2x d128 h4, seq {seq})", encoder, 8,
         (8, seq, 128)),
        (f"lstm (2x h256, seq {seq // 4})", LstmModel(128, 256, 2).eval(), 8,
         (8, seq // 4, 128)),
        ("mlp (3x 1024 wide)", mlp, 1, (1, 1024)),
        ("mlp (3x 1024 wide)", mlp, 16, (16, 1024)),
    ]


def time_torch(model, x, runs, warmup):
    with torch.no_grad():
        for _ in range(warmup):
            model(x)
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            model(x)
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def run(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit(f"command failed ({r.returncode}): {' '.join(cmd)}\n"
                         f"{r.stdout}{r.stderr}")
    return r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "build"))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--quick", action="store_true",
                    help="fewer runs and a shorter sequence (smoke test)")
    args = ap.parse_args()
    if args.quick:
        args.runs = 3
    bindir = os.path.join(args.build, "bin")
    modelc = os.path.join(bindir, "modelc")
    modelc_run = os.path.join(bindir, "modelc-run")

    torch.set_num_threads(args.threads)
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(args.threads),
               OMP_NUM_THREADS=str(args.threads))
    warmup = 2 if args.quick else 5
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, model, batch, shape in models(args.quick):
            log(f"bench: {name}, batch {batch}: export, import, compile")
            x = torch.randn(*shape)
            onnx_path = os.path.join(tmp, "m.onnx")
            torch.onnx.export(model, (x,), onnx_path, opset_version=17,
                              input_names=["x"], output_names=["y"])
            mlir = os.path.join(tmp, "m.mlir")
            art = os.path.join(tmp, "m.mcpk")
            run([modelc, "import", onnx_path, "-o", mlir])
            run([modelc, "compile", mlir, "-o", art])
            np.save(os.path.join(tmp, "x.npy"), x.numpy())
            with torch.no_grad():
                ref = model(x).numpy()
            out_dir = os.path.join(tmp, "out")
            out = run([modelc_run, art, "--input",
                       f"x={os.path.join(tmp, 'x.npy')}", "--output-dir",
                       out_dir, "--bench", str(args.runs)], env=env)
            got = np.load(os.path.join(out_dir, "y.npy"))
            rel = float(np.linalg.norm(got.astype(np.float64) - ref) /
                        np.linalg.norm(ref))
            m = re.search(r"median ([0-9.]+) ms", out)
            if not m:
                raise SystemExit(f"no median in modelc-run output:\n{out}")
            mc_ms = float(m.group(1))
            log(f"bench: {name}, batch {batch}: timing PyTorch")
            pt_ms = time_torch(model, x, args.runs, warmup)
            rows.append((name, batch, mc_ms, pt_ms, mc_ms / pt_ms, rel))

    print(f"\nmodelc vs PyTorch {torch.__version__} (CPU eager, no_grad), "
          f"{args.threads} threads, median of {args.runs} runs")
    print(f"machine: {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores\n")
    header = ("model", "batch", "modelc ms", "PyTorch ms", "ratio",
              "rel err")
    print(f"| {header[0]:<40} | {header[1]:>5} | {header[2]:>10} | "
          f"{header[3]:>10} | {header[4]:>6} | {header[5]:>8} |")
    print(f"|{'-' * 42}|{'-' * 7}|{'-' * 12}|{'-' * 12}|{'-' * 8}|"
          f"{'-' * 10}|")
    for name, batch, mc_ms, pt_ms, ratio, rel in rows:
        print(f"| {name:<40} | {batch:>5} | {mc_ms:>10.2f} | {pt_ms:>10.2f} "
              f"| {ratio:>6.2f} | {rel:>8.1e} |")
    print("\nratio = modelc / PyTorch: below 1.00 modelc is faster.")
    bad = [r for r in rows if not r[5] < 1e-4]
    if bad:
        raise SystemExit("modelc's output differs from PyTorch's "
                         "(rel err >= 1e-4): the timings above are void")


if __name__ == "__main__":
    main()
