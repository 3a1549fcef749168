"""A classifier trained from its ONNX export: the model and its loss
(F.cross_entropy, exported as SoftmaxCrossEntropyLoss with ignore_index
-100) compiled by `modelc compile --train`, against PyTorch's SGD on the
same batches.

    ce_train.py export DIR [cnn | dropout | encoder] [dynamic]
                                 DIR/ce_train.onnx (batch 6; with dynamic,
                                 a batch axis, and PyTorch's steps take
                                 batches of 5, the last of 4), x.npy, y.npy
                                 (24 samples, three labelled -100; with
                                 cnn, a convolution, a batch norm in
                                 training mode and a global pool first;
                                 with dropout, nn.Dropout(0.1) on the
                                 input and nn.Dropout(0.3) after the
                                 hidden layer, in training mode, the
                                 reference using modelc's masks; with
                                 encoder, a TransformerEncoderLayer with
                                 dropout 0.1 on [24, 6, 16] sequences,
                                 its reference's F.dropout drawing
                                 modelc's masks),
                                 y_bad.npy (a label of 5 for 5 classes),
                                 y_negative.npy (one of -1) and
                                 ref_losses.npy: PyTorch's loss at each
                                 SGD step (lr 0.1, 2 epochs in order: 8
                                 steps, 10 with dynamic)
                                 and ref_state.npz (every parameter and
                                 buffer after those steps)
    ce_train.py infer DIR LOGITS.npy
                                 compares the logits of infer.onnx (the
                                 mlp's, cnn's and encoder's inference
                                 export (the encoder's weights read
                                 through Transposes the import folds), eval
                                 mode, written by export) compiled with the
                                 checkpoint's weights with PyTorch's
                                 trained model's (ref_logits.npy)
    ce_train.py check DIR CSV [CKPT]
                                 compares modelc-run --train's --log-csv
                                 losses with ref_losses.npy (rel 1e-5),
                                 and the checkpoint's state (parameters,
                                 batch norms' running statistics) with
                                 ref_state.npz (1e-5 of each's largest)
"""
import csv
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, LR, EPOCHS = 6, 0.1, 2
P_DROP, P_DROP_IN = 0.3, 0.1


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 5)

    def forward(self, x, y=None):  # without y: the logits (inference)
        logits = self.fc2(torch.relu(self.fc1(x)))
        return logits if y is None else F.cross_entropy(logits, y)


class DropoutClassifier(Classifier):
    """Classifier with nn.Dropout(0.1) on its input and nn.Dropout(P_DROP)
    after the hidden layer: exported in training mode, Dropout nodes modelc
    computes with its own masks (Philox4x32-10, rt::dropout), the first
    at rng.offset and the second at rng.offset + 1. The reference multiplies
    by the same masks (`factors`, computed here independently of modelc)
    instead."""

    def __init__(self):
        super().__init__()
        self.drop_in = nn.Dropout(P_DROP_IN)
        self.drop = nn.Dropout(P_DROP)
        self.factors = None  # the reference's masks, one step's

    def forward(self, x, y):
        if self.factors is None:
            h = torch.relu(self.fc1(self.drop_in(x)))
            h = self.drop(h)
        else:
            h = torch.relu(self.fc1(x * self.factors[0])) * self.factors[1]
        return F.cross_entropy(self.fc2(h), y)


MASK32 = (1 << 32) - 1


def philox4x32(c, k0, k1):
    """Philox4x32-10 (Random123) on numpy uint64 arrays of 32-bit values."""
    c0, c1, c2, c3 = c
    for r in range(10):
        if r:
            k0 = (k0 + 0x9E3779B9) & MASK32
            k1 = (k1 + 0xBB67AE85) & MASK32
        p0 = np.uint64(0xD2511F53) * c0
        p1 = np.uint64(0xCD9E8D57) * c2
        c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ np.uint64(k0),
                          p1 & np.uint64(MASK32),
                          (p0 >> np.uint64(32)) ^ c3 ^ np.uint64(k1),
                          p0 & np.uint64(MASK32))
    return c0, c1, c2, c3


