"""Exports a model with a symbolic batch dimension ("batch") and writes, for
each batch size asked for, an input and PyTorch's output: the references of
test/onnx/dynamic-batch.test, where one modelc artifact compiled with
--batch=MIN..MAX runs every size.

usage: dynamic_batch.py NAME OUTDIR --batches 1,7,32,64
writes OUTDIR/NAME.onnx, OUTDIR/x_B.npy and OUTDIR/ref_B.npy per batch B.
"""
import argparse
import os
import sys

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402  (the CNN and the shared seed conventions)


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 128), nn.ReLU(),
                                 nn.Linear(128, 32), nn.GELU(),
                                 nn.Linear(32, 10), nn.LogSoftmax(dim=1))

    def forward(self, x):
        return self.net(x)


class BatchMean(nn.Module):
    """The batch size used as a number (Shape, Gather, Div): the batch's mean
    written by hand. Under --batch, modelc refuses it (the number would be
    the traced batch's at every size)."""

    def forward(self, x):
        return x.sum(0, keepdim=True) / x.shape[0]


class FlattenByBatch(nn.Module):
    """The batch size as a shape (Shape, Gather, Concat, Reshape): x.view(
    x.shape[0], -1), which folds into the reshape's type and runs at every
    batch."""

    def forward(self, x):
        return torch.tanh(x.view(x.shape[0], -1) * 2.0)


class GatherByValue(nn.Module):
    """torch.gather with indices computed from x (GatherElements: with a
    dynamic batch, a select per index instead of a flat gather, whose
    offsets would follow the batch), plus floor and a product over a dim
    (Floor, ReduceProd), at every batch."""

    def forward(self, x):
        i = (x.abs() * 2.0).long() % 6
        return (torch.gather(x, 1, i) + torch.floor(x * 3.0) +
                torch.prod(x[:, :3], 1, keepdim=True))


class TileBatch(nn.Module):
    """x.repeat(2, 1): a gather along the batch of twice its size, which
    no dynamic type can hold (refused, naming the op and why)."""

    def forward(self, x):
        return x.repeat(2, 1)


class ClsToken(nn.Module):
    """ViT's class token: a parameter expanded to the batch and
    concatenated before the patches (folded at import to a constant of the
    traced batch's rows, one row repeated: it becomes that row broadcast
    to the batch)."""

    def __init__(self):
        super().__init__()
        self.cls = nn.Parameter(torch.randn(1, 1, 8))
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        tokens = x.view(x.shape[0], 4, 8)
        cls = self.cls.expand(x.shape[0], -1, -1)
        return self.proj(torch.cat((cls, tokens), dim=1))


class RepeatMask(nn.Module):
    """HF's decoder mask: arange repeated per sample and compared, and a
    key padding mask's zeros_like (a ConstantOfShape of the batch's
    shape), both constants with one row per sample, all alike."""

    def forward(self, x):
        scores = x.view(x.shape[0], 5, 5)
        b, t = scores.shape[0], scores.shape[1]
        seq = torch.arange(t)
        causal = (seq[None, None, :].repeat(b, t, 1) <=
                  seq[None, :, None]).to(torch.float32)
        bias = torch.zeros_like(scores) + (1.0 - causal) * -10000.0
        return torch.softmax(scores + bias, -1).view(b, 25)


class MhaPadding(nn.Module):
    """nn.MultiheadAttention with a key_padding_mask computed from the
    input (the exporter's zeros_like of the expanded mask)."""

    def __init__(self):
        super().__init__()
        self.a = nn.MultiheadAttention(8, 2, batch_first=True)

    def forward(self, x):
        seq = x.view(x.shape[0], 5, 8)
        keep_first = (torch.arange(5) > 0)[None, :]  # no row all padding
        pad = (seq[:, :, 0] > 1.5) & keep_first
        return self.a(seq, seq, seq, key_padding_mask=pad,
                      need_weights=False)[0].reshape(x.shape[0], 40)


def build(name):
    """(model, input shape without the batch)"""
    if name == "mlp":
        return Mlp(), (64,)
    if name == "cnn":
        return models.Cnn(), (3, 17, 17)
    if name == "resnet18":
        import torchvision
        return torchvision.models.resnet18(weights=None), (3, 64, 64)
    if name == "batch_mean":
        return BatchMean(), (6,)
    if name == "gather_by_value":
        return GatherByValue(), (6,)
    if name == "cls_token":
        return ClsToken(), (32,)
    if name == "repeat_mask":
        return RepeatMask(), (25,)
    if name == "mha_padding":
        return MhaPadding(), (40,)
    if name == "tile_batch":
        return TileBatch(), (4,)
    if name == "flatten_by_batch":
        return FlattenByBatch(), (3, 4)
    if name in ("transformer", "transformer_seq"):
        layer = nn.TransformerEncoderLayer(d_model=64, nhead=4,
                                           dim_feedforward=128,
                                           batch_first=True)
        model = nn.TransformerEncoder(layer, num_layers=1,
                                      enable_nested_tensor=False)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p) * 0.05)
        return model, (8, 64)
    sys.exit(f"dynamic_batch.py: unknown model '{name}'")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("name")
    parser.add_argument("outdir")
    parser.add_argument("--batches", default="1,7,32,64")
    parser.add_argument("--opset", type=int, default=17)
    args = parser.parse_args()

    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    model, shape = build(args.name)
    model.eval()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
    os.makedirs(args.outdir, exist_ok=True)
    path = os.path.join(args.outdir, args.name + ".onnx")
    example = torch.from_numpy(rng.standard_normal((3,) + shape)
                               .astype(np.float32))
    # "_seq": the sequence dim symbolic too, as transformer exports have it
    # (modelc takes it from --input-shape x=?xS...).
    axes = ({"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}}
            if args.name.endswith("_seq") else
            {"x": {0: "batch"}, "y": {0: "batch"}})
    torch.onnx.export(model, (example,), path, opset_version=args.opset,
                      input_names=["x"], output_names=["y"],
                      dynamic_axes=axes)
    for b in (int(v) for v in args.batches.split(",")):
        x = rng.standard_normal((b,) + shape).astype(np.float32)
        with torch.no_grad():
            y = model(torch.from_numpy(x))
        np.save(os.path.join(args.outdir, f"x_{b}.npy"), x)
        np.save(os.path.join(args.outdir, f"ref_{b}.npy"),
                y.numpy().astype(np.float32))
    print(f"{args.name}: exported with a symbolic batch; references for "
          f"batches {args.batches}")


if __name__ == "__main__":
    main()
