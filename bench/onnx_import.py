#!/usr/bin/python3
"""ONNX import cost: wall time and peak memory (max RSS) of `modelc import`
and `modelc compile` on torchvision models exported to ONNX, against the
size of their weights. Import is structural (docs/reliability.md): it does
not run the model, so its peak memory should stay near the weights' size
(the weights are held by the importer and copied once into the MLIR module)
and not grow with the activations. "import" writes bytecode (.mlirbc);
"import to text" writes .mlir, where MLIR's printer builds each weight's
hex string in memory. Prints a table.

    bench/onnx_import.py [--build DIR] [--models vgg11,resnet18]

The models have random weights (weights=None: nothing is downloaded).
"""
import argparse
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def export(name, path):
    import torch
    import torchvision
    model = getattr(torchvision.models, name)(weights=None).eval()
    x = torch.randn(1, 3, 224, 224)
    torch.onnx.export(model, (x,), path, opset_version=17,
                      input_names=["image"], output_names=["logits"])
    return sum(p.numel() * p.element_size() for p in model.state_dict().values())


def measure(cmd):
    """(seconds, peak RSS in MB) of one child process."""
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.execvp(cmd[0], cmd)
    _, status, usage = os.wait4(pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"onnx_import: {' '.join(cmd)} failed")
    return seconds, usage.ru_maxrss / 1024.0  # ru_maxrss is in KiB


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--models", default="vgg11,resnet18")
    args = parser.parse_args()
    modelc = os.path.join(args.build, "bin", "modelc")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            onnx_path = os.path.join(tmp, name + ".onnx")
            print(f"exporting {name} ...", file=sys.stderr, flush=True)
            weights = export(name, onnx_path) / 1e6
            imp = measure([modelc, "import", onnx_path, "-o",
                           os.path.join(tmp, name + ".mlirbc")])
            text = measure([modelc, "import", onnx_path, "-o",
                            os.path.join(tmp, name + ".mlir")])
            comp = measure([modelc, "compile", onnx_path, "-o",
                            os.path.join(tmp, name + ".mcpk")])
            rows.append((name, weights, imp, text, comp))
            os.remove(onnx_path)
    print(f"machine: {platform.node()}, {os.cpu_count()} cores")
    print("| model | weights MB | import s | import peak MB | peak / weights "
          "| import to text: s, peak MB | compile s | compile peak MB "
          "| peak / weights |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, w, (it, im), (tt, tm), (ct, cm) in rows:
        print(f"| {name} | {w:.0f} | {it:.2f} | {im:.0f} | {im / w:.2f} "
              f"| {tt:.2f}, {tm:.0f} | {ct:.2f} | {cm:.0f} | {cm / w:.2f} |")


if __name__ == "__main__":
    main()
