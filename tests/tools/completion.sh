#!/bin/bash
# tools/completion/ckptfs.bash: subcommands, options, values, the job ids of
# the directory on the command line, for ckptctl, ckptfs and ckpt-bench;
# paths with spaces (typed with a backslash or in quotes) complete whole;
# every option the programs' --help shows is offered.
# $1: the completion script; $2..$4 (optional): ckptfs, ckptctl, ckpt-bench.
set -u
export LC_ALL=C
. "$1"
ckptfs_bin=${2:-} ckptctl_bin=${3:-} bench_bin=${4:-}
fail=0
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/ck/_jobs/0123456789abcdef0123456789abcdef" "$dir/ck/_state/other" "$dir/ck/_jobs/x1"
mkdir -p "$dir/with space/ck/_jobs/spaced-job" "$dir/with space/sub dir" "$dir/plain"

# complete LINE (as typed, the cursor at its end) -> COMPREPLY, sorted, one
# reply per line; FUNC is the function `complete` registered for the program
complete_line()
{
    local line=$1 prog func
    prog=${line%% *}
    func=$(complete -p "$prog" | sed -n 's/.* -F \([^ ]*\) .*/\1/p')
    COMP_LINE=$line
    COMP_POINT=${#line}
    # what bash would also set (the functions read COMP_LINE)
    read -r -a COMP_WORDS <<<"$line"
    [[ $line == *' ' ]] && COMP_WORDS+=("")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMPREPLY=()
    "$func" "$prog" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]:-}"
    printf '%s\n' "${COMPREPLY[@]}" | sort
}

# expect WANT LINE: the replies joined by '|'
expect()
{
    local want=$1 line=$2 got
    got=$(complete_line "$line" | paste -sd '|')
    if [[ $got != "$want" ]]; then
        echo "FAIL: completion of '$line': got '$got', want '$want'"
        fail=1
    else
        echo "ok: '$line' -> '$got'"
    fi
}

# every WORD is among the replies to LINE
expect_all()
{
    local line=$1 got w
    shift
    # "name" and "name=" alike: a value follows or not
    got=$'\n'$(complete_line "$line" | sed 's/=$//')$'\n'
    for w in "${@%=}"; do
        if [[ $got != *$'\n'"$w"$'\n'* ]]; then
            echo "FAIL: completion of '$line' lacks '$w'"
            fail=1
        fi
    done
    echo "ok: '$line' offers all $# given"
}

# ---- ckptctl ----
expect "check|collisions" "ckptctl c"
expect "set|state-root|status" "ckptctl s"
expect "policy=audit|policy=enforce" "ckptctl set /mnt/ckpt pol"
expect "run" "ckptctl ru"
expect "prune" "ckptctl pr"
expect "--delete" "ckptctl prune --de"
expect "--print0" "ckptctl unused --pr"
expect "--external-root" "ckptctl prune --ex"
expect "--collision-exit" "ckptctl run --col"
expect "--tag-env" "ckptctl run --ta"
expect "--baseline" "ckptctl run --ba"
expect "--file|--follow" "ckptctl collisions --f"
expect "--since" "ckptctl collisions --si"
expect "foreign-write" "ckptctl collisions /mnt --kind fo"
expect "legacy-write,foreign-write" "ckptctl collisions /mnt --kind legacy-write,fo"
expect "-V" "ckptctl -V"
expect "--version" "ckptctl --v"
expect "audit|enforce" "ckptctl run --policy "
expect "0123456789abcdef0123456789abcdef|other|x1" "ckptctl run --dir $dir/ck --job "
expect "0123456789abcdef0123456789abcdef" "ckptctl state-root $dir/ck 01"
PYTEST_CURRENT_TEST=x expect "PYTEST_CURRENT_TEST" "ckptctl run --tag-env PYTEST_CUR"
# paths with a space: typed with a backslash, in double or single quotes
expect "$dir/with space" "ckptctl check $dir/with\\ sp"
expect "$dir/with space" "ckptctl check \"$dir/with sp"
expect "$dir/with space" "ckptctl check '$dir/with sp"
expect "$dir/with space/ck|$dir/with space/sub dir" "ckptctl jobs $dir/with\\ space/"
expect "$dir/with space/sub dir" "ckptctl run --dir $dir/with\\ space/su"
expect "spaced-job" "ckptctl run --dir $dir/with\\ space/ck --job sp"
expect "spaced-job" "ckptctl state-root \"$dir/with space/ck\" sp"
# the identity's value after ':' (a word break for readline)
expect "env:" "ckptctl run --identity e"

# ---- ckptfs ----
expect "--takeover" "ckptfs --ta"
expect "-V" "ckptfs -V"
expect "policy=" "ckptfs -o pol"
expect "audit|enforce" "ckptfs -o policy="
expect "enforce" "ckptfs -o policy=en"
expect "allow_other,policy=" "ckptfs -o allow_other,pol"
expect "audit" "ckptfs -o allow_other,policy=au"
expect "ro|rw" "ckptfs -o legacy="
expect "cgroup:|env:|uid" "ckptfs -o identity="
expect "$dir/with space" "ckptfs $dir/with\\ sp"
expect "$dir/plain" "ckptfs -f $dir/pl"
expect "$dir/with space/sub dir" "ckptfs -o config=$dir/with\\ space/su"
expect "$dir/plain" "ckptfs --takeover $dir/pl"

# ---- ckpt-bench ----
expect "--mount-jobs|--mount-opts|--mounted-dir" "ckpt-bench --mou"
expect "--version" "ckpt-bench --vers"
expect "meta|mount" "ckpt-bench --only m"
expect "commit64k,seqread|commit64k,seqwrite" "ckpt-bench --only commit64k,seq"
expect "$dir/with space" "ckpt-bench --dir $dir/with\\ sp"
expect "passthrough=" "ckpt-bench --mount-opts pass"
expect "off" "ckpt-bench --mount-opts passthrough=o"

# ---- what each program's --help shows is offered ----
if [[ -n $ckptfs_bin ]]; then
    # ckptfs's own -o options (the lines "    -o name=..." of its help)
    mapfile -t o < <("$ckptfs_bin" --help 2>&1 | sed -n 's/^    -o \([a-z_]*=\{0,1\}\).*/\1/p' |
        sed 's/|.*//' | sort -u)
    expect_all "ckptfs -o " "${o[@]}"
    mapfile -t f < <("$ckptfs_bin" --help 2>&1 | grep -oE '(^| )--?[a-zA-Z][a-z-]*' | tr -d ' ' | sort -u)
    expect_all "ckptfs -" "${f[@]}"
fi
if [[ -n $ckptctl_bin ]]; then
    for c in jobs resolve check state-root unused prune collisions set status fixture run; do
        mapfile -t f < <("$ckptctl_bin" "$c" --help 2>&1 | grep -oE '^ +(-[a-zA-Z], )?--[a-z0-9-]+' |
            grep -oE -- '--[a-z0-9-]+' | grep -vE -- '^--help-' | sort -u)
        expect_all "ckptctl $c -" "${f[@]}"
    done
fi
if [[ -n $bench_bin ]]; then
    mapfile -t f < <("$bench_bin" --help 2>&1 | grep -oE '^ +(-[a-zA-Z], )?--[a-z0-9-]+' |
        grep -oE -- '--[a-z0-9-]+' | grep -vE -- '^--help-' | sort -u)
    expect_all "ckpt-bench -" "${f[@]}"
fi
exit $fail
