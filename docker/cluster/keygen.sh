#!/usr/bin/env bash
# Run once when the cluster starts (before the workers): a fresh client key pair for the launcher,
# and empty registration folders. Nothing here is baked into an image.
#
# Who holds what:
#   HVDKIT_LAUNCHER_DIR  the launcher's private folder (compose: the "launcher" volume, mounted by keygen
#                        and the launcher only; namespaces: a tmpfs in the launcher's mount namespace).
#                        The client PRIVATE key lives here and nowhere else.
#   HVDKIT_CLUSTER_DIR   the folder every node shares: public material only (the client public key,
#                        each worker's address and host public key).
set -euo pipefail
dir=${HVDKIT_CLUSTER_DIR:?HVDKIT_CLUSTER_DIR must name the shared cluster folder}
private=${HVDKIT_LAUNCHER_DIR:?HVDKIT_LAUNCHER_DIR must name the launcher private folder (not shared with the workers)}
real_dir=$(realpath -m "$dir")
real_private=$(realpath -m "$private")
case "$real_private/" in
  "$real_dir"/*) echo "keygen: HVDKIT_LAUNCHER_DIR=$private is inside the shared HVDKIT_CLUSTER_DIR=$dir;" \
    "the client private key must not be on the folder the workers share" >&2; exit 1 ;;
esac
rm -rf "$dir/ssh" "$dir/hosts" "$dir/nodes"
mkdir -p "$dir/ssh" "$dir/hosts" "$private"
chmod 755 "$dir" "$dir/ssh" "$dir/hosts"
chmod 700 "$private"
rm -f "$private/id_ed25519" "$private/id_ed25519.pub" "$private/known_hosts" "$private/config" "$private/discover.sh"
ssh-keygen -q -t ed25519 -N "" -C "hvdkit-cluster-$(date +%s)" -f "$private/id_ed25519"
# Only the public half is published; the workers' sshd trusts it.
install -m 644 "$private/id_ed25519.pub" "$dir/ssh/id_ed25519.pub"
echo "keygen: client key made in $private (private), public key published in $dir/ssh"
