# bash completion for ckptfs(8), ckptctl(1) and ckpt-bench(1): options,
# their values (ckptfs's -o list item by item), ckptctl's subcommands and
# the job ids of the checkpoint directory on the command line.  Paths may
# hold spaces and quotes: the word under the cursor is read as the shell
# will read it, and names go back to readline whole (it quotes them).
# Self-contained (compgen only); installed by `ninja install` under each
# program's name in <datadir>/bash-completion/completions.

# The words of the command line up to the cursor: _ckptfs_words as the
# shell reads them (quotes and backslashes removed), _ckptfs_cword the
# index of the word being completed (the last one, maybe empty).  Read from
# COMP_LINE, since COMP_WORDS is also split at '=' and ':'.
_ckptfs_line()
{
    local line=${COMP_LINE:0:COMP_POINT} c q= word= inword=0 i
    _ckptfs_words=()
    for ((i = 0; i < ${#line}; i++)); do
        c=${line:i:1}
        if [[ -z $q && ($c == ' ' || $c == $'\t' || $c == $'\n') ]]; then
            if ((inword)); then
                _ckptfs_words+=("$word")
                word= inword=0
            fi
            continue
        fi
        inword=1
        if [[ $q == "'" ]]; then
            if [[ $c == "'" ]]; then q=; else word+=$c; fi
        elif [[ $c == '\' ]]; then
            ((i++))
            c=${line:i:1}
            # inside "...", a backslash quotes only $ ` " \ and the newline
            [[ $q == '"' && $c != [\$\`\"\\] ]] && word+='\'
            word+=$c
        elif [[ $q == '"' ]]; then
            if [[ $c == '"' ]]; then q=; else word+=$c; fi
        elif [[ $c == "'" || $c == '"' ]]; then
            q=$c
        else
            word+=$c
        fi
    done
    _ckptfs_words+=("$word")
    _ckptfs_cword=$((${#_ckptfs_words[@]} - 1))
}

# COMPREPLY from compgen ARGS..., one reply per line (a name with a space
# stays one reply); then readline's word starts after the last '=' or ':'
# of the current word (COMP_WORDBREAKS), so replies lose what is before it.
# Words that are not file names (-W, -v) are not quoted as file names are
# ("env:", not "env\:").
_ckptfs_reply()
{
    local cur=${_ckptfs_words[_ckptfs_cword]} pre i
    [[ $1 == -W || $1 == -v ]] && compopt +o filenames 2>/dev/null
    mapfile -t COMPREPLY < <(compgen "$@")
    pre=${cur%"${cur##*[=:]}"}
    if [[ -n $pre ]]; then
        for i in "${!COMPREPLY[@]}"; do
            COMPREPLY[i]=${COMPREPLY[i]#"$pre"}
        done
    fi
}

_ckptfs_files() { _ckptfs_reply -f -- "${_ckptfs_words[_ckptfs_cword]}"; }
_ckptfs_dirs() { _ckptfs_reply -d -- "${_ckptfs_words[_ckptfs_cword]}"; }

# Job ids of checkpoint directory $1: the names under _jobs/ and _state/.
_ckptfs_jobs_of()
{
    local dir=$1 d
    [[ -n $dir && -d $dir ]] || return
    for d in "$dir"/_jobs/* "$dir"/_state/*; do
        [[ -d $d ]] && printf '%s\n' "${d##*/}"
    done | sort -u
}

# Replies that end in '=' or ':' take their value next: no space after them.
_ckptfs_nospace_if_open()
{
    local r
    for r in "${COMPREPLY[@]}"; do
        if [[ $r == *[=:,] ]]; then
            compopt -o nospace 2>/dev/null
            return
        fi
    done
}

# One item of a -o list (ckptfs -o, ckpt-bench --mount-opts): the word is
# "a=1,b,pol" and the item "pol", or "policy=en" for its value.
_ckptfs_mount_options()
{
    local cur=${_ckptfs_words[_ckptfs_cword]}
    local item=${cur##*,}
    local head=${cur%"$item"}
    local names="policy= job= identity= anonymous= identity_map= legacy= legacy_backend=
        external_root= views= rescan= config= collision_log= tag_env= entry_timeout=
        attr_timeout= passthrough= io_uring= io_uring_depth= log= log_level= writeback
        supervise nosupervise max_read= fsname= subtype= default_permissions
        no_default_permissions allow_other allow_root auto_unmount max_threads=
        max_idle_threads= clone_fd no_policy no_handles debug"
    local values= files=0 v
    case $item in
        policy=*) values="enforce audit" ;;
        legacy=*) values="ro rw" ;;
        passthrough=* | io_uring=*) values="auto off" ;;
        anonymous=*) values="allow deny" ;;
        identity=*) values="env: cgroup: uid" ;;
        log_level=*) values="error warning info debug" ;;
        log=*) values="journal syslog stderr" files=1 ;;
        legacy_backend=* | external_root=* | config=* | collision_log=* | identity_map=*) files=1 ;;
        *=*) COMPREPLY=() && return ;;
        *)
            _ckptfs_reply -W "$names" -P "$head" -- "$item"
            _ckptfs_nospace_if_open
            return
            ;;
    esac
    local name=${item%%=*}= value=${item#*=}
    COMPREPLY=()
    ((files)) || compopt +o filenames 2>/dev/null
    if [[ -n $values ]]; then
        mapfile -t COMPREPLY < <(compgen -W "$values" -- "$value")
    fi
    if ((files)); then
        mapfile -t -O "${#COMPREPLY[@]}" COMPREPLY < <(compgen -f -- "$value")
    fi
    local pre=${cur%"${cur##*[=:]}"} i
    for i in "${!COMPREPLY[@]}"; do
        v=$head$name${COMPREPLY[i]}
        COMPREPLY[i]=${v#"$pre"}
    done
    _ckptfs_nospace_if_open
}

_ckptfs()
{
    _ckptfs_line
    local cur=${_ckptfs_words[_ckptfs_cword]} prev=
    ((_ckptfs_cword > 0)) && prev=${_ckptfs_words[_ckptfs_cword - 1]}
    case $prev in
        -o)
            _ckptfs_mount_options
            return
            ;;
        --takeover)
            _ckptfs_dirs
            return
            ;;
    esac
    if [[ $cur == -* ]]; then
        _ckptfs_reply -W "-f -d -s -o -h --help -V --version --takeover" -- "$cur"
        return
    fi
    # BACKING_DIR MOUNTPOINT
    _ckptfs_dirs
}

_ckpt_bench()
{
    _ckptfs_line
    local cur=${_ckptfs_words[_ckptfs_cword]} prev=
    ((_ckptfs_cword > 0)) && prev=${_ckptfs_words[_ckptfs_cword - 1]}
    case $prev in
        --dir | --mounted-dir | --backing)
            _ckptfs_dirs
            return
            ;;
        --ckptfs)
            _ckptfs_files
            return
            ;;
        --mount-opts)
            _ckptfs_mount_options
            return
            ;;
        --only)
            local item=${cur##*,}
            _ckptfs_reply -W "commit64k commit4m seqwrite seqread randread meta view mount" \
                -P "${cur%"$item"}" -- "$item"
            return
            ;;
        --scale | --runs | --mount-jobs | --idle-seconds | --kills | --takeovers)
            COMPREPLY=()
            return
            ;;
    esac
    _ckptfs_reply -W "--dir --ckptfs --mount-opts --only --scale --runs --json --peers
        --mount-jobs --idle-seconds --mounted-dir --backing --outlive --kills --takeovers --soak
        -V --version -h --help" -- "$cur"
}

_ckptctl()
{
    _ckptfs_line
    local cur=${_ckptfs_words[_ckptfs_cword]} prev=
    ((_ckptfs_cword > 0)) && prev=${_ckptfs_words[_ckptfs_cword - 1]}
    local cmds="jobs resolve check state-root unused prune collisions set status fixture run"
    if ((_ckptfs_cword == 1)); then
        _ckptfs_reply -W "$cmds --help -V --version" -- "$cur"
        return
    fi
    local cmd=${_ckptfs_words[1]} i
    # after run's --, COMMAND and its arguments: complete as a command line
    for ((i = 2; i < _ckptfs_cword; i++)); do
        if [[ $cmd == run && ${_ckptfs_words[i]} == -- ]]; then
            if ((_ckptfs_cword == i + 1)); then
                _ckptfs_reply -c -- "$cur"
            else
                _ckptfs_files
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
        resolve) opts="$common $resolving -c --checkpoint" ;;
        state-root | status) opts="--json --help" ;;
        collisions) opts="$common --file --since --job --kind --follow -f" ;;
        set)
            if [[ $cur != -* ]] && ((_ckptfs_cword >= 3)); then
                _ckptfs_reply -W "policy=enforce policy=audit legacy=ro legacy=rw rescan= tag_env=" \
                    -- "$cur"
                _ckptfs_nospace_if_open
                return
            fi
            opts="--json --views --help"
            ;;
        fixture) opts="--jobs --checkpoints --subtasks --bytes --legacy --seed --force --json --help" ;;
        run) opts="--dir --policy --identity --job --tag-env --collision-exit --report --json --keep
            --baseline --ckptfs -o --option --help" ;;
        *) return ;;
    esac
    case $prev in
        --policy)
            _ckptfs_reply -W "enforce audit" -- "$cur"
            return
            ;;
        --identity)
            _ckptfs_reply -W "env:" -- "$cur"
            _ckptfs_nospace_if_open
            return
            ;;
        --kind)
            local item=${cur##*,}
            _ckptfs_reply -W "foreign-write legacy-write outside-namespace cross-namespace-rename
                cross-namespace-link cross-namespace-symlink anonymous-write invalid-identity" \
                -P "${cur%"$item"}" -- "$item"
            return
            ;;
        --job)
            # the jobs of --dir DIR given before (run), or of the directory argument
            local dir= w
            for ((i = 2; i < _ckptfs_cword - 1; i++)); do
                w=${_ckptfs_words[i]}
                if [[ ${_ckptfs_words[i - 1]} == --dir ]]; then
                    dir=$w
                elif [[ -z $dir && $w != -* && -d $w ]]; then
                    dir=$w
                fi
            done
            _ckptfs_reply -W "$(_ckptfs_jobs_of "$dir")" -- "$cur"
            return
            ;;
        --tag-env)
            _ckptfs_reply -v -- "$cur"
            return
            ;;
        --dir | --report | --file | --config | --legacy-backend | --external-root | --ckptfs)
            _ckptfs_files
            return
            ;;
        -o | --option)
            _ckptfs_mount_options
            return
            ;;
        -c | --checkpoint | --collision-exit | --jobs | --checkpoints | --subtasks | --bytes | \
            --legacy | --seed | --views | --since)
            COMPREPLY=()
            return
            ;;
    esac
    if [[ $cur == -* ]]; then
        _ckptfs_reply -W "$opts" -- "$cur"
        return
    fi
    # state-root BASE JOB: the jobs of BASE
    if [[ $cmd == state-root ]] && ((_ckptfs_cword == 3)); then
        _ckptfs_reply -W "$(_ckptfs_jobs_of "${_ckptfs_words[2]}")" -- "$cur"
        return
    fi
    _ckptfs_dirs
}

complete -o filenames -F _ckptfs ckptfs
complete -o filenames -F _ckptctl ckptctl
complete -o filenames -F _ckpt_bench ckpt-bench
