#!/bin/sh
# Runs every test binary in $BUILD/test (unit tests first, then the
# integration tests, whose names start with test_it_), and ends with one
# line "N passed, N failed" over all suites. Exit 1 on any failure.
BUILD=${BUILD:-build}
GRID_BIN=$(cd "$BUILD/bin" && pwd)
export GRID_BIN
GRID_TOOLS=$(cd "$BUILD/test/tools" 2>/dev/null && pwd)
export GRID_TOOLS
GRID_SRC=$(pwd)
export GRID_SRC
passed=0
failed=0
broken=""
log=$(mktemp)
for t in $(ls "$BUILD"/test/test_* | grep -v '/test_it_') $(ls "$BUILD"/test/test_it_* 2>/dev/null); do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    start=$(date +%s)
    # CZMQ programs catch SIGTERM, so a hung suite gets SIGKILL 10 s later
    timeout -k 10 600 "$t" >"$log" 2>&1
    rc=$?
    p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -n 1)
    f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -n 1)
    p=${p:-0}
    f=${f:-0}
    if [ "$rc" != 0 ] && [ "$f" = 0 ]; then
        f=1   # crashed or timed out before cmocka could count
    fi
    passed=$((passed + p))
    failed=$((failed + f))
    secs=$(( $(date +%s) - start ))
    if [ "$f" != 0 ]; then
        broken="$broken $name"
        echo "FAIL $name ($p passed, $f failed, ${secs}s, exit $rc)"
        sed 's/^/    /' "$log" | tail -n 60
    else
        echo "ok   $name ($p passed, ${secs}s)"
    fi
done
rm -f "$log"
[ -n "$broken" ] && echo "failing suites:$broken"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ] && [ "$passed" -gt 0 ]
