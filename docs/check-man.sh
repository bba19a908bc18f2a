#!/bin/sh
# The manual pages render without a groff warning and document what the code
# parses, with the lists taken from the code itself:
#  - ckptfs.8: every option of fs/options.c (its fs_opt_spec table and the
#    keys its config file takes), every metric series fs/metrics.c renders,
#    every environment variable, journal field and MESSAGE_ID the daemon
#    knows, and the files and signals an operator deals with;
#  - ckptctl.1: every subcommand of tools/ckptctl.c and every long option of
#    tools/ckptctl*.c;
#  - ckpt-bench.1: every option of tools/ckpt-bench.c and every workload.
# Usage: check-man.sh DOCS_DIR (the source tree is DOCS_DIR/..)
set -eu
dir=$1
src=$dir/..
fail=0
say() { echo "$*"; fail=1; }

for page in ckptfs.8 ckptctl.1 ckpt-bench.1; do
    err=$(MANWIDTH=100 man --warnings -l "$dir/$page" 2>&1 >/dev/null) || { echo "$page: man failed"; exit 1; }
    if [ -n "$err" ]; then say "$page: $err"; fi
done

# One source file by name under a directory, wherever a reorganisation put it.
find_src() {
    f=$(find "$src/$1" -name "$2" -type f | head -n 1)
    [ -n "$f" ] || { echo "check-man: no $2 under $1/"; exit 1; }
    echo "$f"
}
# A C file with its lines joined, so that entries clang-format spread over
# several lines match one pattern.
joined() { tr '\n\t' '  ' <"$1"; }
# Rendered text of a page, one long line per paragraph.
rendered() { MANWIDTH=1000 man -l "$dir/$1" 2>/dev/null | col -b; }
# Whether the page's text holds the word, not as part of a longer name
# ("name=" is followed by its value).
has_word() {
    printf '%s\n' "$1" | grep -Fq -- "$2" || return 1
    re=$(printf '%s' "$2" | sed 's/[][\.*^$|+?(){}]/\\&/g')
    case $2 in *=) ;; *) re="$re([^A-Za-z0-9_]|\$)" ;; esac
    printf '%s\n' "$1" | grep -Eq -- "(^|[^A-Za-z0-9_-])$re"
}
nonempty() { [ -n "$2" ] || { echo "check-man: found no $1 in the code"; exit 1; }; }

# ---- ckptfs(8) ----
text=$(rendered ckptfs.8)
options=$(find_src fs options.c)
# fs_opt_spec: OPT("name=%s", ...), {"name", offsetof(...), v} and
# FUSE_OPT_KEY("name", ...) entries, up to FUSE_OPT_END
spec=$(sed -n '/fs_opt_spec\[\] *= *{/,/FUSE_OPT_END/p' "$options")
opts=$(printf '%s\n' "$spec" | sed -n \
    -e 's/^[[:space:]]*OPT("\([^"%]*\)%s".*/\1/p' \
    -e 's/^[[:space:]]*{"\([^"]*\)",[[:space:]]*offsetof.*/\1/p' \
    -e 's/^[[:space:]]*FUSE_OPT_KEY("\([^"]*\)".*/\1/p')
nonempty "options in fs_opt_spec" "$opts"
for opt in $opts; do
    has_word "$text" "$opt" || say "ckptfs.8 does not document the option $opt"
done
# the config file's [ckptfs] keys: the {"name", offsetof(FsOptions, field)}
# entries of its key table (fs_opt_spec's entries carry a third member)
keys=$(joined "$options" | grep -oE '\{ *"[a-z_]+", *offsetof\(FsOptions, *[a-z_]+\) *\}' |
    sed 's/^{ *"\([^"]*\)".*/\1/')
nonempty "config keys" "$keys"
for key in $keys; do
    has_word "$text" "$key=" || say "ckptfs.8 does not document the config key $key"
done
# environment variables the daemon reads: g_getenv("NAME") in fs/
envs=$(find "$src/fs" -name '*.c' -exec cat {} + | grep -o 'getenv("[A-Z_][A-Z0-9_]*")' |
    sed 's/.*("\(.*\)")/\1/' | sort -u)
nonempty "environment variables" "$envs"
for e in $envs; do
    has_word "$text" "$e" || say "ckptfs.8 does not document the environment variable $e"
