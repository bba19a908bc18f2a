#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang (build-fuzz/) and
# runs each for ${FUZZ_SECONDS:-20} s, starting from the seed corpus.  New
# inputs go to build-fuzz/corpus/<target>/ (not the committed seeds); a crash
# leaves build-fuzz/crash-* and makes this script exit non-zero.
#   FUZZ_SECONDS=60 tools/fuzz.sh [target...]    (targets: marker stateroot classify)
set -uo pipefail
cd "$(dirname "$0")/.."
build=${FUZZ_BUILD:-build-fuzz}
seconds=${FUZZ_SECONDS:-20}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(marker stateroot classify)

if [ ! -d "$build" ]; then
    CC=clang meson setup "$build" -Dfuzz=enabled -Dtests=false >/dev/null || exit 2
fi
for t in "${targets[@]}"; do
    ninja -C "$build" "tests/fuzz/fuzz_$t" >/dev/null || exit 2
done

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
status=0
for t in "${targets[@]}"; do
    corpus="$build/corpus/$t"
    mkdir -p "$corpus"
    log="$build/fuzz-$t.log"
    (cd "$build" && "./tests/fuzz/fuzz_$t" -max_total_time="$seconds" -print_final_stats=1 \
        -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
        "corpus/$t" "../tests/fuzz/corpus/$t") >"$log" 2>&1
    rc=$?
    execs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}')
    if [ $rc -ne 0 ]; then
        echo "fuzz_$t: CRASH after ${execs:-?} executions (exit $rc), see $log:"
        grep -E 'ERROR|SUMMARY|Test unit written|^    #[0-9]' "$log" | head -20
        status=1
    else
        echo "fuzz_$t: ${execs:-?} executions in ${seconds}s, no crash"
    fi
done
exit $status
