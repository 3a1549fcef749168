#!/usr/bin/env python3
"""modelc on the CUDA device against PyTorch eager and torch.compile on the
same GPU, in the same call: bf16 inference of an MLP (batch 4096, 3 layers
of width 4096), ResNet-50 (batch 128, 224x224) and a transformer encoder
(batch 32, seq 512, d_model 768, 12 heads, 4 layers); AMP (bf16)
training steps of the MLP and the transformer with AdamW. PyTorch runs
ResNet-50 channels_last (its recommended layout for AMP convolutions;
modelc's cuda target runs them NHWC too). Prints
one table: median time, modelc's ratio to each peer, achieved TFLOP/s and
GB/s against ceilings measured in the same call (a 8192^3 bf16 matmul, a
1 GiB device-to-device copy), and modelc's compile time (measured at
--prepare) and load-to-first-result time.

Two halves, because the GPU machine has no MLIR:

    bench/gpu_peers.py --prepare DIR [--modelc PATH]   (here: torch 1.13)
        exports each model to ONNX and compiles it with
        `modelc compile --target cuda --amp=bf16`, writing
        DIR/NAME.mcpk.gz and DIR/manifest.json (shapes, FLOPs, bytes,
        compile seconds). Weights: every parameter is one seeded random
        block of 4096 values tiled, so an artifact gzips to a few MB (the
        device tool carries 64 MiB; ResNet-50's bf16 weights alone are
        51 MB, the transformer's f32 113 MB). Speed does not depend on the
        values; correctness is test/gpu/check_models.py's job.
        The training rows' artifacts come from modelc-train-graphs (next
        to modelc; bench/train_graphs): the same models traced in the C++
        frontend with the loss mean(model(x)^2), compiled with `--train
        --optimizer=adamw --lr=1e-4 --amp=bf16 --target cuda`
        (DIR/NAME_train.mcpk.gz, DIR/train.json).
    bench/gpu_peers.py DIR [--modelc-run PATH] [--runs N]   (the GPU machine)
        times everything; prints "skipped: no GPU" and exits 0 where
        torch sees no CUDA device.

The training rows start PyTorch from modelc's weights (every parameter
tiles the param_block.npy that --prepare copies next to train.json) and
train both on the same batch: the note column compares modelc's first 3
losses (`modelc-run --train --device cuda`) with PyTorch's, and says
"DIFFER" when they are more than 5e-2 apart (bf16 AMP on both sides).

modelc's time is `modelc-run --bench N --device cuda` (median of N runs
after warm-up, CUDA graphs replayed); load-to-first-result is the wall
time of one `modelc-run` process that loads the artifact, runs it once
and copies the outputs back (process start and CUDA init included).
PyTorch's times are CUDA-event medians of N runs after 3 warm-ups.
"""
import argparse
import csv
import gzip
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

MODELS = {
    # name: (input name, input shape)
    "mlp": ("x", [4096, 4096]),
    "resnet50": ("image", [128, 3, 224, 224]),
    "transformer": ("src", [32, 512, 768]),
}


def build(name, torch, dropout=0.1):
    nn = torch.nn
    if name == "mlp":
        return nn.Sequential(nn.Linear(4096, 4096), nn.ReLU(),
                             nn.Linear(4096, 4096), nn.ReLU(),
                             nn.Linear(4096, 4096))
    if name == "resnet50":
        import torchvision
        return torchvision.models.resnet50(weights=None)
    layer = nn.TransformerEncoderLayer(d_model=768, nhead=12,
                                       dim_feedforward=3072, dropout=dropout,
                                       batch_first=True)
    return nn.TransformerEncoder(layer, num_layers=4,
                                 enable_nested_tensor=False)


def tile_weights(model, torch):
    """Every parameter: one seeded block of 4096 values, tiled (gzips)."""
    g = torch.Generator().manual_seed(0)
    block = torch.randn(4096, generator=g) * 0.02
    with torch.no_grad():
        for p in model.parameters():
            n = p.numel()
            v = block.repeat(math.ceil(n / 4096))[:n].view_as(p)
            p.copy_(v)


def flops_bytes(name):
    """Forward FLOPs and the bytes a pass must move at least (bf16 weights,
    input and output), per run."""
    if name == "mlp":
        b, w = 4096, 4096
        return 3 * 2 * b * w * w, 2 * (3 * w * w + 2 * b * w)
    if name == "resnet50":
        return 128 * 2 * 4.09e9, 2 * (25.6e6 + 128 * 3 * 224 * 224 + 128 * 1000)
    b, s, d, ff, layers = 32, 512, 768, 3072, 4
    per = 2 * b * s * (4 * d * d + 2 * d * ff) + 2 * 2 * b * s * s * d
    return layers * per, 2 * (layers * (4 * d * d + 2 * d * ff) + 2 * b * s * d)


