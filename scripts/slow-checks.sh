#!/usr/bin/env bash
# Checks too slow for CI's 35-minute budget, in one place. Run them all (no argument) or by name:
#   scripts/slow-checks.sh [tests] [docker] [pythons] [torch-next] [upstream-tf] [cuda-image] [cuda-tf-image] [network]
#   tests        the test-suite tests marked slow_check, which CI deselects and names at the end of its log
#                (python -m pytest --slow-checks -m slow_check), but those of the next two sections.
#   docker       the CPU image built from nothing (docker/build.sh: its own Horovod build) and every test on
#                it: training, compose demo, docker kill in an elastic compose run (tests/docker). Needs root
#                (dockerd).
#   pythons      Horovod build + 2-process job on Python 3.12 and 3.13 (CI runs 3.11 only)
#                (tests/install/test_python_versions.py).
#   torch-next   Horovod built against a newer torch than CI's (HVDKIT_TEST_TORCH, default 2.14.1) and a
#                2-process allreduce + hvdkit.torch training job with it (tests/install/test_torch_versions.py).
#   upstream-tf  upstream Horovod v0.28.1's test_tensorflow.py through hvdkit.tensorflow at np=2, with
#                nothing deselected (CI runs it with two Keras 3 artifacts deselected):
#                scripts/upstream-tf-suite.sh.
#   cuda-image   the CUDA image (docker/cuda/Dockerfile) built with docker/build.sh --cuda, and
#                `hvdkit doctor` inside it reporting Horovod's NCCL operations; prints the image size
#                and build time (no GPU needed): scripts/cuda-image-check.sh. Needs root (dockerd).
#   cuda-tf-image  the same for hvdkit:cuda-tf (docker/build.sh --cuda-tf: TensorFlow 2.21 + Keras 3 on
#                CUDA 12), plus `import horovod.tensorflow; hvd.init(); hvd.nccl_built()` inside it
#                (fails without patch 0010): scripts/cuda-image-check.sh cuda-tf.
#   network      the full simulated-cluster run, benchmarks/run network (2-8 namespaces, tc-shaped links,
#                25 M and 110 M parameters; about an hour on 2 cores), into $HVDKIT_NETWORK_OUT
#                (default /tmp/hvdkit-network); a missed target is reported, not failed. Needs root.
# Each section prints its result; the script exits non-zero if any failed. It uses the same
# environment as ./run.sh (bootstrapped first).
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
sections=("$@")
((${#sections[@]})) || sections=(tests docker pythons torch-next upstream-tf cuda-image cuda-tf-image network)
bash "$repo/scripts/bootstrap.sh" || exit 1
HVDKIT_HOME=${HVDKIT_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/hvdkit}
# shellcheck disable=SC1091
source "$(cat "$HVDKIT_HOME/current-venv")/bin/activate"
cd "$repo" || exit 1
failed=()
for s in "${sections[@]}"; do
  start=$(date +%s)
  echo "=== slow check: $s"
  case "$s" in
    tests) python -m pytest -q -p no:cacheprovider --slow-checks -m slow_check \
             --ignore tests/install/test_python_versions.py --ignore tests/install/test_torch_versions.py \
             --ignore tests/docker ;;
    docker) python -m pytest -q -p no:cacheprovider --slow-checks tests/docker ;;
    pythons) HVDKIT_TEST_PYTHONS="3.12 3.13" CI=true python -m pytest -q -p no:cacheprovider --slow-checks \
               tests/install/test_python_versions.py ;;
    torch-next) python -m pytest -q -p no:cacheprovider --slow-checks tests/install/test_torch_versions.py ;;
    upstream-tf) bash "$repo/scripts/upstream-tf-suite.sh" ;;
    cuda-image) bash "$repo/scripts/cuda-image-check.sh" cuda ;;
    cuda-tf-image) bash "$repo/scripts/cuda-image-check.sh" cuda-tf ;;
    network) python "$repo/benchmarks/run" network --out "${HVDKIT_NETWORK_OUT:-/tmp/hvdkit-network}" ;;
    *) echo "unknown section: $s (known: tests docker pythons torch-next upstream-tf cuda-image cuda-tf-image network)"; false ;;
  esac
  rc=$?
  echo "=== $s: $([ $rc -eq 0 ] && echo passed || echo FAILED) in $(( $(date +%s) - start )) s"
  [ $rc -eq 0 ] || failed+=("$s")
done
((${#failed[@]} == 0)) || { echo "failed: ${failed[*]}"; exit 1; }
echo "all slow checks passed"
