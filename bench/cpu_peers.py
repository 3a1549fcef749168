#!/usr/bin/python3
"""modelc against its CPU peers, in one run on one machine: median latency of
ResNet-18 (batch 1 and 8), the transformer encoder and a 2-layer LSTM (batch
8), and on request (--models) torchvision's MobileNetV2, EfficientNet-B0 and
ResNet-50 (batch 8, 224x224) in

  - modelc unfused (`modelc compile --no-fuse`; "n/a" while `modelc compile
    --help` has no such flag),
  - modelc (default `modelc compile`, fused),
  - PyTorch 1.13 eager (Debian's python3-torch: the reference output),
  - PyTorch 2.x eager and torch.compile (default inductor backend; on the CPU
    it compiles C++ with g++), from PyPI,
  - onnxruntime (CPU execution provider, sequential execution,
    intra_op_num_threads = the thread count) on the very ONNX file that
    modelc compiles,

each engine's ratio to modelc (fused), and each output's relative error
against PyTorch 1.13's (a benchmark of a wrong answer is worthless). Same
thread count for all (default: all cores). Prints two markdown tables on
stdout, progress on stderr.

    /usr/bin/python3 bench/cpu_peers.py [--build DIR] [--threads N] [--runs N]
        [--rounds N] [--quick] [--venv DIR] [--no-peers]
        [--models resnet18,encoder,lstm,mlp,mobilenet_v2,efficientnet_b0,
                  resnet50] [--opset 13..17 (17)]

Every engine is timed --rounds times (default 2), the rounds interleaved,
and its best median is reported: the machines here are shared and drift.

The models, their seeded random weights and inputs are those of
bench/cpu_vs_pytorch.py (imported from it); the torchvision CNNs come from the
system's torchvision with seeded random weights. The peers' environment has no
torchvision (none on PyPI matches its torch) and rebuilds only ResNet-18 by
hand, so those CNNs have onnxruntime's column and not PyTorch 2.x's. The system python runs modelc and
the reference; the peers run in a subprocess (bench/peers_worker.py) under
the python of a virtual environment this script creates and reuses: every
engine sees the same weights and input (the ONNX file for onnxruntime, the
state_dict as .npz for PyTorch 2.x, x.npy) and its output is compared here.

The peers' virtual environment (default build/bench/peers-venv of this
checkout, even with --build elsewhere, which is only read; reused while its
marker file names the same pins; delete the folder to rebuild it): made
with `python3 -m venv` from the system python, then pip from PyPI (the only
reachable index: the CPU-only wheels of download.pytorch.org are not). PyPI's
Linux torch wheel is a CUDA build whose Requires-Dist pulls cuda-toolkit,
cuDNN, NCCL, nvshmem, cuSPARSELt and triton (5.4 GB installed). Measured:

  1. `pip install --no-deps torch` plus its pure-python requirements (sympy,
     networkx, jinja2, filelock, fsspec, typing-extensions, setuptools): 1.4
     GB, but `import torch` fails: libtorch.so itself links libtorch_cuda.so,
     which needs libcufile, libcusparseLt, libnvshmem_host, libcudart,
     cuBLAS, cuDNN, NCCL... at load time. The CUDA 13.0 toolkit of this
     machine kind (/usr/local/cuda-13.0) does not stand in for them: it lacks
     three and its NCCL is too old (undefined symbol ncclCommResume).
  2. Step 1 plus only the nvidia-* / cuda-toolkit requirements that torch
     names (read from its metadata), leaving out triton (1 GB, the GPU
     kernel compiler: inductor's CPU backend does not use it) and
     cuda-bindings: `import torch` and torch.compile on the CPU work. 4.5 GB
     with onnxruntime, 60 s to make here from an empty pip cache.
  3. Plain `pip install torch` (with every dependency): the fallback.

The script tries 1, then 2, then 3, checking `import torch` after each, so it
takes the lightest that works wherever it runs. If the environment cannot be
made (no network, pip failing), the peers' columns say "n/a" with the reason
and the rest still runs.
"""
import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time


