#!/usr/bin/env bash
# Install whatever is missing for hvdkit on a Debian machine, idempotently:
#   1. system packages (Open MPI, compiler, cmake, ssh client),
#   2. a Python 3.11 virtual environment keyed by requirements/cpu.lock,
#   3. the pinned frameworks and tools from that lock,
#   4. hvdkit itself (editable, from this checkout),
#   5. the patched Horovod wheel (built once, then reused from the cache).
# Prints nothing but progress; the venv path is written to $HVDKIT_HOME/current-venv.
# Environment: HVDKIT_HOME (default ~/.cache/hvdkit), HVDKIT_PYTHON (default python3.11).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export HVDKIT_HOME=${HVDKIT_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/hvdkit}
export HVDKIT_CACHE_DIR=${HVDKIT_CACHE_DIR:-$HVDKIT_HOME}
lock="$repo/requirements/cpu.lock"
say() { printf '[bootstrap] %s\n' "$*" >&2; }
# This machine's pip configuration names a missing local index; keep its warnings out of the log.
quiet_pip() { python -m pip "$@" 2> >(grep -v "^WARNING: Location '.*' is ignored" >&2); }

# 1. System packages -------------------------------------------------------------
# Build: Open MPI, cmake, a compiler. Tests: sshd and iproute2 (the namespace cluster),
# the linters shellcheck and docker-compose (the Docker checks).
apt_pkgs=(openmpi-bin libopenmpi-dev cmake g++ make git openssh-client openssh-server iproute2 procps
          shellcheck docker-compose)
missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [ "$(id -u)" -ne 0 ] && ! command -v sudo >/dev/null; then
    say "missing system packages: ${missing[*]}; install them as root: apt-get install ${missing[*]}"
    exit 1
  fi
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  say "installing system packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# 2. Python 3.11 virtual environment --------------------------------------------
py=${HVDKIT_PYTHON:-}
if [ -z "$py" ]; then
  for cand in python3.11 python3; do
    if command -v "$cand" >/dev/null && [ "$("$cand" -c 'import sys; print(sys.version_info[:2] == (3, 11))')" = True ]; then
      py=$cand; break
    fi
  done
fi
if [ -z "$py" ]; then
  say "Python 3.11 not found (Horovod 0.28.1's build fails on 3.12, pypa/setuptools#4655); set HVDKIT_PYTHON"
  exit 1
fi
key=$(sha256sum < "$lock" | cut -c1-12)
venv="$HVDKIT_HOME/venvs/py311-$key"
if [ ! -x "$venv/bin/python" ]; then
  say "creating virtual environment $venv"
  mkdir -p "$HVDKIT_HOME/venvs"
  "$py" -m venv "$venv"
fi
# shellcheck disable=SC1091
source "$venv/bin/activate"

# 3. Pinned frameworks and tools ---------------------------------------------------
# --only-binary=horovod: nothing may ever pull in (and build) the unpatched sdist.
if [ ! -f "$venv/.hvdkit-lock-installed" ]; then
  say "installing pinned packages from requirements/cpu.lock (first run only)"
  quiet_pip install -q --upgrade pip >/dev/null
  quiet_pip install -q --only-binary=horovod -r "$lock"
  touch "$venv/.hvdkit-lock-installed"
fi

# 4. hvdkit from this checkout ------------------------------------------------------
# Probe from / so that the checkout in the current directory does not answer for the venv.
where=$( (cd / && python -c 'import hvdkit, os; print(os.path.dirname(os.path.dirname(hvdkit.__file__)))') 2>/dev/null) || where=""
if [ "$where" != "$repo" ] || [ ! -x "$venv/bin/hvdkit" ]; then
  say "installing hvdkit (editable) from $repo"
  quiet_pip install -q --no-deps --no-build-isolation -e "$repo" >/dev/null
fi

# 5. Patched Horovod wheel (cached by build inputs) ---------------------------------
hvdkit build-horovod

echo "$venv" > "$HVDKIT_HOME/current-venv"
