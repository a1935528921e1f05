#!/usr/bin/env bash
# A node of the namespace Slurm cluster dies at once, as in a power loss: its link goes down first
# (no connection is closed cleanly), then every process on it (slurmd, slurmstepd, the job's tasks)
# gets SIGKILL. Run it from the command slurm-cluster.sh runs:  docker/slurm/lose-node.sh node2
set -euo pipefail
node=${1:?usage: lose-node.sh NODE}
ns="${HVDKIT_SLURM_NETNS_PREFIX:?run me from the command docker/slurm/slurm-cluster.sh runs}$node"
ip netns pids "$ns" >/dev/null 2>&1 || { echo "lose-node: no namespace $ns" >&2; exit 1; }
echo "lose-node: losing $node at $(date +%s.%N)"
ip -n "$ns" link set eth0 down
ip netns pids "$ns" | xargs -r kill -9
