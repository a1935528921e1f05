#!/usr/bin/env bash
# The compose cluster demo in one command (docker/docker-compose.yml):
#   docker/compose.sh up [N]   # a launcher and N workers (default 2; one number sets WORKERS and --scale)
#   docker/compose.sh down     # stop and remove everything, volumes too: fresh keys next time
#   docker/compose.sh ARGS...  # any other compose command, e.g. `logs worker`
# Uses `docker compose` (v2) or else `docker-compose` (v1), and checks the image is built first: without
# it Compose would try to build it and fail on the first registry it cannot reach.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
image=${HVDKIT_IMAGE:-hvdkit:cpu}

if docker compose version >/dev/null 2>&1; then
  compose=(docker compose)
elif command -v docker-compose >/dev/null 2>&1; then
  compose=(docker-compose)
else
  echo "compose.sh: neither \`docker compose\` (v2) nor \`docker-compose\` (v1) works here; install one:" \
    "apt-get install docker-compose-plugin (Docker's apt repository) or docker-compose (Debian)" >&2
  exit 2
fi
compose+=(-p "${HVDKIT_PROJECT:-hvdkit}" -f "$here/docker-compose.yml")

case "${1:-}" in
  up)
    workers=${2:-${WORKERS:-2}}
    [[ "$workers" =~ ^[1-9][0-9]*$ ]] || { echo "compose.sh up N: N must be a number of workers >= 1, got '$workers'" >&2; exit 2; }
    if ! docker image inspect "$image" >/dev/null 2>&1; then
      if ! docker info >/dev/null 2>&1; then
        echo "compose.sh: the Docker engine does not answer (docker info failed); start it first" >&2
      else
        echo "compose.sh: no image $image here: run docker/build.sh first (HVDKIT_IMAGE names another image)" >&2
      fi
      exit 2
    fi
    WORKERS=$workers exec "${compose[@]}" up --no-build --scale "worker=$workers" \
      --abort-on-container-exit --exit-code-from launcher launcher ;;
  down)
    exec "${compose[@]}" down -v ;;
  ""|-h|--help)
    sed -n '2,7p' "$0" | cut -c3-; exit 0 ;;
  *)
    exec "${compose[@]}" "$@" ;;
esac
