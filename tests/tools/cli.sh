#!/bin/bash
# The three programs alike: -V and --version print the same version, in one
# style; --help prints its non-ASCII words under a UTF-8 locale; an
# installed ckpt-bench (no build tree around it) finds ckptfs in PATH.
# $1 ckptfs, $2 ckptctl, $3 ckpt-bench.
set -u
ckptfs=$1 ckptctl=$2 bench=$3
fail=0
bad() { echo "FAIL: $*"; fail=1; }
ok() { echo "ok: $*"; }

version=
for prog in "$ckptfs" "$ckptctl" "$bench"; do
    name=${prog##*/}
    short=$("$prog" -V 2>&1); rs=$?
    long=$("$prog" --version 2>&1); rl=$?
    [ "$rs" -eq 0 ] && [ "$rl" -eq 0 ] || { bad "$name -V: $rs, --version: $rl"; continue; }
    [ "$short" = "$long" ] || bad "$name: -V and --version differ: '$short' / '$long'"
    first=${short%%$'\n'*}
    case $name in
        ckptfs) want="^ckptfs [0-9]+\.[0-9]+\.[0-9]+$" ;;
        *) want="^$name \(ckptfs\) [0-9]+\.[0-9]+\.[0-9]+$" ;;
    esac
    if [[ $first =~ $want ]]; then ok "$name -V: $first"; else bad "$name -V: '$first'"; fi
    v=${first##* }
    [ -z "$version" ] || [ "$v" = "$version" ] || bad "$name: version $v, not $version"
    version=$v
done

# GOption's own words ("[OPTION…]") reach a UTF-8 terminal whole
for cmd in "$bench --help" "$ckptctl jobs --help"; do
    out=$(LC_ALL=C.UTF-8 $cmd 2>&1)
    if [[ $out == *"[OPTION…]"* ]]; then ok "$cmd: UTF-8 help"; else bad "$cmd: ${out%%$'\n'*}"; fi
done

# ckpt-bench out of a build tree: the daemon from PATH (a stand-in that
# records it was started, then fails, so nothing is measured)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/path" "$tmp/scratch"
cp "$bench" "$tmp/bin/ckpt-bench"
cat > "$tmp/path/ckptfs" <<EOS
#!/bin/sh
echo "\$0" > "$tmp/started"
exit 1
EOS
chmod +x "$tmp/path/ckptfs"
PATH="$tmp/path:$PATH" "$tmp/bin/ckpt-bench" --dir "$tmp/scratch" --only meta --scale 0.0001 \
    --runs 1 > "$tmp/out" 2>&1
if [ "$(cat "$tmp/started" 2>/dev/null)" = "$tmp/path/ckptfs" ]; then
    ok "an installed ckpt-bench starts the ckptfs in PATH"
else
    bad "an installed ckpt-bench did not start $tmp/path/ckptfs:"; cat "$tmp/out"
fi
[ -z "$(ls -A "$tmp/scratch")" ] || bad "ckpt-bench left $(ls "$tmp/scratch") in --dir"
exit $fail
