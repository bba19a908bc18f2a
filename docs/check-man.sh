#!/bin/sh
# The manual pages render without a groff warning and name every option of
# the daemon, every metric series it exports and every ckptctl
# subcommand.  Usage: check-man.sh DOCS_DIR
set -eu
dir=$1
fail=0
for page in ckptfs.8 ckptctl.1; do
    err=$(MANWIDTH=100 man --warnings -l "$dir/$page" 2>&1 >/dev/null) || { echo "$page: man failed"; exit 1; }
    if [ -n "$err" ]; then echo "$page: $err"; fail=1; fi
done
text=$(MANWIDTH=200 man -l "$dir/ckptfs.8" 2>/dev/null | col -b)
for opt in policy=enforce policy=enforce\|audit job=ID identity=env:VAR legacy=ro\|rw legacy_backend=PATH \
           external_root=PREFIX views=NAME rescan=SECONDS config=FILE collision_log=FILE \
           entry_timeout= attr_timeout= writeback no_default_permissions allow_other \
           default_permissions max_threads auto_unmount _netdev -f -d -s SIGTERM fusermount3 \
           .collisions .metrics .control fstab ckptfs@ tag_env=VAR max_read= no_handles Type=notify \
           log=journal log_level=error CKPTFS_KIND MESSAGE_ID journalctl SIGHUP "kill -HUP"; do
    case $text in *"$opt"*) ;; *) echo "ckptfs.8 does not mention $opt"; fail=1 ;; esac
done
# every series fs/metrics.c renders (each has a header() call), by its whole
# name: ckptfs_catalog_markers does not stand for ckptfs_catalog_markers_loaded
series=$(sed -n 's/.*header(s, "\([A-Za-z0-9_:]*\)".*/\1/p' "$dir/../fs/metrics.c")
[ -n "$series" ] || { echo "no series found in fs/metrics.c"; exit 1; }
for name in $series; do
    if ! printf '%s\n' "$text" | grep -Eq "(^|[^A-Za-z0-9_])$name([^A-Za-z0-9_]|\$)"; then
        echo "ckptfs.8 does not list the series $name"; fail=1
    fi
done
text=$(MANWIDTH=200 man -l "$dir/ckptctl.1" 2>/dev/null | col -b)
for cmd in "ckptctl jobs" "ckptctl resolve" "ckptctl check" "ckptctl state-root" "ckptctl unused" \
           "ckptctl prune" --delete --print0 \
           "ckptctl collisions" "ckptctl fixture" "ckptctl run" --json --dir --policy --identity \
           --job --report --keep --legacy-backend --external-root --config --views --seed \
           --tag-env --collision-exit --file bash-completion \
           shared-location foreign-root malformed cut-short orphan-root not-a-job; do
    case $text in *"$cmd"*) ;; *) echo "ckptctl.1 does not mention $cmd"; fail=1 ;; esac
done
exit $fail
