#!/usr/bin/env bash
# Prepares, on a machine with the compiler (this one), everything the GPU
# machine runs in one call: the runtime and test binaries, every example
# model compiled for `--target cpu,cuda` (f32, and bf16 AMP), their inputs,
# the CPU's outputs (.npy, the references), the digits MLP's training
# steps with the CPU's loss curves, and the benchmark's artifacts
# (bench/gpu_peers.py --prepare). The GPU machine has no MLIR: it gets
# modelc-run and the artifacts only.
#   test/gpu/prepare.sh [BUILD_DIR] [OUT_DIR]
# OUT_DIR (default build-gpu, ignored by git) is what the device tool
# carries (keep it under 64 MiB; `du -sh` is printed last):
#   OUT_DIR/bin, OUT_DIR/lib        modelc-run, the GPU tests, the runtime
#   OUT_DIR/test/gpu/cubins         the GPU tests' cubins
#   OUT_DIR/models/NAME/            NAME.mcpk, inputs, cpu/*.npy
#   OUT_DIR/train/NAME/             step.mcpk, digits data, cpu_loss.csv
#   OUT_DIR/bench/                  the benchmark's artifacts (gzip)
#   OUT_DIR/manifest.json           what run.sh checks, and how
# Then, on the GPU machine: test/gpu/run.sh OUT_DIR.
# ResNet-18 (47 MB of f32 weights) is left out unless PREPARE_RESNET18=1.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
out="${2:-$root/build-gpu}"
py=/usr/bin/python3
modelc="$build/bin/modelc"
run="$build/bin/modelc-run"
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/test/gpu" "$out/models" "$out/train"

cp "$run" "$build/bin/modelc_gpu_tests" "$out/bin/"
cp -a "$build"/lib/libmodelc_runtime.so* "$build/lib/libmodelc_fake_cuda.so" \
  "$out/lib/"
cp -r "$build/test/gpu/cubins" "$out/test/gpu/"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
entries=()

