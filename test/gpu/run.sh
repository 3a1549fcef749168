#!/usr/bin/env bash
# Runs the GPU checks on a machine with a GPU (the lent machine, see
# GPU.md) in one call and writes logs under $OUT (default ./gpu-logs):
# the GPU tests, every prepared model against the CPU's outputs
# (test/gpu/check_models.py), the digits MLP trained on the GPU against
# the CPU's loss curve, and the benchmark against PyTorch
# (bench/gpu_peers.py), and NCCL at world size 1 against the CPU (the
# Nccl.* tests: issue 11). Prints short tables last. Exit status: 1 when a
# test or a model check failed.
#   test/gpu/run.sh [BUILD_DIR]
# BUILD_DIR (default build) holds bin/modelc_gpu_tests and lib/, built on
# this machine (cmake -DMODELC_RUNTIME_ONLY=ON needs no MLIR) or carried
# from another one: test inputs are found through MODELC_TEST_KERNELS_PTX
# and MODELC_TEST_CUBIN_DIR, set here. The model checks and the benchmark
# run when BUILD_DIR is what test/gpu/prepare.sh wrote (build-gpu: it has
# manifest.json and bench/), which is what to carry:
#   here:     test/gpu/prepare.sh            # writes build-gpu (< 64 MiB)
#   there:    test/gpu/run.sh build-gpu      # run tool, carry ["build-gpu"] cuBLASLt comes from the toolkit or,
# failing that, from PyTorch's wheels (site-packages/nvidia/*/lib).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
out="${OUT:-$PWD/gpu-logs}"
mkdir -p "$out"

libs="$build/lib"
for d in /usr/local/cuda/lib64; do
  [ -d "$d" ] && libs="$libs:$d"
done
for py in python3 /usr/bin/python3; do
  more=$("$py" - 2>/dev/null <<'EOF'
import importlib, os
# CUDA 12 wheels split the libraries by package; CUDA 13's (torch 2.9+)
# put cuBLAS(Lt) and the runtime in nvidia.cu13.
for m in ("nvidia.cu13", "nvidia.cublas", "nvidia.cuda_runtime",
          "nvidia.cudnn", "nvidia.nccl"):
    try:
        for p in importlib.import_module(m).__path__:
            if os.path.isdir(os.path.join(p, "lib")):
                print(os.path.join(p, "lib"))
    except Exception:
        pass
EOF
)
  [ -n "$more" ] && libs="$libs:$(echo "$more" | paste -sd:)" && break
done
export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export MODELC_TEST_KERNELS_PTX="$root/test/gpu/kernels.ptx"
export MODELC_TEST_CUBIN_DIR="$build/test/gpu/cubins"
# PyTorch's Python, for the benchmark; numpy for the checks: the first
# python3 that has numpy.
py=python3
for cand in python3 /usr/bin/python3; do
  if "$cand" -c "import numpy" > /dev/null 2>&1; then py="$cand"; break; fi
done

{
  echo "date: $(date -u +%FT%TZ)"
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
} > "$out/environment.txt"

"$build/bin/modelc_gpu_tests" --gtest_output="xml:$out/gpu-tests.xml" \
  > "$out/gpu-tests.log" 2>&1
status=$?
# The device's logic on the fake driver too (as CI runs it).
MODELC_CUDA_DRIVER="$build/lib/libmodelc_fake_cuda.so" \
  "$build/bin/modelc_gpu_tests" \
  --gtest_filter='CudaDevice.*:CudaKernels.MatmulWithKZeroIsZeros:CudaKernels.OtherRegionsAreRefusedNamingTheOp:CudnnConv.RegionsOtherThanConvBiasReluAreRefusedNamingTheOp' \
  > "$out/fake-driver.log" 2>&1 || status=1

# Every prepared model on the GPU against the CPU, and training.
if [ -f "$build/manifest.json" ]; then
  "$py" "$root/test/gpu/check_models.py" "$build" "$out/models" \
    > "$out/models.log" 2>&1 || status=1
fi
# The benchmark (prints "skipped: no GPU" without one).
if [ -f "$build/bench/manifest.json" ]; then
  "$py" "$root/bench/gpu_peers.py" "$build/bench" \
    --modelc-run "$build/bin/modelc-run" > "$out/bench.log" 2>&1
fi

# NCCL on one GPU (world size 1) against the CPU: the communicator's sum
# and max, and the cuda all-reduce step pair against the CPU pair, bit for
# bit. A run of its own, so that its log says which NCCL it loaded; it
# skips, saying why, without a GPU or without libnccl.
"$build/bin/modelc_gpu_tests" --gtest_filter='Nccl.*' \
  > "$out/nccl.log" 2>&1 || status=1

cat "$out/environment.txt"
grep -E '^ +[a-z0-9]+ .*rel_err|^device:' "$out/gpu-tests.log"
grep -E '^  NCCL |^  nccl |no CUDA device here|no NCCL here' "$out/nccl.log" |
  sort -u | head -n 4
printf '\n%-28s %6s %6s %7s\n' suite passed failed skipped
for log in gpu-tests fake-driver nccl; do
  printf '%-28s %6s %6s %7s\n' "$log" \
    "$(grep -c '^\[       OK \]' "$out/$log.log")" \
    "$(grep -c '^\[  FAILED  \] .*(' "$out/$log.log")" \
    "$(grep -c '^\[  SKIPPED \] .*(' "$out/$log.log")"
done
[ -f "$out/models.log" ] && cat "$out/models.log"
[ -f "$out/bench.log" ] && tail -n 12 "$out/bench.log"
exit $status