def _threads_from_argv():
    """--threads as given (the default: every core), read before numpy and
    torch load: their BLAS fixes its thread count when it loads."""
    for i, a in enumerate(sys.argv):
        if a == "--threads" and i + 1 < len(sys.argv):
            return sys.argv[i + 1]
        if a.startswith("--threads="):
            return a.split("=", 1)[1]
    return str(os.cpu_count() or 1)


# PyTorch 1.13 (the reference, and a column) runs in this process on
# OpenBLAS: without this, torch.set_num_threads(1) left its linear layers
# on every core's BLAS threads.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = _threads_from_argv()

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torchvision  # noqa: E402

sys.dont_write_bytecode = True  # no bench/__pycache__ in the checkout
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_vs_pytorch import (LstmModel, MlpModel, models,  # noqa: E402
                            time_torch)

PEER_TORCH = "2.15.0"
PEER_ORT = "1.32.0"
PURE_DEPS = ["filelock", "fsspec", "jinja2", "networkx", "sympy",
             "typing-extensions", "setuptools", "numpy"]
PINS = {"torch": PEER_TORCH, "onnxruntime": PEER_ORT, "layout": 1}

ENGINES = [  # (key, column title)
    ("modelc_unfused", "modelc unfused"),
    ("modelc", "modelc"),
    ("torch113", "PyTorch {t113} eager"),
    ("torch_eager", "PyTorch {t2} eager"),
    ("torch_compile", "torch.compile {t2}"),
    ("onnxruntime", "onnxruntime {ort}"),
]
PEERS = ("torch_eager", "torch_compile", "onnxruntime")
# torchvision models beyond ResNet-18, at batch 8 (--models): onnxruntime only
# among the peers (see the docstring).
TORCHVISION_CNNS = ("mobilenet_v2", "efficientnet_b0", "resnet50")
NO_TORCHVISION = ("the peers' environment has no torchvision (none on PyPI "
                  "matches torch {t2}); only ResNet-18 is rebuilt by hand")
REL_ERR_MAX = 1e-4


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class Unavailable(Exception):
    """An engine that cannot run here; the message says why."""


def run(cmd, env=None, timeout=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env,
                       timeout=timeout)
    if r.returncode != 0:
        what = " ".join([os.path.basename(cmd[0])] + list(cmd[1:3]))
        raise Unavailable(f"`{what} ...` failed ({r.returncode}): "
                          f"{last_line(r.stderr or r.stdout)}")
    return r.stdout


def last_line(text):
    lines = [l.strip() for l in text.strip().splitlines() if l.strip()]
    return lines[-1][:200] if lines else ""


# --- the peers' virtual environment ----------------------------------------

def venv_python(venv):
    return os.path.join(venv, "bin", "python")


def probe(py):
    """None if torch and onnxruntime import in the venv, else why not."""
    r = subprocess.run(
        [py, "-c", "import torch, onnxruntime; torch.ones(2).add(1)"],
        capture_output=True, text=True)
    return None if r.returncode == 0 else last_line(r.stderr)


