#!/bin/sh
# Runs the Python module's tests (python/tests, unittest) with Debian's
# python3 (where python3-zmq and python3-msgpack live) against the programs
# in GRID_BIN, and prints cmocka-style lines so test/run_tests.sh counts
# each test. Exit 1 when any test failed or the run broke.
#
# usage: sh test/python.sh SRC_DIR
set -u
src=$1
python=/usr/bin/python3
[ -x "$python" ] || python=python3
export PYTHONDONTWRITEBYTECODE=1
log=$(mktemp)
cd "$src/python" || exit 1
"$python" -m unittest discover -s tests -t . -v >"$log" 2>&1
rc=$?
cat "$log"
ran=$(sed -n 's/^Ran \([0-9]*\) tests\{0,1\} in .*/\1/p' "$log" | tail -n 1)
bad=$(sed -n 's/^FAILED (\(.*\))$/\1/p' "$log" | tr ',' '\n' \
    | sed -n 's/.*=\([0-9]*\)$/\1/p' | awk '{ s += $1 } END { print s + 0 }')
rm -f "$log"
ran=${ran:-0}
if [ "$rc" != 0 ] && [ "$bad" = 0 ]; then
    bad=1
fi
passed=$((ran - bad)); [ "$passed" -lt 0 ] && passed=0
echo "[  PASSED  ] $passed test(s)."
[ "$bad" != 0 ] && echo "[  FAILED  ] $bad test(s), listed above."
[ "$rc" = 0 ]
