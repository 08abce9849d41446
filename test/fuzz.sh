#!/bin/sh
# Runs every libFuzzer target in FUZZ_DIR/bin for SECONDS each (ASan and
# UBSan are built in), starting from the seeds that SEEDS_TOOL writes and
# from the corpus kept in FUZZ_DIR/corpus by earlier runs. A crash, a leak,
# undefined behaviour, a timeout or a broken invariant fails the target;
# the input that did it is kept in FUZZ_DIR/crashes and can be replayed
# with the plain build: build/test/tools/<target> FILE.
#
# usage: sh test/fuzz.sh FUZZ_DIR SECONDS SEEDS_TOOL
#
# Prints cmocka-style lines, so test/run_tests.sh counts each target as a
# test; exit 1 when any target failed.
set -u
dir=$1
seconds=$2
seeds_tool=$3
passed=0
failed=0
broken=""
mkdir -p "$dir/corpus" "$dir/crashes" "$dir/seeds" || exit 1
"$seeds_tool" "$dir/seeds" >/dev/null || { echo "cannot write the seeds"; exit 1; }
for bin in "$dir"/bin/fuzz_*; do
    [ -x "$bin" ] || continue
    name=$(basename "$bin")
    corpus="$dir/corpus/$name"
    seeds="$dir/seeds/$name"
    mkdir -p "$corpus" "$seeds"
    log="$dir/$name.log"
    echo "[ RUN      ] $name (${seconds}s)"
    # -timeout: one input may take at most 10 s; -rss_limit_mb: 2 GiB;
    # -max_len: inputs up to 64 KiB, enough for every structure we decode.
    "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -max_len=65536 -print_final_stats=1 \
        -artifact_prefix="$dir/crashes/$name-" \
        "$corpus" "$seeds" >"$log" 2>&1
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    if [ "$rc" = 0 ]; then
        passed=$((passed + 1))
        echo "[       OK ] $name (${runs:-?} inputs)"
    else
        failed=$((failed + 1))
        broken="$broken $name"
        echo "[  FAILED  ] $name (exit $rc, log $log)"
        grep -v '^#' "$log" | tail -n 40 | sed 's/^/    /'
    fi
done
echo "[==========] $((passed + failed)) test(s) run."
echo "[  PASSED  ] $passed test(s)."
if [ "$failed" != 0 ]; then
    echo "[  FAILED  ] $failed test(s), listed below:"
    for name in $broken; do
        echo "[  FAILED  ] $name"
    done
    exit 1
fi
[ "$passed" -gt 0 ]
