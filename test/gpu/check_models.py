#!/usr/bin/env python3
"""Runs what test/gpu/prepare.sh prepared on the CUDA device and compares
it with the CPU's results; prints a correctness table; exit 1 on a failure.

    check_models.py PREPARED_DIR LOG_DIR [--device cuda]

(`--device cpu` checks the script itself on a machine without a GPU.)

Inference: each artifact (compiled for cpu,cuda) runs with
`modelc-run --device cuda`; every output is compared with the CPU's as
||gpu - cpu|| / ||cpu|| against its dtype's tolerance (f32 runs its matmuls
and convolutions on TF32 tensor cores: 5e-4; bf16 AMP 1e-2).
Errors: values the CPU refuses at a step (an integer division by zero, a
gather index out of range the graph computed) must be refused on the GPU
with the CPU's message, from the kernel's error record.
Training: the digits MLP's step trains on the GPU with the CPU's data,
batches and shuffle; the mean loss of the last 10 steps must be within 10%
of the CPU's and below a quarter of the first 10 steps' (as
test/tools/train.test asks of the CPU). Needs numpy only.
"""
import csv
import json
import os
import subprocess
import sys

import numpy as np

TOL = {"f32": 5e-4, "bf16": 1e-2, "f16": 2e-3}


def run(cmd, cwd, log):
    with open(log, "w") as f:
        p = subprocess.run(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT)
    return p.returncode


def last_line(path):
    try:
        lines = [l for l in open(path).read().splitlines() if l.strip()]
        return lines[-1] if lines else ""
    except OSError:
        return ""


DEVICE = "cuda"


def run_model(e, root, logs, modelc_run):
    """Runs entry e's model.mcpk on its inputs on DEVICE, outputs in gpu/:
    (its folder, the exit status, the log's path)."""
    d = os.path.join(root, e["dir"])
    args = []
    for spec in e["inputs"]:
        args += ["--input", spec]
    log = os.path.join(logs, e["name"] + ".log")
    rc = run([modelc_run, "model.mcpk", *args, "--output-dir", "gpu",
              "--device", DEVICE], d, log)
    return d, rc, log


def infer(e, root, logs, modelc_run):
    d, rc, log = run_model(e, root, logs, modelc_run)
    if rc != 0:
        return "FAIL", float("nan"), last_line(log)
    worst, worst_name = 0.0, ""
    for f in sorted(os.listdir(os.path.join(d, "cpu"))):
        ref = np.load(os.path.join(d, "cpu", f)).astype(np.float64)
        got = np.load(os.path.join(d, "gpu", f)).astype(np.float64)
        if ref.shape != got.shape:
            return "FAIL", float("nan"), f"{f}: shape {got.shape} vs {ref.shape}"
        if ref.dtype == np.bool_ or np.issubdtype(ref.dtype, np.integer):
            err = float(np.mean(ref != got))
        else:
            denom = np.linalg.norm(ref.ravel()) or 1.0
            err = float(np.linalg.norm((got - ref).ravel()) / denom)
        if not np.isfinite(err) or err > worst:
            worst, worst_name = err, f
    ok = np.isfinite(worst) and worst <= TOL[e["dtype"]]
    return ("ok" if ok else "FAIL"), worst, worst_name


def error(e, root, logs, modelc_run):
    """Values the CPU refuses at a step: the GPU must refuse them with the
    CPU's message (from the kernel's error record), naming the device."""
    _, rc, log = run_model(e, root, logs, modelc_run)
    got = last_line(log)
    if rc == 0:
        return "FAIL", float("nan"), "ran without an error"
    # "modelc-run: error: model.mcpk: step 0 (...): div: ..." on the CPU;
    # "modelc-run: error: model.mcpk: cuda:0: step 0 (...): div: ... (found
    # by the step's kernel on the GPU; ...)" on the GPU.
    head = "modelc-run: error: model.mcpk: "
    cpu = e["cpu_error"]
    core = cpu[len(head):] if cpu.startswith(head) else cpu
    ok = core in got
    return ("ok" if ok else "FAIL"), 0.0, got[:120] if not ok else core[:70]


def losses(path):
    return [float(r["loss"]) for r in csv.DictReader(open(path))]


def train(e, root, logs, modelc_run):
    d = os.path.join(root, e["dir"])
    log = os.path.join(logs, e["name"] + ".log")
    rc = run([modelc_run, "--train", "step.mcpk", *e["args"], "--log-csv",
              "gpu_loss.csv", "--quiet", "--device", DEVICE], d, log)
    if rc != 0:
        return "FAIL", float("nan"), last_line(log)
    cpu = losses(os.path.join(d, "cpu_loss.csv"))
    gpu = losses(os.path.join(d, "gpu_loss.csv"))
    if len(cpu) != len(gpu) or len(gpu) < 20:
        return "FAIL", float("nan"), f"{len(gpu)} steps on the GPU, {len(cpu)} on the CPU"
    c, g, g0 = np.mean(cpu[-10:]), np.mean(gpu[-10:]), np.mean(gpu[:10])
    rel = abs(g - c) / c
    ok = rel <= 0.10 and g < g0 / 4
    return ("ok" if ok else "FAIL"), rel, f"last-10 loss gpu {g:.4f} cpu {c:.4f}, first-10 gpu {g0:.4f}"


def main():
    global DEVICE
    root, logs = sys.argv[1], sys.argv[2]
    if len(sys.argv) > 4 and sys.argv[3] == "--device":
        DEVICE = sys.argv[4]
    os.makedirs(logs, exist_ok=True)
    modelc_run = os.path.join(root, "bin", "modelc-run")
    manifest = json.load(open(os.path.join(root, "manifest.json")))
    rows, failed = [], 0
    for e in manifest["entries"]:
        if "skip" in e:
            rows.append((e["name"], e["dtype"], "skip", float("nan"),
                         "not compiled: " + e["skip"][:70]))
            continue
        fn = {"infer": infer, "train": train, "error": error}[e["kind"]]
        status, err, note = fn(e, root, logs, modelc_run)
        failed += status == "FAIL"
        rows.append((e["name"], e["dtype"], status, err, note))
    print(f"\n{'model':<24} {'dtype':<5} {'status':<6} {'rel_err':>9} "
          f"{'tol':>7}  note")
    for name, dtype, status, err, note in rows:
        tol = 0.10 if name.startswith("train-") else TOL[dtype]
        print(f"{name:<24} {dtype:<5} {status:<6} {err:>9.2e} {tol:>7.0e}  "
              f"{note}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
