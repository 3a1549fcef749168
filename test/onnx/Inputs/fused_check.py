"""Fused == unfused on every example and imported model.

    fused_check.py WORK_DIR [NAME ...]

For each model: compile it twice, with mc-fuse (the default) and with
--no-fuse (one step per op), run both artifacts on the same inputs, and
compare every output: relative error ||fused - unfused|| / ||unfused||
must stay below 1e-6 (f32). Prints one line per model with the step counts
and the error; exits 1 naming the first model that fails.

Models: the C++ examples traced by the frontend (mlp-example,
resnet18-example, gpt2-example: traced ResNet-18 has batch norms that
mc-fold-batch-norm folds) and every model of models.py exported by PyTorch
to ONNX. The tools come from PATH (lit puts the build's bin/ first).
"""
import os
import re
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TOL = 1e-6
EXAMPLES = {
    "mlp-example": (["mlp-example", "{d}", "--batch", "16"], "mlp.mlir"),
    "resnet18-example": (["resnet18-example", "{d}", "--size", "64"],
                         "resnet18.mlir"),
    "gpt2-example": (["gpt2-example", "{d}"], "gpt2.mlir"),
}
ONNX = ["resnet18", "transformer", "shape_ops", "mask_ops", "split_pad",
        "dilated_conv", "mobile_block", "cnn", "mobilenet_v2_stem"]
# Also run with a NaN, an inf and a value near overflow in the input: the
# convolutions whose activation runs in oneDNN keep NaN only through their
# guard, and skip its scan where the step before published a bound.
POISON = {"resnet18-example", "cnn", "mobilenet_v2_stem"}
# Also compiled with --amp=bf16: the models with attention, whose region
# then holds mc-amp's casts around the softmax.
AMP = {"gpt2-example", "transformer"}


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"fused_check: command failed ({r.returncode}): "
                 f"{' '.join(cmd)}\n{r.stdout}{r.stderr}")
    return r.stdout


def inputs_of(artifact):
    """The input names of an artifact, from modelc inspect."""
    out = run(["modelc", "inspect", artifact])
    names, section = [], None
    for line in out.splitlines():
        if line.startswith("inputs ("):
            section = "in"
        elif not line.startswith("  "):
            section = None
        elif section == "in":
            names.append(line.split()[0])
    return names


def steps_of(artifact):
    out = run(["modelc", "inspect", artifact])
    return int(re.search(r"^steps:\s+(\d+)", out, re.M).group(1))


