#!/bin/sh
# The same two jobs after record 013: each job's state under its own root
# _state/<job>, its marker recording state=_state/<job>.
set -eu
cd "${CKPTFS_MOUNT:-.}"
if [ "${1:-}" = subtask0 ]; then
    root="_state/$CLINK_JOB_ID"
    mkdir -p "$root/v1/0" "_jobs/$CLINK_JOB_ID/chk-1"
    printf 'state of job %s\n' "$CLINK_JOB_ID" > "$root/v1/0/checkpoint-1.snap.tmp"
    mv -f "$root/v1/0/checkpoint-1.snap.tmp" "$root/v1/0/checkpoint-1.snap"
    printf 'checkpoint=1\ngeneration=1\nparticipants=0\nstate=%s\n' "$root" \
        > "_jobs/$CLINK_JOB_ID/chk-1/COMPLETED"
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
