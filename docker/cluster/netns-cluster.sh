#!/usr/bin/env bash
# The docker-compose cluster, built out of network namespaces on this machine, for CI and
# development without a Docker engine: one namespace per worker plus the launcher, each with
# its own address on a bridge, sshd in every worker with keys generated at start, and the very
# entrypoint scripts the containers run. Everything it starts is removed on exit, also on failure.
#
# Who can reach what (as in the compose demo): every node also gets its own mount namespace
# (netns-node.sh) with a private tmpfs. The launcher's client private key is made on the launcher's
# tmpfs and exists nowhere else; each worker's host private key is made on that worker's tmpfs; the
# folder they share ($tmp/cluster) holds public material only (client public key, worker addresses and
# host public keys). Workers also run in their own PID namespace, so even the training user (root here,
# the machine's venv is root's) cannot reach another node's files through /proc/PID/root.
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
for tool in ip unshare nsenter sshd ssh-keygen horovodrun; do
  command -v "$tool" >/dev/null || [ -x "/usr/sbin/$tool" ] || { echo "netns-cluster: $tool not found" >&2; exit 1; }
done

tag="hk$$"
bridge="${tag}br"
# Not under /tmp: sshd's StrictModes refuses key files below a world-writable directory.
tmp=$(mktemp -d /run/hvdkit-netns.XXXXXX)
cluster="$tmp/cluster"     # shared by every node: public material only
launcher_dir="$tmp/launcher"  # the launcher's tmpfs (client private key, known_hosts, ssh config)
node_dir="$tmp/node"        # each worker's own tmpfs at this path (host private key, sshd state)
nodes=(launcher)
for i in $(seq 1 "$workers"); do nodes+=("worker$i"); done

# shellcheck disable=SC2317 # called by the trap
cleanup() {
  local rc=$?
  for node in "${nodes[@]}"; do
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
export HVDKIT_CLUSTER_DIR="$cluster" HVDKIT_CLUSTER_USER HVDKIT_LAUNCHER_DIR="$launcher_dir" HVDKIT_NODE_STATE="$node_dir"
mkdir -p "$cluster" "$launcher_dir" "$node_dir"
# start_node NODE ROLE [unshare options]: the node's namespaces are held by a process of its own
# (netns-node.sh), which reports "ready" on a fifo once its start-up is done.
declare -A holder
start_node() {
  local node=$1 role=$2 fifo="$tmp/$1.ready" fd status=""
  shift 2
  mkfifo "$fifo"
  exec {fd}<>"$fifo"  # read-write: opening does not block, and read -t can time out
  ip netns exec "$tag-$node" unshare --mount --propagation private "$@" "$here/netns-node.sh" "$fifo" "$role" &
  holder[$node]=$!
  disown  # cleanup kills it; no "Killed" line from the shell
  read -r -t 60 -u "$fd" status || status="no answer in 60 s"
  exec {fd}<&-
  [ "$status" = ready ] || { echo "netns-cluster: $node did not start: $status" >&2; exit 1; }
}
start_node launcher launcher  # keygen.sh, in the launcher's own mount namespace
idx=11
for i in $(seq 1 "$workers"); do
  HVDKIT_NODE_NAME="worker$i" HVDKIT_NODE_ADDR="$subnet.$idx" start_node "worker$i" worker --pid --fork --mount-proc
  idx=$((idx + 1))
done
if [ -n "${HVDKIT_NETNS_IMPOSTOR:-}" ]; then
  # A test of the launcher's host-key check: the registration of this worker names a host key that
  # its sshd does not have (what the launcher sees when another machine answers at that address).
  ssh-keygen -q -t ed25519 -N "" -C impostor -f "$tmp/impostor"
  read -r addr _ < "$cluster/hosts/$HVDKIT_NETNS_IMPOSTOR"
  printf '%s %s\n' "$addr" "$(cut -d' ' -f1,2 "$tmp/impostor.pub")" > "$cluster/hosts/$HVDKIT_NETNS_IMPOSTOR"
  echo "netns-cluster: $HVDKIT_NETNS_IMPOSTOR now registers a host key its sshd does not have"
fi

# The namespaces share this machine's cores: split them between the workers.
export HVDKIT_THREADS=${HVDKIT_THREADS:-$(( $(nproc) / workers > 0 ? $(nproc) / workers : 1 ))}
cd "$repo"
start=$(date +%s)
run_launcher() {
  # Each worker's sshd names its own Open MPI session folder (netns-node.sh); mpirun would pass the
  # launcher's value to every daemon over it.
  HVDKIT_WORKERS="$workers" HVDKIT_TRAIN_COMMAND="$command" PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" \
    env -u OMPI_MCA_orte_tmpdir_base nsenter --target "${holder[launcher]}" --mount --net "$here/launcher-entrypoint.sh"
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