def dropout_factors(seed, offset, shape, p):
    """What mc.dropout multiplies element i (row-major) by: word i % 4 of
    Philox at counter (i / 4, offset) under key seed; kept (1 / (1 - p) in
    f32) where its top 24 bits are below round((1 - p) * 2^24)."""
    n = int(np.prod(shape))
    i = np.arange(n, dtype=np.uint64)
    blk = i >> np.uint64(2)
    full = lambda v: np.full(n, v, dtype=np.uint64)
    words = philox4x32((blk & np.uint64(MASK32), blk >> np.uint64(32),
                        full(offset & MASK32), full(offset >> 32)),
                       seed & MASK32, seed >> 32)
    word = np.choose((i & np.uint64(3)).astype(np.int64), words)
    keep = (word >> np.uint64(8)) < np.uint64(int((1 - p) * 2**24 + 0.5))
    scale = np.float32(1.0 / (1.0 - p))
    return torch.from_numpy(
        np.where(keep, scale, np.float32(0)).astype(np.float32).reshape(shape))


class EncoderClassifier(nn.Module):
    """nn.TransformerEncoderLayer(16, 2 heads, FF 32, dropout 0.1) on
    [B, 6, 16] sequences, mean-pooled into a linear classifier: exported in
    training mode, four Dropouts a step (the attention weights', after the
    attention, inside and after the feed-forward), and its weights read
    through Transposes (MatMul, not Gemm). The reference runs PyTorch with
    F.dropout replaced by modelc's masks, drawn in call order
    (`philox_dropout`)."""

    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.1,
                                                batch_first=True)
        self.fc = nn.Linear(16, 5)

    def forward(self, x, y=None):  # without y: the logits (inference)
        logits = self.fc(self.layer(x).mean(1))
        return logits if y is None else F.cross_entropy(logits, y)


def philox_dropout(counter):
    """F.dropout with modelc's masks: the k-th call of the run (counter[0])
    at offset k, seed 0, the ratio rounded to f32 as the ONNX file holds
    it."""
    def dropout(input, p=0.5, training=True, inplace=False):
        if not training or p == 0:
            return input
        f = dropout_factors(0, counter[0], tuple(input.shape),
                            float(np.float32(p)))
        counter[0] += 1
        return input * f
    return dropout


class ConvClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 5)

    def forward(self, x, y=None):  # without y: the logits (inference)
        logits = self.fc(torch.relu(self.bn(self.conv(x))).mean((2, 3)))
        return logits if y is None else F.cross_entropy(logits, y)


def export(out, kind, batch=BATCH):
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    shape = {"cnn": (24, 3, 6, 6), "encoder": (24, 6, 16)}.get(kind, (24, 8))
    x = rng.standard_normal(shape).astype(np.float32)
    y = rng.integers(0, 5, 24).astype(np.int64)
    y[[2, 9, 17]] = -100
    bad = y.copy()
    bad[13] = 5
    negative = y.copy()
    negative[13] = -1
    np.save(os.path.join(out, "x.npy"), x)
    np.save(os.path.join(out, "y.npy"), y)
    np.save(os.path.join(out, "y_bad.npy"), bad)
    np.save(os.path.join(out, "y_negative.npy"), negative)
    model = {"cnn": ConvClassifier, "dropout": DropoutClassifier,
             "encoder": EncoderClassifier}.get(kind, Classifier)()
    if kind in ("mlp", "cnn", "encoder"):
        # The inference graph of the same, untrained model (eval mode: the
        # batch norm on its running statistics), its initializers named as
        # the training export's: `modelc compile --weights` gives it the
        # trained ones. TrainingMode.PRESERVE keeps the batch norm a node
        # (EVAL folds it into the convolution: other weights, other
        # names); running statistics unlike the batch norm's own weight
        # and bias, which the exporter would otherwise merge with them
        # (equal initializers become one, behind Identity nodes).
        if kind == "cnn":
            with torch.no_grad():
                model.bn.running_mean.uniform_(-0.2, 0.2)
                model.bn.running_var.uniform_(0.5, 1.5)
        model.eval()
        torch.onnx.export(model, (torch.from_numpy(x[:BATCH]),),
                          os.path.join(out, "infer.onnx"), opset_version=17,
                          input_names=["x"], output_names=["logits"],
                          training=torch.onnx.TrainingMode.PRESERVE,
                          do_constant_folding=False)
        np.save(os.path.join(out, "x_infer.npy"), x[:BATCH])
    model.train()
    dynamic = batch != BATCH  # a batch axis, and a partial last batch
    torch.onnx.export(model, (torch.from_numpy(x[:BATCH]),
                              torch.from_numpy(y[:BATCH])),
                      os.path.join(out, "ce_train.onnx"), opset_version=17,
                      input_names=["x", "y"], output_names=["loss"],
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False,
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}
                      if dynamic else None)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    losses = []
    if kind == "encoder":  # after the export's own forward
        F.dropout = philox_dropout([0])
    for _ in range(EPOCHS):
        for b in range(0, 24, batch):
            if kind == "dropout":
                # modelc's generator: seed 0 (modelc compile --seed), one
                # offset per dropout per step, in the graph's order; the
                # ratios as the ONNX file holds them (floats).
                rows = min(batch, 24 - b)
                k = 2 * len(losses)
                model.factors = (
                    dropout_factors(0, k, (rows, 8),
                                    float(np.float32(P_DROP_IN))),
                    dropout_factors(0, k + 1, (rows, 16),
                                    float(np.float32(P_DROP))))
            loss = model(torch.from_numpy(x[b:b + batch]),
                         torch.from_numpy(y[b:b + batch]))
            losses.append(loss.item())
            opt.zero_grad()
            loss.backward()
            opt.step()
    np.save(os.path.join(out, "ref_losses.npy"), np.array(losses))
    if kind in ("mlp", "cnn", "encoder"):
        model.eval()
        with torch.no_grad():
            np.save(os.path.join(out, "ref_logits.npy"),
                    model(torch.from_numpy(x[:BATCH])).numpy())
    np.savez(os.path.join(out, "ref_state.npz"),
             **{k: v.detach().numpy() for k, v in model.state_dict().items()
                if v.is_floating_point()})


