#!/usr/bin/env python3
"""Cross-checks modelc's C++ models against PyTorch.

Runs models-torch-export (the C++ side: weights, inputs and eager outputs as
.npy), loads the weights into torchvision.models.resnet18,
torch.nn.TransformerEncoderLayer, torch.nn.MultiheadAttention, a GPT-2
block built from torch.nn modules, torch.nn.LSTM, GRU and RNN and their
cells, runs them
in eval mode and compares: relative error ||ours - torch|| / ||torch|| below
1e-4 (f32, different summation orders and kernels on the two sides). For the
recurrent layers the last states and the gradients of every parameter, the
input and the initial states (eager autograd against torch's) are compared
too.

Exits 77 (CTest's SKIP_RETURN_CODE) when torch or torchvision is missing.
usage: torch_crosscheck.py EXPORTER WORK_DIR
"""
import os
import shutil
import subprocess
import sys

SKIP = 77
TOL = 1e-4

try:
    import numpy as np
    import torch
    import torchvision
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"SKIP: the PyTorch cross-check needs torch and torchvision ({e})")
    sys.exit(SKIP)


def load_case(work, name):
    d = os.path.join(work, name)
    return {f[:-4]: np.load(os.path.join(d, f)) for f in os.listdir(d)
            if f.endswith(".npy")}


def load_state(module, arrays, inputs):
    """Loads every array not in `inputs` into `module` by state_dict name;
    only num_batches_tracked may be missing, and nothing may be left over."""
    state = {k: torch.from_numpy(v) for k, v in arrays.items()
             if k not in inputs}
    result = module.load_state_dict(state, strict=False)
    missing = [k for k in result.missing_keys
               if not k.endswith("num_batches_tracked")]
    if missing or result.unexpected_keys:
        raise SystemExit(f"state_dict mismatch: missing {missing}, "
                         f"unexpected {result.unexpected_keys}")
    return len(state)


def rel_err(ours, ref):
    ours = np.asarray(ours, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert ours.shape == ref.shape, (ours.shape, ref.shape)
    if np.isnan(ours).any() or np.isnan(ref).any():
        return float("nan")
    den = np.linalg.norm(ref)
    # An all-zero reference (a dead relu's gradient): the absolute error.
    return float(np.linalg.norm(ours - ref) / (den if den > 0 else 1.0))


def gpt2_block_torch(a):
    """The GPT-2 block of examples/gpt2 in torch.nn terms."""
    d = a["ln_1.weight"].shape[0]
    ln1, ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
    attn = torch.nn.MultiheadAttention(d, 4, batch_first=True)
    fc, proj = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)
    parts = {"ln_1": ln1, "ln_2": ln2, "attn": attn, "mlp.c_fc": fc,
             "mlp.c_proj": proj}
    for prefix, m in parts.items():
        load_state(m, {k[len(prefix) + 1:]: v for k, v in a.items()
                       if k.startswith(prefix + ".")}, ())
    t = a["x"].shape[1]
    mask = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)

    def block(x):
        h = ln1(x)
        x = x + attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + proj(torch.nn.functional.gelu(fc(ln2(x)),
                                                 approximate="tanh"))
    return block


# The C++ exporter's recurrent cases: (torch.nn class, constructor kwargs).
RECURRENT = {
    "lstm_bi_batch_first": (torch.nn.LSTM, dict(
        input_size=5, hidden_size=8, num_layers=2, batch_first=True,
        bidirectional=True)),
    "lstm_no_bias_zero_state": (torch.nn.LSTM, dict(
        input_size=4, hidden_size=6, bias=False)),
    "gru_bi_zero_state": (torch.nn.GRU, dict(
        input_size=4, hidden_size=6, num_layers=2, bidirectional=True)),
    "gru_batch_first_state": (torch.nn.GRU, dict(
        input_size=3, hidden_size=5, batch_first=True)),
    "rnn_relu_unbatched": (torch.nn.RNN, dict(
        input_size=3, hidden_size=4, num_layers=2, nonlinearity="relu",
        bias=False)),
    "rnn_tanh_bi": (torch.nn.RNN, dict(
        input_size=3, hidden_size=4, batch_first=True, bidirectional=True)),
    "gru_no_bias_state": (torch.nn.GRU, dict(
        input_size=3, hidden_size=5, num_layers=2, bias=False,
        batch_first=True)),
    "lstm_bi_unbatched_state": (torch.nn.LSTM, dict(
        input_size=3, hidden_size=4, bidirectional=True)),
    "rnn_tanh_state": (torch.nn.RNN, dict(
        input_size=3, hidden_size=4, num_layers=2)),
    "rnn_relu_bias_bi": (torch.nn.RNN, dict(
        input_size=3, hidden_size=4, num_layers=2, nonlinearity="relu",
        batch_first=True, bidirectional=True)),
    "lstm_cell": (torch.nn.LSTMCell, dict(input_size=4, hidden_size=5)),
    "gru_cell_unbatched": (torch.nn.GRUCell, dict(
        input_size=4, hidden_size=5, bias=False)),
    "rnn_cell_zero_state": (torch.nn.RNNCell, dict(
        input_size=4, hidden_size=5, nonlinearity="relu")),
}
CELLS = (torch.nn.LSTMCell, torch.nn.GRUCell, torch.nn.RNNCell)


