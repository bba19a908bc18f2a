#!/bin/bash
# tools/setup.sh installs by purpose: what each group asks apt-get for, with
# dpkg-query saying nothing is installed yet (stand-ins for dpkg-query, id
# and apt-get record the calls; nothing is installed).  The default is what
# tools/test.sh and tools/demo.sh need, without the benchmark peers and the
# packaging tools.  $1: tools/setup.sh.
set -u
setup=$1
fail=0
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
printf '#!/bin/sh\nexit 1\n' >"$bin/dpkg-query"
printf '#!/bin/sh\necho 0\n' >"$bin/id"
printf '#!/bin/sh\n[ "$1" = update ] || echo "$@" >>"%s/calls"\n' "$bin" >"$bin/apt-get"
chmod +x "$bin"/*

# the packages `setup.sh ARGS` would install, one per line
asks() {
    rm -f "$bin/calls"
    PATH="$bin:$PATH" bash "$setup" "$@" >/dev/null 2>&1
    tr ' ' '\n' <"$bin/calls" 2>/dev/null | grep -v '^-' | sort -u
}
has() { grep -qx "$2" <<<"$1"; }
# GROUPS (one word, "-" for none) and, for each package, yes or no
check() {
    local groups=$1 got p want v
    shift
    [ "$groups" = - ] && got=$(asks) || got=$(asks $groups)
    while [ $# -gt 0 ]; do
        p=$1 want=$2
        shift 2
        if has "$got" "$p"; then v=yes; else v=no; fi
        if [ "$v" = "$want" ]; then
            echo "ok: setup.sh $groups: $p $want"
        else
            echo "FAIL: setup.sh $groups: $p should be $want"
            fail=1
        fi
    done
}
check - meson yes libfuse3-dev yes libcmocka-dev yes clang-format yes python3-pytest yes \
    fuse-overlayfs no mergerfs no bindfs no unionfs-fuse no lintian no debhelper no
check build meson yes libfuse3-dev yes libcmocka-dev no fuse-overlayfs no lintian no
check bench fuse-overlayfs yes mergerfs yes bindfs yes unionfs-fuse yes strace yes meson yes
check package debhelper yes dh-python yes lintian yes dpkg-dev yes meson yes libcmocka-dev no
check all fuse-overlayfs yes lintian yes libcmocka-dev yes meson yes
check "bench package" lintian yes fuse-overlayfs yes
PATH="$bin:$PATH" bash "$setup" frob >/dev/null 2>&1
[ $? -eq 2 ] && echo "ok: an unknown group is a usage error" || { echo "FAIL: setup.sh frob"; fail=1; }
exit $fail
