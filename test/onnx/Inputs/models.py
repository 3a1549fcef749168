# Builds a test model in PyTorch (random weights from a fixed seed), exports
# it to ONNX, and writes its inputs and PyTorch's outputs as .npy files:
#   models.py NAME OUTDIR [--opset N]
# writes OUTDIR/NAME.onnx, OUTDIR/<input name>.npy and OUTDIR/ref_<output
# name>.npy, and prints the ONNX op types of the graph (for FileCheck).
import argparse
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class ShapeOps(nn.Module):
    """Reshapes and broadcasts whose sizes come from the input's (dynamic)
    shape: Shape, Gather, Unsqueeze, Concat, Reshape, Expand, Flatten."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 6)

    def forward(self, x):  # x [N, 4, 8]
        n, c = x.shape[0], x.shape[1]
        y = self.fc(x)  # [N, 4, 6]
        y = y.reshape(n, c * 2, 3).transpose(1, 2)  # [N, 3, 8]
        z = y.unsqueeze(1).expand(n, 2, 3, c * 2)  # [N, 2, 3, 8]
        flat = torch.flatten(z, 1)  # [N, 48]
        return flat.sigmoid() * 2.0, y.sum(dim=2, keepdim=True)


class MaskOps(nn.Module):
    """A causal mask built from Range, comparisons and Where, a softmax over
    it, and ConstantOfShape, Equal, Not."""

    def forward(self, x):  # x [N, S, S]
        s = x.shape[1]
        pos = torch.arange(s)
        causal = pos.unsqueeze(0) > pos.unsqueeze(1)  # [S, S] bool
        scores = x.masked_fill(causal, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        zeros = torch.zeros(x.shape[0], s, dtype=torch.long)
        eq = (pos.unsqueeze(0) + zeros) == 2  # [N, S]
        keep = torch.where(~eq.unsqueeze(-1), probs, torch.zeros_like(probs))
        return keep, torch.log_softmax(x, dim=1)


class SplitPad(nn.Module):
    """Split (equal and by sizes), Pad, Slice with steps, Concat, Clip,
    LeakyRelu, Pow, Reciprocal, ReduceMax/Mean, Gemm, MatMul."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(6, 5))
        self.fc = nn.Linear(5, 3)

    def forward(self, x):  # x [N, 6, 10]
        a, b = torch.split(x, [4, 6], dim=2)
        c, d = x.chunk(2, dim=1)
        p = F.pad(a, (1, 2))  # [N, 6, 7]
        q = b[:, ::2, 1:5].flip(1)  # [N, 3, 4]
        r = torch.cat([c, d], dim=2)  # [N, 3, 20]
        s = torch.clamp(p, -0.5, 0.5) + F.leaky_relu(p, 0.1) ** 2
        t = torch.matmul(x.transpose(1, 2), self.w)  # [N, 10, 5]
        u = self.fc(t.mean(dim=1))  # Gemm on [N, 5]
        v = 1.0 / (r.abs() + 1.0)
        return s, q.amax(dim=2), v, u


class Cnn(nn.Module):
    """Conv (groups, stride, dilation), BatchNorm, pools with padding and
    ceil_mode, GlobalAveragePool, Flatten, Gemm."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=2, dilation=2, groups=4)
        self.pool = nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True)
        self.avg = nn.AvgPool2d(2, stride=2, padding=1, count_include_pad=False)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        # The batch norm follows a ReLU6: after a Conv, the exporter would
        # fold it into the Conv.
        x = self.bn(F.relu6(self.conv1(x)))
        x = self.avg(self.pool(torch.tanh(self.conv2(x))))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


class DilatedConv(nn.Module):
    """Padding and dilation larger than the input, as in DeepLabv3's ASPP
    branches: whole kernel taps fall outside the 8x8 input (issue 12 item
    1: im2col crashed). The first conv is the issue's model exactly."""

    def __init__(self):
        super().__init__()
        self.aspp = nn.Conv2d(2, 3, 3, padding=9, dilation=9)
        self.strided = nn.Conv2d(3, 4, 3, stride=2, padding=12, dilation=12)
        self.depthwise = nn.Conv2d(4, 4, 3, padding=7, dilation=7, groups=4)

    def forward(self, x):
        a = self.aspp(x)
        return a, self.depthwise(self.strided(a))