def recurrent_results(work, name):
    """Outputs, last states and gradients of one recurrent case."""
    cls, kwargs = RECURRENT[name]
    a = load_case(work, name)
    m = cls(**kwargs).eval()
    data = {k for k in a if k.startswith("grad.")} | {
        "x", "h0", "c0", "wo", "wh", "wc", "output", "h_n", "c_n"}
    load_state(m, a, data)
    leaves = {k: torch.from_numpy(a[k]).requires_grad_()
              for k in ("x", "h0", "c0") if k in a}
    if cls in CELLS:  # one step: the output is the next h
        state = (leaves["h0"], leaves["c0"]) if "c0" in leaves else \
            leaves.get("h0")
        h = m(leaves["x"], state)
        h, c = h if cls is torch.nn.LSTMCell else (h, None)
        out = h
    elif "c0" in leaves:
        out, (h, c) = m(leaves["x"], (leaves["h0"], leaves["c0"]))
    elif cls is torch.nn.LSTM:
        out, (h, c) = m(leaves["x"])
    else:
        out, h = m(leaves["x"], leaves.get("h0"))
        c = None
    loss = (out * torch.from_numpy(a["wo"])).sum() + \
        (h * torch.from_numpy(a["wh"])).sum()
    checks = [("output", out), ("h_n", h)]
    if c is not None:
        loss = loss + (c * torch.from_numpy(a["wc"])).sum()
        checks.append(("c_n", c))
    loss.backward()
    results = [(f"{name} {k}", rel_err(a[k], v.detach().numpy()))
               for k, v in checks]
    grads = {f"grad.{k}": p.grad for k, p in m.named_parameters()}
    grads.update({f"grad.{k}": t.grad for k, t in leaves.items()})
    expected = {k for k in a if k.startswith("grad.")}
    if expected != set(grads):
        raise SystemExit(f"{name}: gradients {sorted(expected)} written, "
                         f"torch has {sorted(grads)}")
    worst = max(grads, key=lambda k: rel_err(a[k], grads[k].numpy()))
    results.append((f"{name} {len(grads)} grads (worst {worst[5:]})",
                    rel_err(a[worst], grads[worst].numpy())))
    return results


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    exporter, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    subprocess.run([exporter, work], check=True)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, torchvision {torchvision.__version__}")

    results = []
    with torch.no_grad():
        a = load_case(work, "resnet18")
        m = torchvision.models.resnet18().eval()
        n = load_state(m, a, ("x", "eager"))
        out = m(torch.from_numpy(a["x"])).numpy()
        results.append((f"resnet18 ({n} tensors) 2x3x64x64",
                        rel_err(a["eager"], out)))

        for norm in ("post", "pre"):
            for act in ("relu", "gelu"):
                a = load_case(work, f"encoder_{norm}_{act}")
                m = torch.nn.TransformerEncoderLayer(
                    32, 4, 64, dropout=0.1, activation=act, batch_first=True,
                    norm_first=norm == "pre").eval()
                load_state(m, a, ("x", "mask", "eager"))
                out = m(torch.from_numpy(a["x"]),
                        src_mask=torch.from_numpy(a["mask"])).numpy()
                results.append((f"TransformerEncoderLayer {norm}-norm {act}",
                                rel_err(a["eager"], out)))

        a = load_case(work, "mha_seq_first")
        m = torch.nn.MultiheadAttention(16, 4).eval()
        load_state(m, a, ("q", "k", "v", "mask", "eager"))
        out = m(*(torch.from_numpy(a[k]) for k in "qkv"),
                attn_mask=torch.from_numpy(a["mask"]), need_weights=False)[0]
        results.append(("MultiheadAttention seq-first bool mask",
                        rel_err(a["eager"], out.numpy())))

        a = load_case(work, "gpt2_block")
        out = gpt2_block_torch(a)(torch.from_numpy(a["x"])).numpy()
        results.append(("GPT-2 block 2x16x64", rel_err(a["eager"], out)))

    for name in RECURRENT:
        results += recurrent_results(work, name)

    failed = 0
    for name, err in results:
        ok = err < TOL  # NaN fails
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name:55s} rel_err {err:.3e}")
    print(f"{len(results) - failed}/{len(results)} within {TOL:g}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
