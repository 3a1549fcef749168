#!/usr/bin/python3
"""modelc's compiled training step against PyTorch's on the CPU, in one run
on one machine: f32 AdamW steps (loss = mean(model(x)^2), lr 1e-4, weight
decay 0.01) of

  - mlp          3 x Linear(1024, 1024) with ReLU between, batch 64,
  - transformer  2 x TransformerEncoderLayer(256, 4 heads, FF 1024, dropout
                 0, batch first), batch 8 x 128 tokens,
  - resnet18     ResNet-18 in training mode (batch norm on the batch's
                 statistics), batch 8 at 112 x 112,
  - embedding    the transformer after an Embedding(30522, 256) of token
                 ids (BERT's vocabulary; its gradient is a scatter-add of
                 1024 rows into the 30522), batch 8 x 128 ids,

in modelc (`modelc-train-graphs` traces them in the C++ frontend, `modelc
compile --train --optimizer=adamw --lr=1e-4`, `modelc-run --bench`: one
call of the artifact is one whole step: forward, backward and update), PyTorch
1.13 eager (Debian's, the system python) and PyTorch 2.x eager and
torch.compile (inductor; its compile time is not in the step time) from
the peers' virtual environment of bench/cpu_peers.py (made on first use,
reused after; --no-peers leaves those columns out).

Both sides start from the same weights (every parameter tiles the 4096
values of modelc-train-graphs' param_block.npy) and train on the same
batch, so their losses must agree: each engine's first --check-steps
losses (the first one before any update) are compared with modelc's
(`modelc-run --train` over that many copies of the batch), and the table
prints the largest relative difference. A benchmark of a wrong step is
worthless. modelc's ResNet-18 graph is traced by hand, so its batch norms'
running statistics are not updated (PyTorch's are: a little more work on
its side).

Prints one markdown table on stdout (median step time; in brackets the
peer's time over modelc's, above 1 where modelc is faster), progress on
stderr. Every engine is timed --rounds times, interleaved, and its best
median kept (the machines here drift).

    /usr/bin/python3 bench/cpu_train_peers.py [--build DIR] [--threads N]
        [--runs N] [--rounds N] [--check-steps K] [--models mlp,...]
        [--venv DIR] [--no-peers]
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no bench/__pycache__ in the checkout
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# cpu_peers sets the BLAS thread count from --threads before numpy loads.
from cpu_peers import (Unavailable, ensure_venv, last_line, log,  # noqa: E402
                       run)
import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = {
    "mlp": {"width": 1024, "batch": 64},
    "transformer": {"batch": 8, "seq": 128, "d_model": 256, "heads": 4,
                    "ff": 1024, "layers": 2},
    "resnet18": {"batch": 8, "hw": 112},
    "embedding": {"batch": 8, "seq": 128, "d_model": 256, "heads": 4,
                  "ff": 1024, "layers": 2, "vocab": 30522},
}
LOSS_REL_MAX = 1e-4


def input_shape(name, c):
    if name == "mlp":
        return [c["batch"], c["width"]]
    if name == "transformer":
        return [c["batch"], c["seq"], c["d_model"]]
    if name == "embedding":
        return [c["batch"], c["seq"]]
    return [c["batch"], 3, c["hw"], c["hw"]]


def graph_args():
    m, t, r = CONFIGS["mlp"], CONFIGS["transformer"], CONFIGS["resnet18"]
    return ["--mlp", f"{m['width']},{m['batch']}",
            "--transformer", ",".join(str(t[k]) for k in (
                "batch", "seq", "d_model", "heads", "ff", "layers")),
            "--resnet18", f"{r['batch']},{r['hw']}",
            "--embedding", str(CONFIGS["embedding"]["vocab"])]


def modelc_losses(modelc_run, art, data, batch, d):
    log_csv = os.path.join(d, "log.csv")
    run([modelc_run, "--train", art, "--data", f"x={data}", "--batch",
         str(batch), "--epochs", "1", "--log-csv", log_csv, "--quiet"])
    with open(log_csv) as f:
        return [float(row["loss"]) for row in csv.DictReader(f)]


def modelc_time(modelc_run, art, x, runs):
    out = run([modelc_run, art, "--input", f"x={x}", "--bench", str(runs)])
    for line in out.splitlines():
        if "median" in line:
            return float(line.split("median")[1].split()[0])
    raise Unavailable(f"no median in modelc-run's output: {last_line(out)}")


def worker(py, spec_path, timeout):
    r = subprocess.run([py, os.path.join(HERE, "train_worker.py"), spec_path],
                       capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise Unavailable(f"train_worker.py failed: {last_line(r.stderr)}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def max_rel(a, b):
    if len(a) != len(b) or not a:
        return float("inf")
    return max(abs(x - y) / max(abs(y), 1e-30) for x, y in zip(a, b))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    root = os.path.dirname(HERE)
    ap.add_argument("--build", default=os.path.join(root, "build"))
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--check-steps", type=int, default=3)
    ap.add_argument("--models", default="mlp,transformer,embedding,resnet18")
    ap.add_argument("--venv",
                    default=os.path.join(root, "build", "bench", "peers-venv"))
    ap.add_argument("--no-peers", action="store_true")
    args = ap.parse_args()
    for flag in ("threads", "runs", "rounds", "check_steps"):
        if getattr(args, flag) < 1:
            ap.error(f"--{flag.replace('_', '-')} must be at least 1")
    names = [m for m in args.models.split(",") if m]
    for m in names:
        if m not in CONFIGS:
            sys.exit(f"cpu_train_peers.py: unknown model '{m}' "
                     f"({', '.join(CONFIGS)})")
    os.environ["MODELC_NUM_THREADS"] = str(args.threads)
    b = os.path.join(args.build, "bin")
    modelc, modelc_run, graphs = (os.path.join(b, t) for t in (
        "modelc", "modelc-run", "modelc-train-graphs"))
    venv_py, venv_why = None, "--no-peers"
    if not args.no_peers:
        try:
            venv_py = ensure_venv(args.venv)
        except Unavailable as e:
            venv_why = str(e)
            log(f"bench: PyTorch 2.x columns n/a: {e}")
    tmp = tempfile.mkdtemp(prefix="modelc-train-peers-")
    log(f"bench: tracing the training graphs into {tmp}")
    run([graphs, tmp] + graph_args())
    rows, versions = [], {}
    for name in names:
        c = CONFIGS[name]
        d = os.path.join(tmp, name)
        os.makedirs(d)
        art = os.path.join(d, "step.mcpk")
        log(f"bench [{name}]: modelc compile --train")
        t0 = time.time()
        run([modelc, "compile", os.path.join(tmp, f"{name}_train.mlir"),
             "--train", "--optimizer=adamw", "--lr=1e-4", "-o", art])
        compile_s = time.time() - t0
        rng = np.random.default_rng(0)
        if name == "embedding":  # token ids, every row of the table
            x = rng.integers(0, c["vocab"], input_shape(name, c),
                             dtype=np.int64)
        else:
            x = rng.standard_normal(input_shape(name, c), dtype=np.float32)
        x_path, data_path = (os.path.join(d, f) for f in ("x.npy", "data.npy"))
        np.save(x_path, x)
        np.save(data_path, np.concatenate([x] * args.check_steps))
        losses = {"modelc": modelc_losses(modelc_run, art, data_path,
                                          c["batch"], d)}
        spec = {"model": name, "config": c,
                "block": os.path.join(tmp, "param_block.npy"), "x": x_path,
                "threads": args.threads, "check_steps": args.check_steps,
                "runs": args.runs, "warmup": 3}
        best, errors = {}, {}
        for rnd in range(args.rounds):
            ms = modelc_time(modelc_run, art, x_path, args.runs)
            log(f"bench [{name}] round {rnd + 1}: modelc {ms:.2f} ms")
            best["modelc"] = min(best.get("modelc", ms), ms)
            jobs = [("torch113", "/usr/bin/python3", ["eager"])]
            if venv_py:
                jobs.append(("torch2", venv_py, ["eager", "compile"]))
            for tag, py, engines in jobs:
                spec_path = os.path.join(d, f"{tag}.json")
                json.dump(dict(spec, engines=engines), open(spec_path, "w"))
                try:
                    res = worker(py, spec_path, timeout=1800)
                except (Unavailable, subprocess.TimeoutExpired) as e:
                    for eng in engines:
                        errors[f"{tag}_{eng}"] = str(e)
                    continue
                versions[tag] = res["torch"]
                for eng, r in res["engines"].items():
                    key = f"{tag}_{eng}"
                    if "error" in r:
                        errors[key] = r["error"]
                        continue
                    log(f"bench [{name}] round {rnd + 1}: {key} "
                        f"{r['ms']:.2f} ms")
                    best[key] = min(best.get(key, r["ms"]), r["ms"])
                    losses[key] = r["losses"]
        rows.append((name, c, best, errors, losses, compile_s))
    print_table(args, rows, versions, venv_why)


def print_table(args, rows, versions, venv_why):
    t113 = versions.get("torch113", "1.13")
    t2 = versions.get("torch2", "2.x")
    cols = [("torch113_eager", f"PyTorch {t113} eager"),
            ("torch2_eager", f"PyTorch {t2} eager"),
            ("torch2_compile", f"torch.compile {t2}")]
    print(f"CPU training steps (f32 AdamW), {args.threads} threads, median "
          f"of {args.runs} steps, best of {args.rounds} rounds; in brackets "
          f"the peer's time over modelc's")
    print()
    print("| model | modelc ms | " + " | ".join(t for _, t in cols) +
          f" | loss rel diff to PyTorch {t113} ({args.check_steps} steps) "
          "| modelc compile s |")
    print("|---|---:|" + "---:|" * len(cols) + "---:|---:|")
    notes = []
    for name, c, best, errors, losses, compile_s in rows:
        m = best.get("modelc")
        cells = []
        for key, _ in cols:
            if key in best and m:
                cells.append(f"{best[key]:.2f} ({best[key] / m:.2f})")
            else:
                why = errors.get(key, venv_why)
                notes.append(f"{name} {key}: n/a ({why})")
                cells.append("n/a")
        ref = losses.get("torch113_eager")
        diff = max_rel(losses["modelc"], ref) if ref else float("nan")
        if ref and not diff <= LOSS_REL_MAX:
            notes.append(f"{name}: modelc's losses {losses['modelc']} differ "
                         f"from PyTorch's {ref} by more than {LOSS_REL_MAX}")
        for key in ("torch2_eager", "torch2_compile"):
            if ref and key in losses:
                notes.append(f"{name} {key}: losses differ from PyTorch "
                             f"{t113}'s by {max_rel(losses[key], ref):.1e}")
        size = ", ".join(f"{k} {v}" for k, v in c.items())
        print(f"| {name} ({size}) | {m:.2f} | " + " | ".join(cells) +
              f" | {diff:.1e} | {compile_s:.1f} |")
    for n in notes:
        print(f"\n- {n}", end="")
    print()


if __name__ == "__main__":
    main()