class MobileBlock(nn.Module):
    """MobileNetV3's activation (ONNX HardSwish, opset 14 and later)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.act = nn.Hardswish()

    def forward(self, x):
        return self.act(self.conv(x) * 2.0)


class SplatWeights(nn.Module):
    """Weights of one value made in forward (torch.full, torch.ones: Constant
    nodes that modelc keeps as splats) read by a matmul, a conv and a
    batched matmul, each with an epilogue that fuses with it; and a clamp
    whose min is above its max (PyTorch and ONNX's Clip: max everywhere)."""

    def forward(self, x, img):
        w = torch.full((6, 6), 0.01)
        lin = torch.relu(F.linear(x, w, torch.full((6,), 0.5)) + x)
        conv = torch.relu(F.conv2d(img, torch.full((4, 3, 3, 3), 0.02)))
        bmm = torch.tanh(x.view(2, 2, 6) @ torch.ones(2, 6, 3))
        return lin, conv, bmm, torch.clamp(x, 1.0, -1.0)


class Activations(nn.Module):
    """Activations that the importer builds from other ops: Hardsigmoid
    (MobileNetV3's squeeze-excite), ELU, SELU, CELU, Softplus, Mish (exported
    as Softplus, Tanh, Mul) and Softsign."""

    def forward(self, x):
        return (F.hardsigmoid(x), F.elu(x, 0.7), F.selu(x),
                F.celu(x, 1.3), F.softplus(x), F.mish(x), F.softsign(x))


class Resizes(nn.Module):
    """F.interpolate as segmentation heads and FPNs use it (ONNX Resize):
    bilinear to a size (up and down, align_corners both ways), by a scale
    factor (the `scales` input), nearest, linear on 1-D, bicubic (up, down
    with align_corners, by a scale factor). (PyTorch 1.13 exports no
    nearest-exact.)"""

    def forward(self, x):
        return (F.interpolate(x, size=(13, 21), mode="bilinear",
                              align_corners=False),
                F.interpolate(x, size=(5, 4), mode="bilinear",
                              align_corners=False),
                F.interpolate(x, size=(13, 21), mode="bilinear",
                              align_corners=True),
                F.interpolate(x, scale_factor=1.5, mode="bilinear",
                              align_corners=False),
                F.interpolate(x, scale_factor=2.0, mode="nearest"),
                F.interpolate(x, size=(11, 5), mode="nearest"),
                F.interpolate(x.flatten(2), size=17, mode="linear",
                              align_corners=False),
                F.interpolate(x, size=(13, 21), mode="bicubic",
                              align_corners=False),
                F.interpolate(x, size=(5, 4), mode="bicubic",
                              align_corners=True),
                F.interpolate(x, scale_factor=1.5, mode="bicubic",
                              align_corners=False))


class Conv1dNet(nn.Module):
    """1-D windows (audio and text CNNs): Conv1d with stride, padding,
    dilation and groups (PyTorch 1.13 exports no padding='same'), MaxPool1d
    with ceil_mode and
    AvgPool1d with padding; the importer runs them as 2-D windows of
    height 1."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(4, 6, 5, stride=2, padding=3, dilation=2,
                              groups=2)
        self.same = nn.Conv1d(6, 8, 4, padding=2)
        self.max = nn.MaxPool1d(3, stride=2, padding=1, ceil_mode=True)
        self.avg = nn.AvgPool1d(4, stride=3, padding=2,
                                count_include_pad=False)

    def forward(self, x):
        return self.avg(self.max(torch.relu(self.same(self.conv(x)))))


class MiscOps(nn.Module):
    """Ops the importer builds from others: logsumexp (ReduceLogSumExp,
    rows of -inf included), isnan, sign, logical and/or/xor, repeat (Tile),
    reflect and replicate padding (Pad's reflect and edge modes). (PyTorch
    exports isinf as a Cast to double, which modelc refuses by name.)"""

    def forward(self, x, m):
        a, b = x > 0, m > 0
        return (torch.logsumexp(x, dim=-1), torch.logsumexp(m, dim=(0, 2),
                                                           keepdim=True),
                torch.isnan(x), torch.sign(x),
                torch.logical_and(a, b), torch.logical_or(a, b),
                torch.logical_xor(a, b), x.repeat(2, 1, 3),
                F.pad(x, (2, 3, 1, 0), mode="reflect"),
                F.pad(x, (3, 1, 0, 2), mode="replicate"))


class IndexOps(nn.Module):
    """argmax / argmin (ArgMax, ArgMin: ties and NaN), triu / tril with a
    diagonal offset (Trilu, opset 14 and later), integer remainder (Mod,
    Python's sign rule, negative operands), cumsum of floats (NaN carried
    on) and of integers (HF position ids from a mask)."""

    def forward(self, x, a, b):
        return (torch.argmax(x, dim=1), torch.argmin(x, dim=-1, keepdim=True),
                torch.triu(x, diagonal=1), torch.tril(x, diagonal=-1),
                torch.remainder(a, b), torch.fmod(a, b),
                torch.cumsum(x, dim=1), torch.cumsum(a, dim=-1))


class Rounding(nn.Module):
    """floor, ceil and round (Floor, Ceil, Round: ties to even, -0.0,
    values past 2^23, inf and NaN), remainder of floats (PyTorch exports
    it as x - floor(x / y) * y, which loses every digit of a large x that
    torch.remainder keeps: clamped to where both agree), products over
    odd and even dims (ReduceProd, of floats and integers) and
    torch.gather (GatherElements) along either axis."""

    def forward(self, x, p, n, src, idx):
        return (torch.floor(x), torch.ceil(x), torch.round(x),
                torch.remainder(torch.clamp(x, -100.0, 100.0), 0.75),
                torch.prod(p, dim=1),
                torch.prod(p, dim=-1, keepdim=True),
                torch.prod(n, dim=1), torch.gather(src, 1, idx),
                torch.gather(src, 0, idx[:, :2] % 3))


class Norms(nn.Module):
    """GroupNorm (exported as a reshape, InstanceNormalization, a reshape
    back and its affine), InstanceNorm2d with an affine, InstanceNorm1d
    without one, with perturbed parameters."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.group = nn.GroupNorm(4, 8, eps=1e-3)
        self.inst = nn.InstanceNorm2d(8, affine=True)
        self.inst1d = nn.InstanceNorm1d(5)
        with torch.no_grad():
            for p in (self.group.weight, self.group.bias, self.inst.weight,
                      self.inst.bias):
                p.copy_(torch.randn_like(p))

    def forward(self, x, s):
        h = self.conv(x)
        return self.group(h), self.inst(h * 3.0 + 1.0), self.inst1d(s)


class PixelOps(nn.Module):
    """pixel_shuffle (DepthToSpace, CRD), PReLU with a slope per channel
    and a single one, F.normalize (ReduceL2) and an L1 norm (ReduceL1)."""

    def __init__(self):
        super().__init__()
        self.shuffle = nn.PixelShuffle(2)
        self.prelu = nn.PReLU(8)
        self.prelu1 = nn.PReLU()
        with torch.no_grad():
            self.prelu.weight.copy_(torch.linspace(-0.5, 0.9, 8))

    def forward(self, x):
        return (self.shuffle(x), self.prelu(x), self.prelu1(x - 0.5),
                F.normalize(x, dim=1), torch.norm(x, p=1, dim=(2, 3)))


class Trig(nn.Module):
    """Sin and Cos computed in forward: a diffusion timestep embedding
    (sin/cos of t times exp(-log(10000) k / half)) and rotary position
    embeddings (RoPE, as HF LLaMA computes them: inv_freq outer positions,
    cos/sin, rotate_half), on arguments up to ~60 rad."""

    def forward(self, t, q):
        half = 8
        freqs = torch.exp(-math.log(10000.0) *
                          torch.arange(half, dtype=torch.float32) / half)
        args = t[:, None] * freqs[None, :]
        emb = torch.cat([torch.sin(args), torch.cos(args)], dim=-1)
        seq, dim = q.shape[1], q.shape[2]
        inv = 1.0 / (10000.0 ** (torch.arange(0, dim, 2).float() / dim))
        pos = torch.arange(seq, dtype=torch.float32)
        ang = torch.outer(pos, inv)
        rot = torch.cat([ang, ang], dim=-1)
        cos, sin = rot.cos()[None], rot.sin()[None]
        q1, q2 = q[..., :dim // 2], q[..., dim // 2:]
        rotated = torch.cat([-q2, q1], dim=-1)
        return emb, q * cos + rotated * sin


class InverseTrig(nn.Module):
    """Tan and the inverse trigonometric functions (ONNX Tan, Asin, Acos,
    Atan): on their domains, and NaN outside; an angle from atan as pose
    and geometry models compute one. (PyTorch 1.13 exports no hyperbolic
    function: hand_models.py builds those.)"""

    def forward(self, x, u):
        return (torch.tan(u), torch.asin(u), torch.acos(u), torch.atan(x),
                torch.atan(x[:, :1] / (x[:, 1:2].abs() + 1.0)))


class Einsums(nn.Module):
    """torch.einsum as diffusers' and LDM's attention write it, and the
    other shapes Einsum takes: batched contraction, an outer product, a
    transpose, sums of one operand's own letters, "..." and the implicit
    output."""

    def forward(self, q, k, v, u, w):
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k)
        attn = torch.einsum("bhqk,bhkd->bhqd", scores.softmax(-1), v)
        outer = torch.einsum("i,j->ij", u, w)
        swapped = torch.einsum("bqd->bdq", q[0])
        rowdot = torch.einsum("bhqd,bhqd->bhq", q, q)
        total = torch.einsum("bhqd->", v)
        ellipsis = torch.einsum("...qd,...kd->...qk", q, k)
        implicit = torch.einsum("ij,jk", u[:, None], w[None, :])
        # "..." next to an upper-case letter of the equation's own.
        upper = torch.einsum("...i,Ai->...", q[0, 0, :2, :3], k[0, 0, :2, :3])
        return attn, outer, swapped, rowdot, total, ellipsis, implicit, upper


class FloatChecks(nn.Module):
    """torch.isinf, torch.isnan and torch.isfinite, which PyTorch exports
    through a Cast to double read only by IsInf and IsNaN."""

    def forward(self, x):
        return torch.isinf(x), torch.isnan(x), torch.isfinite(x)


class DoubleScalars(nn.Module):
    """What PyTorch 1.13's exporter writes in DOUBLE (modelc computes it in
    f32): torch.where with Python scalars (double constants, a double
    Where, the float input cast up to meet it, a double graph output),
    and arithmetic on x.double() with a float64 buffer (a DOUBLE
    initializer), cast back."""

    def __init__(self):
        super().__init__()
        self.register_buffer("s", torch.tensor([1.5, -2.0, 0.1],
                                               dtype=torch.float64))

    def forward(self, x):  # x [2, 3]
        mask = torch.where(x > 0, 1.0, 0.0)
        scaled = x * torch.where(x > 0, 0.5, 2.0)
        wide = (x.double() * self.s + 1.0 / 3.0).float()
        return mask, scaled, wide


class ClassLosses(nn.Module):
    """F.cross_entropy and F.nll_loss as PyTorch exports them
    (SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss): the default mean
    with labels of -100 ignored, a class-weighted sum, no reduction over a
    spatial [N, C, H, W] map, nll_loss with weights and an ignored class
    inside [0, C), and the mean over logits masked with -inf away from
    the labels (finite: a product with the one-hot would be NaN)."""

    def __init__(self):
        super().__init__()
        self.w = torch.tensor([0.5, 2.0, 1.0, 0.25, 3.0])

    def forward(self, x, y, img, seg):  # x [6, 5], y [6], img [2, 5, 3, 4]
        mean = F.cross_entropy(x, y)
        summed = F.cross_entropy(x, y.clamp(min=0), weight=self.w,
                                 reduction="sum")
        spatial = F.cross_entropy(img, seg, reduction="none")
        # (log of softmax: log_softmax would export as one
        # SoftmaxCrossEntropyLoss.)
        nll = F.nll_loss(torch.log(torch.softmax(x, dim=1)), y.clamp(min=0),
                         weight=self.w, ignore_index=1)
        masked = F.cross_entropy(
            x.masked_fill(torch.arange(5) == 3, float("-inf")),
            y.clamp(min=0) % 3)
        return mean, summed, spatial, nll, masked


class ConstantMask(nn.Module):
    """A mask built by assignment into a constant tensor (ScatterND of
    constants, as torchvision's Swin builds its shifted-window mask), and
    dropout with p=0 in training mode (Swin's attention calls it so in
    eval): both evaluated or dropped at import."""

    def forward(self, x):
        m = torch.zeros(1, 6, 6)
        m[:, 0:3, :] = 1.0
        m[:, :, 4:] = 2.0
        y = F.dropout(x, p=0.0, training=True)
        return y + m


class SliceAssign(nn.Module):
    """In-place assignment into computed tensors, which PyTorch exports as
    ScatterND with constant indices and computed data and updates: a block
    of rows, a scalar fill of one column, an in-place add into the last
    column, two rows swapped through a list index (the updates read the
    data before it is written), and a column of an int64 tensor."""

    def forward(self, x, y, v, n):
        z = x * 2.0
        z[:, 1:3] = y + 1.0
        z[0, :, 2] = 7.0
        z[..., -1] += v
        z[:, [0, 4]] = z[:, [4, 0]]
        m = n * 2
        m[:, 1] = n[:, 0] * 3
        return z, m


class Conv3ds(nn.Module):
    """Video models' 3-D convolutions (r3d_18 and r2plus1d_18's forms): a
    3x3x3 with bias, a temporal-only (3, 1, 1) of stride 2 in depth, and
    grouped, dilated in depth, padded unevenly and strided over H and W;
    and 3-D UNets' transposed ones: stride 2 kernel 2, padding with
    output_padding, and grouped, dilated and strided unevenly."""

    def __init__(self):
        super().__init__()
        self.cube = nn.Conv3d(4, 6, 3, padding=1)
        self.temporal = nn.Conv3d(4, 5, (3, 1, 1), stride=(2, 1, 1),
                                  padding=(1, 0, 0), bias=False)
        self.grouped = nn.Conv3d(4, 6, (2, 3, 3), stride=(1, 2, 2),
                                 padding=(2, 0, 1), dilation=(2, 1, 1),
                                 groups=2)
        self.up = nn.ConvTranspose3d(4, 3, 2, stride=2)
        self.up_padded = nn.ConvTranspose3d(4, 6, 3, stride=(1, 2, 2),
                                            padding=1,
                                            output_padding=(0, 1, 1))
        self.up_grouped = nn.ConvTranspose3d(4, 6, (2, 3, 3),
                                             stride=(2, 1, 2),
                                             padding=(0, 2, 1),
                                             dilation=(1, 2, 1), groups=2,
                                             bias=False)

    def forward(self, x):
        return (self.cube(x), self.temporal(x), self.grouped(x), self.up(x),
                self.up_padded(x), self.up_grouped(x))


class Pool3ds(nn.Module):
    """Video models' MaxPool3d: S3D's (1, 3, 3) stride (1, 2, 2), a cube of
    stride 2 with padding, and (2, 2, 2) with ceil_mode over an odd depth
    and dilation in depth; a NaN in the input stays NaN where a window
    takes it. AvgPool3d: S3D's head (2, 7, 7) stride 1, and padded with
    and without count_include_pad, with ceil_mode."""

    def forward(self, x):
        return (F.max_pool3d(x, (1, 3, 3), (1, 2, 2), (0, 1, 1)),
                F.max_pool3d(x, 3, 2, 1),
                F.max_pool3d(x, 2, 2, ceil_mode=True),
                F.max_pool3d(x, (2, 3, 2), (1, 2, 2), dilation=(2, 1, 1)),
                F.avg_pool3d(x, (2, 7, 7), 1),
                F.avg_pool3d(x, 3, 2, 1, ceil_mode=True),
                F.avg_pool3d(x, 3, 2, 1, ceil_mode=True,
                             count_include_pad=False))


class ShapeBranches(nn.Module):
    """What PyTorch exports with a shape-dependent If (LocalResponseNorm,
    torch.diagonal, whose export also holds an EyeLike) and F.one_hot
    (OneHot); modelc takes the branch the constant condition picks."""

    def __init__(self):
        super().__init__()
        self.lrn = nn.LocalResponseNorm(3, alpha=0.01, beta=0.75, k=2.0)

    def forward(self, x, i):
        return (self.lrn(x), torch.diagonal(x, dim1=2, dim2=3),
                torch.diagonal(x, offset=1, dim1=2, dim2=3),
                F.one_hot(i, 6).to(torch.float32) * 2.0)


class GridSamples(nn.Module):
    """F.grid_sample in every mode modelc imports: bilinear and nearest,
    zeros, border and reflection padding, each align_corners (12 outputs,
    in that order)."""

    def forward(self, x, g):
        outs = []
        for mode in ("bilinear", "nearest"):
            for pad in ("zeros", "border", "reflection"):
                for corners in (False, True):
                    outs.append(F.grid_sample(x, g, mode=mode,
                                              padding_mode=pad,
                                              align_corners=corners))
        return tuple(outs)


class Scatters(nn.Module):
    """Tensor.scatter and scatter_add with computed indices
    (ScatterElements): one-hot targets from labels, rows written along
    dim 0 by an index smaller than the data in dim 1, and scatter_add with
    repeated indices (whole numbers, so the sums are exact in any order);
    negative indices count from the end."""

    def forward(self, x, labels, idx, src):
        onehot = torch.zeros(labels.shape[0], 5).scatter(1, labels[:, None],
                                                         1.0)
        rows = x.scatter(0, idx, src)
        added = x.round().scatter_add(1, idx.t()[:, :2] % 4,
                                      src.t()[:, :2].round())
        return onehot, rows, added


class IntegerSums(nn.Module):
    """Sums of integers (ReduceSum of int64, which the runtime's reductions
    do not take): torch.bucketize (a sum of comparisons), a count of a
    mask per row, and a whole-tensor sum of large values (exact, past
    f32's 2^24)."""

    def forward(self, x, n):
        edges = torch.tensor([-1.0, 0.0, 0.5, 2.0])
        return (torch.bucketize(x, edges), (x > 0).sum(dim=1),
                n.sum(), n.sum(dim=0, keepdim=True))


class GridSamplesNonFinite(GridSamples):
    """GridSamples over a grid with NaN and inf points. The exported graph
    is GridSamples'; the reference (forward outside the export) is NaN at
    those points in every mode, modelc's rule (PyTorch gives NaN in
    bilinear zeros mode, and an edge pixel or 0 elsewhere, as its kernels
    happen to compare and clamp)."""

    def forward(self, x, g):
        outs = super().forward(x, g)
        if torch.onnx.is_in_onnx_export():
            return outs
        bad = ~torch.isfinite(g).all(dim=-1, keepdim=True).permute(0, 3, 1, 2)
        return tuple(torch.where(bad, torch.full_like(o, float("nan")), o)
                     for o in outs)


class TopKOps(nn.Module):
    """torch.topk (ONNX TopK) along the last dim and a middle one, largest
    and smallest, of floats and int64, with NaN and +-inf among distinct values (PyTorch leaves
    the order of ties open; the frontend's test checks ONNX's
    lower-index-first), and a mixture-of-experts router: softmax over 8
    experts, the top 2 and their renormalized weights."""

    def forward(self, x, g, n):
        top, top_i = torch.topk(x, 3, dim=-1)
        bottom, bottom_i = torch.topk(x, 2, dim=1, largest=False)
        weights, experts = torch.topk(torch.softmax(g, dim=-1), 2, dim=-1)
        int_top, int_top_i = torch.topk(n, 2, dim=-1)
        return (top, top_i, bottom, bottom_i,
                weights / weights.sum(-1, keepdim=True), experts, int_top,
                int_top_i)


class Deconvs(nn.Module):
    """Transposed convolutions (decoders, UNets, GANs): stride 2 with
    padding and output_padding, groups and dilation, a stride larger than
    the kernel, more padding than the kernel covers, and a 1-D one."""

    def __init__(self):
        super().__init__()
        self.up = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1,
                                     output_padding=1)
        self.grouped = nn.ConvTranspose2d(4, 6, (3, 2), stride=(1, 2),
                                          padding=(2, 0), dilation=(2, 1),
                                          groups=2, bias=False)
        self.sparse = nn.ConvTranspose2d(4, 2, 2, stride=3)
        self.one = nn.ConvTranspose1d(4, 3, 4, stride=2, padding=1)

    def forward(self, x, s):
        return self.up(x), self.grouped(x), self.sparse(x), self.one(s)


