#!/usr/bin/env bash
# hvdkit's two set-up commands (see README):
#   ./run.sh train   install what is missing, then a real 2-process horovodrun training run
#   ./run.sh test    install what is missing, then the whole test suite
# Anything after the command is passed on (to the example, or to pytest).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cmd=${1:-}
shift || true
case "$cmd" in
  train|test|shell) ;;
  *) echo "usage: ./run.sh train|test [args...]" >&2; exit 2 ;;
esac
bash "$repo/scripts/bootstrap.sh"
HVDKIT_HOME=${HVDKIT_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/hvdkit}
# shellcheck disable=SC1091
source "$(cat "$HVDKIT_HOME/current-venv")/bin/activate"
cd "$repo"
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}
case "$cmd" in
  train) exec horovodrun -np 2 -H localhost:2 python examples/pytorch_mnist.py "$@" ;;
  test) exec python -m pytest "$@" ;;
  shell) exec "${SHELL:-bash}" ;;
esac
