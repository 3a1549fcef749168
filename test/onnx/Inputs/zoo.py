"""torchvision's architectures through modelc, against PyTorch: each model
(random weights, seeded) is exported to ONNX (opset 17, batch 1), compiled
by `modelc compile` for the CPU, run by `modelc-run`, and its output
compared with PyTorch's: one line per model, `NAME: ok rel err E` or
`NAME: FAIL ...`; exits 1 if any failed or erred above TOL (default 1e-5).
A model's files (ONNX, artifact: up to 0.5 GB) are removed once it
passed, and kept for a look when it failed.

    zoo.py OUTDIR [--tol TOL] [--models a,b,...] [--bin BUILD/bin]

(It replaced bench/torchvision_survey.py, which ran the same path outside
CI.)

The set covers the families a user brings: residual and dense CNNs,
inverted bottlenecks and squeeze-excitation (MobileNetV3, EfficientNetV2,
MnasNet, RegNet), grouped and channel-shuffled convolutions (ResNeXt,
ShuffleNet), Inception's branches, ConvNeXt's layer norms, vision
transformers (ViT, Swin, MaxViT), segmentation heads (FCN, DeepLabV3) and
video models' 3-D convolutions and pools (R3D, R(2+1)D, S3D).
"""
import argparse
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import torch
import torchvision

MODELS = [
    "alexnet", "googlenet", "inception_v3", "densenet121", "mobilenet_v2",
    "efficientnet_b0",
    "resnext50_32x4d", "shufflenet_v2_x1_0", "squeezenet1_1", "mnasnet1_0",
    "mobilenet_v3_large", "efficientnet_v2_s", "regnet_y_400mf",
    "convnext_tiny", "vit_b_16", "swin_t", "maxvit_t", "fcn_resnet50",
    "deeplabv3_mobilenet_v3_large", "r3d_18", "r2plus1d_18", "s3d",
]


class Segmentation(torch.nn.Module):
    """torchvision's segmentation models return a dict: its "out"."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


def build(name):
    """(model in eval mode, input shape)"""
    tv = torchvision.models
    if name in ("fcn_resnet50", "deeplabv3_mobilenet_v3_large"):
        return (Segmentation(getattr(tv.segmentation, name)(
            weights=None, weights_backbone=None, aux_loss=False)),
            (1, 3, 224, 224))
    if name in ("r3d_18", "r2plus1d_18"):
        return getattr(tv.video, name)(weights=None), (1, 3, 8, 112, 112)
    if name == "s3d":  # its pools need 16 frames of 224 x 224
        return tv.video.s3d(weights=None), (1, 3, 16, 224, 224)
    kw = {}
    if name in ("inception_v3", "googlenet"):
        kw = {"aux_logits": False, "init_weights": False}
    model = getattr(tv, name)(weights=None, **kw)
    if name.startswith("vit"):  # its head starts at zero: give it values
        torch.nn.init.normal_(model.heads.head.weight, std=0.02)
    size = 299 if name == "inception_v3" else 224
    return model, (1, 3, size, size)


def features_count(model):
    """The last layer's bias zeroed, so that the output is the features
    times its weights (S3D's features are 1e-6 under the default init,
    DeepLabV3's small: with their heads' biases the outputs were those
    biases, and any error in the features would have been lost)."""
    last = None
    for m in model.modules():
        if isinstance(m, (torch.nn.Linear, torch.nn.Conv2d,
                          torch.nn.Conv3d)) and m.bias is not None:
            last = m
    if last is not None:
        with torch.no_grad():
            last.bias.zero_()


def check(name, out, bindir, tol):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    torch.manual_seed(0)
    model, shape = build(name)
    model.eval()
    features_count(model)
    x = torch.randn(*shape)
    with torch.no_grad():
        ref = model(x).numpy().astype(np.float64)
    onnx_path = os.path.join(d, "m.onnx")
    torch.onnx.export(model, (x,), onnx_path, opset_version=17,
                      input_names=["x"], output_names=["y"])
    np.save(os.path.join(d, "x.npy"), x.numpy())
    for cmd in ([os.path.join(bindir, "modelc"), "compile", onnx_path, "-o",
                 os.path.join(d, "m.mcpk")],
                [os.path.join(bindir, "modelc-run"),
                 os.path.join(d, "m.mcpk"), "--input",
                 "x=" + os.path.join(d, "x.npy"), "--output-dir",
                 os.path.join(d, "out")]):
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            why = (r.stderr or r.stdout).strip().splitlines()
            return False, f"FAIL ({os.path.basename(cmd[0])}: " \
                          f"{why[-1] if why else r.returncode})"
    y = np.load(os.path.join(d, "out", "y.npy")).astype(np.float64)
    if y.shape != ref.shape:
        return False, f"FAIL (shape {y.shape}, PyTorch {ref.shape})"
    err = np.linalg.norm(y - ref) / max(np.linalg.norm(ref), 1e-30)
    if not err <= tol:
        return False, f"FAIL (rel err {err:.2e} above {tol:.0e})"
    return True, f"ok rel err {err:.1e}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--bin", default=os.environ.get("MODELC_BIN", ""),
                    help="the directory of modelc and modelc-run "
                         "(default: found on PATH)")
    args = ap.parse_args()
    bindir = args.bin or os.path.dirname(
        subprocess.run(["which", "modelc"], capture_output=True,
                       text=True).stdout.strip())
    if not os.access(os.path.join(bindir, "modelc"), os.X_OK):
        sys.exit("zoo.py: no modelc on PATH; pass --bin BUILD/bin")
    torch.set_num_threads(2)
    failed = False
    for name in args.models.split(","):
        start = time.time()
        try:
            ok, what = check(name, args.outdir, bindir, args.tol)
        except Exception as e:  # an export PyTorch cannot do
            ok, what = False, f"FAIL ({type(e).__name__}: {e})"
        failed |= not ok
        if ok:
            shutil.rmtree(os.path.join(args.outdir, name), ignore_errors=True)
        print(f"{name}: {what} ({time.time() - start:.0f} s)", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
