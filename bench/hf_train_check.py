#!/usr/bin/env python3
"""Fine-tuning Hugging Face classifiers from their ONNX export: each model
built from a tiny config (random weights; nothing is downloaded) with
dropout 0.1, its loss (`model(input_ids, labels=...).loss`) exported to
ONNX in training mode (opset 17, PyTorch 1.13's exporter), compiled by
`modelc compile --train --optimizer=adamw --lr=1e-3`, and trained for 10
steps by `modelc-run --train` on one batch. The reference is PyTorch's
AdamW on the same model, with F.dropout drawing modelc's masks
(test/onnx/Inputs/ce_train.py's philox_dropout: Philox4x32-10 at seed 0,
one offset per dropout in call order), so the losses must agree to f32's
rounding. Prints one markdown table; exits 1 if a model that exports
fails in modelc or differs by more than 1e-5. The batch holds no pad
token: PyTorch gives an embedding's padding_idx row no gradient, which
its ONNX export (a Gather) does not say.

    /usr/bin/python3 bench/hf_train_check.py [--build DIR] [--venv DIR]
                                             [--out DIR] [MODEL ...]

Like bench/hf_survey.py (whose virtual environment it shares), a check
to run by hand, not a CI test: CI has no PyPI packages. The reference
relies on every dropout going through F.dropout, as in PyTorch 1.13 with
transformers 4.36.2 (newer ones may route attention dropout through
scaled_dot_product_attention).
"""
import argparse
import csv
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.dont_write_bytecode = True
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "test", "onnx", "Inputs"))
from hf_survey import ensure_venv  # noqa: E402


def models():
    import transformers as T
    tiny = dict(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                num_attention_heads=2, intermediate_size=64,
                max_position_embeddings=64, num_labels=3,
                hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    return {
        "bert": lambda: T.BertForSequenceClassification(
            T.BertConfig(**tiny)),
        "roberta": lambda: T.RobertaForSequenceClassification(
            T.RobertaConfig(**tiny)),
        "electra": lambda: T.ElectraForSequenceClassification(
            T.ElectraConfig(embedding_size=32, **tiny)),
        "albert": lambda: T.AlbertForSequenceClassification(
            T.AlbertConfig(embedding_size=32, classifier_dropout_prob=0.1,
                           **tiny)),
        "distilbert": lambda: T.DistilBertForSequenceClassification(
            T.DistilBertConfig(vocab_size=100, dim=32, n_layers=2, n_heads=2,
                               hidden_dim=64, max_position_embeddings=64,
                               num_labels=3, dropout=0.1,
                               attention_dropout=0.1,
                               seq_classif_dropout=0.1)),
        "gpt2": lambda: T.GPT2ForSequenceClassification(
            T.GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=2,
                         n_positions=64, num_labels=3, pad_token_id=0,
                         resid_pdrop=0.1, embd_pdrop=0.1, attn_pdrop=0.1)),
    }


def check(name, build, out, steps=10):
    import numpy as np
    import torch
    import torch.nn.functional as F
    import ce_train
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    torch.manual_seed(0)
    model = models()[name]()
    model.train()

    class Loss(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, ids, labels):
            return self.m(input_ids=ids, labels=labels).loss

    wrap = Loss(model)
    # No pad ids (0 for BERT, 1 for RoBERTa): an nn.Embedding's padding_idx
    # row gets no gradient in PyTorch, but the ONNX export has no
    # padding_idx (a Gather), so a graph trained from it updates that row.
    ids = torch.randint(2, 100, (4, 16))
    labels = torch.randint(0, 3, (4,))
    np.save(os.path.join(d, "ids.npy"), ids.numpy())
    np.save(os.path.join(d, "labels.npy"), labels.numpy())
    onnx_path = os.path.join(d, "train.onnx")
    try:
        torch.onnx.export(wrap, (ids, labels), onnx_path, opset_version=17,
                          input_names=["ids", "labels"],
                          output_names=["loss"],
                          training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False)
    except Exception as e:  # noqa: BLE001 (the exporter's own failure)
        return "no export", "", str(e).splitlines()[0][:60]
    saved = F.dropout
    F.dropout = ce_train.philox_dropout([0])
    try:
        opt = torch.optim.AdamW(wrap.parameters(), lr=1e-3)
        ref = []
        for _ in range(steps):
            loss = wrap(ids, labels)
            ref.append(loss.item())
            opt.zero_grad()
            loss.backward()
            opt.step()
    finally:
        F.dropout = saved
    bin_dir = os.path.join(build, "bin")
    step = os.path.join(d, "step.mcpk")
    p = subprocess.run([os.path.join(bin_dir, "modelc"), "compile",
                        onnx_path, "--train", "--optimizer=adamw",
                        "--lr=1e-3", "-o", step],
                       capture_output=True, text=True)
    if p.returncode:
        return "FAIL", "", (p.stderr.strip().splitlines() or ["?"])[-1][:80]
    log = os.path.join(d, "log.csv")
    p = subprocess.run([os.path.join(bin_dir, "modelc-run"), "--train", step,
                        "--data", "ids=" + os.path.join(d, "ids.npy"),
                        "--data", "labels=" + os.path.join(d, "labels.npy"),
                        "--batch", "4", "--epochs", str(steps),
                        "--log-csv", log, "--quiet"],
                       capture_output=True, text=True)
    if p.returncode:
        return "FAIL", "", (p.stderr.strip().splitlines() or ["?"])[-1][:80]
    got = [float(r["loss"]) for r in csv.DictReader(open(log))]
    if len(got) != steps:
        return "FAIL", "", f"{len(got)} losses logged, {steps} expected"
    errs = [abs(a - b) / abs(b) for a, b in zip(got, ref)]
    # (max() would pass over a NaN that is not first.)
    err = float("nan") if any(e != e for e in errs) else max(errs)
    status = "ok" if err <= 1e-5 else "FAIL"
    note = f"loss {ref[0]:.4f} -> {ref[-1]:.4f}"
    if status == "ok":
        shutil.rmtree(d)
    else:
        note += "; rel err by step " + " ".join(f"{e:.0e}" for e in errs)
    return status, f"{err:.1e}", note


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--venv", default=os.path.join(ROOT, "build", "bench",
                                                   "hf-venv"))
    ap.add_argument("--out", default="/tmp/modelc-hf-train")
    ap.add_argument("--in-venv", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("models", nargs="*")
    a = ap.parse_args()
    if not a.in_venv:
        py = ensure_venv(a.venv)
        os.execv(py, [py, os.path.abspath(__file__), "--in-venv",
                      *sys.argv[1:]])
    names = a.models or list(models())
    print("| model | status | max rel err of 10 losses | PyTorch's losses |")
    print("|---|---|---|---|")
    bad = 0
    for name in names:
        status, err, note = check(name, a.build, a.out)
        bad += status == "FAIL"
        print(f"| {name} | {status} | {err} | {note} |", flush=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
