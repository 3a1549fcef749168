"""Trains a compiled step on random inputs with modelc-run --train and
fails unless the last epoch's mean loss is below a fraction of the first's.
    loss_falls.py MODELC_RUN STEP.mcpk INPUT_NAME SHAPE(e.g. 64x32) EPOCHS BATCH FRACTION [VOCAB]
With VOCAB, the input is token ids (i64) in [0, VOCAB) instead of floats.
"""
import re
import subprocess
import sys
import tempfile

import numpy as np

run, step, name, shape, epochs, batch, fraction = sys.argv[1:8]
vocab = int(sys.argv[8]) if len(sys.argv) > 8 else 0
shape = [int(d) for d in shape.split("x")]
with tempfile.TemporaryDirectory() as tmp:
    x = f"{tmp}/x.npy"
    rng = np.random.default_rng(0)
    np.save(x, rng.integers(0, vocab, shape, dtype=np.int64) if vocab
            else rng.standard_normal(shape, np.float32))
    csv = f"{tmp}/loss.csv"
    p = subprocess.run([run, "--train", step, "--data", f"{name}={x}",
                        "--batch", batch, "--epochs", epochs, "--log-csv",
                        csv], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"modelc-run --train failed:\n{p.stdout}{p.stderr}")
    rows = [l.split(",") for l in open(csv).read().splitlines()[1:]]
    header = open(csv).readline().strip().split(",")
    col = header.index("loss")
    epoch = header.index("epoch")
    by_epoch = {}
    for r in rows:
        by_epoch.setdefault(int(r[epoch]), []).append(float(r[col]))
    first = np.mean(by_epoch[min(by_epoch)])
    last = np.mean(by_epoch[max(by_epoch)])
    print(f"loss: first epoch {first:.3g}, last epoch {last:.3g}")
    if not (np.isfinite(first) and np.isfinite(last)) or \
            last > float(fraction) * first:
        sys.exit(f"the loss did not fall below {fraction} of the first "
                 f"epoch's: {first:.3g} -> {last:.3g}")
    print("loss falls: ok")
