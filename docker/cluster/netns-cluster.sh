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
#
# Host loss (with HVDKIT_MIN_NP set, the launcher runs the job elastic): HVDKIT_LOSE_NODE=worker2
# HVDKIT_LOSE_WHEN='epoch +2/' kills that node once the job's output matches the pattern: every
# process in its namespace (sshd and the training worker) gets SIGKILL, its link goes down, and its
# registration is removed, so discovery stops listing it.
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
    rm -rf "/etc/netns/$tag-$node"
  done
  ip link del "$bridge" 2>/dev/null || true
  if [ -n "$forward_rule" ]; then iptables -w -D FORWARD -i "$bridge" -o "$bridge" -j ACCEPT 2>/dev/null || true; fi
  rm -rf "$tmp"
  exit "$rc"
}
forward_rule=""
trap cleanup EXIT INT TERM

ip link add "$bridge" type bridge
ip link set "$bridge" up
# A Docker engine on this machine sets the FORWARD policy to DROP and makes bridged frames pass
# iptables (br_netfilter): the nodes on our bridge could not reach each other. Accept them.
if command -v iptables >/dev/null && [ "$(cat /proc/sys/net/bridge/bridge-nf-call-iptables 2>/dev/null)" = 1 ]; then
  iptables -w -I FORWARD -i "$bridge" -o "$bridge" -j ACCEPT
  forward_rule=1
fi
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
  # Like a container, each node's own name resolves to its own address (ip netns exec bind-mounts
  # /etc/netns/NAME/hosts over /etc/hosts); with the machine's hosts file every node's name would
  # be 127.0.0.1, and elastic Horovod's Gloo peers then try to connect to 127.0.0.1 (seen here).
  mkdir -p "/etc/netns/$ns"
  printf '127.0.0.1 localhost\n%s %s\n' "$subnet.$idx" "$(hostname)" > "/etc/netns/$ns/hosts"
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
run_launcher() {
  HVDKIT_WORKERS="$workers" HVDKIT_TRAIN_COMMAND="$command" PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" \
    ip netns exec "$tag-launcher" "$here/launcher-entrypoint.sh"
}
lose_node() {  # $1: node name; the whole "host" goes away at once
  local ns="$tag-$1"
  echo "netns-cluster: losing $1 at $(date +%s.%N)"
  rm -f "$cluster/hosts/$1"
  ip -n "$ns" link set eth0 down
  ip netns pids "$ns" | xargs -r kill -9
}
set +e
if [ -n "${HVDKIT_LOSE_NODE:-}" ]; then
  log="$tmp/launcher.log"
  : > "$log"
  PYTHONUNBUFFERED=1 run_launcher > >(tee "$log") 2>&1 &
  launcher=$!
  # Follow the job's output until the pattern shows up (or the job ends), then lose the node.
  if grep -q -m1 -E "${HVDKIT_LOSE_WHEN:?set HVDKIT_LOSE_WHEN}" < <(tail -n +1 -f --pid="$launcher" "$log"); then
    lose_node "$HVDKIT_LOSE_NODE"
  fi
  wait "$launcher"
  rc=$?
else
  run_launcher
  rc=$?
fi
set -e
echo "netns-cluster: launcher exited $rc after $(( $(date +%s) - start )) s"
exit "$rc"
