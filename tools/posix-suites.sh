#!/usr/bin/env bash
# Runs the POSIX suites nobody here wrote against ckptfs, in each data path
# (passthrough on, off) and transport (/dev/fuse, io_uring), and prints one
# summary table.  It fetches nothing: give it what you built.
#
#   tools/posix-suites.sh [--ckptfs BIN] [--pjdfstest DIR] [--fsx BIN] [--fsstress BIN]
#                         [--xfstests DIR [--xfstests-tests "generic/080 ..." | --xfstests-group G]]
#                         [--paths "auto off"] [--transports "off auto"] [--ops N]
#
#   pjdfstest: a built checkout (DIR/pjdfstest and DIR/tests; needs prove)
#   fsx:       xfstests' ltp/fsx (or any fsx), run plain, with AIO (-A), with
#              io_uring (-U, where that fsx has it) and O_DIRECT (-Z)
#   fsstress:  xfstests' ltp/fsstress: 4 processes of --ops/4 random
#              operations each, then the tree through the mount must be the
#              backing's (names, types, sizes, link counts) and the mount
#              must still answer
#   xfstests:  a built checkout; FSTYP=fuse, FUSE_SUBTYP=.ckptfs, so
#              mount(8) must find ckptfs (ninja install, or --link to put a
#              symlink in /usr/local/sbin for the run).  xfstests works at the
#              mount's root, which the write policy keeps for _state and _jobs:
#              the mounts are made with -o no_policy (every check skipped),
#              and empties it with rm -rf MNT/* before tests: the views are
#              named .views there (-o views=.views), which the glob skips.
#              The test and scratch backing directories are 16 GiB ext4
#              images of their own (sparse, loop-mounted), so that a test
#              that fills the scratch one fills nothing else.
#              Needs the users fsgqa, fsgqa2 and 123456-fsgqa.  Results and
#              the daemons' logs: /var/tmp/ckptfs-xfs-<variant>.results/
#
# How to get and build the suites: README.md.  Root, /dev/fuse.  Exit 0
# when every suite that ran passed, 1 otherwise.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
ckptfs=""
pjd=""
fsx=""
fss=""
xfs=""
xfs_tests=""
xfs_group="quick"
paths="auto off"
transports="off auto"
ops=100000
link=0
while [ $# -gt 0 ]; do
    case $1 in
    --ckptfs) ckptfs=$2; shift 2 ;;
    --pjdfstest) pjd=$2; shift 2 ;;
    --fsx) fsx=$2; shift 2 ;;
    --fsstress) fss=$2; shift 2 ;;
    --xfstests) xfs=$2; shift 2 ;;
    --xfstests-tests) xfs_tests=$2; shift 2 ;;
    --xfstests-group) xfs_group=$2; shift 2 ;;
    --paths) paths=$2; shift 2 ;;
    --transports) transports=$2; shift 2 ;;
    --ops) ops=$2; shift 2 ;;
    --link) link=1; shift ;;
    -h|--help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "posix-suites: unknown argument $1 (try --help)" >&2; exit 2 ;;
    esac
done
[ "$(id -u)" -eq 0 ] || { echo "posix-suites: run as root" >&2; exit 2; }
if [ -z "$ckptfs" ]; then
    for c in "$here/build-release/fs/ckptfs" "$here/build-test/fs/ckptfs" "$(command -v ckptfs)"; do
        [ -x "$c" ] && { ckptfs=$c; break; }
    done
fi
[ -x "$ckptfs" ] || { echo "posix-suites: no ckptfs (--ckptfs BIN)" >&2; exit 2; }
# absolute: --link's symlink and the suites' own directories must find it
ckptfs=$(realpath "$ckptfs")
[ -n "$pjd$fsx$fss$xfs" ] || { echo "posix-suites: give --pjdfstest, --fsx, --fsstress or --xfstests" >&2; exit 2; }
uring=/sys/module/fuse/parameters/enable_uring
if [ -w "$uring" ]; then
    uring_was=$(cat "$uring")
    echo Y > "$uring"
fi
work=$(mktemp -d /var/tmp/ckptfs-posix-XXXXXX)
chmod 755 "$work" # mktemp's 0700 kept the suites' other users (fsgqa) from the mounts
linked=""
cleanup() {
    for m in "$work"/*/mnt "$work"/xfs-*/test.mnt "$work"/xfs-*/scratch.mnt; do
        mountpoint -q "$m" 2>/dev/null && { fusermount3 -u "$m" || fusermount3 -u -z "$m"; }
    done
    for m in "$work"/xfs-*/test.fs "$work"/xfs-*/scratch.fs; do
        mountpoint -q "$m" 2>/dev/null && umount -l "$m"
    done
    [ -n "$linked" ] && rm -f "$linked"
    [ -n "${uring_was:-}" ] && echo "$uring_was" > "$uring"
    rm -rf --one-file-system "$work"
}
trap cleanup EXIT
rows=()
fail=0

