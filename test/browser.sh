#!/bin/sh
# Runs the dashboard's browser test (test/browser, Node's test runner with
# playwright-core and Debian's chromium) against the programs in GRID_BIN,
# and prints cmocka-style lines so test/run_tests.sh counts each test.
# Screenshots go to BUILD_DIR/test-artifacts. Exit 1 when a test failed.
#
# usage: sh test/browser.sh SRC_DIR BUILD_DIR
set -u
src=$1
build=$2
GRID_BIN=${GRID_BIN:-$build/bin}
GRID_SRC=$src
GRID_ARTIFACTS=$build/test-artifacts
export GRID_BIN GRID_SRC GRID_ARTIFACTS
if ! "$GRID_BIN/gridbroker" --help 2>&1 | grep -Eq -e '--http([^a-z-]|$)'; then
    echo "SKIPPED: this gridbroker has no --http (no HTTP face built in), so"
    echo "the dashboard cannot be served; its browser test did not run."
    echo "[  PASSED  ] 0 test(s)."
    exit 0
fi
cd "$src/test/browser" || exit 1
if [ ! -f node_modules/playwright-core/package.json ]; then
    echo "test/browser/node_modules is missing: make test-deps runs npm ci there"
    echo "[  FAILED  ] 1 test(s), listed above."
    exit 1
fi
mkdir -p "$GRID_ARTIFACTS"
log=$(mktemp)
node --test --test-reporter=tap dashboard.test.mjs >"$log" 2>&1
rc=$?
cat "$log"
pass=$(sed -n 's/^# pass \([0-9]*\)$/\1/p' "$log" | tail -n 1)
fail=$(sed -n 's/^# fail \([0-9]*\)$/\1/p' "$log" | tail -n 1)
rm -f "$log"
pass=${pass:-0}
fail=${fail:-0}
if [ "$rc" != 0 ] && [ "$fail" = 0 ]; then
    fail=1
fi
echo "screenshots: $GRID_ARTIFACTS"
echo "[  PASSED  ] $pass test(s)."
[ "$fail" != 0 ] && echo "[  FAILED  ] $fail test(s), listed above."
[ "$rc" = 0 ]
