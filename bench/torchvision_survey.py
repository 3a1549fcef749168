#!/usr/bin/python3
"""Which torchvision models modelc imports and how close they come to
PyTorch: each model (random weights, eval mode, batch 1) is exported to
ONNX at opset 17, compiled with `modelc compile`, run with `modelc-run`,
and its output compared with PyTorch 1.13's (||a - b|| / ||b||). Prints
one line per model: the relative error, or the step that failed and why.
Not in CI (minutes per model on 2 cores); the tests hold a few of these
models (test/onnx/*.test).

    /usr/bin/python3 bench/torchvision_survey.py [--build DIR] [--work DIR]
        [--models a,b,...]   (default: the list below)
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
import torch
import torchvision

MODELS = ("mobilenet_v2,mobilenet_v3_small,efficientnet_b0,squeezenet1_0,"
          "densenet121,shufflenet_v2_x1_0,regnet_y_400mf,mnasnet0_5,googlenet,"
          "inception_v3,convnext_tiny,resnext50_32x4d,vit_b_16,swin_t,"
          "seg_fcn_resnet50,seg_lraspp_mobilenet_v3_large")


def build(name):
    if name.startswith("seg_"):
        return getattr(torchvision.models.segmentation, name[4:])(
            weights=None, weights_backbone=None, aux_loss=False)
    return getattr(torchvision.models, name)(weights=None)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(here, "..", "build"))
    ap.add_argument("--work", default="/tmp/torchvision-survey")
    ap.add_argument("--models", default=MODELS)
    args = ap.parse_args()
    bin_dir = os.path.join(args.build, "bin")
    torch.manual_seed(0)
    for name in args.models.split(","):
        d = os.path.join(args.work, name)
        os.makedirs(d, exist_ok=True)
        size = {"inception_v3": 299, "vit_b_16": 224, "swin_t": 224}.get(
            name, 128)
        try:
            m = build(name).eval()
            x = torch.randn(1, 3, size, size)
            torch.onnx.export(m, x, f"{d}/m.onnx", opset_version=17,
                              input_names=["x"], output_names=["y"])
            with torch.no_grad():
                y = m(x)
            y = y["out"] if isinstance(y, dict) else y
            y = y[0] if isinstance(y, tuple) else y
            np.save(f"{d}/x.npy", x.numpy())
            ref = y.numpy()
        except Exception as e:  # the exporter's own limits
            print(f"{name}: export failed: {str(e)[:200]}", flush=True)
            continue
        ops = sorted({n.op_type for n in onnx.load(f"{d}/m.onnx").graph.node})
        r = subprocess.run([f"{bin_dir}/modelc", "compile", f"{d}/m.onnx",
                            "-o", f"{d}/m.mcpk"], capture_output=True,
                           text=True)
        if r.returncode:
            print(f"{name}: compile failed: {r.stderr.strip()[:300]}",
                  flush=True)
            continue
        r = subprocess.run([f"{bin_dir}/modelc-run", f"{d}/m.mcpk", "--input",
                            f"x={d}/x.npy", "--output-dir", f"{d}/out"],
                           capture_output=True, text=True)
        if r.returncode:
            print(f"{name}: run failed: {r.stderr.strip()[:300]}", flush=True)
            continue
        got = np.load(f"{d}/out/y.npy")
        norm = np.linalg.norm(ref)
        if norm == 0:  # vit_b_16's head starts at zero
            err = "exact" if np.array_equal(got, ref) else "differs (ref 0)"
        else:
            err = f"rel err {np.linalg.norm(got - ref) / norm:.2e}"
        print(f"{name}: {err} ({len(ops)} op types)", flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
