#!/usr/bin/env python3
"""Hugging Face architectures through modelc: each model built from its
config (random weights; nothing is downloaded), shrunk where that keeps
its structure (2 layers), exported to ONNX (opset 17, the TorchScript
exporter of Debian's PyTorch 1.13), compiled by `modelc compile`, run by
`modelc-run`, and compared with PyTorch's output on the same input.
Prints one line per model and a summary; exits 1 if any model that
exports fails in modelc or differs by more than 1e-4 (relative to the
output's largest magnitude). A model's files (under --out) are removed
once it matched; a failing one's stay.

    /usr/bin/python3 bench/hf_survey.py [--build DIR] [--venv DIR]
                                        [--out DIR] [MODEL ...]

transformers is not in Debian: the script makes a virtual environment
(default build/bench/hf-venv) from /usr/bin/python3 with the system's
site packages (PyTorch 1.13, onnx, numpy) and pip-installs
transformers==4.36.2 from PyPI into it (the last release that runs on
PyTorch 1.13), then runs itself there. A survey, not a CI test: CI has no
PyPI packages. docs/compiler.md records the last run.
"""
import argparse
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TRANSFORMERS = "transformers==4.36.2"


def ensure_venv(venv):
    py = os.path.join(venv, "bin", "python")
    probe = [py, "-c", "import transformers, torch, onnx"]
    if os.path.exists(py) and subprocess.run(
            probe, capture_output=True).returncode == 0:
        return py
    print(f"hf_survey: making {venv} (venv with system packages, then pip "
          f"install {TRANSFORMERS})", flush=True)
    subprocess.run(["/usr/bin/python3", "-m", "venv",
                    "--system-site-packages", venv], check=True)
    subprocess.run([py, "-m", "pip", "install", "-q", TRANSFORMERS],
                   check=True)
    subprocess.run(probe, check=True)
    return py


def models():
    import transformers as T

    def cfg(c, **kw):
        for k, v in kw.items():
            setattr(c, k, v)
        return c

    two = dict(num_hidden_layers=2)
    small = dict(num_hidden_layers=2, hidden_size=256, intermediate_size=512,
                 num_attention_heads=4)
    # name: (builder, input kind)
    return {
        "bert": (lambda: T.BertModel(cfg(T.BertConfig(), **two)), "ids"),
        "distilbert": (lambda: T.DistilBertModel(
            cfg(T.DistilBertConfig(), n_layers=2)), "ids"),
        "roberta": (lambda: T.RobertaModel(cfg(T.RobertaConfig(), **two)),
                    "ids"),
        "albert": (lambda: T.AlbertModel(cfg(T.AlbertConfig(), **two)),
                   "ids"),
        "electra": (lambda: T.ElectraModel(cfg(T.ElectraConfig(), **two)),
                    "ids"),
        "deberta-v2": (lambda: T.DebertaV2Model(
            cfg(T.DebertaV2Config(), **two)), "ids"),
        "mpnet": (lambda: T.MPNetModel(cfg(T.MPNetConfig(), **two)), "ids"),
        "squeezebert": (lambda: T.SqueezeBertModel(
            cfg(T.SqueezeBertConfig(), **two)), "ids"),
        "xlnet": (lambda: T.XLNetModel(cfg(T.XLNetConfig(), n_layer=2)),
                  "ids"),
        "funnel": (lambda: T.FunnelBaseModel(
            cfg(T.FunnelConfig(), block_sizes=[1, 1, 1])), "ids"),
        "t5-encoder": (lambda: T.T5EncoderModel(
            cfg(T.T5Config(), num_layers=2)), "ids"),
        "bart-encoder": (lambda: T.BartModel(
            cfg(T.BartConfig(), encoder_layers=2,
                decoder_layers=2)).encoder, "ids"),
        "clip-text": (lambda: T.CLIPTextModel(cfg(T.CLIPTextConfig(), **two)),
                      "ids"),
        "gpt2": (lambda: T.GPT2Model(cfg(T.GPT2Config(), n_layer=2)), "ids"),
        "gpt-neo": (lambda: T.GPTNeoModel(
            cfg(T.GPTNeoConfig(), num_layers=2,
                attention_types=[[["global", "local"], 1]])), "ids"),
        "gpt-j": (lambda: T.GPTJModel(
            cfg(T.GPTJConfig(), n_layer=2, n_embd=256, n_head=4,
                rotary_dim=32)), "ids"),
        "opt": (lambda: T.OPTModel(cfg(T.OPTConfig(), **two)), "ids"),
        "bloom": (lambda: T.BloomModel(cfg(T.BloomConfig(), n_layer=2)),
                  "ids"),
        "falcon": (lambda: T.FalconModel(cfg(T.FalconConfig(), **two)),
                   "ids"),
        "llama": (lambda: T.LlamaModel(
            cfg(T.LlamaConfig(), **small, num_key_value_heads=4)), "ids"),
        "mistral": (lambda: T.MistralModel(
            cfg(T.MistralConfig(), **small, num_key_value_heads=2)), "ids"),
        "phi": (lambda: T.PhiModel(cfg(T.PhiConfig(), **small)), "ids"),
        "vit": (lambda: T.ViTModel(cfg(T.ViTConfig(), **two)), "image"),
        "deit": (lambda: T.DeiTModel(cfg(T.DeiTConfig(), **two)), "image"),
        "beit": (lambda: T.BeitModel(cfg(T.BeitConfig(), **two)), "image"),
        "dinov2": (lambda: T.Dinov2Model(cfg(T.Dinov2Config(), **two)),
                   "image"),
        "yolos": (lambda: T.YolosModel(cfg(T.YolosConfig(), **two)),
                  "image"),
        "swin": (lambda: T.SwinModel(cfg(T.SwinConfig(),
                                         depths=[1, 1, 1, 1])), "image"),
        "convnext": (lambda: T.ConvNextModel(
            cfg(T.ConvNextConfig(), depths=[1, 1, 1, 1])), "image"),
        "resnet": (lambda: T.ResNetModel(
            cfg(T.ResNetConfig(), depths=[1, 1, 1, 1])), "image"),
        "regnet": (lambda: T.RegNetModel(T.RegNetConfig()), "image"),
        "bit": (lambda: T.BitModel(T.BitConfig()), "image"),
        "mobilenet-v2": (lambda: T.MobileNetV2Model(T.MobileNetV2Config()),
                         "image"),
        "mobilevit": (lambda: T.MobileViTModel(T.MobileViTConfig()),
                      "image256"),
        "levit": (lambda: T.LevitModel(T.LevitConfig()), "image"),
        "poolformer": (lambda: T.PoolFormerModel(T.PoolFormerConfig()),
                       "image"),
        "cvt": (lambda: T.CvtModel(T.CvtConfig()), "image"),
        "segformer": (lambda: T.SegformerModel(T.SegformerConfig()),
                      "image"),
        "dpt": (lambda: T.DPTModel(cfg(T.DPTConfig(), **two,
                                       backbone_out_indices=[0, 1, 1, 1])),
                "image384"),
        "efficientnet": (lambda: T.EfficientNetModel(T.EfficientNetConfig()),
                         "image"),
        "whisper-encoder": (lambda: T.WhisperModel(
            cfg(T.WhisperConfig(), encoder_layers=2,
                decoder_layers=2)).encoder, "mel"),
        "wav2vec2": (lambda: T.Wav2Vec2Model(cfg(T.Wav2Vec2Config(), **two)),
                     "wave"),
        "hubert": (lambda: T.HubertModel(cfg(T.HubertConfig(), **two)),
                   "wave"),
    }