# One inference model: compile f32 and bf16 AMP for cpu,cuda; run each on
# the CPU for the references. $1 name, $2 source (.onnx/.mlir), then
# input specs NAME=FILE, then -- and extra compile flags.
model() {
  local name="$1" src="$2"
  shift 2
  local inputs=() flags=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do inputs+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  flags=("$@")
  for variant in f32 bf16; do
    local dir="$out/models/$name-$variant" amp=()
    [ "$variant" = bf16 ] && amp=(--amp=bf16)
    mkdir -p "$dir"
    if ! "$modelc" compile "$src" --target cpu,cuda "${amp[@]}" "${flags[@]}" \
        -o "$dir/model.mcpk" > "$dir/compile.log" 2>&1; then
      echo "prepare: $name-$variant does not compile for cpu,cuda:" \
        "$(tail -1 "$dir/compile.log")"
      entries+=("{\"name\": \"$name-$variant\", \"kind\": \"infer\", \"dtype\": \"$variant\", \"skip\": $(tail -1 "$dir/compile.log" | $py -c 'import json,sys; print(json.dumps(sys.stdin.read().strip()))')}")
      rm -f "$dir/model.mcpk"
      continue
    fi
    local args=() specs=()
    for spec in "${inputs[@]}"; do
      cp "${spec#*=}" "$dir/"
      args+=(--input "${spec%%=*}=$(basename "${spec#*=}")")
      specs+=("\"${spec%%=*}=$(basename "${spec#*=}")\"")
    done
    (cd "$dir" && "$run" model.mcpk "${args[@]}" --output-dir cpu \
      --device cpu > cpu.log 2>&1)
    local joined
    joined=$(IFS=,; echo "${specs[*]}")
    entries+=("{\"name\": \"$name-$variant\", \"kind\": \"infer\", \"dtype\": \"$variant\", \"dir\": \"models/$name-$variant\", \"inputs\": [$joined]}")
  done
}

onnx() { # $1 name, then models.py flags
  local name="$1"
  shift
  "$py" "$root/test/onnx/Inputs/models.py" "$name" "$tmp/$name" "$@" \
    > /dev/null
}

for m in cnn dilated_conv transformer; do
  onnx "$m"
done
onnx mobile_block --opset 14
onnx split_pad
onnx shape_ops
onnx mask_ops
model cnn "$tmp/cnn/cnn.onnx" "image=$tmp/cnn/image.npy"
model dilated_conv "$tmp/dilated_conv/dilated_conv.onnx" \
  "x=$tmp/dilated_conv/x.npy"
model transformer "$tmp/transformer/transformer.onnx" \
  "src=$tmp/transformer/src.npy"
model mobile_block "$tmp/mobile_block/mobile_block.onnx" \
  "x=$tmp/mobile_block/x.npy"
model split_pad "$tmp/split_pad/split_pad.onnx" "x=$tmp/split_pad/x.npy" \
  -- --input-shape x=2x6x10
model shape_ops "$tmp/shape_ops/shape_ops.onnx" "x=$tmp/shape_ops/x.npy" \
  -- --input-shape x=2x4x8
model mask_ops "$tmp/mask_ops/mask_ops.onnx" "x=$tmp/mask_ops/x.npy" \
  -- --input-shape x=2x5x5
# Integer division of two int64 inputs (a generated kernel with an error
# record, docs/cuda.md "Errors found by a kernel").
mkdir -p "$tmp/structural"
"$py" "$root/test/onnx/Inputs/structural_models.py" "$tmp/structural" \
  > /dev/null
model int_div "$tmp/structural/int_div.onnx" "x=$tmp/structural/x.npy" \
  "z=$tmp/structural/z.npy" -- --input-shape x=2x6 --input-shape z=2x6
# Dropout: the cuda kernels' Philox masks must be the CPU's exactly.
mkdir -p "$tmp/dropout"
"$py" - "$tmp/dropout" <<'PY'
import os, sys
import numpy as np
d, r = sys.argv[1], np.random.default_rng(3)
np.save(os.path.join(d, "x.npy"), r.standard_normal((5, 67)).astype(np.float32))
np.save(os.path.join(d, "v.npy"), r.standard_normal((5, 64)).astype(np.float32))
np.save(os.path.join(d, "seed.npy"), np.array(-7, dtype=np.int64))
np.save(os.path.join(d, "offset.npy"), np.array(12, dtype=np.int64))
PY
model dropout "$root/test/gpu/Inputs/dropout.mlir" "x=$tmp/dropout/x.npy" \
  "v=$tmp/dropout/v.npy" "seed=$tmp/dropout/seed.npy" \
  "offset=$tmp/dropout/offset.npy"
if [ "${PREPARE_RESNET18:-0}" = 1 ]; then
  onnx resnet18
  model resnet18 "$tmp/resnet18/resnet18.onnx" "image=$tmp/resnet18/image.npy"
fi

# The examples' MLP (traced by mlp-example) and its training step.
mkdir -p "$tmp/mlp"
"$py" "$root/test/unit/digits_reference.py" export "$tmp/mlp"
"$build/bin/mlp-example" "$tmp/mlp" --batch 50 > /dev/null
model mlp "$tmp/mlp/mlp.mlir" "x=$tmp/mlp/x.npy"

# GPT-2 (the example's small config): its embedding gathers by the token
# ids the caller passes, checked when the input is set.
mkdir -p "$tmp/gpt2"
"$build/bin/gpt2-example" "$tmp/gpt2" > /dev/null
model gpt2 "$tmp/gpt2/gpt2.mlir" "ids=$tmp/gpt2/ids.npy"

# The sequence example's LSTM classifier (nn::LSTM, 24 unrolled steps).
mkdir -p "$tmp/seq"
"$build/bin/sequence-example" "$tmp/seq" --batch 32 --samples 32 > /dev/null
model sequence "$tmp/seq/seq.mlir" "x=$tmp/seq/x.npy"

# Training: the digits MLP, AdamW, f32 and bf16 AMP; the CPU's loss per
# step is the reference (4 epochs, shuffled with seed 1).
for variant in f32 bf16; do
  dir="$out/train/mlp-$variant"
  amp=()
  [ "$variant" = bf16 ] && amp=(--amp=bf16)
  mkdir -p "$dir"
  "$modelc" compile "$tmp/mlp/mlp_train.mlir" --train --optimizer=adamw \
    --lr=3e-3 "${amp[@]}" --target cpu,cuda -o "$dir/step.mcpk" \
    > "$dir/compile.log" 2>&1
  cp "$tmp/mlp/x_train.npy" "$tmp/mlp/y_train.npy" "$dir/"
  (cd "$dir" && "$run" --train step.mcpk --data x=x_train.npy \
    --data y=y_train.npy --batch 50 --epochs 4 --shuffle 1 \
    --log-csv cpu_loss.csv --quiet --device cpu > cpu.log 2>&1)
  entries+=("{\"name\": \"train-mlp-$variant\", \"kind\": \"train\", \"dtype\": \"$variant\", \"dir\": \"train/mlp-$variant\", \"args\": [\"--data\", \"x=x_train.npy\", \"--data\", \"y=y_train.npy\", \"--batch\", \"50\", \"--epochs\", \"4\", \"--shuffle\", \"1\"]}")
done

# Training a bag of embeddings (test/codegen/cuda/Inputs/embedding-train.mlir):
# the embedding's gradient is mc.scatter_add, whose kernel sums in index
# order, so the GPU's losses follow the CPU's (AdamW, f32; the loss falls
# about 8x in the 100 steps on the CPU).
dir="$out/train/embedding-f32"
mkdir -p "$dir"
"$modelc" compile "$root/test/codegen/cuda/Inputs/embedding-train.mlir" \
  --train --optimizer=adamw --lr=1e-2 --target cpu,cuda -o "$dir/step.mcpk" \
  > "$dir/compile.log" 2>&1
"$py" - "$dir" <<'PY'
import os, sys
import numpy as np
d = sys.argv[1]
r = np.random.default_rng(3)
ids = r.integers(-50, 50, (400, 6), dtype=np.int64)  # negative ids too
# The mean of the ids' rows of a rank-1 table: learnable from the
# step's constant start (every embedding row's 16 values stay equal).
table = np.outer(r.standard_normal(50), r.standard_normal(4)).astype(np.float32)
y = table[ids].mean(axis=1)
np.save(os.path.join(d, "ids.npy"), ids)
np.save(os.path.join(d, "y.npy"), y)
PY
(cd "$dir" && "$run" --train step.mcpk --data ids=ids.npy --data y=y.npy \
  --batch 8 --epochs 2 --shuffle 1 --log-csv cpu_loss.csv --quiet \
  --device cpu > cpu.log 2>&1)
entries+=("{\"name\": \"train-embedding-f32\", \"kind\": \"train\", \"dtype\": \"f32\", \"dir\": \"train/embedding-f32\", \"args\": [\"--data\", \"ids=ids.npy\", \"--data\", \"y=y.npy\", \"--batch\", \"8\", \"--epochs\", \"2\", \"--shuffle\", \"1\"]}")

# Errors a generated kernel finds (docs/cuda.md, "Errors found by a
# kernel"): values the CPU refuses at a step, which the GPU must refuse with
# the same message, from the kernel's error record. $1 name, $2 artifact,
# then input specs NAME=FILE.
error_case() {
  local name="$1" artifact="$2"
  shift 2
  local dir="$out/errors/$name" args=() specs=()
  mkdir -p "$dir"
  cp "$artifact" "$dir/model.mcpk"
  for spec in "$@"; do
    cp "${spec#*=}" "$dir/"
    args+=(--input "${spec%%=*}=$(basename "${spec#*=}")")
    specs+=("\"${spec%%=*}=$(basename "${spec#*=}")\"")
  done
  if (cd "$dir" && "$run" model.mcpk "${args[@]}" --output-dir cpu \
      --device cpu > cpu.log 2>&1); then
    echo "prepare: error case $name: the CPU did not refuse it"
    return
  fi
  local joined
  joined=$(IFS=,; echo "${specs[*]}")
  entries+=("{\"name\": \"error-$name\", \"kind\": \"error\", \"dtype\": \"f32\", \"dir\": \"errors/$name\", \"inputs\": [$joined], \"cpu_error\": $(tail -1 "$dir/cpu.log" | "$py" -c 'import json,sys; print(json.dumps(sys.stdin.read().strip()))')}")
}
# int_div with zero divisors at elements 5 and 8: element 5 is named.
"$py" - "$tmp/structural" <<'PY'
import os, sys
import numpy as np
d = sys.argv[1]
z = np.load(os.path.join(d, "z.npy")).copy()
z[1, 2] = 0
z[0, 5] = 0
np.save(os.path.join(d, "z_zero.npy"), z)
PY
error_case int-div "$out/models/int_div-f32/model.mcpk" \
  "x=$tmp/structural/x.npy" "z=$tmp/structural/z_zero.npy"
# A gather by computed indices (ids + 1) over a dim of 5: ids 4 at
# position 4 gives index 5.
mkdir -p "$tmp/gather"
"$modelc" compile "$root/test/codegen/cuda/Inputs/gather-computed.mlir" \
  --target cpu,cuda -o "$tmp/gather/model.mcpk" > /dev/null
"$py" -c "import numpy as np; np.save('$tmp/gather/ids.npy', np.array([[0, 1, 2], [3, 4, -1]], dtype=np.int64))"
error_case gather-computed "$tmp/gather/model.mcpk" "ids=$tmp/gather/ids.npy"

# The benchmark's artifacts (weights that gzip well; see the script).
if ! "$py" "$root/bench/gpu_peers.py" --prepare "$out/bench" \
    --modelc "$modelc" > "$out/bench-prepare.log" 2>&1; then
  echo "prepare: bench/gpu_peers.py --prepare failed (see" \
    "$out/bench-prepare.log); run.sh will skip the benchmark"
fi

joined=$(IFS=,; echo "${entries[*]}")
echo "{\"entries\": [$joined]}" | "$py" -m json.tool > "$out/manifest.json"
echo "prepare: wrote $out ($(du -sh "$out" | cut -f1)); on the GPU machine:" \
  "test/gpu/run.sh $(basename "$out")"