def poison_check(name, arts, d, tag):
    """Runs both artifacts on the inputs with one element of each float
    input set to NaN, one to inf and one to 3e37 (sums that could
    overflow): the outputs must hold NaN at the same places and agree
    elsewhere. Returns what to add to the model's line."""
    pd = os.path.join(d, "poisoned")
    os.makedirs(pd, exist_ok=True)
    for i in inputs_of(arts["fused" + tag]):
        x = np.load(os.path.join(d, i + ".npy"))
        if x.dtype == np.float32 and x.size >= 3:
            # With a batch of two, the value near overflow is in the first
            # sample and NaN and inf in the second, so the first sample's
            # outputs (through the guard's exact path) are compared too.
            flat = x.reshape(-1)
            flat[x.size // 4] = 3e37
            flat[3 * x.size // 4] = np.nan
            flat[5 * x.size // 8] = np.inf
        np.save(os.path.join(pd, i + ".npy"), x)
    outs = {}
    for kind in ("fused" + tag, "unfused" + tag):
        o = os.path.join(pd, kind)
        args = ["modelc-run", arts[kind], "--output-dir", o]
        for i in inputs_of(arts[kind]):
            args += ["--input", f"{i}={os.path.join(pd, i + '.npy')}"]
        run(args)
        outs[kind] = o
    nans = finite = 0
    for f in sorted(os.listdir(outs["unfused" + tag])):
        a = np.load(os.path.join(outs["fused" + tag], f)).astype(np.float64)
        b = np.load(os.path.join(outs["unfused" + tag], f)).astype(np.float64)
        if not np.array_equal(np.isnan(a), np.isnan(b)):
            sys.exit(f"fused_check: {name}: {f}: with NaN and inf in the "
                     f"input, fused has {int(np.isnan(a).sum())} NaN, "
                     f"unfused {int(np.isnan(b).sum())}")
        ok = np.isnan(b) | (a == b) | (np.abs(a - b) <= TOL * np.abs(b))
        if not ok.all():
            sys.exit(f"fused_check: {name}: {f}: with NaN and inf in the "
                     f"input, {int((~ok).sum())} values differ")
        nans += int(np.isnan(b).sum())
        finite += int((~np.isnan(b)).sum())
    if nans == 0:
        sys.exit(f"fused_check: {name}: the NaN in the input reached no "
                 f"output")
    return f", NaN in: {nans} NaN out alike, {finite} other values alike"


def check(name, source, d, extra=(), tag=""):
    arts = {}
    shapes = []
    if source.endswith(".onnx"):
        # Dynamic dims of the export frozen at the saved inputs' shapes.
        for f in sorted(os.listdir(d)):
            if f.endswith(".npy") and not f.startswith("ref_"):
                dims = "x".join(str(n) for n in np.load(os.path.join(d, f)).shape)
                shapes += ["--input-shape", f"{f[:-4]}={dims}"]
    for kind, flags in (("fused" + tag, []), ("unfused" + tag, ["--no-fuse"])):
        art = os.path.join(d, f"{kind}.mcpk")
        run(["modelc", "compile", source, "-o", art] + shapes + flags +
            list(extra))
        args = ["modelc-run", art, "--output-dir", os.path.join(d, kind)]
        for i in inputs_of(art):
            args += ["--input", f"{i}={os.path.join(d, i + '.npy')}"]
        run(args)
        arts[kind] = art
    worst = 0.0
    outs = sorted(f for f in os.listdir(os.path.join(d, "unfused" + tag))
                  if f.endswith(".npy"))
    if not outs:
        sys.exit(f"fused_check: {name}: no outputs")
    for f in outs:
        a = np.load(os.path.join(d, "fused" + tag, f)).astype(np.float64)
        b = np.load(os.path.join(d, "unfused" + tag, f)).astype(np.float64)
        if a.shape != b.shape:
            sys.exit(f"fused_check: {name}: {f}: shapes {a.shape} vs {b.shape}")
        if not np.array_equal(np.isnan(a), np.isnan(b)):
            sys.exit(f"fused_check: {name}: {f}: NaNs differ")
        a, b = np.nan_to_num(a), np.nan_to_num(b)
        norm = np.linalg.norm(b)
        err = np.linalg.norm(a - b) / norm if norm else np.linalg.norm(a - b)
        worst = max(worst, err)
    poisoned = ""
    if name in POISON:
        poisoned = poison_check(name, arts, d, tag)
    fused = steps_of(arts["fused" + tag])
    unfused = steps_of(arts["unfused" + tag])
    status = "ok" if worst < TOL else "FAIL"
    print(f"{name}: {fused} steps fused, {unfused} unfused, "
          f"rel err {worst:.1e}{poisoned}: {status}", flush=True)
    if worst >= TOL:
        sys.exit(f"fused_check: {name}: fused and unfused differ by {worst:.3e}"
                 f" (limit {TOL})")
    if fused >= unfused:
        sys.exit(f"fused_check: {name}: fusion made no fewer steps "
                 f"({fused} vs {unfused})")


def main():
    work = sys.argv[1]
    only = set(sys.argv[2:])
    for name, (cmd, mlir) in EXAMPLES.items():
        if only and name not in only:
            continue
        d = os.path.join(work, name)
        os.makedirs(d, exist_ok=True)
        run([c.format(d=d) for c in cmd])
        check(name, os.path.join(d, mlir), d)
        if name in AMP:
            check(name + " --amp=bf16", os.path.join(d, mlir), d,
                  ["--amp=bf16"], "-bf16")
    for name in ONNX:
        if only and name not in only:
            continue
        d = os.path.join(work, name)
        # HardSwish (mobile_block) is ONNX opset 14.
        opset = "14" if name == "mobile_block" else "13"
        run([sys.executable, os.path.join(HERE, "models.py"), name, d,
             "--opset", opset])
        check(name, os.path.join(d, name + ".onnx"), d)
        if name in AMP:
            check(name + " --amp=bf16", os.path.join(d, name + ".onnx"), d,
                  ["--amp=bf16"], "-bf16")


if __name__ == "__main__":
    main()