# mount NAME OPTS: a fresh backing dir (with _state/t) and mount under $work/NAME
mount_ckptfs() {
    local d=$work/$1
    mkdir -p "$d/backing/_state/t" "$d/mnt"
    "$ckptfs" -o "nosupervise,allow_other,$2" "$d/backing" "$d/mnt" 2>>"$d/daemon.log" ||
        return 1
}
unmount_ckptfs() {
    fusermount3 -u "$work/$1/mnt" 2>/dev/null || fusermount3 -u -z "$work/$1/mnt"
}
# the tree below a directory: names, types, sizes, link counts
tree() { (cd "$1" && find . -printf '%P %y %s %n\n' | LC_ALL=C sort); }
row() { rows+=("$(printf '%-10s %-30s %-6s %s' "$1" "$2" "$3" "$4")"); [ "$3" = PASS ] || fail=1; }

for pt in $paths; do
    for tr in $transports; do
        variant="passthrough=$pt,io_uring=$tr"
        tag="pt-$pt-ring-$tr"
        if [ -n "$pjd" ]; then
            name=pjd-$tag
            if mount_ckptfs "$name" "$variant"; then
                dir=$work/$name/mnt/_state/t
                out=$(cd "$dir" && prove -r "$(cd "$pjd" && pwd)/tests" 2>&1)
                summary=$(printf '%s\n' "$out" | grep -E '^Files=' | tail -1)
                failed=$(printf '%s\n' "$out" | sed -n 's/.*Failed \([0-9]*\)\/[0-9]* subtests.*/\1/p' |
                    awk '{s+=$1} END {print s+0}')
                printf '%s\n' "$out" > "$work/$name.out"
                cp "$work/$name.out" "/var/tmp/ckptfs-$name.out"
                if printf '%s\n' "$out" | grep -q '^Result: PASS'; then
                    row pjdfstest "$variant" PASS "$summary"
                else
                    row pjdfstest "$variant" FAIL "$failed failed subtests; $summary (/var/tmp/ckptfs-$name.out)"
                fi
                unmount_ckptfs "$name"
            else
                row pjdfstest "$variant" FAIL "the mount did not come up"
            fi
        fi
        if [ -n "$fsx" ]; then
            # fsx -h exits 90: under pipefail "fsx -h | grep -q" always failed
            fsx_help=$("$fsx" -h 2>&1)
            for how in plain aio uring direct; do
                case $how in
                plain) args=() ;;
                aio) args=(-A) ;;
                uring) grep -q -- '-U:' <<<"$fsx_help" || continue; args=(-U) ;;
                direct) args=(-Z -r 4096 -t 4096 -w 4096) ;;
                esac
                name=fsx-$how-$tag
                if mount_ckptfs "$name" "$variant"; then
                    f=$work/$name/mnt/_state/t/fsx.file
                    if "$fsx" -q -N "$ops" -S 1 "${args[@]}" "$f" > "$work/$name.out" 2>&1; then
                        row "fsx $how" "$variant" PASS "$ops operations"
                    else
                        cp "$work/$name.out" "/var/tmp/ckptfs-$name.out"
                        row "fsx $how" "$variant" FAIL "see /var/tmp/ckptfs-$name.out"
                    fi
                    unmount_ckptfs "$name"
                else
                    row "fsx $how" "$variant" FAIL "the mount did not come up"
                fi
            done
        fi
        if [ -n "$fss" ]; then
            name=fsstress-$tag
            if mount_ckptfs "$name" "$variant"; then
                m=$work/$name/mnt/_state/t
                b=$work/$name/backing/_state/t
                if ! "$fss" -d "$m/fsstress" -n $((ops / 4)) -p 4 -s 1 > "$work/$name.out" 2>&1; then
                    why="fsstress failed"
                elif ! stat "$m" > /dev/null 2>&1; then
                    why="the mount stopped answering"
                elif ! diff <(tree "$m") <(tree "$b") >> "$work/$name.out" 2>&1; then
                    why="the tree through the mount differs from the backing's"
                else
                    why=""
                fi
                if [ -z "$why" ]; then
                    row fsstress "$variant" PASS "4 x $((ops / 4)) operations, $(tree "$m" | wc -l) objects agree"
                else
                    cp "$work/$name.out" "/var/tmp/ckptfs-$name.out"
                    row fsstress "$variant" FAIL "$why (/var/tmp/ckptfs-$name.out)"
                fi
                unmount_ckptfs "$name"
            else
                row fsstress "$variant" FAIL "the mount did not come up"
            fi
        fi
        if [ -n "$xfs" ]; then
            name=xfs-$tag
            d=$work/$name
            # the test and scratch backing directories on file systems of
            # their own, as xfstests means its two devices: its ENOSPC tests
            # (generic/103) fill the scratch one and leave it full, which
            # must not fill the disk the test one, /tmp and the results are on.
            # Each is a directory inside its file system, not the mount point
            # itself: xfstests unmounts by the "device", and umount(8) would
            # take the file system mounted there for it.
            mkdir -p "$d/test.fs" "$d/scratch.fs" "$d/test.mnt" "$d/scratch.mnt"
            for b in test scratch; do
                truncate -s 16G "$work/$name-$b.img" &&
                    mkfs.ext4 -q -F "$work/$name-$b.img" &&
                    mount -o loop "$work/$name-$b.img" "$d/$b.fs" &&
                    mkdir "$d/$b.fs/$b" ||
                    { echo "posix-suites: cannot make the $b file system for xfstests" >&2; exit 2; }
            done
            if [ "$link" = 1 ] && ! command -v ckptfs >/dev/null; then
                ln -s "$ckptfs" /usr/local/sbin/ckptfs && linked=/usr/local/sbin/ckptfs
            fi
            # results and the daemons' logs (without log=, a daemon that has
            # no journal or syslog says so on stderr, in every test's output)
            res=/var/tmp/ckptfs-$name.results
            rm -rf "$res"
            mkdir -p "$res"
            cat > "$d/local.config" <<EOF
