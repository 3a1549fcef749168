"""mlp-example's model (Linear 64->128, ReLU, Linear 128->64, Tanh, Linear
64->10, softmax) in NumPy with the weights of a checkpoint (.mcst): checks
an artifact's probabilities against it.

    mlp_forward.py CHECKPOINT.mcst X.npy PROBS.npy [--differs]
    mlp_forward.py CHECKPOINT.mcst X.npy --first-loss Y.npy LOG.csv BATCH

With --differs, checks that the probabilities are not the checkpoint's
model's (an artifact without its weights). With --first-loss, checks the
first loss a modelc-run --train log shows (a step that starts from the
checkpoint's weights, `--weights`) against the cross-entropy of the
checkpoint's model on the first BATCH rows.
"""
import csv
import sys

import numpy as np

from dp_compare import read_mcst

s = read_mcst(sys.argv[1])
x = np.load(sys.argv[2]).astype(np.float64)
if sys.argv[3] == "--first-loss":
    x = x[:int(sys.argv[6])]
h = np.maximum(x @ s["0.weight"].T + s["0.bias"], 0)
h = np.tanh(h @ s["2.weight"].T + s["2.bias"])
z = h @ s["4.weight"].T + s["4.bias"]
p = np.exp(z - z.max(1, keepdims=True))
p /= p.sum(1, keepdims=True)
if sys.argv[3] == "--first-loss":
    y = np.load(sys.argv[4])
    n = int(sys.argv[6])
    want = float(-np.log(p[np.arange(n), y[:n]]).mean())
    got = float(next(csv.DictReader(open(sys.argv[5])))["loss"])
    rel = abs(got - want) / want
    print(f"first loss {got:.6f}, the checkpoint's model's {want:.6f}, "
          f"rel err {rel:.1e}")
    assert rel < 1e-5, rel
    sys.exit(0)
got = np.load(sys.argv[3])
err = float(np.abs(got - p).max())
print(f"max abs err vs the checkpoint's weights in NumPy: {err:.1e}")
if "--differs" in sys.argv[4:]:
    assert err > 1e-3, err
else:
    assert err < 1e-5, err