done
# the journal's fields and MESSAGE_IDs (fs/log.c, fs/log.h)
logc=$(find_src fs log.c)
logh=$(find_src fs log.h)
fields=$(grep -o '"CKPTFS_[A-Z_]*"' "$logc" | tr -d '"' | sort -u)
nonempty "journal fields" "$fields"
ids=$(sed -n 's/^#define LOG_ID_[A-Z_]*[[:space:]]*"\([0-9a-f]*\)".*/\1/p' "$logh")
nonempty "MESSAGE_IDs" "$ids"
for f in $fields $ids MESSAGE_ID; do
    has_word "$text" "$f" || say "ckptfs.8 does not document the journal's $f"
done
# every series of .metrics (each has a header() call in fs/metrics.c), by its
# whole name: ckptfs_catalog_markers does not stand for ckptfs_catalog_markers_loaded
metrics=$(find_src fs metrics.c)
series=$(sed -n 's/.*header(s, "\([A-Za-z0-9_:]*\)".*/\1/p' "$metrics")
nonempty "metric series" "$series"
for name in $series; do
    has_word "$text" "$name" || say "ckptfs.8 does not list the series $name"
done
# what an operator deals with beyond the options
for term in .collisions .metrics .control fstab ckptfs@.service Type=notify /etc/ckptfs \
            mnt-ckpt.env SIGTERM SIGINT SIGHUP "kill -HUP" fusermount3 journalctl --takeover \
            "systemctl reload" -f -d -s --help --version; do
    has_word "$text" "$term" || say "ckptfs.8 does not mention $term"
done

# ---- ckptctl(1) ----
text=$(rendered ckptctl.1)
ckptctl=$(find_src tools ckptctl.c)
cmds=$(sed -n '/Command commands\[\] *= *{/,/};/p' "$ckptctl" | grep -o '{"[a-z-]*",' | tr -d '{",')
nonempty "ckptctl subcommands" "$cmds"
for c in $cmds; do
    has_word "$text" "ckptctl $c" || say "ckptctl.1 does not document the subcommand $c"
done
# long options: {"name", 0 or 'c', 0, G_OPTION_ARG_... of every GOptionEntry
longs=$(for f in "$src"/tools/ckptctl*.c; do joined "$f"; done |
    grep -oE '\{ *"[a-z][a-z0-9-]*", *(0|'"'"'.'"'"'), *0, *G_OPTION_ARG_' |
    sed 's/^{ *"\([^"]*\)".*/\1/' | sort -u)
nonempty "ckptctl options" "$longs"
for o in $longs; do
    has_word "$text" "--$o" || say "ckptctl.1 does not document the option --$o"
done
for term in shared-location foreign-root malformed cut-short orphan-root not-a-job \
            CKPTFS_MOUNT CKPTFS_BACKING bash-completion; do
    has_word "$text" "$term" || say "ckptctl.1 does not mention $term"
done

# ---- ckpt-bench(1) ----
text=$(rendered ckpt-bench.1)
bench=$(find_src tools ckpt-bench.c)
longs=$(joined "$bench" | grep -oE '\{ *"[a-z][a-z0-9-]*", *(0|'"'"'.'"'"'), *0, *G_OPTION_ARG_' |
    sed 's/^{ *"\([^"]*\)".*/\1/' | sort -u)
nonempty "ckpt-bench options" "$longs"
for o in $longs; do
    has_word "$text" "--$o" || say "ckpt-bench.1 does not document the option --$o"
done
# the workload names --only takes
wls=$(joined "$bench" | grep -oE 'workload_names\[\] *= *\{[^}]*\}' | grep -oE '"[a-z0-9]+"' | tr -d '"')
nonempty "ckpt-bench workloads" "$wls"
for w in $wls; do
    has_word "$text" "$w" || say "ckpt-bench.1 does not document the workload $w"
done
# the peers of --peers: {"name", SYS_..., of peer_defs
peers=$(joined "$bench" | grep -oE '\{ *"[a-z_-]+", *SYS_[A-Z_]+' | sed 's/^{ *"\([^"]*\)".*/\1/')
nonempty "ckpt-bench peers" "$peers"
for p in $peers; do
    has_word "$text" "$p" || say "ckpt-bench.1 does not document the peer $p"
done
exit $fail
