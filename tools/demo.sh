#!/usr/bin/env bash
# A five-minute tour on a fresh Debian 12: installs what is missing, builds,
# generates a checkpoint directory where two legacy jobs share v1/, mounts
# ckptfs over it, shows the per-job views and a refused cross-job write with
# its collision record, kills the daemon with SIGKILL and shows the mount
# carry on (-o supervise), then unmounts and cleans up.
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/setup.sh build test

build=${CKPTFS_DEMO_BUILD:-build-demo}
[ -d "$build" ] || meson setup "$build" -Dbuildtype=release -Dtests=false >/dev/null
ninja -C "$build" >/dev/null
ckptctl=$PWD/$build/tools/ckptctl
ckptfs=$PWD/$build/fs/ckptfs

work=$(mktemp -d /var/tmp/ckptfs-demo.XXXXXX)
dir=$work/checkpoints
mnt=$work/mnt
mkdir -p "$mnt"
cleanup() {
    if mountpoint -q "$mnt" 2>/dev/null; then fusermount3 -u "$mnt" || fusermount3 -u -z "$mnt"; fi
    [ -n "${pid:-}" ] && wait "$pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
run() { step "$@"; "$@" || true; }

run "$ckptctl" fixture "$dir" --jobs 2 --legacy 2 --checkpoints 2 --subtasks 2 --seed 7
run "$ckptctl" jobs "$dir"
run "$ckptctl" check "$dir"
run "$ckptctl" resolve "$dir" -c 1

step "$ckptfs" -f -o supervise,identity=env:CLINK_JOB_ID "$dir" "$mnt" '&'
"$ckptfs" -f -o supervise,identity=env:CLINK_JOB_ID "$dir" "$mnt" &
pid=$!
for _ in $(seq 100); do mountpoint -q "$mnt" && break; sleep 0.05; done
mountpoint -q "$mnt" || { echo "demo: the mount did not come up" >&2; exit 1; }

run ls "$mnt" "$mnt/_views"
# a legacy job (its view shows the shared v1 and who shares it), and a job
# with its own record-013 root to aim another job's write at
job=$(ls "$mnt/_views" | grep -v '^\.' | while read -r j; do
    [ -d "$dir/_state/$j" ] || { echo "$j"; break; }; done)
owner=$(ls "$dir/_state" | head -1)
other=$(ls "$mnt/_views" | grep -v '^\.' | grep -vx "$owner" | head -1)
run find "$mnt/_views/$job" -maxdepth 4
run cat "$mnt/_views/$job/restore"
run ls -l "$mnt/_views/$job/latest"
f=$(find "$mnt/_views/$job/checkpoints" -type f | head -1)
[ -n "$f" ] && run getfattr -d "$f"

step "CLINK_JOB_ID=$other sh -c 'echo x > $mnt/_state/$owner/stolen'   # another job's namespace"
if CLINK_JOB_ID=$other sh -c "echo x > '$mnt/_state/$owner/stolen'"; then
    echo "demo: the cross-job write was NOT refused" >&2; exit 1
fi
step "CLINK_JOB_ID=$job sh -c 'mkdir -p $mnt/v9/0'   # the shared legacy layout"
CLINK_JOB_ID=$job sh -c "mkdir -p '$mnt/v9/0'" || true
run "$ckptctl" collisions "$mnt"
step ls "$dir/_state/$owner/stolen" "$dir/v9"
ls "$dir/_state/$owner/stolen" "$dir/v9" 2>&1 || true

# the mount outlives its daemon: kill -9 it, and the job's next write and
# read go on (the supervisor started a new daemon on the same connection)
daemon=$(cat "/proc/$pid/task/$pid/children" 2>/dev/null | awk '{print $1}')
if [ -n "$daemon" ]; then
    run kill -9 "$daemon"
    step "CLINK_JOB_ID=$owner sh -c 'echo after > $mnt/_state/$owner/after-kill; cat $mnt/_state/$owner/after-kill'"
    CLINK_JOB_ID=$owner sh -c "echo after > '$mnt/_state/$owner/after-kill' && cat '$mnt/_state/$owner/after-kill'" || {
        echo "demo: the mount did not carry on after kill -9" >&2
        exit 1
    }
    run cat "$mnt/_views/$job/restore"
fi
echo
echo "demo: done (nothing was written by the refused calls; the mount outlived kill -9)"
