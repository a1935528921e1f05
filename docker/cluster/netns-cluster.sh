#!/usr/bin/env bash
# The docker-compose cluster, built out of network namespaces on this machine, for CI and
# development without a Docker engine: one namespace per worker plus the launcher, each with
# its own address on a bridge, sshd in every worker with keys generated at start, and the very
# entrypoint scripts the containers run. Everything it starts is removed on exit, also on failure.
#
#   sudo docker/cluster/netns-cluster.sh            # 2 workers, a short digits training run
#   HVDKIT_WORKERS=3 HVDKIT_TRAIN_COMMAND="python examples/keras_mnist.py --epochs 2" docker/cluster/netns-cluster.sh
#
# Needs root, iproute2 and openssh-server; addresses come from 10.77.0.0/24 (HVDKIT_NETNS_SUBNET).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
workers=${HVDKIT_WORKERS:-2}
subnet=${HVDKIT_NETNS_SUBNET:-10.77.0}
command=${HVDKIT_TRAIN_COMMAND:-python $repo/examples/pytorch_mnist.py --epochs 3}
[ "$(id -u)" -eq 0 ] || { echo "netns-cluster: needs root (ip netns)" >&2; exit 1; }
for tool in ip sshd ssh-keygen horovodrun; do
  command -v "$tool" >/dev/null || [ -x "/usr/sbin/$tool" ] || { echo "netns-cluster: $tool not found" >&2; exit 1; }
done

tag="hk$$"
bridge="${tag}br"
# Not under /tmp: sshd's StrictModes refuses key files below a world-writable directory.
tmp=$(mktemp -d /run/hvdkit-netns.XXXXXX)
cluster="$tmp/cluster"
nodes=(launcher)
for i in $(seq 1 "$workers"); do nodes+=("worker$i"); done

# shellcheck disable=SC2317 # called by the trap
cleanup() {
  local rc=$?
  for node in "${nodes[@]}"; do
    pidfile="$cluster/nodes/$node/sshd.pid"
    if [ -f "$pidfile" ]; then kill "$(cat "$pidfile")" 2>/dev/null || true; fi
    ip netns pids "$tag-$node" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$tag-$node" 2>/dev/null || true
  done
  ip link del "$bridge" 2>/dev/null || true
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT INT TERM

ip link add "$bridge" type bridge
ip link set "$bridge" up
idx=10
for node in "${nodes[@]}"; do
  ns="$tag-$node"
  ip netns add "$ns"
  ip link add "${tag}v$idx" type veth peer name "${tag}p$idx"
  ip link set "${tag}v$idx" master "$bridge" up
  ip link set "${tag}p$idx" netns "$ns"
  ip -n "$ns" link set "${tag}p$idx" name eth0
  ip -n "$ns" addr add "$subnet.$idx/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  idx=$((idx + 1))
done

HVDKIT_CLUSTER_USER=$(id -un)
export HVDKIT_CLUSTER_DIR="$cluster" HVDKIT_CLUSTER_USER
mkdir -p "$cluster"
"$here/keygen.sh"
idx=11
for i in $(seq 1 "$workers"); do
  HVDKIT_NODE_NAME="worker$i" HVDKIT_NODE_ADDR="$subnet.$idx" HVDKIT_FOREGROUND=0 \
    ip netns exec "$tag-worker$i" "$here/worker-entrypoint.sh"
  HVDKIT_NODE_NAME="worker$i" ip netns exec "$tag-worker$i" "$here/worker-healthcheck.sh"
  idx=$((idx + 1))
done

# The namespaces share this machine's cores: split them between the workers.
export HVDKIT_THREADS=${HVDKIT_THREADS:-$(( $(nproc) / workers > 0 ? $(nproc) / workers : 1 ))}
cd "$repo"
start=$(date +%s)
set +e
HVDKIT_WORKERS="$workers" HVDKIT_TRAIN_COMMAND="$command" PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" \
  ip netns exec "$tag-launcher" "$here/launcher-entrypoint.sh"
rc=$?
set -e
echo "netns-cluster: launcher exited $rc after $(( $(date +%s) - start )) s"
exit "$rc"
