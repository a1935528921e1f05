#!/usr/bin/env bash
# The CUDA image, built and inspected on a machine without a GPU (scripts/slow-checks.sh cuda-image):
#   1. a Docker engine: the running one, or dockerd started as the test suite starts it
#      (tests/docker/docker_engine.py) and stopped again at the end;
#   2. docker/build.sh --cuda (HVDKIT_CUDA_BUILD_ARGS, e.g. --no-cache, go to docker build);
#   3. `hvdkit doctor` inside the image: fails unless Horovod loads there with torch and reports its NCCL
#      operations built in (doctor reads Horovod's build flags; no GPU or driver is needed for that,
#      nor is any NCCL call made);
#   4. prints the image size and the build time.
# What this does not prove: anything on a GPU (no driver here); see docs/gpu.md.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
image=${HVDKIT_CUDA_IMAGE:-hvdkit:cuda}
say() { printf '[cuda-image] %s\n' "$*"; }
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
HVDKIT_IMAGE=$image bash docker/build.sh --cuda ${HVDKIT_CUDA_BUILD_ARGS:-}
build_s=$(( $(date +%s) - start ))
size=$(docker image inspect --format '{{.Size}}' "$image")

say "hvdkit doctor in $image (no GPU on this machine):"
docker run --rm "$image" hvdkit doctor | sed 's/^/  /'
docker run --rm "$image" hvdkit doctor --json > "${TMPDIR:-/tmp}/hvdkit-cuda-doctor.json"
python - "${TMPDIR:-/tmp}/hvdkit-cuda-doctor.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
facts = report["facts"]
build = facts.get("horovod_build") or {}
checks = {
    "doctor finds nothing fatal": report["ok"],
    "Horovod is hvdkit's CUDA build (+hvdkit.cuda.)": "+hvdkit.cuda." in (facts.get("horovod") or ""),
    "torch is the CUDA 13 build from PyPI (2.13.0, no local label)": facts.get("torch") == "2.13.0",
    "Horovod's torch library loads": build.get("frameworks", {}).get("torch") is True,
    "NCCL tensor operations are built in": build.get("tensor_operations", {}).get("nccl") is True,
}
for what, ok in checks.items():
    print(f"[cuda-image] {'ok  ' if ok else 'FAIL'} {what}")
sys.exit(0 if all(checks.values()) else 1)
PY
say "image $image: $(( size / 1000000 )) MB; docker/build.sh --cuda ${HVDKIT_CUDA_BUILD_ARGS:-} took $build_s s"
