#!/usr/bin/env bash
# Makes the cordon-dev root filesystem with debootstrap, from the Debian mirror this host's
# apt already uses (no other network is reachable). Usage: build-rootfs.sh OUT_DIR
# Takes minutes; `cordon images build dev` caches the result and reuses it.
set -euo pipefail
out=${1:?usage: build-rootfs.sh OUT_DIR}
command -v debootstrap >/dev/null || { echo "debootstrap missing: apt-get install debootstrap" >&2; exit 1; }
mirror=${CORDON_DEBIAN_MIRROR:-}
if [ -z "$mirror" ]; then
  # First Debian "URIs:" (deb822) or "deb" line that serves the main archive.
  mirror=$(grep -hE '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null \
    | grep -oE 'https?://[^ ]+/debian/?' | grep -v security | head -n1 || true)
fi
mirror=${mirror:-http://deb.debian.org/debian}
echo "debootstrap from $mirror into $out"
rm -rf "$out.partial"
debootstrap --variant=minbase \
  --include=bash,coreutils,git,python3,build-essential,ripgrep,ca-certificates \
  bookworm "$out.partial" "$mirror"
# Nothing in the image needs the package caches.
rm -rf "$out.partial"/var/cache/apt/archives/*.deb "$out.partial"/var/lib/apt/lists/*
mkdir -p "$out.partial/run/cordon"
rm -rf "$out"
mv "$out.partial" "$out"
