# bash completion for ckptctl(1): subcommands, their options, and job ids
# read from the checkpoint directory on the command line (its _jobs/ and
# _state/).  Self-contained (compgen only), installed by `ninja install`
# into <datadir>/bash-completion/completions/ckptctl.

# Job ids of checkpoint directory $1: the names under _jobs/ and _state/.
_ckptctl_jobs()
{
    local dir=$1 d
    [[ -d $dir ]] || return
    for d in "$dir"/_jobs/* "$dir"/_state/*; do
        [[ -d $d ]] && printf '%s\n' "${d##*/}"
    done | sort -u
}

_ckptctl()
{
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    local cmds="jobs resolve check state-root unused prune collisions set fixture run"
    if ((COMP_CWORD == 1)); then
        COMPREPLY=($(compgen -W "$cmds --help --version" -- "$cur"))
        return
    fi
    local cmd=${COMP_WORDS[1]} i
    # after run's --, COMMAND and its arguments: complete as a command line
    for ((i = 2; i < COMP_CWORD; i++)); do
        if [[ $cmd == run && ${COMP_WORDS[i]} == -- ]]; then
            if ((COMP_CWORD == i + 1)); then
                COMPREPLY=($(compgen -c -- "$cur"))
            else
                COMPREPLY=($(compgen -f -- "$cur"))
            fi
            return
        fi
    done
    local common="--json --help --views"
    local resolving="--legacy-backend --external-root --config"
    local opts
    case $cmd in
        jobs | check) opts="$common $resolving" ;;
        unused) opts="$common $resolving --print0" ;;
        prune) opts="$common $resolving --delete" ;;
        resolve) opts="$common $resolving -c" ;;
        state-root) opts="--json --help" ;;
        collisions) opts="$common --file" ;;
        set)
            if [[ $cur != -* ]] && ((COMP_CWORD >= 3)); then
                COMPREPLY=($(compgen -W "policy=enforce policy=audit legacy=ro legacy=rw rescan=" -- "$cur"))
                compopt -o nospace 2>/dev/null
                return
            fi
            opts="--json --views --help"
            ;;
        fixture) opts="--jobs --checkpoints --subtasks --bytes --legacy --seed --force --json --help" ;;
        run) opts="--dir --policy --identity --job --tag-env --collision-exit --report --json --keep --ckptfs -o --option --help" ;;
        *) return ;;
    esac
    case $prev in
        --policy)
            COMPREPLY=($(compgen -W "enforce audit" -- "$cur"))
            return
            ;;
        --identity)
            COMPREPLY=($(compgen -W "env:" -- "$cur"))
            compopt -o nospace 2>/dev/null
            return
            ;;
        --job)
            # the jobs of --dir DIR, when given before
            local dir=
            for ((i = 2; i < COMP_CWORD - 1; i++)); do
                [[ ${COMP_WORDS[i]} == --dir ]] && dir=${COMP_WORDS[i+1]}
            done
            COMPREPLY=($(compgen -W "$(_ckptctl_jobs "$dir")" -- "$cur"))
            return
            ;;
        --tag-env)
            COMPREPLY=($(compgen -v -- "$cur"))
            return
            ;;
        --dir | --report | --file | --config | --legacy-backend | --external-root | --ckptfs)
            COMPREPLY=($(compgen -f -- "$cur"))
            return
            ;;
        -c | --collision-exit | --jobs | --checkpoints | --subtasks | --bytes | --legacy | --seed | --views | -o | --option)
            return
            ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
        return
    fi
    # state-root BASE JOB: the jobs of BASE
    if [[ $cmd == state-root && $COMP_CWORD -ge 3 && ${COMP_WORDS[COMP_CWORD-1]} != -* ]]; then
        COMPREPLY=($(compgen -W "$(_ckptctl_jobs "${COMP_WORDS[COMP_CWORD-1]}")" -- "$cur"))
        return
    fi
    COMPREPLY=($(compgen -d -- "$cur"))
}
complete -o filenames -F _ckptctl ckptctl
