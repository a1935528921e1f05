#!/usr/bin/env bash
# Build the CPU image (docker/cpu/Dockerfile), or with --cuda the CUDA image (docker/cuda/Dockerfile),
# wherever a Docker engine runs, Docker Hub or not:
#   docker/build.sh                        # -> hvdkit:cpu
#   docker/build.sh --cuda                 # -> hvdkit:cuda (no GPU needed to build)
#   docker/build.sh --cuda-tf              # -> hvdkit:cuda-tf (TensorFlow + Keras; same Dockerfile)
#   HVDKIT_IMAGE=me/hvdkit:cpu docker/build.sh --no-cache
# Further arguments go to `docker build`.
#
# 1. The base (BASE_IMAGE): $HVDKIT_BASE_IMAGE if set; else python:3.11-slim-bookworm when the engine has
#    it or Docker Hub answers; else the equivalent made by docker/base/debootstrap-base.sh from Debian's
#    mirror (hvdkit/base:bookworm, made once, kept while its recipe is unchanged).
# 2. The wheelhouse (docker/wheelhouse/, the build context's only generated part, git-ignored):
#    - CPU image: the '+cpu' torch wheel pinned in requirements/cpu.lock, fetched on this machine with its own pip
#      settings plus $HVDKIT_TORCH_INDEX (default: the PyTorch CPU index), as tests/install/
#      test_install.py does. If that fails, the image fetches it from TORCH_INDEX itself.
#    - CPU image: the host's cached patched Horovod wheels whose build inputs (Python, torch, TensorFlow,
#      patches) are the image's; the image reuses one only if its full build key (MPI too) matches, else
#      builds. Both images: the host's Horovod sdist (checksum-checked again inside).
#    - this machine's own CA certificates ($HVDKIT_BUILD_CA_CERTS, default /usr/local/share/ca-certificates),
#      trusted by the builder stage only (a TLS-inspecting proxy on the way to PyPI).
# Inside the image pip reads no configuration: PyPI, the PyTorch CPU index (CPU image) and the wheelhouse
# only.
# The classic builder is used (DOCKER_BUILDKIT=0): BuildKit would need its frontend image from Docker Hub.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
variant=cpu
case "${1:-}" in --cuda) variant=cuda; shift ;; --cuda-tf) variant=cuda-tf; shift ;; esac
image=${HVDKIT_IMAGE:-hvdkit:$variant}
dockerfile=docker/${variant%-tf}/Dockerfile
official=python:3.11-slim-bookworm
local_base=hvdkit/base:bookworm
torch_index=${HVDKIT_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}
cache=${HVDKIT_CACHE_DIR:-${HVDKIT_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/hvdkit}}
say() { printf '[docker/build] %s\n' "$*" >&2; }
begin=$(date +%s)
command -v docker >/dev/null || { say "docker not found"; exit 1; }
docker info >/dev/null 2>&1 || { say "no Docker engine answers (start dockerd first)"; exit 1; }

# 1. Base image
base=${HVDKIT_BASE_IMAGE:-}
if [ -z "$base" ]; then
  if docker image inspect "$official" >/dev/null 2>&1; then
    base=$official
  elif curl -s -o /dev/null -m 5 https://registry-1.docker.io/v2/; then
    base=$official  # reachable: the build pulls it
  else
    say "Docker Hub does not answer: using $local_base (docker/base/debootstrap-base.sh)"
    HVDKIT_BASE_IMAGE=$local_base bash "$here/base/debootstrap-base.sh" >&2
    base=$local_base
  fi
fi
say "base image: $base"