def check(out, path):
    ref = np.load(os.path.join(out, "ref_losses.npy"))
    with open(path) as f:
        got = np.array([float(r["loss"]) for r in csv.DictReader(f)])
    if got.shape != ref.shape:
        sys.exit(f"ce_train: {got.size} losses, PyTorch has {ref.size}")
    err = float(np.max(np.abs(got - ref) / np.abs(ref)))
    print(f"ce_train: {got.size} SGD steps, losses {got[0]:.6f} .. "
          f"{got[-1]:.6f}, max rel err {err:.2e} against PyTorch")
    if err > 1e-5:
        sys.exit("ce_train: FAIL")
    if len(sys.argv) > 4:
        sys.path.insert(0, os.path.join(os.path.dirname(
            os.path.abspath(__file__)), "..", "..", "tools", "Inputs"))
        from dp_compare import read_mcst
        state = read_mcst(sys.argv[4])
        ref = np.load(os.path.join(out, "ref_state.npz"))
        worst = 0.0
        for name in ref.files:
            if name not in state:
                sys.exit(f"ce_train: the checkpoint has no '{name}'")
            r = ref[name]
            e = float(np.abs(state[name].reshape(r.shape) - r).max() /
                      max(float(np.abs(r).max()), 1e-30))
            worst = max(worst, e)
            if e > 1e-5:
                sys.exit(f"ce_train: FAIL: '{name}' differs by {e:.2e}")
        if "rng.offset" in state:
            print(f"ce_train: rng.offset {int(state['rng.offset'])} after "
                  f"{got.size} steps")
        running = sorted(n for n in ref.files if "running" in n)
        print(f"ce_train: {len(ref.files)} state tensors "
              + (f"({', '.join(running)} among them) " if running else "")
              + f"match PyTorch's within {worst:.2e}")


def infer(out, path, what="ce_train: inference with the trained weights"):
    """The trained model's logits (modelc compile infer.onnx --weights)
    against PyTorch's after its SGD steps (OUT/ref_logits.npy), eval mode;
    `what` starts the line printed (tied_lm.py shares this)."""
    ref = np.load(os.path.join(out, "ref_logits.npy"))
    got = np.load(path)
    err = float(np.abs(got - ref).max() / np.abs(ref).max())
    print(f"{what}, max rel err {err:.2e} against PyTorch's trained model")
    if err > 1e-5:
        sys.exit(what.split(":")[0] + ": FAIL")


if __name__ == "__main__":
    if sys.argv[1] == "infer":
        infer(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "export":
        kinds = [k for k in sys.argv[3:] if k in ("cnn", "dropout", "encoder")]
        export(sys.argv[2], kinds[0] if kinds else "mlp",
               5 if "dynamic" in sys.argv[3:] else BATCH)
    else:
        check(sys.argv[2], sys.argv[3])
