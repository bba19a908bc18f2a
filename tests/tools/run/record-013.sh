#!/bin/sh
# Record 013's failure, before the fix: a script with two INSERT statements
# becomes two jobs (a, b) sharing one checkpoint directory, and both jobs'
# subtask 0 write and rename v1/0/checkpoint-1.snap, then complete
# checkpoint 1 with a legacy marker (no state= line).
# It works in the checkpoint directory: $CKPTFS_MOUNT under ckptctl run.
# Each job is its own process started with CLINK_JOB_ID in its environment:
# ckptfs reads a process's job from /proc/<pid>/environ.
set -eu
cd "${CKPTFS_MOUNT:-.}"
if [ "${1:-}" = subtask0 ]; then
    mkdir -p v1/0 "_jobs/$CLINK_JOB_ID/chk-1"
    printf 'state of job %s\n' "$CLINK_JOB_ID" > "v1/0/checkpoint-1.snap.tmp-$CLINK_JOB_ID"
    mv -f "v1/0/checkpoint-1.snap.tmp-$CLINK_JOB_ID" v1/0/checkpoint-1.snap
    printf 'checkpoint=1\ngeneration=1\nparticipants=0\n' > "_jobs/$CLINK_JOB_ID/chk-1/COMPLETED"
    exit 0
fi
CLINK_JOB_ID=a sh "$0" subtask0 &
a=$!
CLINK_JOB_ID=b sh "$0" subtask0 &
b=$!
# both jobs run to their end, as a script's jobs do; the first failure is the status
sa=0; wait "$a" || sa=$?
sb=0; wait "$b" || sb=$?
[ "$sa" -eq 0 ] || exit "$sa"
exit "$sb"
