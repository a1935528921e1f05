#!/usr/bin/env bash
# One node of netns-cluster.sh, started through `ip netns exec NS unshare --mount ...`: its own
# network namespace and its own mount namespace, like a container. It mounts a fresh tmpfs on its
# private folder (visible only inside this node: nobody else, not the machine, sees what is written
# there), runs the node's start-up, reports on the fifo $1 ("ready" or why not) and then holds the
# namespaces until it is killed.
#   netns-node.sh FIFO launcher   private folder HVDKIT_LAUNCHER_DIR; runs keygen.sh
#   netns-node.sh FIFO worker     private folder HVDKIT_NODE_STATE; runs worker-entrypoint.sh + healthcheck
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ready=${1:?usage: netns-node.sh FIFO launcher|worker}
role=${2:?usage: netns-node.sh FIFO launcher|worker}
report() { echo "$1" > "$ready"; }
trap 'report "failed at line $LINENO"' ERR
case "$role" in
  launcher) private=${HVDKIT_LAUNCHER_DIR:?} ;;
  worker) private=${HVDKIT_NODE_STATE:?} ;;
  *) report "unknown role $role"; exit 2 ;;
esac
mkdir -p "$private"
mount -t tmpfs -o mode=700,size=64m "hvdkit-$role" "$private"
if [ "$role" = launcher ]; then
  "$here/keygen.sh"
else
  # Open MPI's session directories on the node's own tmpfs, as a container's /tmp is its own. The nodes
  # share this machine's /tmp and hostname, so every orted of a job would use /tmp/ompi.HOST.UID/jf.JOB
  # and clear it as it starts: a daemon whose directory another one cleared dies ("mkdir ...: File exists").
  HVDKIT_FOREGROUND=0 HVDKIT_MPI_TMPDIR="$private/mpi" "$here/worker-entrypoint.sh"
  "$here/worker-healthcheck.sh"
fi
report ready
trap - ERR
exec sleep infinity