def prepare(args):
    import torch
    os.makedirs(args.prepare, exist_ok=True)
    manifest = {}
    for name, (inp, shape) in MODELS.items():
        torch.manual_seed(0)
        model = build(name, torch).eval()
        tile_weights(model, torch)
        with tempfile.TemporaryDirectory() as tmp:
            onnx = os.path.join(tmp, name + ".onnx")
            torch.onnx.export(model, (torch.zeros(*shape),), onnx,
                              input_names=[inp], output_names=["y"],
                              opset_version=13)
            art = os.path.join(tmp, name + ".mcpk")
            t0 = time.perf_counter()
            p = subprocess.run([args.modelc, "compile", onnx, "--target",
                                "cuda", "--amp=bf16", "-o", art],
                               capture_output=True, text=True)
            secs = time.perf_counter() - t0
            entry = {"input": inp, "shape": shape, "compile_s": secs}
            if p.returncode != 0:
                entry["error"] = (p.stderr or p.stdout).strip()[-300:]
                print(f"{name}: compile failed: {entry['error']}")
            else:
                with open(art, "rb") as f, \
                        gzip.open(os.path.join(args.prepare, name + ".mcpk.gz"),
                                  "wb", compresslevel=6) as g:
                    shutil.copyfileobj(f, g)
                print(f"{name}: compiled in {secs:.1f} s, "
                      f"{os.path.getsize(art) / 2**20:.1f} MiB, gzip "
                      f"{os.path.getsize(os.path.join(args.prepare, name + '.mcpk.gz')) / 2**20:.1f} MiB")
        manifest[name] = entry
    json.dump(manifest, open(os.path.join(args.prepare, "manifest.json"), "w"),
              indent=1)
    return prepare_training(args)


def prepare_training(args):
    """The training rows' artifacts: modelc-train-graphs traces the graphs,
    modelc compiles each into an AMP AdamW step for cuda."""
    graphs = args.train_graphs or os.path.join(
        os.path.dirname(os.path.abspath(args.modelc)), "modelc-train-graphs")
    train = {}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            p = subprocess.run([graphs, tmp], capture_output=True, text=True)
        except OSError as e:  # not built, not executable
            p = subprocess.CompletedProcess([graphs], 1, "", str(e))
        for name in ("mlp", "transformer"):
            entry = {"input": "x", "shape": MODELS[name][1]}
            if p.returncode != 0:
                entry["error"] = ("modelc-train-graphs: " +
                                  (p.stderr or p.stdout).strip())[-300:]
                print(f"{name} train: {entry['error']}")
                train[name] = entry
                continue
            art = os.path.join(tmp, name + "_train.mcpk")
            t0 = time.perf_counter()
            c = subprocess.run([args.modelc, "compile",
                                os.path.join(tmp, name + "_train.mlir"),
                                "--train", "--optimizer=adamw", "--lr=1e-4",
                                "--amp=bf16", "--target", "cuda", "-o", art],
                               capture_output=True, text=True)
            entry["compile_s"] = time.perf_counter() - t0
            if c.returncode != 0:
                entry["error"] = (c.stderr or c.stdout).strip()[-300:]
                print(f"{name} train: compile failed: {entry['error']}")
            else:
                gz = os.path.join(args.prepare, name + "_train.mcpk.gz")
                with open(art, "rb") as f, gzip.open(gz, "wb",
                                                     compresslevel=6) as g:
                    shutil.copyfileobj(f, g)
                print(f"{name} train: compiled in {entry['compile_s']:.1f} s, "
                      f"{os.path.getsize(art) / 2**20:.1f} MiB, gzip "
                      f"{os.path.getsize(gz) / 2**20:.1f} MiB")
                os.remove(art)
            train[name] = entry
        # The values every parameter tiles: the run's PyTorch models start
        # from the same weights, so the losses can be compared.
        block = os.path.join(tmp, "param_block.npy")
        if os.path.exists(block):
            shutil.copy(block, os.path.join(args.prepare, "param_block.npy"))
    json.dump(train, open(os.path.join(args.prepare, "train.json"), "w"),
              indent=1)
    return 0


def tile_parameters(torch, model, block):
    """Every parameter tiles `block`, as modelc-train-graphs tiles its own
    (bench/train_worker.py does the same on the CPU)."""
    with torch.no_grad():
        for p in model.parameters():
            n = p.numel()
            reps = (n + block.numel() - 1) // block.numel()
            p.copy_(block.repeat(reps)[:n].view_as(p))


