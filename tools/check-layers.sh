#!/usr/bin/env bash
# The layers of fs/ (docs/DESIGN.md, "The layers of fs/"): every
# #include "..." of a file of fs/ must name a file of its own layer, of a
# layer it may use (below it), of core/, or outside the tree; a folder's
# *-private.h only files of that folder.  A C file can call only what a
# header it includes declares, so this is the call graph too.  Prints one
# line per layer and each include that runs up; exits 1 if there is one.
#   tools/check-layers.sh [SOURCE_ROOT]
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"

# the layer of a file of fs/
layer_of() {
    case "$1" in
    fs/main.c | fs/attach.[ch] | fs/backing_mount.[ch]) echo top ;;
    fs/ops/*) echo ops ;;
    fs/views/*) echo views ;;
    fs/ckptfs.h) echo daemon ;;
    fs/nodes/*) echo nodes ;;
    fs/outlive/*) echo outlive ;;
    fs/kernel/*) echo kernel ;;
    fs/log.[ch] | fs/metrics.[ch] | fs/options.[ch] | fs/proctitle.[ch] | fs/mounttab.[ch]) echo base ;;
    *) echo "?" ;;
    esac
}

# top first; each may use the layers named after it
declare -A may=(
    [top]="ops views daemon nodes outlive kernel base"
    [ops]="views daemon nodes outlive kernel base"
    [views]="daemon nodes outlive kernel base"
    [daemon]="nodes outlive kernel base"
    [nodes]="outlive kernel base"
    [outlive]="kernel base"
    [kernel]=""
    [base]=""
)
order="top ops views daemon nodes outlive kernel base"

declare -A files=() includes=()
bad=0
while IFS= read -r f; do
    from=$(layer_of "$f")
    if [ "$from" = "?" ]; then
        echo "$f: in no layer (add it to tools/check-layers.sh)"
        bad=1
        continue
    fi
    files[$from]=$((${files[$from]:-0} + 1))
    while IFS= read -r inc; do
        if [ -e "$(dirname "$f")/$inc" ]; then
            target=$(realpath --relative-to=. "$(dirname "$f")/$inc")
        elif [ -e "fs/$inc" ]; then
            target="fs/$inc"
        else
            continue # core/, the build's config header, the system
        fi
        to=$(layer_of "$target")
        includes[$from]=$((${includes[$from]:-0} + 1))
        case "$target" in
        *-private.h)
            if [ "$(dirname "$target")" != "$(dirname "$f")" ]; then
                echo "$f -> $target: another folder's private header"
                bad=1
            fi
            ;;
        esac
        if [ "$to" != "$from" ] && [[ " ${may[$from]} " != *" $to "* ]]; then
            echo "$f ($from) -> $target ($to): runs up"
            bad=1
        fi
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done < <(git ls-files --cached --others --exclude-standard 'fs/*.c' 'fs/*.h' 2>/dev/null || find fs -name '*.[ch]')

for l in $order; do
    printf '%-8s %3s files %4s includes of fs/  may use: %s\n' "$l" "${files[$l]:-0}" \
        "${includes[$l]:-0}" "${may[$l]:-(none)}"
done
if [ "$bad" -ne 0 ]; then
    echo "check-layers: an include runs up (see above)"
    exit 1
fi
echo "check-layers: every include of fs/ runs down or stays in its layer"
