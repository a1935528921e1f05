#!/usr/bin/env bash
# Upstream Horovod v0.28.1's test/parallel/test_tensorflow.py through hvdkit.tensorflow at np=2, alone and
# without deselection (the upstream README measured 9 min 21 s against the raw build; one run through hvdkit
# took 71 s here). CI runs it with the two Keras 3 artifacts deselected: tests/compat/test_upstream_conformance.py.
# The upstream tree is copied into a temporary folder (never edited in place); the copy's only change is its
# import line, plus a one-line `mock` module mapping the `mock` backport onto unittest.mock.
# Usage: scripts/upstream-tf-suite.sh [pytest args...]
# Uses the vendored third_party/horovod-0.28.1-test (or HVDKIT_UPSTREAM_TESTS) and the hvdkit environment.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
upstream=${HVDKIT_UPSTREAM_TESTS:-$repo/third_party/horovod-0.28.1-test}
[[ -f $upstream/parallel/test_tensorflow.py ]] || { echo "no upstream test tree at $upstream" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r "$upstream/utils" "$tmp/utils"
echo 'from unittest.mock import *  # noqa: F403' > "$tmp/utils/mock.py"
mkdir "$tmp/parallel"
cp "$upstream/parallel/base_test_tensorflow.py" "$tmp/parallel/"
sed 's/^import horovod\.tensorflow as hvd$/import hvdkit.tensorflow as hvd/' "$upstream/parallel/test_tensorflow.py" \
  > "$tmp/parallel/test_tensorflow.py"
grep -q '^import hvdkit.tensorflow as hvd$' "$tmp/parallel/test_tensorflow.py"
cd "$tmp"
# The run passes when every failure is one of the two Keras 3 artifacts inside upstream's own tests
# (tests/compat/test_upstream_conformance.py KERAS3_IN_TEST says why); anything else fails it.
known='test_horovod_syncbn_cpu|test_partial_distributed_gradient_tape'
set +e
PYTHONPATH="$repo:$tmp/utils" timeout 1200 horovodrun -np 2 -H localhost:2 \
  python -m pytest -q -rf --color=no -p no:cacheprovider parallel/test_tensorflow.py "$@" | tee "$tmp/log"
rc=${PIPESTATUS[0]}
set -e
# horovodrun tags the ranks' output per write, not per line: two ranks' lines can arrive glued into one.
# Split at every tag first, so that a real failure glued to a known one is not filtered out with it.
sed 's/\[1,[0-9]*\]<std\(out\|err\)>:/\n&/g' "$tmp/log" > "$tmp/lines"
grep -E '<stdout>:[0-9]+ (passed|failed)|<stdout>:.* passed' "$tmp/lines" | tail -n 2
other=$(grep -E '<stdout>:(SUB)?FAILED' "$tmp/lines" | grep -v -E "::($known)( |$)" || true)
if [ -n "$other" ] || ! grep -q ' passed' "$tmp/lines"; then
  echo "upstream test_tensorflow.py: failures beyond the two known Keras 3 artifacts:" >&2
  echo "$other" >&2
  exit 1
fi
[ "$rc" -eq 0 ] || echo "only the known Keras 3 artifacts failed ($known): passed"