def cuda_median(torch, fn, runs):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def ceilings(torch, runs):
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    ms = cuda_median(torch, lambda: a @ a, runs)
    tflops = 2 * 8192**3 / ms / 1e9
    src = torch.empty(2**30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = cuda_median(torch, lambda: dst.copy_(src), runs)
    gbs = 2 * 2**30 / ms / 1e6  # read + write
    return tflops, gbs


def modelc_times(art, inp, shape, modelc_run, runs, tmp):
    import numpy as np
    x = os.path.join(tmp, "x.npy")
    np.save(x, np.random.default_rng(0).standard_normal(shape, np.float32))
    t0 = time.perf_counter()
    p = subprocess.run([modelc_run, art, "--input", f"{inp}={x}",
                        "--output-dir", os.path.join(tmp, "out"),
                        "--device", "cuda"], capture_output=True, text=True)
    first = time.perf_counter() - t0
    if p.returncode != 0:
        return None, None, p.stderr.strip()[-200:]
    p = subprocess.run([modelc_run, art, "--input", f"{inp}={x}", "--bench",
                        str(runs), "--device", "cuda"],
                       capture_output=True, text=True)
    m = re.search(r"median ([0-9.]+) ms", p.stdout + p.stderr)
    if not m:
        return None, first, (p.stderr or p.stdout).strip()[-200:]
    return float(m.group(1)), first, ""


TRAIN_CHECK_STEPS = 3
TRAIN_LOSS_REL_MAX = 5e-2  # bf16 AMP on both sides, other op orders


def modelc_train_losses(art, x_np, modelc_run, tmp):
    """modelc's first TRAIN_CHECK_STEPS losses on the cuda device, training
    on copies of one batch (the first before any update); or an error."""
    import numpy as np
    data = os.path.join(tmp, "train_data.npy")
    np.save(data, np.concatenate([x_np] * TRAIN_CHECK_STEPS))
    log_csv = os.path.join(tmp, "train_log.csv")
    p = subprocess.run([modelc_run, "--train", art, "--data", f"x={data}",
                        "--batch", str(x_np.shape[0]), "--epochs", "1",
                        "--log-csv", log_csv, "--device", "cuda", "--quiet"],
                       capture_output=True, text=True)
    os.remove(data)
    if p.returncode != 0:
        return None, "modelc-run --train: " + (p.stderr or p.stdout).strip()[-200:]
    with open(log_csv) as f:
        return [float(r["loss"]) for r in csv.DictReader(f)], ""


def run(args):
    try:
        import torch
    except ImportError:
        print("skipped: no GPU (no torch)")
        return 0
    if not torch.cuda.is_available():
        print("skipped: no GPU")
        return 0
    manifest = json.load(open(os.path.join(args.dir, "manifest.json")))
    peak_tflops, peak_gbs = ceilings(torch, args.runs)
    dev = torch.cuda.get_device_name()
    print(f"device: {dev}; torch {torch.__version__}; ceilings: bf16 matmul "
          f"{peak_tflops:.0f} TFLOP/s, D2D copy {peak_gbs:.0f} GB/s")
    rows = []
    tmp = tempfile.mkdtemp()
    for name, e in manifest.items():
        torch.manual_seed(0)
        model = build(name, torch).eval().cuda().to(torch.bfloat16)
        x = torch.randn(*e["shape"], device="cuda", dtype=torch.bfloat16)
        if name == "resnet50":
            # PyTorch at its best for convolutions on tensor cores, the
            # layout modelc's cuda target runs them in too (NHWC).
            model = model.to(memory_format=torch.channels_last)
            x = x.contiguous(memory_format=torch.channels_last)
        with torch.no_grad():
            eager = cuda_median(torch, lambda: model(x), args.runs)
            compiled = torch.compile(model)
            comp = cuda_median(torch, lambda: compiled(x), args.runs)
        mc, first, err = None, None, e.get("error", "")
        if not err:
            art = os.path.join(tmp, name + ".mcpk")
            with gzip.open(os.path.join(args.dir, name + ".mcpk.gz")) as f, \
                    open(art, "wb") as g:
                shutil.copyfileobj(f, g)
            mc, first, err = modelc_times(art, e["input"], e["shape"],
                                          args.modelc_run, args.runs, tmp)
            os.remove(art)
        rows.append((name + " bf16 infer", mc, eager, comp, flops_bytes(name),
                     e.get("compile_s"), first, err))
        del model
        torch.cuda.empty_cache()
    # AMP training steps (dropout 0, as modelc-train-graphs traces them):
    # modelc's artifact from --prepare's train.json, when there is one.
    train_path = os.path.join(args.dir, "train.json")
    train = json.load(open(train_path)) if os.path.exists(train_path) else {}
    block_path = os.path.join(args.dir, "param_block.npy")
    for name in ("mlp", "transformer"):
        import numpy as np
        torch.manual_seed(0)
        model = build(name, torch, dropout=0.0).cuda()
        if os.path.exists(block_path):  # modelc-train-graphs' weights
            tile_parameters(torch, model,
                            torch.from_numpy(np.load(block_path)).cuda())
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        x_np = np.random.default_rng(0).standard_normal(MODELS[name][1],
                                                        np.float32)
        x = torch.from_numpy(x_np).cuda()

        def step(m=model):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = m(x).float().pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss

        # The first steps from the shared weights, before any timing.
        torch_losses = [float(step().item())
                        for _ in range(TRAIN_CHECK_STEPS)]
        eager = cuda_median(torch, step, args.runs)
        compiled = torch.compile(model)
        comp = cuda_median(torch, lambda: step(compiled), args.runs)
        f, b = flops_bytes(name)
        e = train.get(name)
        mc, first = None, None
        err = "modelc: no training artifact (run --prepare again)"
        if e:
            err = e.get("error", "")
        if e and not err:
            art = os.path.join(tmp, name + "_train.mcpk")
            with gzip.open(os.path.join(args.dir, name + "_train.mcpk.gz")) \
                    as fz, open(art, "wb") as g:
                shutil.copyfileobj(fz, g)
            mc, first, err = modelc_times(art, e["input"], e["shape"],
                                          args.modelc_run, args.runs, tmp)
            if not os.path.exists(block_path):
                err = (err + "; " if err else "") + (
                    "losses not compared (no param_block.npy: run --prepare "
                    "again)")
            else:
                mc_losses, why = modelc_train_losses(art, x_np,
                                                     args.modelc_run, tmp)
                if mc_losses is None:
                    err = (err + "; " if err else "") + why
                else:
                    diff = max((abs(a - b) / max(abs(b), 1e-30)
                                for a, b in zip(mc_losses, torch_losses)),
                               default=float("inf"))
                    verdict = ("match" if diff <= TRAIN_LOSS_REL_MAX
                               and len(mc_losses) == len(torch_losses)
                               else "DIFFER")
                    err = (err + "; " if err else "") + (
                        f"losses {verdict} PyTorch's, max rel diff "
                        f"{diff:.1e} (modelc {mc_losses}, PyTorch "
                        f"{[round(v, 6) for v in torch_losses]})")
            os.remove(art)
        rows.append((name + " AMP train", mc, eager, comp, (3 * f, 3 * b),
                     e.get("compile_s") if e else None, first, err))
        del model, opt
        torch.cuda.empty_cache()
    shutil.rmtree(tmp, ignore_errors=True)

    def fmt(v, spec):
        return format(v, spec) if v is not None else "-"

    print(f"\n{'row':<24} {'modelc ms':>10} {'eager ms':>9} {'compile ms':>10} "
          f"{'x eager':>8} {'x compile':>9} {'TFLOP/s':>8} {'%peak':>6} "
          f"{'GB/s':>7} {'compile s':>9} {'first s':>8}  note")
    for name, mc, eager, comp, (f, b), cs, first, err in rows:
        t = mc if mc is not None else comp
        tf, gb = f / t / 1e9, b / t / 1e6
        print(f"{name:<24} {fmt(mc, '10.3f')} {eager:9.3f} {comp:10.3f} "
              f"{fmt(mc and eager / mc, '8.2f')} {fmt(mc and comp / mc, '9.2f')} "
              f"{tf:8.1f} {100 * tf / peak_tflops:6.1f} {gb:7.0f} "
              f"{fmt(cs, '9.1f')} {fmt(first, '8.2f')}  {err}")
    print("\nx eager / x compile: the peer's time over modelc's (above 1: "
          "modelc is faster). TFLOP/s and GB/s: modelc's where it ran, else "
          "torch.compile's; GB/s counts weights, input and output once.")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir", nargs="?")
    ap.add_argument("--prepare")
    ap.add_argument("--modelc", default="build/bin/modelc")
    ap.add_argument("--modelc-run", default="build/bin/modelc-run")
    ap.add_argument("--train-graphs",
                    help="modelc-train-graphs (default: next to --modelc)")
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    if args.prepare:
        return prepare(args)
    if not args.dir:
        ap.error("give the prepared DIR, or --prepare DIR")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
