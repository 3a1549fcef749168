"""One PyTorch engine of bench/cpu_train_peers.py: AdamW training steps of
the models bench/train_graphs traces, on the CPU. Runs under the system
python (PyTorch 1.13 eager) or the peers' virtual environment's (PyTorch
2.x eager and torch.compile), and needs only torch and numpy: ResNet-18 is
bench/peers_worker.py's rebuild of torchvision's (the venv has no
torchvision).

    python train_worker.py SPEC.json

SPEC (written by cpu_train_peers.py): model ("mlp" | "transformer" |
"resnet18" | "embedding"), config (its sizes), block (param_block.npy: every parameter
tiles its 4096 values, as modelc-train-graphs does, so both sides start
from the same weights), x (.npy, one batch), engines (["eager"] or
["eager", "compile"]), threads, check_steps, runs, warmup.

Each engine builds the model afresh, runs `check_steps` steps on x and
records their losses (the first is the loss before any update), then times
`runs` more after `warmup`. The step is the one modelc compiles with
`--train --optimizer=adamw --lr=1e-4`: loss = mean(model(x)^2), backward,
torch.optim.AdamW(lr=1e-4) (weight decay 0.01, as modelc's default).
Prints one JSON object on stdout: the torch version and per engine
{"ms": median step time, "losses": [...]} or {"error": why}; progress on
stderr.
"""
import json
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_peers import tile_parameters  # noqa: E402
from peers_worker import resnet18  # noqa: E402


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def build(torch, spec):
    nn = torch.nn
    c = spec["config"]
    if spec["model"] == "mlp":
        w = c["width"]
        return nn.Sequential(nn.Linear(w, w), nn.ReLU(), nn.Linear(w, w),
                             nn.ReLU(), nn.Linear(w, w))
    if spec["model"] in ("transformer", "embedding"):
        layer = nn.TransformerEncoderLayer(
            c["d_model"], c["heads"], c["ff"], dropout=0.0, batch_first=True)
        kwargs = {}
        if "enable_nested_tensor" in nn.TransformerEncoder.__init__.__code__.co_varnames:
            kwargs["enable_nested_tensor"] = False
        encoder = nn.TransformerEncoder(layer, c["layers"], **kwargs)
        if spec["model"] == "transformer":
            return encoder
        return nn.Sequential(nn.Embedding(c["vocab"], c["d_model"]), encoder)
    return resnet18(torch)


def run_engine(torch, spec, engine, x):
    model = build(torch, spec)
    tile_parameters(torch, model, torch.from_numpy(np.load(spec["block"])))
    model.train()
    fwd = torch.compile(model) if engine == "compile" else model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step():
        opt.zero_grad(set_to_none=True)
        y = fwd(x)
        loss = y.float().pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    t0 = time.perf_counter()
    losses = [float(step().item()) for _ in range(spec["check_steps"])]
    log(f"  {engine}: {spec['check_steps']} checked steps in "
        f"{time.perf_counter() - t0:.1f} s (compiling, for torch.compile)")
    for _ in range(spec["warmup"]):
        step()
    times = []
    for _ in range(spec["runs"]):
        t = time.perf_counter()
        step()
        times.append((time.perf_counter() - t) * 1e3)
    return {"ms": statistics.median(times), "losses": losses}


def main():
    spec = json.load(open(sys.argv[1]))
    import torch
    torch.manual_seed(0)
    torch.set_num_threads(spec["threads"])
    x = torch.from_numpy(np.load(spec["x"]))
    result = {"torch": torch.__version__, "engines": {}}
    for engine in spec["engines"]:
        try:
            result["engines"][engine] = run_engine(torch, spec, engine, x)
        except Exception as e:  # an engine that fails is reported, not fatal
            lines = [l for l in str(e).strip().splitlines() if l.strip()]
            result["engines"][engine] = {
                "error": f"{type(e).__name__}: {lines[-1] if lines else ''}"[:200]}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
