#!/usr/bin/env bash
# Builds the Debian package from a copy of the tree (dpkg-buildpackage
# writes ../*.deb: nothing lands in or beside the source tree), runs lintian
# on it (an error fails), then, unless --build-only, installs it with
# apt-get, checks the installed programs (versions, `ckptctl run -- true`,
# a mount by /usr/sbin/ckptfs: a file written through it reaches the
# backing directory, the pytest plugin's --ckptfs) and removes it again,
# with whatever apt-get installed for it, so the machine is as before.
#
#   tools/package.sh [--build-only] [--out DIR]   (root; tools/test.sh runs it)
#
# --out DIR keeps the .deb (and the lintian report) in DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
build_only=0 out=
while [ $# -gt 0 ]; do
    case $1 in
        --build-only) build_only=1 ;;
        --out) out=$2; shift ;;
        *) echo "package: unknown argument $1 (--build-only, --out DIR)" >&2; exit 2 ;;
    esac
    shift
done
./tools/setup.sh package

tmp=$(mktemp -d /var/tmp/ckptfs-package.XXXXXX)
mnt= daemon= installed=0
before=$tmp/packages-before
cleanup() {
    rc=$?
    if [ -n "$mnt" ] && mountpoint -q "$mnt" 2>/dev/null; then
        fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -u -z "$mnt" || true
    fi
    if [ -n "$daemon" ]; then kill "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; fi
    if [ "$installed" = 1 ]; then
        # the package, then what apt-get brought in for it and nothing else
        DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq ckptfs >/dev/null || rc=1
        mapfile -t extra < <(dpkg-query -W -f='${Package}\n' | sort | comm -13 "$before" -)
        if [ "${#extra[@]}" -gt 0 ]; then
            echo "package: removing what was installed with it: ${extra[*]}"
            DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq "${extra[@]}" >/dev/null || rc=1
        fi
        if dpkg-query -W -f='${Status}' ckptfs 2>/dev/null | grep -q "installed"; then
            echo "package: ckptfs is still installed" >&2
            rc=1
        fi
    fi
    rm -rf "$tmp"
    exit "$rc"
}
trap cleanup EXIT

echo "== Debian package: build (dpkg-buildpackage -us -uc -b, in $tmp)"
mkdir "$tmp/src"
# the files git knows or would add, as they are in the working tree:
# nothing a build left (.gitignore), uncommitted changes included
git ls-files -z --cached --others --exclude-standard |
    (while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done) |
    tar --null -T - -cf - | tar -xf - -C "$tmp/src"
if ! (cd "$tmp/src" && dpkg-buildpackage -us -uc -b) >"$tmp/build.log" 2>&1; then
    tail -n 60 "$tmp/build.log"
    echo "package: dpkg-buildpackage failed (the end of its log is above)" >&2
    exit 1
fi
deb=$(ls "$tmp"/ckptfs_*.deb)
echo "built $(basename "$deb"): $(dpkg-deb -f "$deb" Version), $(du -h "$deb" | cut -f1)"
dpkg-deb -c "$deb" | awk '{print "  " $6 ($7 ? " " $7 " " $8 : "")}'

echo "== lintian"
lint=0
lintian --fail-on error --display-info "$deb" >"$tmp/lintian.txt" 2>&1 || lint=$?
cat "$tmp/lintian.txt"
printf 'lintian: %d error(s), %d warning(s), %d info\n' \
    "$(grep -c '^E:' "$tmp/lintian.txt" || true)" "$(grep -c '^W:' "$tmp/lintian.txt" || true)" \
    "$(grep -c '^I:' "$tmp/lintian.txt" || true)"
if [ -n "$out" ]; then
    mkdir -p "$out"
    cp "$deb" "$tmp/lintian.txt" "$out/"
fi
[ "$lint" -eq 0 ] || { echo "package: lintian found errors" >&2; exit 1; }
[ "$build_only" = 0 ] || exit 0

echo "== install, use, remove"
if dpkg-query -W -f='${Status}' ckptfs 2>/dev/null | grep -q "installed"; then
    echo "package: a ckptfs package is installed already; not replacing it (--build-only)" >&2
    exit 1
fi
dpkg-query -W -f='${Package}\n' | sort >"$before"
installed=1
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$deb" >/dev/null
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
cd "$tmp"
/usr/sbin/ckptfs -V | head -1
/usr/bin/ckptctl -V
/usr/bin/ckpt-bench -V
man -w ckptfs ckptctl ckpt-bench >/dev/null
for c in ckptfs ckptctl ckpt-bench; do
    [ -e "/usr/share/bash-completion/completions/$c" ] || { echo "no completion for $c" >&2; exit 1; }
done
[ -e /lib/systemd/system/ckptfs@.service ] || { echo "no ckptfs@.service" >&2; exit 1; }

echo "\$ ckptctl run -- true"
ckptctl run -- true

echo "\$ /usr/sbin/ckptfs BACKING MNT; write through it; fusermount3 -u MNT"
mkdir -p "$tmp/backing" "$tmp/mnt"
mnt=$tmp/mnt
/usr/sbin/ckptfs -f -o nosupervise,log=stderr "$tmp/backing" "$mnt" 2>"$tmp/ckptfs.log" &
daemon=$!
for _ in $(seq 100); do mountpoint -q "$mnt" && break; sleep 0.1; done
mountpoint -q "$mnt" || { cat "$tmp/ckptfs.log"; echo "package: no mount" >&2; exit 1; }
mkdir -p "$mnt/_state/j1/v1/0"
echo "through the mount" >"$mnt/_state/j1/v1/0/state"
[ "$(cat "$tmp/backing/_state/j1/v1/0/state")" = "through the mount" ] ||
    { echo "package: the write did not reach the backing directory" >&2; exit 1; }
ls "$mnt/_views" >/dev/null
fusermount3 -u "$mnt"
wait "$daemon"
daemon=
echo "mounted, written, unmounted"

if python3 -m pytest --version >/dev/null 2>&1; then
    echo "\$ pytest --ckptfs (the installed plugin)"
    mkdir "$tmp/suite"
    printf 'import os\n\ndef test_mounted():\n    assert os.path.ismount(os.environ["CKPTFS_MOUNT"])\n' \
        >"$tmp/suite/test_mounted.py"
    (cd "$tmp/suite" && python3 -m pytest -q -p no:cacheprovider --ckptfs test_mounted.py)
fi
echo "package: ok"