def ensure_venv(venv):
    """Creates (or reuses) the peers' venv; returns its python or raises
    Unavailable."""
    py = venv_python(venv)
    marker = os.path.join(venv, "modelc-peers.json")
    if os.path.exists(marker):
        try:
            info = json.load(open(marker))
        except ValueError:
            info = {}
        if info.get("pins") == PINS and probe(py) is None:
            log(f"bench: peers venv {venv} reused ({info.get('how')})")
            return py
        log(f"bench: peers venv {venv} is stale, updating it")
    t0 = time.time()
    if not os.path.exists(py):
        log(f"bench: creating the peers venv {venv} (python3 -m venv, then "
            f"pip from PyPI: 0.6 GB to download, and several GB more if "
            f"torch needs its CUDA libraries)")
        os.makedirs(os.path.dirname(os.path.abspath(venv)), exist_ok=True)
        run([sys.executable, "-m", "venv", venv])
    pip = [py, "-m", "pip", "install", "--disable-pip-version-check",
           "--timeout", "60", "--retries", "3", "-q"]
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")

    def pip_install(args, what):
        log(f"bench: peers venv: pip install {what}")
        run(pip + args, env=env)

    pip_install([f"onnxruntime=={PEER_ORT}"] + PURE_DEPS,
                f"onnxruntime=={PEER_ORT} and torch's pure-python deps")
    pip_install(["--no-deps", f"torch=={PEER_TORCH}"],
                f"--no-deps torch=={PEER_TORCH}")
    how = "torch --no-deps"
    why = probe(py)
    if why is not None:
        log(f"bench: peers venv: import torch fails without its CUDA "
            f"libraries ({why})")
        reqs = subprocess.run(
            [py, "-c", "import importlib.metadata as m; "
             "print('\\n'.join(m.requires('torch') or []))"],
            capture_output=True, text=True).stdout.splitlines()
        cuda = [r.split(";")[0].strip() for r in reqs
                if re.match(r"(nvidia-|cuda-toolkit)", r)
                and "extra ==" not in r]
        if cuda:
            pip_install(cuda, "torch's nvidia-* / cuda-toolkit requirements "
                        "(not triton: CPU inductor does not use it)")
            how = "torch --no-deps + its nvidia-*/cuda-toolkit requirements"
            why = probe(py)
    if why is not None:
        log(f"bench: peers venv: still failing ({why}); installing torch "
            f"with all its dependencies")
        pip_install([f"torch=={PEER_TORCH}"], f"torch=={PEER_TORCH}")
        how = "torch with all dependencies"
        why = probe(py)
    if why is not None:
        raise Unavailable(f"import torch/onnxruntime fails in the venv: {why}")
    took = time.time() - t0
    size = subprocess.run(["du", "-sh", venv], capture_output=True,
                          text=True).stdout.split("\t")[0]
    json.dump({"pins": PINS, "how": how, "seconds": round(took),
               "size": size}, open(marker, "w"))
    log(f"bench: peers venv ready in {took:.0f} s, {size} ({how})")
    return py


# --- the benchmark ---------------------------------------------------------

def model_spec(model):
    """What the worker needs to rebuild `model` (without torchvision)."""
    if getattr(model, "modelc_torchvision", None):
        return "onnx-only", {"name": model.modelc_torchvision}
    if isinstance(model, torch.nn.TransformerEncoder):
        layer = model.layers[0]
        return "encoder", {
            "d_model": layer.self_attn.embed_dim,
            "nhead": layer.self_attn.num_heads,
            "dim_feedforward": layer.linear1.out_features,
            "num_layers": len(model.layers)}
    if isinstance(model, MlpModel):
        linears = [m for m in model.net if isinstance(m, torch.nn.Linear)]
        return "mlp", {"width": linears[0].in_features,
                       "layers": len(linears)}
    if isinstance(model, LstmModel):
        return "lstm", {"input_size": model.lstm.input_size,
                        "hidden_size": model.lstm.hidden_size,
                        "num_layers": model.lstm.num_layers}
    return "resnet18", {}


def rel_err(got, ref):
    got = np.asarray(got, dtype=np.float64)
    if got.shape != ref.shape:
        return float("inf")
    return float(np.linalg.norm(got - ref) / np.linalg.norm(ref))


def modelc_time(modelc_run, art, x_path, out_dir, runs, env):
    out = run([modelc_run, art, "--input", f"x={x_path}", "--output-dir",
               out_dir, "--bench", str(runs)], env=env)
    m = re.search(r"median ([0-9.]+) ms", out)
    if not m:
        raise Unavailable(f"no median in modelc-run output: {last_line(out)}")
    return float(m.group(1)), np.load(os.path.join(out_dir, "y.npy"))