export FSTYP=fuse
export FUSE_SUBTYP=.ckptfs
export TEST_DEV=$d/test.fs/test
export TEST_DIR=$d/test.mnt
export SCRATCH_DEV=$d/scratch.fs/scratch
export SCRATCH_MNT=$d/scratch.mnt
export TEST_FS_MOUNT_OPTS="-o nosupervise,no_policy,views=.views,allow_other,$variant,log=$res/test.log"
export MOUNT_OPTIONS="-o nosupervise,no_policy,views=.views,allow_other,$variant,log=$res/scratch.log"
export RESULT_BASE=$res
EOF
            # xfstests takes FSTYP=fuse only where df -T says "fuse", and
            # ckptfs mounts as fuse.ckptfs (it adds subtype=ckptfs, and an
            # empty subtype is refused): its df sees the type as "fuse"
            mkdir -p "$d/bin"
            cat > "$d/bin/df" <<EOF
#!/bin/sh
$(command -v df) "\$@" | sed 's/^\([^ ]* *\)fuse\.ckptfs /\1fuse /'
EOF
            # and umount(8) takes a directory argument for a mount point: the
            # backing directories xfstests unmounts by (TEST_DEV, SCRATCH_DEV)
            # are found as a mount's source only with -c
            cat > "$d/bin/umount" <<EOF
#!/bin/sh
for a in "\$@"; do
    case \$a in $d/test.fs/test|$d/scratch.fs/scratch) exec $(command -v umount) -c "\$@" ;; esac
done
exec $(command -v umount) "\$@"
EOF
            chmod +x "$d/bin/df" "$d/bin/umount"
            if [ -n "$xfs_tests" ]; then sel=($xfs_tests); else sel=(-g "$xfs_group"); fi
            # tee: a quick group takes the better part of an hour; follow it there
            out=$(cd "$xfs" && PATH=$d/bin:$PATH HOST_OPTIONS=$d/local.config ./check "${sel[@]}" 2>&1 |
                tee "/var/tmp/ckptfs-$name.out")
            failures=$(printf '%s\n' "$out" | sed -n 's/^Failures: //p')
            notrun=$(printf '%s\n' "$out" | sed -n 's/^Not run: //p' | wc -w)
            ran=$(printf '%s\n' "$out" | sed -n 's/^Ran: //p' | wc -w) # "Ran:" lists the not run too
            # "Passed all 0 tests" is what check says when it could not start
            if [ "$ran" -gt 0 ] && [ -z "$failures" ]; then
                row xfstests "$variant" PASS "ran $((ran - notrun)) of $ran, not run $notrun"
            else
                row xfstests "$variant" FAIL "ran $((ran - notrun)) of $ran, not run $notrun, failed: ${failures:-?} (/var/tmp/ckptfs-$name.out, .results/)"
            fi
            mountpoint -q "$d/test.mnt" && fusermount3 -u -z "$d/test.mnt"
            mountpoint -q "$d/scratch.mnt" && fusermount3 -u -z "$d/scratch.mnt"
            umount -l "$d/test.fs" "$d/scratch.fs"
            rm -f "$work/$name-test.img" "$work/$name-scratch.img"
        fi
    done
done

printf '%-10s %-30s %-6s %s\n' SUITE VARIANT RESULT DETAIL
printf '%s\n' "${rows[@]}"
exit $fail
