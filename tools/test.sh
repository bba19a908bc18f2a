#!/usr/bin/env bash
# Installs what is missing, builds ckptfs with AddressSanitizer and UBSan,
# and runs every test suite (unit, tools, mount, python, fuzz seeds, bench
# smoke) under meson test; then checks that the sources are
# clang-formatted, that a release build (what tools/demo.sh uses) and a
# build with Debian's hardening flags compile with -Werror, tests included,
# runs the memory test again in the release build,
# fuzzes each libFuzzer target briefly, and builds, lints, installs, uses
# and removes the Debian package (tools/package.sh).
#   ./tools/test.sh [meson test args]     e.g. --suite mount
#   CKPTFS_FUZZ_SECONDS=0 ./tools/test.sh # skip the fuzz run
#   CKPTFS_PACKAGE=0 ./tools/test.sh      # skip the package step
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/setup.sh build test

build=${CKPTFS_TEST_BUILD:-build-test}
if [ ! -d "$build" ]; then
    meson setup "$build" -Db_sanitize=address,undefined -Db_lundef=false \
        -Dbuildtype=debugoptimized >/dev/null
fi
ninja -C "$build"
# the ring variants of the mount suites want FUSE over io_uring: on for the
# run where the fuse module has the switch, as it was afterwards
uring=/sys/module/fuse/parameters/enable_uring
if [ -w "$uring" ]; then
    uring_was=$(cat "$uring")
    trap 'echo "$uring_was" > "$uring"' EXIT
    echo Y > "$uring"
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
rc=0
meson test -C "$build" --print-errorlogs --num-processes 2 "$@" || rc=$?
# One plain closing line for whoever reads the log: counts from meson's own record.
/usr/bin/python3 - "$build/meson-logs/testlog.json" <<'PY' || true
import json, sys
ok = bad = skip = 0
for line in open(sys.argv[1]):
    r = json.loads(line).get("result", "")
    if r in ("OK", "EXPECTEDFAIL"): ok += 1
    elif r == "SKIP": skip += 1
    else: bad += 1
print(f"{ok} passed, {bad} failed" + (f", {skip} skipped" if skip else ""))
PY
[ "$rc" -eq 0 ] || exit "$rc"

# A test selection given on the command line runs just that.
[ "$#" -eq 0 ] || exit 0

echo "== clang-format (.clang-format)"
git ls-files -z '*.c' '*.h' | xargs -0 clang-format --style=file --dry-run -Werror
echo "clang-format: ok"

echo "== the layers of fs/ (tools/check-layers.sh)"
bash tools/check-layers.sh

# Both optimised builds compile everything, tests included, with -Werror:
# the optimiser sees warnings (format overflows, fortified bounds) that the
# sanitizer build does not.
echo "== release build (-O3, -Werror, no sanitizers), tests included"
release=${CKPTFS_RELEASE_BUILD:-build-release}
[ -d "$release" ] || meson setup "$release" -Dbuildtype=release >/dev/null
ninja -C "$release" >/dev/null
echo "release build: ok"

# What the daemon gives back when the kernel forgets is the allocator's
# doing, and AddressSanitizer's allocator is not the one users run.
echo "== memory given back (mount/memory, release build)"
meson test -C "$release" --print-errorlogs mount/memory

echo "== Debian's flags (-O2 -D_FORTIFY_SOURCE=3), tests included"
debflags=${CKPTFS_FORTIFY_BUILD:-build-fortify}
[ -d "$debflags" ] || meson setup "$debflags" -Dbuildtype=plain \
    -Dc_args='-g -O2 -D_FORTIFY_SOURCE=3 -fstack-protector-strong -Wformat -Werror=format-security' \
    >/dev/null
ninja -C "$debflags" >/dev/null
echo "fortified build: ok"

seconds=${CKPTFS_FUZZ_SECONDS:-20}
if [ "$seconds" -gt 0 ]; then
    echo "== fuzz (${seconds}s per target)"
    FUZZ_SECONDS=$seconds ./tools/fuzz.sh
fi

if [ "${CKPTFS_PACKAGE:-1}" != 0 ]; then
    echo "== Debian package (build, lintian, install, use, remove)"
    ./tools/package.sh
fi
