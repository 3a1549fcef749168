#!/usr/bin/python3
"""Two or more compiled artifacts of one model, timed alternately on one
machine: what a compiler change did, with the runtime held fixed; or one
artifact under runtime settings (`A.mcpk@VAR=VALUE[,VAR=VALUE]` runs A with
those environment variables, e.g. `enc.mcpk@MODELC_GEMM=openblas`); or what
a runtime change did: `A.mcpk@LD_LIBRARY_PATH=OLD/lib A.mcpk` runs the same
modelc-run with another build's runtime library (LD_LIBRARY_PATH comes
before modelc-run's RUNPATH; a copy of an old bin/ would still load this
build's lib/).

    /usr/bin/python3 bench/ab_artifacts.py A.mcpk B.mcpk [...] --input x=x.npy
        [--threads 1,2] [--rounds 6] [--runs 60] [--build DIR]

For each thread count, every round runs each artifact once
(`modelc-run --bench RUNS`, its median), in turn, so drift on a shared
machine hits all of them alike. Prints a markdown table: per artifact and
thread count, the best and the median of the rounds' medians (ms) and the
ratio of the latter to the first artifact's (below 1.00: faster than the
first). The artifacts' outputs are compared to the first's: a faster wrong
answer is no result.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

import numpy as np


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("artifacts", nargs="+")
    ap.add_argument("--input", action="append", default=[],
                    help="NAME=FILE.npy, as modelc-run's")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--runs", type=int, default=60)
    ap.add_argument("--build", default=os.path.join(here, "..", "build"))
    args = ap.parse_args()
    run_bin = os.path.join(args.build, "bin", "modelc-run")
    inputs = [a for i in args.input for a in ("--input", i)]
    medians = {}  # (artifact, threads) -> [ms]

    def split(variant):
        """The artifact's path and the environment it runs with."""
        path, sep, settings = variant.rpartition("@")
        if not sep or "=" not in settings:
            return variant, {}
        return path, dict(kv.split("=", 1) for kv in settings.split(","))

    def label(variant):
        path, extra = split(variant)
        return os.path.basename(path) + "".join(
            f" {k}={v}" for k, v in extra.items())
    with tempfile.TemporaryDirectory() as tmp:
        outs = []
        for k, art in enumerate(args.artifacts):
            d = os.path.join(tmp, str(k))
            path, extra = split(art)
            subprocess.run([run_bin, path, *inputs, "--output-dir", d],
                           check=True, capture_output=True,
                           env=dict(os.environ, **extra))
            outs.append({f: np.load(os.path.join(d, f))
                         for f in sorted(os.listdir(d))})
        for k in range(1, len(outs)):
            for f, ref in outs[0].items():
                got = outs[k].get(f)
                same = got is not None and got.shape == ref.shape and \
                    np.array_equal(got, ref)
                err = float("inf") if got is None or got.shape != ref.shape \
                    else float(np.linalg.norm(got.astype(np.float64) - ref) /
                               max(np.linalg.norm(ref), 1e-30))
                print(f"{label(args.artifacts[k])} {f}: "
                      f"{'bit-identical to' if same else f'rel err {err:.1e} against'} "
                      f"{label(args.artifacts[0])}", file=sys.stderr)
        for t in args.threads.split(","):
            env = dict(os.environ, MODELC_NUM_THREADS=t,
                       OPENBLAS_NUM_THREADS=t, OMP_NUM_THREADS=t)
            for r in range(args.rounds):
                for art in args.artifacts:
                    path, extra = split(art)
                    out = subprocess.run(
                        [run_bin, path, *inputs, "--output-dir",
                         os.path.join(tmp, "bench"), "--bench",
                         str(args.runs)],
                        check=True, capture_output=True, text=True,
                        env=dict(env, **extra))
                    m = re.search(r"median ([0-9.]+) ms", out.stdout + out.stderr)
                    medians.setdefault((art, t), []).append(float(m.group(1)))
                print(f"threads {t} round {r + 1}/{args.rounds}: " +
                      ", ".join(f"{medians[(a, t)][-1]:.2f}"
                                for a in args.artifacts), file=sys.stderr)
    print(f"median ms of {args.runs} runs per round, {args.rounds} rounds "
          f"alternated; machine: {os.uname().machine}, {os.cpu_count()} "
          f"cores; load average at end {os.getloadavg()[0]:.2f}\n")
    print("| artifact | threads | best | median of rounds | vs first |")
    print("|---|---:|---:|---:|---:|")
    for t in args.threads.split(","):
        base = statistics.median(medians[(args.artifacts[0], t)])
        for art in args.artifacts:
            ms = medians[(art, t)]
            med = statistics.median(ms)
            print(f"| {label(art)} | {t} | {min(ms):.2f} | "
                  f"{med:.2f} | {med / base:.2f} |")


if __name__ == "__main__":
    main()
