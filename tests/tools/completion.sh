#!/bin/bash
# tools/completion/ckptctl.bash: subcommands, options, values and the job
# ids of the directory on the command line.  $1: the completion script.
set -u
. "$1"
fail=0
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/ck/_jobs/0123456789abcdef0123456789abcdef" "$dir/ck/_state/other" "$dir/ck/_jobs/x1"

# complete WORDS... -> the sorted COMPREPLY, one line
complete_words()
{
    COMP_WORDS=("$@")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMPREPLY=()
    _ckptctl
    printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' ' | sed 's/ $//'
}

expect()
{
    local want=$1
    shift
    local got
    got=$(complete_words "$@")
    if [[ $got != "$want" ]]; then
        echo "FAIL: ckptctl completion of '$*': got '$got', want '$want'"
        fail=1
    else
        echo "ok: '$*' -> '$got'"
    fi
}

expect "check collisions" ckptctl c
expect "set state-root" ckptctl s
expect "policy=audit policy=enforce" ckptctl set /mnt/ckpt pol
expect "run" ckptctl ru
expect "prune" ckptctl pr
expect "--delete" ckptctl prune --de
expect "--print0" ckptctl unused --pr
expect "--external-root" ckptctl prune --ex
expect "--collision-exit" ckptctl run --col
expect "--tag-env" ckptctl run --ta
expect "--file" ckptctl collisions --fi
expect "audit enforce" ckptctl run --policy ""
expect "0123456789abcdef0123456789abcdef other x1" ckptctl run --dir "$dir/ck" --job ""
expect "0123456789abcdef0123456789abcdef" ckptctl state-root "$dir/ck" 01
PYTEST_CURRENT_TEST=x expect "PYTEST_CURRENT_TEST" ckptctl run --tag-env PYTEST_CUR
exit $fail
