#!/usr/bin/env bash
# A worker: trust the launcher's public key, make this node's host key, start sshd (key
# authentication only), then register "address host-public-key" for the launcher's known_hosts.
# Registration happens after sshd is listening, so a registered worker is ready.
# The host private key stays in this node's own folder (HVDKIT_NODE_STATE, default /run/hvdkit-node:
# inside the container, or a tmpfs in the node's mount namespace), root-only; only public material
# (address, host public key) goes to the shared folder.
# HVDKIT_FOREGROUND=1 (the default, for containers) keeps running while sshd lives.
# HVDKIT_MPI_TMPDIR (optional; netns-node.sh sets it): this node's own folder for Open MPI session
# directories, given to every ssh session. Containers have their own /tmp and need none.
set -euo pipefail
dir=${HVDKIT_CLUSTER_DIR:?HVDKIT_CLUSTER_DIR must name the shared cluster folder}
node=${HVDKIT_NODE_NAME:-$(hostname)}
addr=${HVDKIT_NODE_ADDR:-$(hostname -i | awk '{print $1}')}
user=${HVDKIT_CLUSTER_USER:-trainer}
port=${HVDKIT_SSH_PORT:-22}
state=${HVDKIT_NODE_STATE:-/run/hvdkit-node}
real_dir=$(realpath -m "$dir")
case "$(realpath -m "$state")/" in
  "$real_dir"/*) echo "worker $node: HVDKIT_NODE_STATE=$state is inside the shared HVDKIT_CLUSTER_DIR=$dir;" \
    "the host private key must stay on the node" >&2; exit 1 ;;
esac

[ -f "$dir/ssh/id_ed25519.pub" ] || { echo "worker $node: no client key in $dir/ssh (run keygen.sh first)" >&2; exit 1; }
mkdir -p "$state" /run/sshd
# sshd reads authorized_keys as the training user, so the folder is traversable; the host key is 0600 root.
chown root:root "$state"
chmod 755 "$state"
install -m 644 "$dir/ssh/id_ed25519.pub" "$state/authorized_keys"
rm -f "$state/ssh_host_ed25519_key" "$state/ssh_host_ed25519_key.pub"
ssh-keygen -q -t ed25519 -N "" -C "$node" -f "$state/ssh_host_ed25519_key"
chmod 600 "$state/ssh_host_ed25519_key"
cat > "$state/sshd_config" <<CONF
Port $port
ListenAddress $addr
HostKey $state/ssh_host_ed25519_key
PidFile $state/sshd.pid
AuthorizedKeysFile $state/authorized_keys
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
AllowUsers $user
UsePAM no
PermitUserEnvironment no
CONF
if [ -n "${HVDKIT_MPI_TMPDIR:-}" ]; then
  # Set by sshd itself, so the value is this node's (mpirun forwards the launcher's OMPI_MCA_* instead).
  install -d -m 1777 "$HVDKIT_MPI_TMPDIR"
  echo "SetEnv OMPI_MCA_orte_tmpdir_base=$HVDKIT_MPI_TMPDIR" >> "$state/sshd_config"
fi
# Daemon mode: sshd returns once it listens.
install -m 600 /dev/null "$state/sshd.log"
/usr/sbin/sshd -f "$state/sshd_config" -E "$state/sshd.log"
pubkey=$(cut -d' ' -f1,2 "$state/ssh_host_ed25519_key.pub")
tmp=$(mktemp "$dir/hosts/.$node.XXXXXX")
printf '%s %s\n' "$addr" "$pubkey" > "$tmp"
chmod 644 "$tmp"
mv "$tmp" "$dir/hosts/$node"
echo "worker $node: sshd listening on $addr:$port"
if [ "${HVDKIT_FOREGROUND:-1}" = 1 ]; then
  exec tail --pid="$(cat "$state/sshd.pid")" -f /dev/null
fi
