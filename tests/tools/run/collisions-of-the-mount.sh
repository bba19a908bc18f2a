#!/bin/sh
# ckptctl collisions and set over the mount ckptctl run made, given only the
# mount point: the views' name (-o views=...) is asked of the mount.  $1: a
# directory outside the mount for what the checks found; $CKPTCTL_BIN: ckptctl.
set -u
out=$1
m=$CKPTFS_MOUNT
mkdir -p "$m/_state/a"
CLINK_JOB_ID=b sh -c 'echo x > "$1/_state/a/stolen"' sh "$m" 2>/dev/null
rc=0; "$CKPTCTL_BIN" collisions "$m" --json > "$out/collisions.json" || rc=$?
echo "$rc" > "$out/collisions.rc"
rc=0; "$CKPTCTL_BIN" set "$m" > "$out/set.out" || rc=$?
echo "$rc" > "$out/set.rc"
# --follow on the mount: the record made while it runs, filtered by kind
"$CKPTCTL_BIN" collisions "$m" --follow --json --kind foreign-write --job a \
    > "$out/follow.json" 2> "$out/follow.err" &
follower=$!
sleep 1
CLINK_JOB_ID=c sh -c 'echo y > "$1/_state/a/again"' sh "$m" 2>/dev/null
CLINK_JOB_ID=c sh -c 'mkdir "$1/v9"' sh "$m" 2>/dev/null # legacy-write: filtered out
i=0
while [ "$i" -lt 50 ] && [ "$(grep -c '"caller_job" : "c"' "$out/follow.json")" -lt 1 ]; do
    sleep 0.1
    i=$((i + 1))
done
kill -TERM "$follower"
rc=0; wait "$follower" || rc=$?
echo "$rc" > "$out/follow.rc"
exit 0
