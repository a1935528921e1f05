#!/usr/bin/env bash
# Run once when the cluster starts (before the workers): a fresh client key pair for the
# launcher, and empty registration folders. Nothing here is baked into an image.
set -euo pipefail
dir=${HVDKIT_CLUSTER_DIR:?HVDKIT_CLUSTER_DIR must name the shared cluster folder}
rm -rf "$dir/ssh" "$dir/hosts" "$dir/nodes"
mkdir -p "$dir/ssh" "$dir/hosts" "$dir/nodes"
chmod 700 "$dir/ssh"
ssh-keygen -q -t ed25519 -N "" -C "hvdkit-cluster-$(date +%s)" -f "$dir/ssh/id_ed25519"
# The workers read the public key (sshd runs as root there); the private key stays 0600.
chmod 711 "$dir/ssh"
chmod 644 "$dir/ssh/id_ed25519.pub"
echo "keygen: client key made in $dir/ssh"
