#!/usr/bin/env python3
"""Writes inputs and PyTorch (CPU) reference outputs as .npy files for the
TorchCrossCheck gtest (test/runtime/TorchCrossCheckTest.cpp), which runs the
modelc kernels on the same inputs and compares. Usage: torch_crosscheck.py DIR

Each case NAME writes NAME.x.npy (input), parameters as NAME.<p>.npy and the
reference NAME.ref.npy. The case list and parameters must match the test.
Exit code 77 when torch cannot be imported (the test skips).
"""
import os
import sys

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except Exception as e:  # noqa: BLE001
    print(f"torch_crosscheck: cannot import torch/numpy: {e}", file=sys.stderr)
    sys.exit(77)

out = sys.argv[1]
g = torch.Generator().manual_seed(1234)
torch.set_num_threads(1)


def rnd(*shape, lo=-1.0, hi=1.0):
    return torch.rand(*shape, generator=g, dtype=torch.float32) * (hi - lo) + lo


def save(name, **arrays):
    for k, v in arrays.items():
        np.save(os.path.join(out, f"{name}.{k}.npy"),
                np.ascontiguousarray(v.detach().numpy()))


# conv2d: strides, symmetric padding, dilation, groups.
x, w = rnd(2, 6, 15, 13), rnd(8, 3, 3, 3)
save("conv_groups", x=x, w=w,
     ref=F.conv2d(x, w, stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2))
# conv2d: asymmetric padding (F.pad first: left, right, top, bottom).
x, w = rnd(1, 4, 11, 10), rnd(5, 4, 3, 2)
save("conv_asym", x=x, w=w,
     ref=F.conv2d(F.pad(x, (1, 0, 2, 1)), w, stride=(2, 2)))
# depthwise, stride 2, pad 1.
x, w = rnd(2, 8, 12, 12), rnd(8, 1, 3, 3)
save("conv_dw", x=x, w=w, ref=F.conv2d(x, w, stride=2, padding=1, groups=8))
# 1x1 (no im2col) and the ResNet stem.
x, w = rnd(2, 16, 7, 7), rnd(12, 16, 1, 1)
save("conv_1x1", x=x, w=w, ref=F.conv2d(x, w))
x, w = rnd(1, 3, 32, 32), rnd(8, 3, 7, 7)
save("conv_stem", x=x, w=w, ref=F.conv2d(x, w, stride=2, padding=3))

# Pooling, ceil mode.
x = rnd(2, 4, 14, 15)
save("maxpool_ceil", x=x,
     ref=F.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True))
x = rnd(1, 3, 13, 12)
save("maxpool_dil", x=x,
     ref=F.max_pool2d(x, (3, 2), stride=(2, 1), padding=(1, 1), dilation=(2, 3),
                      ceil_mode=True))
x = rnd(2, 4, 14, 15)
save("avgpool_excl", x=x,
     ref=F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True,
                      count_include_pad=False))
save("avgpool_incl", x=x,
     ref=F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True,
                      count_include_pad=True))
x = rnd(1, 2, 8, 9)
save("avgpool_ceil_nopad", x=x,
     ref=F.avg_pool2d(x, 3, stride=2, ceil_mode=True, count_include_pad=False))

# Norms.
x = rnd(2, 6, 5, 7, lo=-3, hi=3)
mean, var = rnd(6), rnd(6, lo=0.2, hi=2)
scale, offset = rnd(6), rnd(6)
save("batch_norm", x=x, mean=mean, var=var, scale=scale, offset=offset,
     ref=F.batch_norm(x, mean, var, scale, offset, training=False, eps=1e-5))
x = rnd(4, 7, 32, lo=-3, hi=3)
gamma, beta = rnd(32), rnd(32)
save("layer_norm", x=x, gamma=gamma, beta=beta,
     ref=F.layer_norm(x, (32,), gamma, beta, eps=1e-5))
gamma2, beta2 = rnd(7, 32), rnd(7, 32)
save("layer_norm2", x=x, gamma=gamma2, beta=beta2,
     ref=F.layer_norm(x, (7, 32), gamma2, beta2, eps=1e-6))

# Activations and log_softmax (large inputs).
x = rnd(4, 257, lo=-8, hi=8)
save("gelu_tanh", x=x, ref=F.gelu(x, approximate="tanh"))
save("gelu", x=x, ref=F.gelu(x))
save("erf", x=x, ref=torch.erf(x))
x = rnd(3, 5, 40, lo=-20, hi=20)
x[0] += 1000
save("log_softmax", x=x, ref=F.log_softmax(x, dim=-1))
save("log_softmax1", x=x, ref=F.log_softmax(x, dim=1))
print("torch_crosscheck: wrote cases to", out)
