#!/usr/bin/env bash
# CUDA/NCCL check on a GPU machine that already has a CUDA build of PyTorch and/or TensorFlow, nvcc and
# NCCL (for example the NVIDIA pip wheel nvidia-nccl-cu*): builds Horovod through hvdkit's patched build
# path with HOROVOD_GPU_OPERATIONS=NCCL for the frameworks present, runs `hvdkit doctor`, then
#   PyTorch: a 1-process NCCL allreduce and DistributedOptimizer steps on the GPU, then hvdkit's Trainer
#            on CUDA (tests/workers/gpu_allreduce.py, gpu_trainer.py);
#   TensorFlow/Keras: fit + warm-up + checkpoint/resume + metric average, mixed_float16 loss-scale skips,
#            a DistributedGradientTape loop and a NCCL allreduce on the GPU (tests/workers/gpu_keras.py),
#            then the Keras figures as JSON lines (gpu_keras_bench.py: XLA on/off, hvdkit vs plain fit,
#            bf16/fp16 vs fp32) into OUT_DIR/gpu_keras_bench.jsonl.
#   Keras on torch (when Keras and torch are installed): fit + warm-up + checkpoint/resume on the GPU,
#            mixed_bfloat16, and hvdkit's fit against plain fit on ResNet-50 (tests/workers/gpu_keras_torch.py)
#            into OUT_DIR/gpu_keras_torch.json and gpu_keras_torch_bench.jsonl.
# Exits non-zero when any check fails.
#   scripts/gpu-check.sh OUT_DIR
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:?usage: scripts/gpu-check.sh OUT_DIR}
mkdir -p "$out"
py=${PYTHON:-python3}
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
nvidia-smi -L | tee "$out/nvidia-smi.txt"
nvcc --version | tail -n 2 | tee -a "$out/nvidia-smi.txt"

if [ -z "${HOROVOD_NCCL_HOME:-}" ]; then
  # NCCL from the nvidia-nccl pip wheel: give CMake the include/ and lib/libnccl.so it looks for.
  nccl_pkg=$("$py" -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])')
  home=$(mktemp -d)
  mkdir -p "$home/lib"
  ln -s "$nccl_pkg/include" "$home/include"
  for f in "$nccl_pkg"/lib/libnccl.so*; do ln -s "$f" "$home/lib/$(basename "$f")"; done
  libs=("$nccl_pkg"/lib/libnccl.so.*)
  [ -e "$home/lib/libnccl.so" ] || ln -s "${libs[0]}" "$home/lib/libnccl.so"
  export HOROVOD_NCCL_HOME="$home"
  export LD_LIBRARY_PATH="$nccl_pkg/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
export HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_NCCL_LINK=SHARED
# Build only for the GPU on this machine (CUDA 13 dropped the older architectures Horovod lists).
has() { "$py" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('$1') is None)"; }
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d '. ')
export HOROVOD_BUILD_CUDA_CC_LIST=${HOROVOD_BUILD_CUDA_CC_LIST:-$cc}
export MAKEFLAGS=${MAKEFLAGS:--j$(nproc)}

"$py" -m hvdkit build-horovod --print-key > "$out/build-inputs.json"
set +e
"$py" -m hvdkit build-horovod 2>&1 | tee "$out/build.txt"
rc=${PIPESTATUS[0]}
set -e
cp "${HVDKIT_CACHE_DIR:-${HVDKIT_HOME:-$HOME/.cache/hvdkit}}"/logs/horovod-*.log "$out/" 2>/dev/null || true
[ "$rc" -eq 0 ] || exit "$rc"
"$py" -m hvdkit doctor | tee "$out/doctor.txt" || true
if has torch; then
  horovodrun -np 1 -H localhost:1 --gloo "$py" "$repo/tests/workers/gpu_allreduce.py" "$out" 2>&1 | tee "$out/run.txt"
  # hvdkit's Trainer on CUDA: every precision, async checkpoints of CUDA state restored, SyncBatchNorm,
  # fp16 compression (exits 1 when a check fails).
  horovodrun -np 1 -H localhost:1 --gloo "$py" "$repo/tests/workers/gpu_trainer.py" "$out" 2>&1 | tee "$out/trainer.txt"
fi
# Keras on the torch backend (the GPU test machine has no TensorFlow: copy the keras, namex and optree
# wheels there): fit, checkpoint resume, bf16, and hvdkit's fit against plain fit on ResNet-50.
if has keras && has torch; then
  KERAS_BACKEND=torch horovodrun -np 1 -H localhost:1 --gloo "$py" "$repo/tests/workers/gpu_keras_torch.py" "$out" \
    2>&1 | tee "$out/keras_torch.txt"
fi
if has tensorflow && has keras; then
  horovodrun -np 1 -H localhost:1 --gloo "$py" "$repo/tests/workers/gpu_keras.py" "$out" 2>&1 | tee "$out/keras.txt"
  horovodrun -np 1 -H localhost:1 --gloo "$py" "$repo/tests/workers/gpu_keras_bench.py" "$out" 2>&1 \
    | tee "$out/keras_bench.txt"
fi
