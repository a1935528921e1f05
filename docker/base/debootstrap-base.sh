#!/usr/bin/env bash
# A base image equivalent to python:3.11-slim-bookworm, made from Debian's own packages, for
# machines that cannot reach Docker Hub (air-gapped clusters, this CI):
#   debootstrap --variant=minbase bookworm + python3 python3-venv python3-dev ca-certificates,
#   trimmed like Debian's slim images, then `docker import`ed and tagged.
#
#   sudo docker/base/debootstrap-base.sh                 # -> hvdkit/base:bookworm
#   docker build --build-arg BASE_IMAGE=hvdkit/base:bookworm -f docker/cpu/Dockerfile -t hvdkit:cpu .
#
# Python is Debian's 3.11 (3.11.2, /usr/bin/python3, `python` links to it); the official image has
# python.org's newest 3.11 in /usr/local. Nothing else differs for hvdkit's images.
# An image with this tag made from the same recipe (this file) is kept; HVDKIT_BASE_REBUILD=1 redoes it.
# Environment: HVDKIT_BASE_IMAGE (tag), HVDKIT_DEBIAN_MIRROR (default http://deb.debian.org/debian).
# Needs root, debootstrap (installed from Debian when missing) and a running Docker engine.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tag=${HVDKIT_BASE_IMAGE:-hvdkit/base:bookworm}
suite=bookworm
mirror=${HVDKIT_DEBIAN_MIRROR:-http://deb.debian.org/debian}
packages=python3,python3-venv,python3-dev,python-is-python3,ca-certificates
recipe=$(sha256sum "$here/debootstrap-base.sh" | cut -c1-16)

[ "$(id -u)" -eq 0 ] || { echo "debootstrap-base: needs root (debootstrap)" >&2; exit 1; }
command -v docker >/dev/null || { echo "debootstrap-base: docker not found" >&2; exit 1; }
have=$(docker image inspect --format '{{index .Config.Labels "org.hvdkit.base.recipe"}}' "$tag" 2>/dev/null || true)
if [ "$have" = "$recipe" ] && [ "${HVDKIT_BASE_REBUILD:-0}" != 1 ]; then
  echo "debootstrap-base: $tag is up to date (recipe $recipe)"
  exit 0
fi
if ! command -v debootstrap >/dev/null; then
  echo "debootstrap-base: installing debootstrap"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
fi

start=$(date +%s)
rootfs=$(mktemp -d /var/tmp/hvdkit-base.XXXXXX)
# shellcheck disable=SC2317 # called by the trap
cleanup() {
  # a failed debootstrap can leave /proc or /sys mounted inside the tree: unmount before removing
  grep -o " $rootfs/[^ ]*" /proc/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
  rm -rf "$rootfs"
}
trap cleanup EXIT INT TERM

echo "debootstrap-base: debootstrap --variant=minbase --include=$packages $suite from $mirror"
debootstrap --variant=minbase --include="$packages" "$suite" "$rootfs" "$mirror" > "$rootfs.log" 2>&1 \
  || { tail -n 30 "$rootfs.log" >&2; rm -f "$rootfs.log"; echo "debootstrap-base: debootstrap failed" >&2; exit 1; }
rm -f "$rootfs.log"

# What Debian's slim images do: no documentation, manuals or translations now or in later installs,
# no package lists or downloaded packages left in the image.
cat > "$rootfs/etc/dpkg/dpkg.cfg.d/docker-slim" <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
CFG
cat > "$rootfs/etc/apt/apt.conf.d/docker-clean" <<'CFG'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache ""; Dir::Cache::srcpkgcache "";
Acquire::GzipIndexes "true";
CFG
cat > "$rootfs/etc/apt/sources.list" <<LIST
deb $mirror $suite main
deb $mirror $suite-updates main
deb http://deb.debian.org/debian-security $suite-security main
LIST
find "$rootfs/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete 2>/dev/null || true
find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete 2>/dev/null || true
rm -rf "${rootfs:?}"/usr/share/{man,groff,info,lintian,linda,locale}/* "$rootfs"/var/lib/apt/lists/* \
  "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/log/*.log \
  "${rootfs:?}"/var/cache/debconf/*-old "${rootfs:?}"/tmp/* "${rootfs:?}"/dev/*
# The container gets its own hostname, resolver and machine id.
: > "$rootfs/etc/hostname"
: > "$rootfs/etc/resolv.conf"
: > "$rootfs/etc/machine-id"

tar --numeric-owner --xattrs -C "$rootfs" -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change "LABEL org.hvdkit.base.recipe=$recipe org.hvdkit.base.source=debootstrap-$suite" \
  --change 'CMD ["python3"]' \
  --message "debootstrap --variant=minbase $suite + $packages" - "$tag" >/dev/null
size=$(docker image inspect --format '{{.Size}}' "$tag")
echo "debootstrap-base: $tag built in $(( $(date +%s) - start )) s, $(( size / 1000000 )) MB" \
  "($(docker run --rm "$tag" python3 --version))"
