#!/usr/bin/env bash
# A real Slurm cluster on this machine, built out of network namespaces, for CI and development:
# one slurmctld and N slurmd "nodes", each node in its own network and UTS namespace (its own
# address on a private bridge and its own host name), authenticated by a munge key made at start.
# It runs COMMAND in the controller's namespace (the "login node", with SLURM_CONF set), then
# removes everything it started: daemons, job processes, namespaces, bridge, files. Also on failure.
#
#   sudo docker/slurm/slurm-cluster.sh                                   # sbatch examples/slurm/train.sbatch
#   sudo docker/slurm/slurm-cluster.sh sbatch --wait examples/slurm/train-gloo.sbatch
#   sudo HVDKIT_SLURM_NODES=3 docker/slurm/slurm-cluster.sh bash          # an interactive login shell
#
# Needs root, iproute2, util-linux (unshare) and Debian's slurmctld, slurmd, slurm-client and munge
# packages (Slurm 22.05 in bookworm): missing ones are installed with apt-get (HVDKIT_SLURM_NO_INSTALL=1
# turns that off). Addresses come from 10.78.0.0/24 (HVDKIT_SLURM_SUBNET). Inside COMMAND:
#   HVDKIT_SLURM_NETNS_PREFIX   prefix of the namespaces: ${prefix}node1, ${prefix}ctl, ...
#   HVDKIT_SLURM_DIR            the cluster's state folder (logs under log/)
#   docker/slurm/lose-node.sh NODE   a node dies at once: its link goes down, every process on it is killed
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
nodes_n=${HVDKIT_SLURM_NODES:-2}
cpus=${HVDKIT_SLURM_CPUS:-2}
subnet=${HVDKIT_SLURM_SUBNET:-10.78.0}
[ "$(id -u)" -eq 0 ] || { echo "slurm-cluster: needs root (ip netns, munged, slurmd)" >&2; exit 1; }
[ "$#" -gt 0 ] || set -- sbatch --wait "$repo/examples/slurm/train.sbatch"