def keep_best(results, key, new, tag=None):
    """Per engine, the fastest median over the rounds (this machine is shared
    and drifts: the best of a few medians is the steadiest figure); an error
    in any round voids the engine's cell."""
    if tag and "ms" in new:
        log(f"{tag}: {key}: {new['ms']:.2f} ms")
    old = results.get(key)
    if old is None or "na" in new:
        results[key] = new
    elif "na" not in old and new["ms"] < old["ms"]:
        if "compile_s" in old:  # the first round's: later ones hit caches
            new["compile_s"] = old["compile_s"]
        results[key] = new


def bench_model(args, ctx, name, model, batch, shape, tmp):
    label = f"{name.split(' ')[0]} b{batch}"
    results = {}  # key -> {"ms", "err"} or {"na": why}
    x = torch.randn(*shape)
    d = os.path.join(tmp, f"{label.replace(' ', '-')}")
    os.makedirs(d)
    x_path = os.path.join(d, "x.npy")
    np.save(x_path, x.numpy())
    with torch.no_grad():
        ref = model(x).numpy().astype(np.float64)

    log(f"bench [{label}] export to ONNX, modelc import and compile")
    onnx_path = os.path.join(d, "m.onnx")
    torch.onnx.export(model, (x,), onnx_path, opset_version=args.opset,
                      input_names=["x"], output_names=["y"])
    mlir = os.path.join(d, "m.mlir")
    run([ctx["modelc"], "import", onnx_path, "-o", mlir])
    arts = {}
    for key, flags in (("modelc_unfused", ["--no-fuse"]), ("modelc", [])):
        if key == "modelc_unfused" and not ctx["has_no_fuse"]:
            results[key] = {"na": "`modelc compile` has no --no-fuse yet"}
            continue
        try:
            arts[key] = os.path.join(d, f"{key}.mcpk")
            run([ctx["modelc"], "compile", *flags, mlir, "-o", arts[key]])
        except Unavailable as e:
            results[key] = {"na": str(e)}
            del arts[key]

    spec_path = None
    if ctx["peers_na"]:
        for key in PEERS:
            results[key] = {"na": ctx["peers_na"]}
    else:
        kind, config = model_spec(model)
        weights = os.path.join(d, "weights.npz")
        np.savez(weights, **{k: v.detach().numpy()
                             for k, v in model.state_dict().items()})
        engines = list(PEERS)
        if kind == "onnx-only":
            engines = ["onnxruntime"]
            for key in ("torch_eager", "torch_compile"):
                results[key] = {"na": NO_TORCHVISION.format(t2=PEER_TORCH)}
        spec = {"label": label, "kind": kind, "config": config,
                "weights": weights, "x": x_path, "onnx": onnx_path,
                "threads": args.threads, "runs": args.runs,
                "warmup": args.warmup, "out_dir": os.path.join(d, "peers"),
                "engines": engines}
        spec_path = os.path.join(d, "spec.json")
        json.dump(spec, open(spec_path, "w"))

    for rnd in range(args.rounds):
        tag = f"bench [{label}] round {rnd + 1}/{args.rounds}"
        for key, art in arts.items():
            log(f"{tag}: {key.replace('_', ' ')} (modelc-run --bench)")
            try:
                ms, got = modelc_time(ctx["modelc_run"], art, x_path,
                                      os.path.join(d, key), args.runs,
                                      ctx["env"])
                keep_best(results, key, {"ms": ms, "err": rel_err(got, ref)},
                          tag)
            except Unavailable as e:
                keep_best(results, key, {"na": str(e)})
        log(f"{tag}: PyTorch {torch.__version__} eager")
        keep_best(results, "torch113",
                  {"ms": time_torch(model, x, args.runs, args.warmup),
                   "err": 0.0}, tag)
        if spec_path:
            log(f"{tag}: peers, in {ctx['venv_py']}")
            engines = json.load(open(spec_path))["engines"]
            for key, new in run_peers(args, ctx, spec_path, ref).items():
                if key in engines:
                    keep_best(results, key, new, tag)
    return results


