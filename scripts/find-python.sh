#!/usr/bin/env bash
# Print the path of a Python interpreter hvdkit supports, or exit 1 with the reason on stderr.
# Order: $HVDKIT_PYTHON (must be supported: no silent fallback), then python3, python3.11,
# python3.12, python3.13 on PATH, then pyenv's installed versions. A candidate counts only if
# it runs: pyenv shims exist on PATH for versions that are not selected and fail when run.
# HVDKIT_PYTHON_VERSION=3.X narrows the search to that one supported version.
# Keep SUPPORTED equal to hvdkit/tools/build/pythons.py (tests/install/test_pythons.py checks it).
set -uo pipefail
SUPPORTED="3.11 3.12 3.13"
if [ -n "${HVDKIT_PYTHON_VERSION:-}" ]; then
  case " $SUPPORTED " in
    *" $HVDKIT_PYTHON_VERSION "*) SUPPORTED=$HVDKIT_PYTHON_VERSION ;;
    *) echo "HVDKIT_PYTHON_VERSION=$HVDKIT_PYTHON_VERSION is not supported; supported: $SUPPORTED" >&2; exit 1 ;;
  esac
fi

version_of() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null; }
supported() { case " $SUPPORTED " in *" $1 "*) return 0 ;; esac; return 1; }

if [ -n "${HVDKIT_PYTHON:-}" ]; then
  v=$(version_of "$HVDKIT_PYTHON") || v=""
  if [ -z "$v" ]; then
    echo "HVDKIT_PYTHON=$HVDKIT_PYTHON does not run; set it to a Python $SUPPORTED interpreter" >&2; exit 1
  fi
  if ! supported "$v"; then
    echo "HVDKIT_PYTHON=$HVDKIT_PYTHON is Python $v; supported: $SUPPORTED" >&2; exit 1
  fi
  command -v "$HVDKIT_PYTHON"; exit 0
fi
candidates=(python3 python3.11 python3.12 python3.13)
if command -v pyenv >/dev/null; then
  root=$(pyenv root 2>/dev/null) || root=""
  for s in $SUPPORTED; do
    for exe in "$root"/versions/"$s".*/bin/python"$s"; do [ -x "$exe" ] && candidates+=("$exe"); done
  done
fi
for cand in "${candidates[@]}"; do
  command -v "$cand" >/dev/null || continue
  v=$(version_of "$cand") || continue
  if supported "$v"; then
    # The real file behind a pyenv shim, so the venv does not depend on the shim's selection.
    "$cand" -c 'import sys; print(sys.executable)'; exit 0
  fi
done
echo "no supported Python found (need one of $SUPPORTED; tried ${candidates[*]})" >&2
exit 1
