#!/usr/bin/env bash
# Installs what is missing, builds ckptfs with AddressSanitizer and UBSan,
# and runs every test suite (unit, tools, mount, fuzz smoke) under meson test.
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/setup.sh

build=${CKPTFS_TEST_BUILD:-build-test}
if [ ! -d "$build" ]; then
    meson setup "$build" -Db_sanitize=address,undefined -Db_lundef=false \
        -Dbuildtype=debugoptimized >/dev/null
fi
ninja -C "$build"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
meson test -C "$build" --print-errorlogs --num-processes 2 "$@"