def run_peers(args, ctx, spec_path, ref):
    """One run of peers_worker.py: {engine: {"ms", "err"} or {"na"}}."""
    try:
        r = subprocess.run([ctx["venv_py"], ctx["worker"], spec_path],
                           stdout=subprocess.PIPE, text=True,
                           env=ctx["env"], timeout=args.peer_timeout)
        if r.returncode != 0:
            raise Unavailable(f"peers worker failed ({r.returncode})")
        out = json.loads(r.stdout.strip().splitlines()[-1])
    except (Unavailable, subprocess.TimeoutExpired, ValueError,
            IndexError) as e:
        return {key: {"na": str(e)[:200]} for key in PEERS}
    ctx["versions"].update(out["versions"])
    results = {}
    for key in PEERS:
        e = out["engines"].get(key, {"error": "not run"})
        if "error" in e:
            results[key] = {"na": e["error"]}
        else:
            results[key] = {"ms": e["ms"],
                            "err": rel_err(np.load(e["out"]), ref)}
            if "compile_s" in e:
                results[key]["compile_s"] = e["compile_s"]
    return results


def print_tables(args, ctx, rows):
    v = ctx["versions"]
    t2 = v.get("torch", PEER_TORCH).split("+")[0]
    titles = {k: t.format(t113=torch.__version__.split("+")[0], t2=t2,
                          ort=v.get("onnxruntime", PEER_ORT))
              for k, t in ENGINES}
    notes = []

    def na(why):
        if why not in notes:
            notes.append(why)
        return f"n/a ({notes.index(why) + 1})"

    print(f"\nmodelc vs CPU peers: median ms of {args.runs} runs after "
          f"{args.warmup} warm-up, best of {args.rounds} round(s), "
          f"{args.threads} threads, ONNX opset {args.opset}; cell = ms "
          f"(engine / modelc: above 1.00 modelc is faster)")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, "
          f"{cpu_model()}; OPENBLAS_CORETYPE="
          f"{os.environ.get('OPENBLAS_CORETYPE', '(unset)')}; load average "
          f"at start {ctx['load']:.2f}\n")
    head = ["model", "batch"] + [titles[k] for k, _ in ENGINES]
    print("| " + " | ".join(head) + " |")
    print("|---|---:|" + "---:|" * len(ENGINES))
    for name, batch, res in rows:
        base = res["modelc"].get("ms")
        cells = []
        for key, _ in ENGINES:
            r = res[key]
            if "na" in r:
                cells.append(na(r["na"]))
                continue
            # Three significant digits below 1 ms (a small MLP's rows).
            cell = f"{r['ms']:.3f}" if r["ms"] < 1 else f"{r['ms']:.2f}"
            if base:
                cell += f" ({r['ms'] / base:.2f})"
            if not r["err"] < REL_ERR_MAX:
                cell += " WRONG"
            cells.append(cell)
        print(f"| {name} | {batch} | " + " | ".join(cells) + " |")
    print("\nrel err against PyTorch "
          f"{torch.__version__.split('+')[0]}'s output "
          f"(||y - y_ref|| / ||y_ref||; WRONG at {REL_ERR_MAX:g} or above):\n")
    print("| model | batch | " + " | ".join(
        titles[k] for k, _ in ENGINES if k != "torch113") + " |")
    print("|---|---:|" + "---:|" * (len(ENGINES) - 1))
    for name, batch, res in rows:
        cells = [("n/a" if "na" in res[k] else f"{res[k]['err']:.1e}")
                 for k, _ in ENGINES if k != "torch113"]
        print(f"| {name} | {batch} | " + " | ".join(cells) + " |")
    compiles = [f"{name.split(' ')[0]} b{batch}: "
                f"{res['torch_compile']['compile_s']:.0f} s"
                for name, batch, res in rows
                if "compile_s" in res["torch_compile"]]
    if compiles:
        print("\ntorch.compile's first call (compilation, not in the "
              "medians): " + ", ".join(compiles))
    for i, why in enumerate(notes):
        print(f"\n({i + 1}) n/a: {why}")