# 2. Wheelhouse
wheelhouse="$here/wheelhouse"
py=${HVDKIT_HOST_PYTHON:-$(command -v python3)}
mapfile -t pins < <(grep -E '^[A-Za-z0-9].*\+cpu' "$repo/requirements/cpu.lock" || true)
# Keep the wheels of the current pins (pip then does not fetch them again), drop everything else.
keep=()
for p in "${pins[@]}"; do keep+=(-not -name "${p%%==*}-${p#*==}-*.whl"); done
rm -rf "$wheelhouse/hvdkit-cache"
find "$wheelhouse" -mindepth 1 -maxdepth 1 -not -name README.md "${keep[@]}" -exec rm -rf {} +
mkdir -p "$wheelhouse/hvdkit-cache/horovod"
# This machine's own CA certificates (Debian keeps locally added ones in /usr/local/share/ca-certificates;
# e.g. a TLS-inspecting proxy's): the builder stage trusts them too. Public certificates, no keys.
ca_dir=${HVDKIT_BUILD_CA_CERTS:-/usr/local/share/ca-certificates}
rm -rf "$wheelhouse/ca-certificates"
if compgen -G "$ca_dir/*.crt" >/dev/null; then
  mkdir -p "$wheelhouse/ca-certificates"
  cp "$ca_dir"/*.crt "$wheelhouse/ca-certificates/"
  grep -L -- "-----BEGIN CERTIFICATE-----" "$wheelhouse"/ca-certificates/*.crt | xargs -r rm -f
  ! grep -l "PRIVATE KEY" "$wheelhouse"/ca-certificates/*.crt || { say "$ca_dir holds a private key"; exit 1; }
  say "wheelhouse: CA certificates from $ca_dir: $(cd "$wheelhouse/ca-certificates" && echo *.crt)"
fi
have_all=1
for p in "${pins[@]}"; do compgen -G "$wheelhouse/${p%%==*}-${p#*==}-cp311-*.whl" >/dev/null || have_all=0; done
if [ "$variant" = cpu ] && ((${#pins[@]})) && [ "$have_all" = 0 ]; then
  # The image is Python 3.11 on x86_64 Linux: ask for that wheel whatever this machine's Python is.
  if "$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 --implementation cp \
      --platform manylinux_2_28_x86_64 --extra-index-url "$torch_index" --timeout 20 -d "$wheelhouse" \
      "${pins[@]}" >&2; then
    say "wheelhouse: $(find "$wheelhouse" -maxdepth 1 -name '*.whl' -printf '%f ')"
  else
    say "could not fetch ${pins[*]} here; the image will fetch them from TORCH_INDEX"
  fi
fi
# Host Horovod wheels built from the image's inputs (the image checks the whole key again).
"$py" - "$repo" "$cache" "$wheelhouse/hvdkit-cache" "$variant" <<'PY'
import hashlib, json, os, re, shutil, sys
from pathlib import Path
repo, cache, dest = (Path(a) for a in sys.argv[1:4])
variant = sys.argv[4]


def link_or_copy(src, dst):
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


lock = (repo / "requirements/cpu.lock").read_text()
pin = lambda name: next((f"{name}=={m.group(2)}" for m in re.finditer(r"^([A-Za-z0-9_.-]+)==(\S+)$", lock, re.M)
                         if m.group(1).lower().replace("_", "-") == name), None)
want = {"python": "cpython-3.11", "torch": pin("torch"), "tensorflow": pin("tensorflow-cpu"),
        "patches": {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
                    for p in sorted((repo / "hvdkit/tools/build/patches").glob("*.patch"))}}
for inputs in sorted((cache / "horovod").glob("*/inputs.json")) if variant == "cpu" else []:
    got = json.loads(inputs.read_text())
    if all(got.get(k) == v for k, v in want.items()):
        shutil.copytree(inputs.parent, dest / "horovod" / inputs.parent.name, copy_function=link_or_copy)
        print(f"[docker/build] wheelhouse: host Horovod wheel {inputs.parent.name}", file=sys.stderr)
sdist = cache / "sdist/horovod-0.28.1.tar.gz"
if sdist.is_file():
    (dest / "sdist").mkdir(parents=True, exist_ok=True)
    link_or_copy(sdist, dest / "sdist" / sdist.name)
PY

# 3. Build
args=(--build-arg "BASE_IMAGE=$base")
[ "$variant" = cpu ] && args+=(--build-arg "TORCH_INDEX=$torch_index")
[ "$variant" = cuda-tf ] && args+=(--build-arg FRAMEWORK=tensorflow)
say "DOCKER_BUILDKIT=0 docker build ${args[*]} -f $dockerfile -t $image $*"
start=$(date +%s)
DOCKER_BUILDKIT=0 docker build "${args[@]}" -f "$repo/$dockerfile" -t "$image" "$@" "$repo"
# The builder stage gets a tag of its own (all cache hits now), so that it is the layer cache of the next
# build; then the untagged hvdkit images earlier builds left behind go (no other image is touched).
again=()
for arg in "$@"; do case "$arg" in --no-cache|--no-cache=true|--pull|--pull=true) ;; *) again+=("$arg") ;; esac; done
DOCKER_BUILDKIT=0 docker build -q "${args[@]}" -f "$repo/$dockerfile" --target builder -t "$image-builder" \
  "${again[@]}" "$repo" >/dev/null
docker image prune -f --filter "label=org.hvdkit.image=${variant%-tf}" >/dev/null
size=$(docker image inspect --format '{{.Size}}' "$image")
say "built $image from $base: docker build $(( $(date +%s) - start )) s, all $(( $(date +%s) - begin )) s;" \
  "$(( size / 1000000 )) MB"
