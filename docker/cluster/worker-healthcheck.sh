#!/usr/bin/env bash
# Healthy once this worker registered (which it does after sshd listens) and sshd still runs.
set -euo pipefail
dir=${HVDKIT_CLUSTER_DIR:?}
node=${HVDKIT_NODE_NAME:-$(hostname)}
state=${HVDKIT_NODE_STATE:-/run/hvdkit-node}
[ -s "$dir/hosts/$node" ] && kill -0 "$(cat "$state/sshd.pid")"
