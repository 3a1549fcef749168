"""Recurrent layers (ONNX RNN, GRU, LSTM) for test/onnx/recurrent.test.

    recurrent_models.py torch OUT [--opset N]
        PyTorch's nn.LSTM (2 layers, bidirectional, batch first), nn.GRU
        with a given h0, nn.RNN (relu), exported with a symbolic batch;
        OUT/recurrent.onnx, OUT/{x,h0}_B.npy and OUT/ref_{name}_B.npy for
        batches B = 3 and 5 (PyTorch's outputs).

    recurrent_models.py selfcheck
        Checks ref_layer (below) against PyTorch's LSTM, GRU and RNN.

    recurrent_models.py spec OUT
        What PyTorch does not export, built with onnx's helper API and
        answered by a NumPy transcription of the ONNX spec's equations
        (NumPy only: ref_spec() below, independent of modelc's code):
        OUT/spec.onnx, OUT/s.npy and OUT/ref_*.npy. Then graphs that must be
        refused: OUT/bad_lens.onnx (sequence_lens shorter than X),
        OUT/bad_act.onnx (an activation ONNX does not have),
        OUT/bad_w.onnx (W of the wrong size), OUT/bad_affine.onnx (Affine
        without its alpha), OUT/bad_act_count.onnx (two activations for
        one direction of RNN), OUT/bad_h0.onnx (a zero initial_h of the wrong
        batch), OUT/bad_hidden.onnx (hidden_size -2),
        OUT/bad_lens_count.onnx (sequence_lens of the wrong count),
        OUT/bad_dyn_h0.onnx (a constant initial_h of ones under a symbolic
        batch).
"""
import argparse
import os
import sys

import numpy as np


# --- The ONNX spec's equations, in NumPy ------------------------------------

def act(name, alpha=None, beta=None):
    n = name.lower()
    if n == "sigmoid":
        return lambda x: 1.0 / (1.0 + np.exp(-x))
    if n == "tanh":
        return np.tanh
    if n == "relu":
        return lambda x: np.maximum(x, 0.0)
    if n == "affine":
        return lambda x: alpha * x + beta
    if n == "leakyrelu":
        a = 0.01 if alpha is None else alpha
        return lambda x: np.where(x >= 0, x, a * x)
    if n == "thresholdedrelu":
        a = 1.0 if alpha is None else alpha
        return lambda x: np.where(x > a, x, 0.0)
    if n == "scaledtanh":
        return lambda x: alpha * np.tanh(beta * x)
    if n == "hardsigmoid":
        a = 0.2 if alpha is None else alpha
        b = 0.5 if beta is None else beta
        return lambda x: np.clip(a * x + b, 0.0, 1.0)
    if n == "elu":
        a = 1.0 if alpha is None else alpha
        return lambda x: np.where(x >= 0, x, a * (np.exp(x) - 1.0))
    if n == "softsign":
        return lambda x: x / (1.0 + np.abs(x))
    if n == "softplus":
        return lambda x: np.log1p(np.exp(x))
    raise ValueError(name)


NEEDS = {"affine": "ab", "leakyrelu": "a", "thresholdedrelu": "a",
         "scaledtanh": "ab", "hardsigmoid": "ab", "elu": "a"}


def acts(names, alphas, betas):
    """Alphas and betas consumed in order by the activations that use them."""
    ia = ib = 0
    out = []
    for n in names:
        need = NEEDS.get(n.lower(), "")
        a = b = None
        if "a" in need and ia < len(alphas):
            a, ia = alphas[ia], ia + 1
        if "b" in need and ib < len(betas):
            b, ib = betas[ib], ib + 1
        out.append(act(n, a, b))
    return out


