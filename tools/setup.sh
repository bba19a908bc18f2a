#!/usr/bin/env bash
# Installs what ckptfs needs to build, test and demo, from Debian's packages.
# Safe to run again: it installs only what is missing.
set -euo pipefail

pkgs=(meson ninja-build pkg-config gcc clang clang-format libclang-rt-14-dev git
      libfuse3-dev fuse3 libglib2.0-dev libjson-glib-dev libcmocka-dev
      libmount-dev libsmartcols-dev libsystemd-dev liburing-dev
      librocksdb-dev libsqlite3-dev sqlite3 attr rsync util-linux tar findutils
      python3-pytest cmake man-db groff-base bsdextrautils
      # the peers of `ckpt-bench --peers` (passthrough_ll is built from libfuse3-dev),
      # and strace for counting a daemon's syscalls
      fuse-overlayfs mergerfs bindfs unionfs-fuse strace)

missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "setup: missing packages (${missing[*]}); run as root or install them" >&2
        exit 2
    fi
    echo "setup: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
[ -e /dev/fuse ] || { echo "setup: /dev/fuse is missing (modprobe fuse)" >&2; exit 2; }