def torchvision_cnns(wanted):
    """The torchvision CNNs asked for, at batch 8, seeded random weights,
    eval mode (BatchNorm with its running statistics)."""
    out = []
    for name in TORCHVISION_CNNS:
        if name not in wanted:
            continue
        torch.manual_seed(0)
        model = getattr(torchvision.models, name)(weights=None).eval()
        model.modelc_torchvision = name
        out.append((name, model, 8, (8, 3, 224, 224)))
    return out


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--build", default=os.path.join(here, "..", "build"))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2,
                    help="time every engine this many times, interleaved, "
                    "and keep each one's best median")
    ap.add_argument("--quick", action="store_true",
                    help="3 runs, 1 round, a shorter sequence (smoke test)")
    ap.add_argument("--venv", help="the peers' virtual environment "
                    "(default: build/bench/peers-venv in this checkout, "
                    "whatever --build says, so that --build is only read)")
    ap.add_argument("--no-peers", action="store_true",
                    help="skip the venv and the PyPI peers")
    ap.add_argument("--models", default="resnet18,encoder,lstm,mlp",
                    help="comma-separated subset of resnet18, encoder, lstm, "
                    "mlp, " + ", ".join(TORCHVISION_CNNS))
    ap.add_argument("--opset", type=int, default=17,
                    help="the ONNX opset of the export (below 17, PyTorch "
                    "writes LayerNorm out as ReduceMean/Sub/Pow/.../Div)")
    ap.add_argument("--peer-timeout", type=int, default=1800,
                    help="seconds for the peers of one model")
    args = ap.parse_args()
    if args.quick:
        args.runs, args.rounds = 3, 1
    args.warmup = 2 if args.quick else 5
    build = os.path.abspath(args.build)
    venv = os.path.abspath(args.venv or os.path.join(
        here, "..", "build", "bench", "peers-venv"))
    modelc = os.path.join(build, "bin", "modelc")
    ctx = {
        "modelc": modelc,
        "modelc_run": os.path.join(build, "bin", "modelc-run"),
        "worker": os.path.join(here, "peers_worker.py"),
        "versions": {},
        "peers_na": None,
        "load": os.getloadavg()[0],
        "env": dict(os.environ, OPENBLAS_NUM_THREADS=str(args.threads),
                    OMP_NUM_THREADS=str(args.threads),
                    MKL_NUM_THREADS=str(args.threads),
                    MODELC_NUM_THREADS=str(args.threads)),
    }
    help_text = subprocess.run([modelc, "compile", "--help"],
                               capture_output=True, text=True)
    ctx["has_no_fuse"] = "--no-fuse" in help_text.stdout + help_text.stderr
    log(f"bench: modelc {modelc}; `compile --no-fuse` "
        f"{'present' if ctx['has_no_fuse'] else 'absent: unfused = n/a'}")
    if args.no_peers:
        ctx["peers_na"] = "--no-peers"
    else:
        try:
            ctx["venv_py"] = ensure_venv(venv)
        except (Unavailable, OSError, subprocess.SubprocessError) as e:
            ctx["peers_na"] = f"peers venv: {e}"
            log(f"bench: {ctx['peers_na']}")

    torch.set_num_threads(args.threads)
    wanted = set(args.models.split(","))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, model, batch, shape in (models(args.quick) +
                                          torchvision_cnns(wanted)):
            kind = ("encoder" if name.startswith("transformer") else
                    name.split(" ")[0])
            if kind not in wanted:
                continue
            rows.append((name, batch, bench_model(args, ctx, name, model,
                                                  batch, shape, tmp)))
    print_tables(args, ctx, rows)
    bad = [name for name, _, res in rows
           if not res["modelc"].get("err", 1.0) < REL_ERR_MAX]
    if bad:
        raise SystemExit("modelc did not run or its output differs from "
                         f"PyTorch's on {', '.join(bad)}: the timings above "
                         f"are void")


if __name__ == "__main__":
    main()