def survey(args):
    import numpy as np
    import torch

    table = models()
    names = args.models or list(table)
    unknown = [n for n in names if n not in table]
    if unknown:
        sys.exit(f"hf_survey: unknown model(s) {unknown}; known: "
                 f"{', '.join(table)}")
    modelc = os.path.join(args.build, "bin", "modelc")
    run = os.path.join(args.build, "bin", "modelc-run")
    rng = np.random.default_rng(0)
    shapes = {"ids": (2, 16), "image": (1, 3, 224, 224),
              "image256": (1, 3, 256, 256), "image384": (1, 3, 384, 384),
              "mel": (1, 80, 3000), "wave": (1, 16000)}
    counts = {"ok": 0, "not exported": 0, "failed": 0}
    for name in names:
        build, kind = table[name]
        torch.manual_seed(0)
        model = build().eval()
        shape = shapes[kind]
        x = (rng.integers(0, 1000, shape).astype(np.int64) if kind == "ids"
             else rng.standard_normal(shape).astype(np.float32))

        class First(torch.nn.Module):  # the first output, a tensor
            def __init__(self, m):
                super().__init__()
                self.m = m

            def forward(self, x):
                return self.m(x, return_dict=False)[0]

        wrapped = First(model).eval()
        d = os.path.join(args.out, name)
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "model.onnx")
        try:
            with torch.no_grad():
                ref = wrapped(torch.from_numpy(x)).numpy()
            torch.onnx.export(wrapped, (torch.from_numpy(x),), path,
                              input_names=["x"], output_names=["y"],
                              opset_version=17)
        except Exception as e:  # the exporter's gap, not modelc's
            counts["not exported"] += 1
            print(f"{name:16s} not exported by PyTorch 1.13: "
                  f"{type(e).__name__}: {str(e).splitlines()[0][:120]}")
            continue
        np.save(os.path.join(d, "x.npy"), x)
        art = os.path.join(d, "model.mcpk")
        p = subprocess.run([modelc, "compile", path, "-o", art],
                           capture_output=True, text=True)
        if p.returncode == 0:
            p = subprocess.run([run, art, "--input", "x=" + d + "/x.npy",
                                "--output-dir", d + "/out"],
                               capture_output=True, text=True)
        if p.returncode != 0:
            counts["failed"] += 1
            lines = (p.stderr or p.stdout).strip().splitlines()
            print(f"{name:16s} FAILED: {lines[-1] if lines else ''}")
            continue
        got = np.load(os.path.join(d, "out", "y.npy"))
        scale = max(float(np.abs(ref).max()), 1e-30)
        err = float(np.abs(got.astype(np.float64) - ref).max()) / scale
        ok = got.shape == ref.shape and err <= 1e-4
        counts["ok" if ok else "failed"] += 1
        if ok:  # the models' files are GBs in all (falcon's 0.4 GB f32)
            shutil.rmtree(d)
        print(f"{name:16s} {'ok' if ok else 'MISMATCH'}  output "
              f"{list(ref.shape)}, max |modelc - PyTorch| / max |PyTorch| "
              f"{err:.1e}", flush=True)
    print(f"hf_survey: {counts['ok']} match PyTorch, {counts['failed']} "
          f"failed, {counts['not exported']} not exported by PyTorch")
    return 1 if counts["failed"] else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="*")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--venv", default=os.path.join(ROOT, "build", "bench",
                                                   "hf-venv"))
    ap.add_argument("--out", default="/tmp/modelc-hf-survey")
    ap.add_argument("--in-venv", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    if not args.in_venv:
        py = ensure_venv(args.venv)
        os.execv(py, [py, os.path.abspath(__file__), "--in-venv",
                      "--build", args.build, "--out", args.out] + args.models)
    return survey(args)


if __name__ == "__main__":
    sys.exit(main())
