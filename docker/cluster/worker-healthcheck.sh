#!/usr/bin/env bash
# Healthy once this worker registered (which it does after sshd listens) and sshd still runs.
set -euo pipefail
dir=${HVDKIT_CLUSTER_DIR:?}
node=${HVDKIT_NODE_NAME:-$(hostname)}
[ -s "$dir/hosts/$node" ] && kill -0 "$(cat "$dir/nodes/$node/sshd.pid")"
