#!/usr/bin/env bash
# Install whatever is missing for hvdkit on a Debian machine, idempotently:
#   1. system packages (Open MPI, compiler, cmake, ssh client),
#   2. a virtual environment (Python 3.11-3.13, see scripts/find-python.sh) keyed by the lock,
#   3. the pinned frameworks and tools from that lock,
#   4. hvdkit itself (editable, from this checkout),
#   5. the patched Horovod wheel (built once, then reused from the cache).
# Prints nothing but progress; the venv path is written to $HVDKIT_HOME/current-venv.
# Environment: HVDKIT_HOME (default ~/.cache/hvdkit), HVDKIT_PYTHON (an interpreter to use),
# HVDKIT_TORCH_INDEX (where '+cpu' torch comes from; default https://download.pytorch.org/whl/cpu).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export HVDKIT_HOME=${HVDKIT_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/hvdkit}
export HVDKIT_CACHE_DIR=${HVDKIT_CACHE_DIR:-$HVDKIT_HOME}
lock="$repo/requirements/cpu.lock"
say() { printf '[bootstrap] %s\n' "$*" >&2; }
# This machine's pip configuration names a missing local index; keep its warnings out of the log.
quiet_pip() { python -m pip "$@" 2> >(grep -v "^WARNING: Location '.*' is ignored" >&2); }

# 1. A supported Python, then system packages -----------------------------------------
# Build: Open MPI, cmake, a compiler, Python's headers. Tests: sshd and iproute2 (the namespace
# cluster), the linters shellcheck and docker-compose (the Docker checks), Java for Spark (tests/integrations/spark).
apt_pkgs=(openmpi-bin libopenmpi-dev cmake g++ make git openssh-client openssh-server iproute2 procps
          shellcheck docker-compose ca-certificates default-jre-headless)
py=$(bash "$repo/scripts/find-python.sh") || py=""
if [ -z "$py" ]; then
  [ -n "${HVDKIT_PYTHON:-}" ] && exit 1   # find-python.sh said why; never replace the user's choice
  apt_pkgs+=(python3 python3-venv python3-dev)   # Debian 12/13 and Ubuntu 24.04 ship 3.11-3.13
else
  ver=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  # Debian's and Ubuntu's own interpreters keep venv and the headers Horovod's build needs apart.
  if [[ "$py" == /usr/bin/* ]]; then
    "$py" -c 'import ensurepip' 2>/dev/null || apt_pkgs+=("python$ver-venv")
    "$py" -c 'import os, sysconfig, sys; sys.exit(not os.path.exists(sysconfig.get_paths()["include"] + "/Python.h"))' \
      || apt_pkgs+=("python$ver-dev")
  fi
fi
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
[ -n "$py" ] || py=$(bash "$repo/scripts/find-python.sh") || exit 1

# 2. Virtual environment, keyed by interpreter version and lock -------------------------
ver=$("$py" -c 'import sys; print("%d%d" % sys.version_info[:2])')
key=$(sha256sum < "$lock" | cut -c1-12)
venv="$HVDKIT_HOME/venvs/py$ver-$key"
if [ ! -x "$venv/bin/python" ]; then
  say "creating virtual environment $venv with $py"
  mkdir -p "$HVDKIT_HOME/venvs"
  "$py" -m venv "$venv"
fi
# shellcheck disable=SC1091
source "$venv/bin/activate"

# 3. Pinned frameworks and tools ---------------------------------------------------
# The lock is complete, so everything installs --no-deps. The '+cpu' builds (torch) exist only on
# the PyTorch CPU index: they come from $HVDKIT_TORCH_INDEX (a mirror of it, or the real one) and
# nowhere else, so a same-named package on another index can never replace them. The rest comes
# from pip's own index (PyPI unless the user configured a mirror).
# --only-binary=horovod: nothing may ever pull in (and build) the unpatched sdist.
# --no-compile, then compileall on both cores: pip byte-compiles in one process (docs/benchmarks.md, "Setup").
# The .pyc files must exist: with PYTHONDONTWRITEBYTECODE set, Python would recompile on every import.
torch_index=${HVDKIT_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}
if [ ! -f "$venv/.hvdkit-lock-installed" ]; then
  say "installing pinned packages from requirements/cpu.lock (first run only)"
  parts=$(mktemp -d)
  trap 'rm -rf "$parts"' EXIT
  grep -E '^[A-Za-z0-9]' "$lock" | grep -v '+cpu' > "$parts/index.txt" || true
  grep -E '^[A-Za-z0-9].*\+cpu' "$lock" > "$parts/torch-index.txt" || true
  quiet_pip install -q --upgrade pip >/dev/null
  # pyspark comes as an sdist: pip builds a 450 MB wheel of it and unpacks it again at once, so that wheel is
  # stored uncompressed, which halves its install (docs/benchmarks.md, "Setup"); wheels from the index are untouched.
  quiet_pip install -q --no-compile --no-deps --only-binary=horovod \
    --config-settings=--build-option=--compression=stored -r "$parts/index.txt"
  if [ -s "$parts/torch-index.txt" ]; then
    say "installing $(tr '\n' ' ' < "$parts/torch-index.txt")from $torch_index"
    quiet_pip install -q --no-compile --no-deps --index-url "$torch_index" -r "$parts/torch-index.txt"
  fi
  # compileall also reports the deliberately broken .py files some packages ship as test data: not errors here
  python -m compileall -q -j0 "$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
    >/dev/null 2>&1 || true
  python -m pip check >/dev/null || { python -m pip check >&2; say "the installed packages do not fit together"; exit 1; }
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
