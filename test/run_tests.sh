#!/bin/sh
# Runs every test binary in $BUILD/test, GRID_TEST_JOBS suites at a time
# (default: the number of processors, at most 2), the slowest first, and
# ends with one line "N passed, N failed" over all suites. Each suite's
# line is printed as it ends; the log of a failing suite follows it.
# Exit 1 on any failure. GRID_TEST_JOBS=1 runs them one after another.
BUILD=${BUILD:-build}
GRID_BIN=$(cd "$BUILD/bin" && pwd)
export GRID_BIN
GRID_TOOLS=$(cd "$BUILD/test/tools" 2>/dev/null && pwd)
export GRID_TOOLS
GRID_SRC=$(pwd)
export GRID_SRC
jobs=${GRID_TEST_JOBS:-$(nproc 2>/dev/null || echo 1)}
[ "$jobs" -gt 2 ] 2>/dev/null && [ -z "$GRID_TEST_JOBS" ] && jobs=2
case $jobs in ''|*[!0-9]*|0) echo "GRID_TEST_JOBS must be a positive number" >&2; exit 2;; esac

# The suites that take longest start first, so two runners end together.
slow="test_it_upgrade test_it_delivery test_it_bench test_fuzz test_packaging
test_it_cluster test_it_browser test_it_hello_backoff test_it_http
test_it_security test_it_claims test_it_basic"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT INT TERM
list="$out/list"
: >"$list"
for n in $slow; do
    [ -x "$BUILD/test/$n" ] && echo "$BUILD/test/$n" >>"$list"
done
for t in "$BUILD"/test/test_*; do
    [ -x "$t" ] && [ -f "$t" ] || continue
    grep -qx "$t" "$list" || echo "$t" >>"$list"
done

# One suite: its log to $out/<name>.log, its counts to $out/<name>.res,
# and one line to stdout (a single short write, so lines never mix).
export out
run_one='
t=$1
name=$(basename "$t")
log="$out/$name.log"
start=$(date +%s)
# CZMQ programs catch SIGTERM, so a hung suite gets SIGKILL 10 s later
timeout -k 10 600 "$t" >"$log" 2>&1
rc=$?
p=$(sed -n "s/^\[  PASSED  \] \([0-9]*\) test.*/\1/p" "$log" | tail -n 1)
f=$(sed -n "s/^\[  FAILED  \] \([0-9]*\) test.*/\1/p" "$log" | tail -n 1)
p=${p:-0}
f=${f:-0}
if [ "$rc" != 0 ] && [ "$f" = 0 ]; then
    f=1   # crashed or timed out before cmocka could count
fi
secs=$(( $(date +%s) - start ))
echo "$p $f" >"$out/$name.res"
if [ "$f" != 0 ]; then
    echo "FAIL $name ($p passed, $f failed, ${secs}s, exit $rc)"
else
    echo "ok   $name ($p passed, ${secs}s)"
fi
'
xargs -P "$jobs" -n 1 sh -c "$run_one" run_one <"$list"

passed=0
failed=0
broken=""
while read -r t; do
    name=$(basename "$t")
    if [ -f "$out/$name.res" ]; then
        read -r p f <"$out/$name.res"
    else
        p=0 f=1
    fi
    passed=$((passed + p))
    failed=$((failed + f))
    if [ "$f" != 0 ]; then
        broken="$broken $name"
        echo "---- $name (the end of its log)"
        sed 's/^/    /' "$out/$name.log" 2>/dev/null | tail -n 60
    fi
done <"$list"
[ -n "$broken" ] && echo "failing suites:$broken"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ] && [ "$passed" -gt 0 ]
