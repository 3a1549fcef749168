"""A classifier whose output layer is its embedding, transposed (tied
weights, as a language model's head is its token embedding): exported to
ONNX with its loss for `modelc compile --train`, and in eval mode for
`modelc compile --weights`. The one initializer is read by a Gather and, as
the head, through a Transpose, which an inference import folds.

    tied_lm.py export DIR   DIR/train.onnx, DIR/infer.onnx (the untrained
                            model's logits graph), ids.npy and y.npy (24
                            samples of 5 token ids, labels among the 20
                            tokens), ids_infer.npy (the first 6), and
                            ref_logits.npy: PyTorch's logits of ids_infer
                            after 8 SGD steps (lr 0.5, batches of 6, two
                            epochs in order)
    tied_lm.py infer DIR LOGITS.npy
                            compares modelc's logits with ref_logits.npy
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ce_train import infer  # noqa: E402

VOCAB, DIM, BATCH, LR = 20, 8, 6, 0.5


class TiedClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.bias = nn.Parameter(torch.zeros(VOCAB))

    def forward(self, ids, y=None):  # without y: the logits
        h = self.emb(ids).mean(1)
        logits = h @ self.emb.weight.t() + self.bias
        return logits if y is None else F.cross_entropy(logits, y)


def export(out):
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    ids = rng.integers(0, VOCAB, (24, 5)).astype(np.int64)
    y = rng.integers(0, VOCAB, 24).astype(np.int64)
    np.save(os.path.join(out, "ids.npy"), ids)
    np.save(os.path.join(out, "y.npy"), y)
    np.save(os.path.join(out, "ids_infer.npy"), ids[:BATCH])
    model = TiedClassifier()
    with torch.no_grad():  # a bias unlike every other initializer
        model.bias.uniform_(-0.1, 0.1)
    model.eval()
    torch.onnx.export(model, (torch.from_numpy(ids[:BATCH]),),
                      os.path.join(out, "infer.onnx"), opset_version=17,
                      input_names=["ids"], output_names=["logits"],
                      training=torch.onnx.TrainingMode.PRESERVE,
                      do_constant_folding=False)
    model.train()
    torch.onnx.export(model, (torch.from_numpy(ids[:BATCH]),
                              torch.from_numpy(y[:BATCH])),
                      os.path.join(out, "train.onnx"), opset_version=17,
                      input_names=["ids", "y"], output_names=["loss"],
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    for _ in range(2):
        for b in range(0, 24, BATCH):
            loss = model(torch.from_numpy(ids[b:b + BATCH]),
                         torch.from_numpy(y[b:b + BATCH]))
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        np.save(os.path.join(out, "ref_logits.npy"),
                model(torch.from_numpy(ids[:BATCH])).numpy())


if __name__ == "__main__":
    if sys.argv[1] == "export":
        export(sys.argv[2])
    else:
        infer(sys.argv[2], sys.argv[3],
              "tied_lm: logits with the trained (tied) weights")
