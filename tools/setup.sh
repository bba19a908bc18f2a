#!/usr/bin/env bash
# Installs what ckptfs needs from Debian's packages, by purpose; safe to run
# again: it installs only what is missing (apt-get, as root).
#
#   tools/setup.sh [GROUP...]      GROUP: build, test, bench, package, all
#
#   build    compile ckptfs, ckptctl and ckpt-bench (meson setup -Dtests=false)
#   test     build the tests and run every suite: cmocka, SQLite and RocksDB,
#            clang (fuzz targets, clang-format), the tools the suites call
#   bench    ckpt-bench --peers: the FUSE file systems it measures against,
#            and strace to see which of them drop the directory fsync
#   package  build the Debian package (tools/package.sh): debhelper, dh-python
#            and lintian
#   all      every group
#
# Without a group: build and test, what tools/demo.sh and tools/test.sh need
# (tools/test.sh asks for package too, for its package step).
set -euo pipefail

build=(meson ninja-build pkg-config gcc python3
       libfuse3-dev fuse3 libglib2.0-dev libjson-glib-dev
       libmount-dev libsmartcols-dev libsystemd-dev liburing-dev)
test=(libcmocka-dev librocksdb-dev libsqlite3-dev sqlite3
      clang clang-format libclang-rt-14-dev git
      attr rsync util-linux tar findutils python3-pytest cmake
      man-db groff-base bsdextrautils)
# the peers of `ckpt-bench --peers` (passthrough_ll is built from
# libfuse3-dev), and strace for counting a daemon's syscalls
bench=(fuse-overlayfs mergerfs bindfs unionfs-fuse strace)
package=(dpkg-dev debhelper dh-python python3-all lintian fakeroot)

groups=("$@")
[ "${#groups[@]}" -gt 0 ] || groups=(build test)
pkgs=()
for g in "${groups[@]}"; do
    case $g in
        build) pkgs+=("${build[@]}") ;;
        test) pkgs+=("${build[@]}" "${test[@]}") ;;
        bench) pkgs+=("${build[@]}" "${bench[@]}") ;;
        package) pkgs+=("${build[@]}" "${package[@]}") ;;
        all) pkgs+=("${build[@]}" "${test[@]}" "${bench[@]}" "${package[@]}") ;;
        -h | --help)
            sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
            exit 0
            ;;
        *)
            echo "setup: unknown group '$g' (build, test, bench, package, all)" >&2
            exit 2
            ;;
    esac
done

missing=()
for p in $(printf '%s\n' "${pkgs[@]}" | sort -u); do
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
