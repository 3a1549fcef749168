"""Times the CPU peers of bench/cpu_peers.py: PyTorch 2.x eager,
torch.compile (inductor) and onnxruntime. Runs under the peers' virtual
environment's python, never the system one, and depends only on what that
environment holds (torch, onnxruntime, numpy: no torchvision, so ResNet-18 is
rebuilt below with torchvision's module names and strictly loaded from the
weights the parent saved).

    python peers_worker.py SPEC.json

SPEC (written by cpu_peers.py): kind ("resnet18" | "encoder" | "lstm" |
"mlp"), config (the model's sizes), weights (.npz of the parent's state_dict), x (.npy input),
onnx (the file modelc compiled), threads, runs, warmup, out_dir, engines.
Prints one JSON object on stdout: versions, and per engine either
{"ms": median, "out": path of its output .npy} or {"error": why};
progress goes to stderr.
"""
import json
import os
import statistics
import sys
import time
import traceback
import warnings

import numpy as np


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def resnet18(torch):
    nn = torch.nn

    class BasicBlock(nn.Module):
        def __init__(self, inplanes, planes, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.downsample = None
            if stride != 1 or inplanes != planes:
                self.downsample = nn.Sequential(
                    nn.Conv2d(inplanes, planes, 1, stride, bias=False),
                    nn.BatchNorm2d(planes))

        def forward(self, x):
            identity = x
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            if self.downsample is not None:
                identity = self.downsample(x)
            return self.relu(out + identity)

    class ResNet18(nn.Module):
        """torchvision.models.resnet18's structure and parameter names."""

        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            inplanes = 64
            for i, planes in enumerate((64, 128, 256, 512)):
                stride = 1 if i == 0 else 2
                setattr(self, f"layer{i + 1}", nn.Sequential(
                    BasicBlock(inplanes, planes, stride),
                    BasicBlock(planes, planes, 1)))
                inplanes = planes
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(512, 1000)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(torch.flatten(self.avgpool(x), 1))

    return ResNet18()


def build(torch, spec):
    if spec["kind"] == "resnet18":
        model = resnet18(torch)
    elif spec["kind"] == "mlp":
        c = spec["config"]

        class MlpModel(torch.nn.Module):  # bench/cpu_vs_pytorch.py's
            def __init__(self):
                super().__init__()
                mods = []
                for _ in range(c["layers"] - 1):
                    mods += [torch.nn.Linear(c["width"], c["width"]),
                             torch.nn.ReLU()]
                mods.append(torch.nn.Linear(c["width"], 10))
                self.net = torch.nn.Sequential(*mods)

            def forward(self, x):
                return self.net(x)
        model = MlpModel()
    elif spec["kind"] == "lstm":
        c = spec["config"]

        class LstmModel(torch.nn.Module):  # bench/cpu_vs_pytorch.py's
            def __init__(self):
                super().__init__()
                self.lstm = torch.nn.LSTM(c["input_size"], c["hidden_size"],
                                          c["num_layers"], batch_first=True)

            def forward(self, x):
                return self.lstm(x)[0]
        model = LstmModel()
    elif spec["kind"] == "encoder":
        c = spec["config"]
        layer = torch.nn.TransformerEncoderLayer(
            d_model=c["d_model"], nhead=c["nhead"],
            dim_feedforward=c["dim_feedforward"], dropout=0.0,
            batch_first=True)
        model = torch.nn.TransformerEncoder(layer, num_layers=c["num_layers"])
    else:
        raise ValueError(f"no PyTorch model for kind {spec['kind']!r}")
    weights = np.load(spec["weights"])
    state = {k: torch.from_numpy(weights[k].copy()) for k in weights.files}
    model.load_state_dict(state, strict=True)
    return model.eval()


def time_calls(fn, runs, warmup):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def short(e):
    lines = [l for l in str(e).strip().splitlines() if l.strip()]
    return f"{type(e).__name__}: {lines[-1] if lines else ''}"[:200]


def main():
    spec = json.load(open(sys.argv[1]))
    threads, runs, warmup = spec["threads"], spec["runs"], spec["warmup"]
    out_dir = spec["out_dir"]
    os.makedirs(out_dir, exist_ok=True)
    label = spec["label"]
    result = {"versions": {}, "engines": {}}
    engines = result["engines"]
    x_np = np.load(spec["x"])

    def save(name, y):
        path = os.path.join(out_dir, f"{name}.npy")
        np.save(path, np.ascontiguousarray(y, dtype=np.float32))
        return path

    try:
        import torch
        warnings.filterwarnings("ignore")
        torch.set_num_threads(threads)
        result["versions"]["torch"] = torch.__version__
        model = None
        if {"torch_eager", "torch_compile"} & set(spec["engines"]):
            model = build(torch, spec)  # onnx-only specs have none
            x = torch.from_numpy(x_np)
    except Exception as e:  # noqa: BLE001 - reported, not raised
        traceback.print_exc()
        for name in ("torch_eager", "torch_compile"):
            engines[name] = {"error": f"torch: {short(e)}"}
        model = None

    if model is not None and "torch_eager" in spec["engines"]:
        log(f"bench [{label}] PyTorch {torch.__version__} eager: timing")
        try:
            with torch.no_grad():
                y = model(x).numpy()
                ms = time_calls(lambda: model(x), runs, warmup)
            engines["torch_eager"] = {"ms": ms, "out": save("torch_eager", y)}
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            engines["torch_eager"] = {"error": short(e)}

    if model is not None and "torch_compile" in spec["engines"]:
        log(f"bench [{label}] torch.compile (inductor): compiling "
            f"(the first call; minutes on 2 cores)")
        try:
            with torch.no_grad():
                compiled = torch.compile(model)
                t0 = time.perf_counter()
                y = compiled(x).numpy()
                compile_s = time.perf_counter() - t0
                log(f"bench [{label}] torch.compile: compiled in "
                    f"{compile_s:.1f} s, timing")
                ms = time_calls(lambda: compiled(x), runs, warmup)
            engines["torch_compile"] = {"ms": ms, "compile_s": compile_s,
                                        "out": save("torch_compile", y)}
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            engines["torch_compile"] = {"error": short(e)}

    if "onnxruntime" in spec["engines"]:
        try:
            import onnxruntime as ort
            result["versions"]["onnxruntime"] = ort.__version__
            log(f"bench [{label}] onnxruntime {ort.__version__} (CPU EP): "
                f"session, timing")
            so = ort.SessionOptions()
            so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            so.intra_op_num_threads = threads
            so.inter_op_num_threads = 1
            sess = ort.InferenceSession(spec["onnx"], so,
                                        providers=["CPUExecutionProvider"])
            iname = sess.get_inputs()[0].name
            oname = sess.get_outputs()[0].name
            feed = {iname: x_np}
            y = sess.run([oname], feed)[0]
            ms = time_calls(lambda: sess.run([oname], feed), runs, warmup)
            engines["onnxruntime"] = {"ms": ms, "out": save("onnxruntime", y)}
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            engines["onnxruntime"] = {"error": short(e)}

    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