def build(name):
    """(model, {input name: array}, [output names], {input: {dim: name}})"""
    rng = np.random.default_rng(0)

    def randn(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    if name == "resnet18":
        import torchvision
        model = torchvision.models.resnet18(weights=None)
        return model, {"image": randn(1, 3, 224, 224)}, ["logits"], {}
    if name == "mobilenet_v2_stem":
        # MobileNetV2's first blocks: conv + relu6 chains (expand,
        # depthwise at stride 1 and 2, project) and a residual add.
        import torchvision
        model = torchvision.models.mobilenet_v2(weights=None).features[:5]
        return model, {"image": randn(2, 3, 32, 32)}, ["features"], {}
    if name == "mobilenet_v3_small":
        import torchvision
        model = torchvision.models.mobilenet_v3_small(weights=None)
        return model, {"image": randn(1, 3, 112, 112)}, ["logits"], {}
    if name == "lraspp_mobilenet_v3_large":
        # torchvision's segmentation head over MobileNetV3: its output is
        # upsampled to the input's size by a bilinear Resize.
        from torchvision.models import segmentation

        class Out(nn.Module):
            def __init__(self):
                super().__init__()
                self.m = segmentation.lraspp_mobilenet_v3_large(
                    weights=None, weights_backbone=None)

            def forward(self, x):
                return self.m(x)["out"]
        return Out(), {"image": randn(1, 3, 96, 96)}, ["masks"], {}
    if name == "transformer":
        layer = nn.TransformerEncoderLayer(d_model=128, nhead=4,
                                           dim_feedforward=256,
                                           batch_first=True)
        model = nn.TransformerEncoder(layer, num_layers=2,
                                      enable_nested_tensor=False)
        # The layers start as copies of one layer (and the exporter would
        # share their equal weights), norms at 1 and 0: perturb every
        # parameter so that each is its own.
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p) * 0.05)
        return model, {"src": randn(1, 16, 128)}, ["encoded"], {}
    if name == "shape_ops":
        return (ShapeOps(), {"x": randn(2, 4, 8)}, ["scaled", "row_sums"],
                {"x": {0: "batch"}})
    if name == "mask_ops":
        return (MaskOps(), {"x": randn(2, 5, 5)}, ["masked", "logp"],
                {"x": {0: "batch", 1: "seq", 2: "seq"}})
    if name == "split_pad":
        return (SplitPad(), {"x": randn(2, 6, 10)}, ["s", "q", "v", "u"],
                {"x": {0: "batch"}})
    if name == "dilated_conv":
        return (DilatedConv(), {"x": randn(1, 2, 8, 8)}, ["aspp", "deep"],
                {})
    if name == "mobile_block":
        return MobileBlock(), {"x": randn(2, 3, 8, 8)}, ["y"], {}
    if name == "cnn":
        return Cnn(), {"image": randn(2, 3, 17, 17)}, ["logits"], {}
    if name == "activations":
        # Tiny, ordinary and huge magnitudes of both signs, +-0, +-inf.
        mags = np.concatenate([np.logspace(-7, 2.5, 60),
                               [0.0, 1e-30, 3.0, 20.0, 88.0, 1e4, np.inf]])
        x = np.concatenate([mags, -mags]).astype(np.float32).reshape(2, -1)
        return (Activations(), {"x": x},
                ["hardsigmoid", "elu", "selu", "celu", "softplus", "mish",
                 "softsign"], {})
    if name == "conv1d":
        return Conv1dNet(), {"x": randn(2, 4, 37)}, ["y"], {"x": {0: "batch"}}
    if name == "misc_ops":
        x = randn(2, 5, 6)
        x[0, 1, 2], x[1, 3, 0], x[0, 4, 5] = np.nan, np.inf, -np.inf
        x[1, 2, :] = -np.inf  # a row of -inf: logsumexp -inf
        x[0, 0, 0] = 0.0
        m = randn(2, 5, 6)
        return (MiscOps(), {"x": x, "m": m},
                ["lse", "lse_keep", "isnan", "sign", "and_", "or_",
                 "xor", "tiled", "reflect", "edge"], {})
    if name == "tiny_bn":
        # A batch norm whose gamma is 1e-4 (zero-init residual blocks end
        # near that), folded into the conv before mc-amp: the folded
        # weight (~3e-6) is below f16's normal range.
        conv = nn.Conv2d(8, 16, 3, padding=1, bias=False)
        bn = nn.BatchNorm2d(16)
        with torch.no_grad():
            conv.weight.normal_(0, 0.03)
            bn.weight.fill_(1e-4)
        return nn.Sequential(conv, bn), {"x": randn(2, 8, 16, 16)}, ["y"], {}
    if name == "index_ops":
        x = randn(3, 5, 6)
        x[0, 2, 1] = x[0, 4, 1]  # a tie: the first index wins
        x[1, 3, 2] = np.nan  # NaN is the extreme, as in PyTorch
        a = np.array([[7, -7, 7, -7, 0, 13]], np.int64).repeat(2, 0)
        b = np.array([[3], [-3]], np.int64)
        return (IndexOps(), {"x": x, "a": a, "b": b},
                ["argmax", "argmin", "triu", "tril", "remainder", "fmod",
                 "cumsum", "cumsum_int"], {})
    if name == "rounding":
        x = np.array([[0.5, 1.5, 2.5, -0.5, -1.5, -2.5, -0.0, 0.0, -0.3,
                       0.3, 0.49999997, -0.49999997, 1e10, -1e10,
                       8388609.0, -8388609.0, 4194304.5, 1e38, np.inf,
                       -np.inf, np.nan, 1e-30, -1e-30, 2.7, -2.7, 7.0]],
                     np.float32).repeat(2, 0)
        x[1] *= 3.0
        p = np.abs(randn(3, 7, 5)) + 0.5
        n = rng.integers(-3, 4, size=(2, 4, 3)).astype(np.int64)
        src = randn(3, 6)
        idx = np.array([[0, 5, 1, 2], [3, 0, 1, 1], [4, 0, 4, 5]],
                       np.int64)
        return (Rounding(), {"x": x, "p": p, "n": n, "src": src, "idx": idx},
                ["floor", "ceil", "round", "fmod_floor", "prod", "prod_keep",
                 "prod_int", "gathered", "gathered0"], {})
    if name == "norms":
        return (Norms(), {"x": randn(2, 3, 9, 9), "s": randn(3, 5, 7)},
                ["group", "inst", "inst1d"],
                {"x": {0: "batch"}, "s": {0: "batch"}})
    if name == "pixel_ops":
        return (PixelOps(), {"x": randn(2, 8, 3, 5)},
                ["shuffled", "prelu", "prelu1", "normalized", "l1"], {})
    if name == "trig":
        t = np.array([0.0, 1.0, 17.0, 999.0], np.float32)
        return (Trig(), {"t": t, "q": randn(2, 60, 16)}, ["emb", "roped"],
                {})
    if name == "inverse_trig":
        x = (randn(3, 16) * 4).astype(np.float32)
        x[0, :6] = [0.0, -0.0, 1.0, 1e-20, np.inf, -np.inf]
        x[1, :3] = [np.nan, 80.0, -80.0]
        u = np.tanh(randn(3, 16)).astype(np.float32)
        u[0, :6] = [1.0, -1.0, 1.5, -2.0, 0.0, np.nan]
        return (InverseTrig(), {"x": x, "u": u},
                ["tan", "asin", "acos", "atan", "angle"], {})
    if name == "einsums":
        return (Einsums(),
                {"q": randn(2, 3, 5, 4), "k": randn(2, 3, 6, 4),
                 "v": randn(2, 3, 6, 4), "u": randn(7), "w": randn(3)},
                ["attn", "outer", "swapped", "rowdot", "total", "ellipsis",
                 "implicit", "upper"], {})
    if name == "float_checks":
        x = np.array([[1.0, np.inf, -np.inf], [np.nan, 0.0, -3e38]],
                     np.float32)
        return FloatChecks(), {"x": x}, ["inf", "nan", "finite"], {}
    if name == "constant_mask":
        return ConstantMask(), {"x": randn(2, 6, 6)}, ["y"], {}
    if name == "class_losses":
        y = np.array([1, -100, 4, 0, -100, 2], np.int64)
        seg = rng.integers(0, 5, (2, 3, 4)).astype(np.int64)
        seg[1, 2, 3] = -100
        return (ClassLosses(),
                {"x": randn(6, 5) * 3, "y": y, "img": randn(2, 5, 3, 4),
                 "seg": seg},
                ["mean", "summed", "spatial", "nll", "masked"], {})
    if name == "double_scalars":
        x = np.array([[1.0, -2.5, 0.0], [3e-8, -1e9, 7.0]], np.float32)
        return (DoubleScalars(), {"x": x},
                ["mask", "scaled", "wide"], {})
    if name == "conv3ds":
        return (Conv3ds(), {"x": randn(2, 4, 6, 7, 5)},
                ["cube", "temporal", "grouped", "up", "up_padded",
                 "up_grouped"], {})
    if name == "pool3ds":
        x = randn(2, 3, 7, 9, 8)
        x[1, 2, 3, 4, 5] = np.nan
        return (Pool3ds(), {"x": x},
                ["s3d", "cube", "ceil", "dilated", "avg_head", "avg_pad",
                 "avg_valid"], {})
    if name == "shape_branches":
        return (ShapeBranches(),
                {"x": randn(2, 6, 5, 4),
                 "i": np.array([[0, 5, 2], [3, 3, 1]], np.int64)},
                ["lrn", "diag", "diag1", "hot"], {})
    if name == "grid_samples":
        x = randn(2, 3, 5, 7)
        x[1, 2, 4, 6] = np.inf  # a zeros-padded corner must not read it
        g = (rng.random((2, 4, 6, 2)) * 3 - 1.5).astype(np.float32)
        g[0, 0, 0] = [1.0, -1.0]  # the corners, exactly
        g[0, 0, 1] = [0.0, 0.0]
        g[1, 3, 5] = [2.7, -3.9]  # far outside: reflected several times
        return (GridSamples(), {"x": x, "g": g},
                [f"gs{i}" for i in range(12)], {})
    if name == "scatters":
        x = (randn(3, 4) * 4).astype(np.float32)
        x[1, 3] = -0.0  # untouched by the scatters: keeps its sign
        x[2, 3] = -0.25  # rounds to -0.0
        return (Scatters(),
                {"x": x, "labels": np.array([4, 0, 2], np.int64),
                 "idx": np.array([[2, 0, 1], [0, 2, 2]], np.int64),
                 "src": randn(2, 3) * 4},
                ["onehot", "rows", "added"], {})
    if name == "integer_sums":
        n = np.array([[2**40 + 1, 3, -7], [5, 2**33, 11], [1, 1, 1],
                      [-(2**35), 0, 9], [4, 4, 4]], np.int64)
        return (IntegerSums(), {"x": randn(3, 7, 5), "n": n},
                ["buckets", "count", "total", "cols"], {})
    if name == "grid_nonfinite":
        x = randn(1, 2, 4, 5)
        g = (rng.random((1, 3, 3, 2)) * 2 - 1).astype(np.float32)
        g[0, 0, 0, 0] = np.nan
        g[0, 1, 2, 1] = np.inf
        g[0, 2, 1, 0] = -np.inf
        return (GridSamplesNonFinite(), {"x": x, "g": g},
                [f"gs{i}" for i in range(12)], {})
    if name == "slice_assign":
        n = np.array([[1, 2, 3], [-4, 5, 6]], np.int64)
        return (SliceAssign(),
                {"x": randn(2, 5, 6), "y": randn(2, 2, 6), "v": randn(2, 5),
                 "n": n}, ["z", "m"], {})
    if name == "topk":
        x = randn(3, 5, 7)
        x[0, 1, 3] = np.nan  # NaN ranks above +inf, as in PyTorch
        x[0, 4, 6] = np.nan
        x[1, 2, 4] = np.inf
        x[1, 3, 0] = -np.inf
        x[2, 0, 5] = np.inf
        x[2, 0, 2] = np.nan
        # Integers without ties (PyTorch leaves their order open).
        n = np.array([[7, -3, 12, 0, -8], [1, 100, -100, 5, 4],
                      [9, 8, 7, 6, 5]], np.int64)
        return (TopKOps(), {"x": x, "g": randn(3, 8), "n": n},
                ["top", "top_i", "bottom", "bottom_i", "weights",
                 "experts", "int_top", "int_top_i"],
                {"x": {0: "batch"}, "g": {0: "batch"}, "n": {0: "batch"}})
    if name == "deconvs":
        return (Deconvs(), {"x": randn(2, 4, 5, 6), "s": randn(2, 4, 9)},
                ["up", "grouped", "sparse", "one"], {})
    if name == "resizes":
        return (Resizes(), {"x": randn(2, 3, 7, 9)},
                ["up", "down", "corners", "scaled", "nearest2", "nearest",
                 "linear1d", "cubic_up", "cubic_down", "cubic_scaled"], {})
    if name == "splat_weights":
        return (SplatWeights(),
                {"x": randn(4, 6), "img": randn(1, 3, 6, 6)},
                ["lin", "conv", "bmm", "clamped"], {})
    sys.exit(f"models.py: unknown model '{name}'")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("name")
    parser.add_argument("outdir")
    parser.add_argument("--opset", type=int, default=13)
    args = parser.parse_args()

    torch.manual_seed(0)
    model, inputs, output_names, dynamic = build(args.name)
    model.eval()
    # Random (not fresh) batch-norm statistics, so the import of
    # BatchNormalization is checked with values that matter.
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
    tensors = tuple(torch.from_numpy(v) for v in inputs.values())
    dynamic_axes = {k: v for k, v in dynamic.items()}
    os.makedirs(args.outdir, exist_ok=True)
    path = os.path.join(args.outdir, args.name + ".onnx")
    # Grad stays enabled: under no_grad, nn.TransformerEncoderLayer in eval
    # mode takes its fused fast path, which the exporter cannot export.
    torch.onnx.export(model, tensors, path, opset_version=args.opset,
                      input_names=list(inputs), output_names=output_names,
                      dynamic_axes=dynamic_axes or None,
                      # Unfolded, the CNN keeps its BatchNormalization
                      # (folding merges it into the Conv before it).
                      do_constant_folding=args.name != "cnn")
    outputs = model(*tensors)
    if isinstance(outputs, torch.Tensor):
        outputs = (outputs,)
    for name, value in inputs.items():
        np.save(os.path.join(args.outdir, name + ".npy"), value)
    for name, value in zip(output_names, outputs):
        ref = value.detach().numpy()
        # Integers exactly (int64 past 2^24 would round in float32).
        if not np.issubdtype(ref.dtype, np.integer):
            ref = ref.astype(np.float32)
        np.save(os.path.join(args.outdir, "ref_" + name + ".npy"), ref)

    import onnx
    ops = sorted({n.op_type for n in onnx.load(path).graph.node})
    print(f"{args.name}: opset {args.opset}, ops: {' '.join(ops)}")


if __name__ == "__main__":
    main()
