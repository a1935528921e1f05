#!/usr/bin/env bash
# A CUDA image, built and inspected on a machine without a GPU:
#   scripts/cuda-image-check.sh [cuda|cuda-tf]   (scripts/slow-checks.sh cuda-image | cuda-tf-image)
# cuda: hvdkit:cuda (PyTorch); cuda-tf: hvdkit:cuda-tf (TensorFlow + Keras). Same steps for both:
#   1. a Docker engine: the running one, or dockerd started as the test suite starts it
#      (tests/docker/docker_engine.py) and stopped again at the end;
#   2. docker/build.sh --cuda / --cuda-tf (HVDKIT_CUDA_BUILD_ARGS, e.g. --no-cache, go to docker build);
#   3. `hvdkit doctor` inside the image: fails unless Horovod loads there with the image's framework and
#      reports its NCCL operations built in (doctor reads Horovod's build flags; no GPU or driver is
#      needed for that, nor is any NCCL call made); cuda-tf also runs hvd.init() + nccl_built() in
#      horovod.tensorflow, which fails without patch 0010 (the library does not load);
#   4. prints the image size and the build time.
# What this does not prove: anything on a GPU (no driver here); see docs/gpu.md.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
variant=${1:-cuda}
case "$variant" in cuda|cuda-tf) ;; *) echo "variant: expected cuda or cuda-tf, got '$variant'" >&2; exit 2 ;; esac
image=${HVDKIT_CUDA_IMAGE:-hvdkit:$variant}
say() { printf '[%s-image] %s\n' "$variant" "$*"; }
cd "$repo"

started=""
stop_engine() {
  [ -n "$started" ] || return 0
  say "stopping the dockerd this check started (pid $started)"
  kill -TERM "$started" 2>/dev/null || return 0
  for _ in $(seq 60); do kill -0 "$started" 2>/dev/null || return 0; sleep 1; done
  kill -KILL "$started" 2>/dev/null || true
}
trap stop_engine EXIT
if ! docker info >/dev/null 2>&1; then
  started=$(python - <<'PY'
import sys
sys.path.insert(0, "tests/docker")
import docker_engine
engine = docker_engine.start()
print(engine.process.pid if engine.started_here and engine.process else "")
PY
)
  say "started dockerd (pid $started, log ${HVDKIT_DOCKERD_LOG:-/var/log/hvdkit-dockerd.log})"
fi

start=$(date +%s)
# shellcheck disable=SC2086 # the build arguments are words
HVDKIT_IMAGE=$image bash docker/build.sh "--$variant" ${HVDKIT_CUDA_BUILD_ARGS:-}
build_s=$(( $(date +%s) - start ))
size=$(docker image inspect --format '{{.Size}}' "$image")

say "hvdkit doctor in $image (no GPU on this machine):"
docker run --rm "$image" hvdkit doctor | sed 's/^/  /'
doctor_json="${TMPDIR:-/tmp}/hvdkit-$variant-doctor.json"
docker run --rm "$image" hvdkit doctor --json > "$doctor_json"
nccl_flag=""
if [ "$variant" = cuda-tf ]; then
  nccl_flag=$(docker run --rm "$image" python -c \
    'import horovod.tensorflow as hvd; hvd.init(); print(hvd.nccl_built())' | tail -n 1)
  say "horovod.tensorflow: hvd.init(); hvd.nccl_built() -> $nccl_flag"
fi
python - "$doctor_json" "$variant" "$nccl_flag" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
variant, nccl_flag = sys.argv[2], sys.argv[3]
facts = report["facts"]
build = facts.get("horovod_build") or {}
checks = {
    "doctor finds nothing fatal": report["ok"],
    "Horovod is hvdkit's CUDA build (+hvdkit.cuda.)": "+hvdkit.cuda." in (facts.get("horovod") or ""),
    "NCCL tensor operations are built in": build.get("tensor_operations", {}).get("nccl") is True,
}
if variant == "cuda":
    checks["torch is the CUDA 13 build from PyPI (2.13.0, no local label)"] = facts.get("torch") == "2.13.0"
    checks["Horovod's torch library loads"] = build.get("frameworks", {}).get("torch") is True
else:
    checks["TensorFlow is 2.21.0 (the and-cuda wheel), no torch"] = (
        facts.get("tensorflow") == "2.21.0" and not facts.get("torch"))
    checks["Horovod's TensorFlow library loads"] = build.get("frameworks", {}).get("tensorflow") is True
    checks["doctor does not report a torch extension in this TensorFlow-only build"] = (
        build.get("frameworks", {}).get("torch") is False)
    checks["horovod.tensorflow: hvd.init(); hvd.nccl_built() is true"] = nccl_flag not in ("", "0", "False")
for what, ok in checks.items():
    print(f"[{variant}-image] {'ok  ' if ok else 'FAIL'} {what}")
sys.exit(0 if all(checks.values()) else 1)
PY
say "image $image: $(( size / 1000000 )) MB; docker/build.sh --$variant ${HVDKIT_CUDA_BUILD_ARGS:-} took $build_s s"