def ref_layer(op, x, W, R, B=None, h0=None, c0=None, P=None, hidden=None,
              direction="forward", activations=None, alphas=(), betas=(),
              clip=None, input_forget=0, linear_before_reset=0, layout=0):
    """Y, Y_h, Y_c of one ONNX RNN / GRU / LSTM node, in float64."""
    x = x.astype(np.float64)
    if layout == 1:
        x = x.transpose(1, 0, 2)
        h0 = None if h0 is None else h0.transpose(1, 0, 2)
        c0 = None if c0 is None else c0.transpose(1, 0, 2)
    T, N, _ = x.shape
    D = 2 if direction == "bidirectional" else 1
    n = hidden
    per = {"RNN": 1, "GRU": 2, "LSTM": 3}[op]
    if activations is None:
        activations = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"],
                       "LSTM": ["Sigmoid", "Tanh", "Tanh"]}[op] * D
    fns = acts(activations, list(alphas), list(betas))
    cl = (lambda v: np.clip(v, -clip, clip)) if clip else (lambda v: v)
    Y = np.zeros((T, D, N, n))
    Yh = np.zeros((D, N, n))
    Yc = np.zeros((D, N, n))
    for d in range(D):
        f = fns[d * per:(d + 1) * per]
        w, r = W[d].astype(np.float64), R[d].astype(np.float64)
        g = w.shape[0] // n
        wb = np.zeros(g * n) if B is None else B[d, :g * n].astype(np.float64)
        rb = np.zeros(g * n) if B is None else B[d, g * n:].astype(np.float64)
        h = np.zeros((N, n)) if h0 is None else h0[d].astype(np.float64)
        c = np.zeros((N, n)) if c0 is None else c0[d].astype(np.float64)
        p = np.zeros(3 * n) if P is None else P[d].astype(np.float64)
        rev = direction == "reverse" or d == 1
        for t in (range(T - 1, -1, -1) if rev else range(T)):
            xt = x[t]
            if op == "RNN":
                h = f[0](cl(xt @ w.T + h @ r.T + wb + rb))
            elif op == "GRU":
                def part(m, k):
                    return m[..., k * n:(k + 1) * n]
                z = f[0](cl(part(xt @ w.T, 0) + part(h @ r.T, 0) +
                            part(wb, 0) + part(rb, 0)))
                rr = f[0](cl(part(xt @ w.T, 1) + part(h @ r.T, 1) +
                             part(wb, 1) + part(rb, 1)))
                rh = r[2 * n:]
                if linear_before_reset:
                    hh = f[1](cl(part(xt @ w.T, 2) +
                                 rr * (h @ rh.T + part(rb, 2)) +
                                 part(wb, 2)))
                else:
                    hh = f[1](cl(part(xt @ w.T, 2) + (rr * h) @ rh.T +
                                 part(rb, 2) + part(wb, 2)))
                h = (1 - z) * hh + z * h
            else:
                gates = xt @ w.T + h @ r.T + wb + rb
                gi, go, gf, gc = (gates[:, k * n:(k + 1) * n]
                                  for k in range(4))
                pi, po, pf = p[:n], p[n:2 * n], p[2 * n:]
                i = f[0](cl(gi + pi * c))
                fg = 1 - i if input_forget else f[0](cl(gf + pf * c))
                cc = f[1](cl(gc))
                c = fg * c + i * cc
                o = f[0](cl(go + po * c))
                h = o * f[2](c)
            Y[t, d] = h
        Yh[d], Yc[d] = h, c
    if layout == 1:
        Y = Y.transpose(2, 0, 1, 3)
        Yh, Yc = Yh.transpose(1, 0, 2), Yc.transpose(1, 0, 2)
    return Y, Yh, Yc


# --- PyTorch's layers --------------------------------------------------------

