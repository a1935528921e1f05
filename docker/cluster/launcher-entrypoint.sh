#!/usr/bin/env bash
# The launcher: build known_hosts from the workers' registrations, then run
#   horovodrun -np N -H addr1:1,...,addrN:1 $HVDKIT_TRAIN_COMMAND
# over ssh with strict host-key checking, and exit with its status.
# HVDKIT_MIN_NP=M runs it elastic instead: horovodrun -np N --min-np M --max-np N with a
# discovery script that lists the registered workers (a worker whose registration is removed,
# or whose host fails, leaves the job; the others roll back to their last commit and go on).
# It reads only public material from the shared folder (HVDKIT_CLUSTER_DIR, read-only is enough) and
# keeps its client private key, known_hosts, ssh config and discovery script in its own private folder
# (HVDKIT_LAUNCHER_DIR), which no worker mounts.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dir=${HVDKIT_CLUSTER_DIR:?HVDKIT_CLUSTER_DIR must name the shared cluster folder}
private=${HVDKIT_LAUNCHER_DIR:?HVDKIT_LAUNCHER_DIR must name the launcher private folder (not shared with the workers)}
workers=${HVDKIT_WORKERS:?HVDKIT_WORKERS must give the number of workers}
user=${HVDKIT_CLUSTER_USER:-trainer}
iface=${HVDKIT_NETWORK_INTERFACE:-eth0}
command=${HVDKIT_TRAIN_COMMAND:-python /opt/hvdkit/examples/pytorch_mnist.py}
min_np=${HVDKIT_MIN_NP:-}
# More horovodrun options, e.g. "--gloo-timeout-seconds 10 --prefix-output-with-timestamp".
read -r -a extra <<< "${HVDKIT_HOROVODRUN_ARGS:-}"

[ -f "$private/id_ed25519" ] || { echo "launcher: no client key in $private (run keygen.sh first)" >&2; exit 1; }
[ -w "$private" ] || { echo "launcher: HVDKIT_LAUNCHER_DIR=$private is not writable by $(id -un)" >&2; exit 1; }
shopt -s nullglob
regs=("$dir"/hosts/*)
if [ "${#regs[@]}" -ne "$workers" ]; then
  echo "launcher: expected $workers registered workers in $dir/hosts, found ${#regs[@]}: WORKERS and" \
    "--scale worker= must be the same number (docker/compose.sh up N sets both)" >&2
  exit 1
fi
cat "${regs[@]}" > "$private/known_hosts"
hosts=$(awk '{printf "%s%s:1", (NR > 1 ? "," : ""), $1}' "${regs[@]}")
cat > "$private/config" <<CONF
Host *
  User $user
  IdentityFile $private/id_ed25519
  IdentitiesOnly yes
  UserKnownHostsFile $private/known_hosts
  StrictHostKeyChecking yes
  BatchMode yes
  PasswordAuthentication no
  ConnectTimeout 20
  # A host that dies without closing its connections (power loss, cable, kernel panic) must end
  # its ssh session, or Horovod's elastic driver never learns that the worker is gone.
  ServerAliveInterval 5
  ServerAliveCountMax 3
CONF
export HVDKIT_SSH_CONFIG="$private/config"
export PATH="$here/bin:$PATH"
# Open MPI launches every remote daemon from here (no tree spawn: workers hold no client key).
export OMPI_MCA_plm_rsh_no_tree_spawn=1
# Without tree spawn, orted daemonizes and its ssh session ends: a daemon that dies while starting is never
# reported and mpirun waits for it forever. Attached, it stays the session's child and its failure ends the job.
export OMPI_MCA_orte_leave_session_attached=${OMPI_MCA_orte_leave_session_attached:-1}
# Containers: Docker's default seccomp profile denies process_vm_readv, which Open MPI's shared-memory
# single-copy path needs (large messages between ranks on one worker fail with errno 1). horovodrun
# exports this to every rank (mpirun -x).
export OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism:-none}
if [ -n "$min_np" ]; then
  discover="$private/discover.sh"
  cat > "$discover" <<SCRIPT
#!/bin/sh
# registered workers, one "address:slots" line each
cat "$dir"/hosts/* 2>/dev/null | awk '{print \$1 ":1"}'
SCRIPT
  chmod 755 "$discover"
  echo "launcher: horovodrun -np $workers --min-np $min_np --max-np $workers --host-discovery-script $discover" \
    "--network-interface $iface $command"
  # shellcheck disable=SC2086 # the training command is split into words on purpose
  exec horovodrun -np "$workers" --min-np "$min_np" --max-np "$workers" --host-discovery-script "$discover" \
    --network-interface "$iface" "${extra[@]}" $command
fi
echo "launcher: horovodrun -np $workers -H $hosts --network-interface $iface $command"
# shellcheck disable=SC2086 # the training command is split into words on purpose
horovodrun -np "$workers" -H "$hosts" --network-interface "$iface" "${extra[@]}" $command