# Debian's packages, installed once (apt serialised with the machine's other installs).
need=()
for pkg in slurmctld slurmd slurm-client munge; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
if ((${#need[@]})); then
  [ "${HVDKIT_SLURM_NO_INSTALL:-0}" != 1 ] || { echo "slurm-cluster: missing packages: ${need[*]}" >&2; exit 1; }
  echo "slurm-cluster: installing ${need[*]}"
  # The packages start their services where a policy allows it; this script runs its own daemons.
  install() {
    flock /tmp/hvdkit-apt.lock env DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 \
      apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  }
  install || { flock /tmp/hvdkit-apt.lock apt-get update -qq && install; }
fi
for tool in ip unshare munged slurmctld slurmd sbatch; do
  command -v "$tool" >/dev/null || [ -x "/usr/sbin/$tool" ] || { echo "slurm-cluster: $tool not found" >&2; exit 1; }
done

tag="hs$$"
bridge="${tag}br"
dir=$(mktemp -d /run/hvdkit-slurm.XXXXXX)
chmod 755 "$dir"
names=(ctl)
for i in $(seq 1 "$nodes_n"); do names+=("node$i"); done
forward_rule=""

# shellcheck disable=SC2317 # called by the trap
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  for name in "${names[@]}"; do
    ip netns pids "$tag-$name" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
  done
  for name in "${names[@]}"; do
    ip netns del "$tag-$name" 2>/dev/null || true
  done
  ip link del "$bridge" 2>/dev/null || true
  if [ -n "$forward_rule" ]; then iptables -w -D FORWARD -i "$bridge" -o "$bridge" -j ACCEPT 2>/dev/null || true; fi
  if [ "${HVDKIT_SLURM_KEEP_LOGS:-}" ]; then
    { mkdir -p "$HVDKIT_SLURM_KEEP_LOGS" && cp -r "$dir/log/." "$HVDKIT_SLURM_KEEP_LOGS/"; } 2>/dev/null || true
  fi
  rm -rf "$dir"
  echo "slurm-cluster: removed (exit $rc)"
  exit "$rc"
}
trap cleanup EXIT INT TERM

# Network: a bridge, one namespace per host, every host name in every namespace's hosts file.
ip link add "$bridge" type bridge
ip link set "$bridge" up
# A Docker engine on this machine sets the FORWARD policy to DROP and makes bridged frames pass
# iptables (br_netfilter): the hosts on our bridge could not reach each other. Accept them.
if command -v iptables >/dev/null && [ "$(cat /proc/sys/net/bridge/bridge-nf-call-iptables 2>/dev/null)" = 1 ]; then
  iptables -w -I FORWARD -i "$bridge" -o "$bridge" -j ACCEPT
  forward_rule=1
fi
hosts="127.0.0.1 localhost"$'\n'
idx=10
for name in "${names[@]}"; do
  ns="$tag-$name"
  ip netns add "$ns"
  ip link add "${tag}v$idx" type veth peer name "${tag}p$idx"
  ip link set "${tag}v$idx" master "$bridge" up
  ip link set "${tag}p$idx" netns "$ns"
  ip -n "$ns" link set "${tag}p$idx" name eth0
  ip -n "$ns" addr add "$subnet.$idx/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  hosts+="$subnet.$idx $name"$'\n'
  idx=$((idx + 1))
done
printf '%s' "$hosts" > "$dir/hosts"
# Run on host NAME: its network namespace, its own UTS namespace (host name) and a private mount
# namespace where the cluster's hosts file is /etc/hosts. Not `ip netns exec`: it remounts /sys,
# which hides /sys/fs/cgroup, and slurmd will not start without it.
in_host() {
  local name=$1; shift
  # shellcheck disable=SC2016 # expanded by the inner shell
  nsenter --net="/run/netns/$tag-$name" unshare --uts --mount --propagation private \
    sh -c 'mount --bind "$0" /etc/hosts && hostname "$1" && shift && exec "$@"' "$dir/hosts" "$name" "$@"
}

# munge: a fresh key, its own socket (the machine's munged, if any, is left alone).
mkdir -p "$dir/munge" "$dir/log" "$dir/state" "$dir/spool"
chmod 755 "$dir/munge"  # the socket must be reachable by job users; the key stays 0400
head -c 1024 /dev/urandom > "$dir/munge/munge.key"
chmod 400 "$dir/munge/munge.key"
in_host ctl munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
  --pid-file="$dir/munge/munged.pid" --seed-file="$dir/munge/munged.seed" --log-file="$dir/log/munged.log"

node_lines=""
idx=11
for i in $(seq 1 "$nodes_n"); do
  node_lines+="NodeName=node$i NodeAddr=$subnet.$idx CPUs=$cpus RealMemory=1000 State=UNKNOWN"$'\n'
  mkdir -p "$dir/spool/node$i" "$dir/tmp/node$i"
  idx=$((idx + 1))
done
export SLURM_CONF="$dir/slurm.conf"
cat > "$SLURM_CONF" <<CONF
# Written by docker/slurm/slurm-cluster.sh; removed with the cluster.
ClusterName=hvdkit
SlurmctldHost=ctl($subnet.10)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
# cred_expire: also how long a requeued job waits before it may start again (default 120 s).
AuthInfo=socket=$dir/munge/munge.socket,cred_expire=${HVDKIT_SLURM_CRED_EXPIRE:-10}
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
TmpFS=$dir/tmp/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups in CI containers: processes are tracked through /proc.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/backfill
# Pending jobs are looked at every 5 s (default 60/30 s): a requeued job starts soon after cred_expire.
SchedulerParameters=sched_interval=5,bf_interval=5
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# The nodes share this machine's cores: use the CPUs written here, not the hardware's.
SlurmdParameters=config_overrides
# Node loss is noticed fast here (the default is 300 s); a node that comes back is usable again.
SlurmdTimeout=${HVDKIT_SLURMD_TIMEOUT:-10}
ReturnToService=2
JobRequeue=1
KillWait=5
MessageTimeout=5
InactiveLimit=0
MinJobAge=600
$node_lines
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF

start=$(date +%s.%N)
in_host ctl slurmctld -i
for i in $(seq 1 "$nodes_n"); do
  in_host "node$i" slurmd -N "node$i"
done
# Ready when every node registered (idle); polled, with a deadline.
deadline=$(( $(date +%s) + ${HVDKIT_SLURM_START_TIMEOUT:-60} ))
while :; do
  idle=$(in_host ctl sinfo -h -N -t idle -o '%N' 2>/dev/null | sort -u | wc -l)
  [ "$idle" -ge "$nodes_n" ] && break
  if [ "$(date +%s)" -gt "$deadline" ]; then
    echo "slurm-cluster: nodes not idle after ${HVDKIT_SLURM_START_TIMEOUT:-60} s" >&2
    in_host ctl sinfo -N >&2 || true
    tail -n 20 "$dir"/log/*.log >&2 || true
    exit 1
  fi
  sleep 0.2
done
awk -v n="$nodes_n" -v s="$start" -v e="$(date +%s.%N)" -v c="$subnet.10" -v f="$SLURM_CONF" \
  'BEGIN { printf "slurm-cluster: %d nodes idle after %.1f s (controller ctl %s, conf %s)\n", n, e - s, c, f }'

export HVDKIT_SLURM_NETNS_PREFIX="$tag-" HVDKIT_SLURM_DIR="$dir"
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
cd "$repo"
set +e
in_host ctl "$@"
rc=$?
set -e
echo "slurm-cluster: command exited $rc"
exit "$rc"