def torch_models(out, opset):
    import torch
    from torch import nn

    class Recurrent(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(6, 8, num_layers=2, batch_first=True,
                                bidirectional=True)
            self.gru = nn.GRU(16, 5, batch_first=True)
            self.rnn = nn.RNN(6, 4, nonlinearity="relu", batch_first=True)
            self.init = nn.Linear(6, 5)

        def forward(self, x):
            a, (h, c) = self.lstm(x)
            # The GRU's initial state is computed from x (an input's batch
            # must lead, and a state's is its dim 1).
            h0 = torch.tanh(self.init(x.mean(1))).unsqueeze(0)
            g, hg = self.gru(a, h0)
            r, hr = self.rnn(x)
            return a, h, c, g, hg, r, hr

    torch.manual_seed(0)
    model = Recurrent().eval()
    names = ["a", "h", "c", "g", "hg", "r", "hr"]
    rng = np.random.default_rng(0)
    os.makedirs(out, exist_ok=True)
    for batch in (3, 5):
        x = rng.standard_normal((batch, 7, 6)).astype(np.float32)
        np.save(os.path.join(out, f"x_{batch}.npy"), x)
        with torch.no_grad():
            outs = model(torch.from_numpy(x))
        for name, v in zip(names, outs):
            np.save(os.path.join(out, f"ref_{name}_{batch}.npy"), v.numpy())
        if batch == 3:
            path = os.path.join(out, "recurrent.onnx")
            torch.onnx.export(
                model, (torch.from_numpy(x),), path,
                opset_version=opset, input_names=["x"],
                output_names=names, dynamic_axes={"x": {0: "batch"}})
    import onnx
    ops = sorted({n.op_type for n in onnx.load(path).graph.node
                  if n.op_type in ("RNN", "GRU", "LSTM")})
    print(f"recurrent: opset {opset}, ops: {' '.join(ops)}")


def selfcheck():
    """ref_layer against PyTorch's layers where PyTorch has the variant:
    LSTM and GRU (linear_before_reset=1) bidirectional with initial states,
    RNN with tanh and relu; ONNX's gate order from PyTorch's."""
    import torch
    from torch import nn
    torch.manual_seed(2)
    rng = np.random.default_rng(2)
    T, N, I, n = 6, 3, 4, 5
    x = rng.standard_normal((T, N, I)).astype(np.float32)
    h0 = rng.standard_normal((2, N, n)).astype(np.float32)
    c0 = rng.standard_normal((2, N, n)).astype(np.float32)
    worst = 0.0
    for op, order in (("LSTM", [0, 3, 1, 2]), ("GRU", [1, 0, 2]),
                      ("RNN", [0]), ("RNN-relu", [0])):
        kind = op.split("-")[0]
        layer = getattr(nn, kind)(I, n, bidirectional=True,
                                  **({"nonlinearity": "relu"}
                                     if op == "RNN-relu" else {}))
        def onnx_order(t):
            parts = np.split(t.detach().numpy(), len(order))
            return np.concatenate([parts[k] for k in order])
        W = np.stack([onnx_order(getattr(layer, "weight_ih_l0" + s))
                      for s in ("", "_reverse")])
        R = np.stack([onnx_order(getattr(layer, "weight_hh_l0" + s))
                      for s in ("", "_reverse")])
        B = np.stack([np.concatenate(
            [onnx_order(getattr(layer, "bias_ih_l0" + s)),
             onnx_order(getattr(layer, "bias_hh_l0" + s))])
            for s in ("", "_reverse")])
        state = ((torch.from_numpy(h0), torch.from_numpy(c0))
                 if kind == "LSTM" else torch.from_numpy(h0))
        with torch.no_grad():
            y, hs = layer(torch.from_numpy(x), state)
        ref = ref_layer(kind, x, W, R, B, h0, c0 if kind == "LSTM" else None,
                        hidden=n, direction="bidirectional",
                        activations=(["Tanh", "Relu"][op == "RNN-relu"],) * 2
                        if kind == "RNN" else None,
                        linear_before_reset=1)
        got_y = ref[0].transpose(0, 2, 1, 3).reshape(T, N, 2 * n)
        h = hs[0] if kind == "LSTM" else hs
        err = max(np.abs(got_y - y.numpy()).max(),
                  np.abs(ref[1] - h.numpy()).max())
        if kind == "LSTM":
            err = max(err, np.abs(ref[2] - hs[1].numpy()).max())
        worst = max(worst, err)
        print(f"selfcheck {op}: max abs err {err:.1e}")
    if worst > 1e-5:
        sys.exit(f"the NumPy reference differs from PyTorch by {worst}")
    print("selfcheck: ok")


# --- Hand-built graphs, answered by ref_layer --------------------------------

def spec_models(out):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)
    os.makedirs(out, exist_ok=True)
    T, N, I = 5, 3, 4
    s = rng.standard_normal((T, N, I)).astype(np.float32)
    np.save(os.path.join(out, "s.npy"), s)
    inits, nodes, outputs = [], [], []

    def const(name, value):
        inits.append(numpy_helper.from_array(value.astype(np.float32), name))
        return name

    def weights(prefix, op, n, D, bias=True):
        g = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
        W = rng.uniform(-0.6, 0.6, (D, g * n, I)).astype(np.float32)
        R = rng.uniform(-0.6, 0.6, (D, g * n, n)).astype(np.float32)
        B = rng.uniform(-0.5, 0.5, (D, 2 * g * n)).astype(np.float32)
        names = [const(prefix + "_W", W), const(prefix + "_R", R),
                 const(prefix + "_B", B) if bias else ""]
        return W, R, (B if bias else None), names

    def add(name, op, n, D=1, bias=True, h0=None, c0=None, P=None,
            lens=None, x=s, xname="s", want=(0, 1, 2), **attrs):
        W, R, B, wn = weights(name, op, n, D, bias)
        ins = [xname] + wn
        ins.append(const(name + "_lens", lens) if lens is not None else "")
        ins.append(const(name + "_h0", h0) if h0 is not None else "")
        if op == "LSTM":
            ins.append(const(name + "_c0", c0) if c0 is not None else "")
            ins.append(const(name + "_P", P) if P is not None else "")
        while ins and ins[-1] == "":
            ins.pop()
        if lens is not None:  # sequence_lens is int32
            inits[-1 if h0 is None else -2] = numpy_helper.from_array(
                lens.astype(np.int32), name + "_lens")
        outs = [f"{name}_{k}" if k in want else ""
                for k in range(3 if op == "LSTM" else 2)]
        while outs[-1] == "":
            outs.pop()
        nodes.append(helper.make_node(op, ins, outs, hidden_size=n, **attrs))
        kw = {k: v for k, v in attrs.items()
              if k in ("direction", "activations", "clip", "input_forget",
                       "linear_before_reset", "layout")}
        if "activation_alpha" in attrs:
            kw["alphas"] = attrs["activation_alpha"]
        if "activation_beta" in attrs:
            kw["betas"] = attrs["activation_beta"]
        refs = ref_layer(op, x, W, R, B, h0, c0, P, hidden=n, **kw)
        for k, o in enumerate(outs):
            if o:
                np.save(os.path.join(out, f"ref_{o}.npy"),
                        refs[k].astype(np.float32))
                outputs.append(helper.make_tensor_value_info(
                    o, TensorProto.FLOAT, list(refs[k].shape)))

    n = 3
    # LSTM: peepholes, clip, initial states, bidirectional.
    add("peep", "LSTM", n, D=2, direction="bidirectional", clip=0.8,
        h0=rng.standard_normal((2, N, n)), c0=rng.standard_normal((2, N, n)),
        P=rng.uniform(-1, 1, (2, 3 * n)))
    # LSTM: input_forget, reverse, no bias, no initial state, other
    # activations with alphas and betas, sequence_lens all of X's length.
    add("coupled", "LSTM", n, direction="reverse", input_forget=1,
        bias=False, lens=np.full(N, T),
        activations=["HardSigmoid", "LeakyRelu", "ScaledTanh"],
        activation_alpha=[0.3, 0.2, 1.5], activation_beta=[0.4, 0.7])
    # GRU without linear_before_reset (PyTorch exports 1), bidirectional,
    # with the remaining activations.
    add("gru0", "GRU", n, D=2, direction="bidirectional",
        activations=["Sigmoid", "Softsign", "HardSigmoid", "Elu"],
        activation_alpha=[0.25, 0.5], activation_beta=[0.45])
    # GRU with linear_before_reset and no initial state, clip.
    add("gru1", "GRU", n, linear_before_reset=1, clip=1.5)
    # RNN: Affine, Softplus, ThresholdedRelu, reverse.
    add("rnn_aff", "RNN", n, D=2, direction="bidirectional",
        activations=["Affine", "Softplus"], activation_alpha=[0.7],
        activation_beta=[0.1], h0=rng.standard_normal((2, N, n)))
    add("rnn_thr", "RNN", n, activations=["ThresholdedRelu"],
        activation_alpha=[0.1])
    # layout = 1 (batch first): X [N, T, I], states [N, D, n].
    sb = s.transpose(1, 0, 2).copy()
    np.save(os.path.join(out, "sb.npy"), sb)
    add("bf", "LSTM", n, D=2, direction="bidirectional", layout=1,
        x=sb, xname="sb", h0=rng.standard_normal((N, 2, n)),
        c0=rng.standard_normal((N, 2, n)))
    add("bfg", "GRU", n, layout=1, x=sb, xname="sb", want=(1,))

    inputs = [helper.make_tensor_value_info("s", TensorProto.FLOAT,
                                            [T, N, I]),
              helper.make_tensor_value_info("sb", TensorProto.FLOAT,
                                            [N, T, I])]
    graph = helper.make_graph(nodes, "spec", inputs, outputs, inits)
    model = helper.make_model(graph,
                              opset_imports=[helper.make_opsetid("", 14)])
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(out, "spec.onnx"))
    print("spec: " + " ".join(o.name for o in outputs))

    # Graphs to refuse.
    def bad(file, op, n, ins_extra=(), inits_extra=(), w_rows=None,
            hidden_override=None, **attrs):
        g = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
        W = np.zeros((1, w_rows or g * n, I), np.float32)
        R = np.zeros((1, g * n, n), np.float32)
        ini = [numpy_helper.from_array(W, "W"),
               numpy_helper.from_array(R, "R")] + list(inits_extra)
        node = helper.make_node(op, ["s", "W", "R"] + list(ins_extra),
                                ["y"], hidden_size=hidden_override or n,
                                **attrs)
        graph = helper.make_graph(
            [node], file, [inputs[0]],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                           [T, 1, N, n])],
            ini)
        onnx.save(helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", 14)]),
            os.path.join(out, file + ".onnx"))

    lens = numpy_helper.from_array(np.array([5, 2, 5], np.int32), "lens")
    bad("bad_lens", "LSTM", 2, ["", "lens"], [lens])
    bad("bad_act", "RNN", 2, activations=["Swish"])
    bad("bad_w", "GRU", 2, w_rows=5)
    bad("bad_affine", "RNN", 2, activations=["Affine"])
    bad("bad_act_count", "RNN", 2, activations=["Tanh", "Relu"])
    # A zero initial state of the wrong batch (3 sequences for X's 3 is
    # right; 4 is not), a hidden_size below 1, sequence_lens of the wrong
    # count.
    h0 = numpy_helper.from_array(np.zeros((1, N + 1, 2), np.float32), "h0")
    bad("bad_h0", "LSTM", 2, ["", "", "h0"], [h0])
    bad("bad_hidden", "GRU", 2, hidden_override=-2)
    lens2 = numpy_helper.from_array(np.full(N + 2, T, np.int32), "lens")
    bad("bad_lens_count", "RNN", 2, ["", "lens"], [lens2])
    # A constant non-zero initial state, of one batch size, under a
    # symbolic batch (layout 1: the batch leads X).
    node = helper.make_node("LSTM", ["xb", "W", "R", "", "", "h0"], ["y"],
                            hidden_size=2, layout=1)
    graph = helper.make_graph(
        [node], "bad_dyn_h0",
        [helper.make_tensor_value_info("xb", TensorProto.FLOAT,
                                       ["batch", T, I])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                       ["batch", T, 1, 2])],
        [numpy_helper.from_array(np.ones((1, 8, I), np.float32), "W"),
         numpy_helper.from_array(np.ones((1, 8, 2), np.float32), "R"),
         numpy_helper.from_array(np.ones((N, 1, 2), np.float32), "h0")])
    onnx.save(helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 14)]),
        os.path.join(out, "bad_dyn_h0.onnx"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["torch", "spec", "selfcheck"])
    parser.add_argument("outdir", nargs="?")
    parser.add_argument("--opset", type=int, default=14)
    args = parser.parse_args()
    if args.what == "selfcheck":
        selfcheck()
    elif args.what == "torch":
        torch_models(args.outdir, args.opset)
    else:
        spec_models(args.outdir)


if __name__ == "__main__":
    sys.exit(main())
