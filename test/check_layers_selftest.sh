#!/bin/sh
# Tests test/check_layers.sh on small trees made in a temporary folder: a
# tree that keeps every rule passes; trees that break one (a circle, a
# handler including broker.h, proto/ including store/, relay/ including
# broker/, a file over the size limit) fail with the line that names it.
#
# usage: sh test/check_layers_selftest.sh
# Prints one line per failed case and a summary; exit 1 when a case failed.
set -u
check=$(cd "$(dirname "$0")" && pwd)/check_layers.sh
tmp=$(mktemp -d) || exit 1
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
passed=0
failed=0

# put FILE LINE...: write FILE (under the current tree) with the lines.
put() {
    f=$1
    shift
    [ -d "$tree/${f%/*}" ] || mkdir -p "$tree/${f%/*}"
    printf '%s\n' "$@" >"$tree/$f"
}

# A tree that keeps the rules: each folder, includes written both ways
# (from the file's folder and from the root), a system header in quotes, a
# header under test/, a file with no include, a module with no header.
good() {
    tree=$tmp/$1
    rm -rf "$tree"
    put proto/pv.h '#ifndef PV_H' '#define PV_H' '#endif'
    put proto/pv.c '#include "pv.h"' '#include <stdio.h>'
    put proto/proto.h '#include "pv.h"'
    put proto/proto.c '  #  include "proto.h"' '#include "./pv.h"'
    put proto/empty.c 'int empty;'
    put store/store.h '#include "../proto/pv.h"'
    put store/store.c '#include "store.h"' '#include "lmdb.h"'
    put backends/backend.h '#include "../proto/proto.h"'
    put backends/ping.c '#include "backend.h"'
    put client/client.h '#include "../proto/pv.h"'
    put client/client.c '#include "client.h"' '#include "proto/proto.h"'
    put broker/sched.h '#include "../proto/proto.h"'
    put broker/sched.c '#include "sched.h"'
    put broker/api.h '#include "sched.h"' '#include "../store/store.h"'
    put broker/api.c '#include "api.h"' '#include "../backends/backend.h"' \
        '#include "../test/lib/fixture.h"' '#include "zmq.h"'
    put broker/broker.h '#include "api.h"' '#include "../client/client.h"'
    put broker/broker.c '#include "broker.h"'
    put broker/main.c '#include "broker.h"'
    put agent/agent.h '#include "../proto/proto.h"'
    put agent/agent.c '#include "agent.h"' '#include "../store/store.h"' \
        '#include "../backends/backend.h"'
    put cli/cli.h '#include "../client/client.h"'
    put cli/cli.c '#include "cli.h"'
    put relay/relay.c '#include "../proto/proto.h"' '#include "../client/client.h"'
    put test/lib/fixture.h '#include "../../broker/broker.h"'
}

# expect NAME CODE [ARG...] -- LINE...: run the check on the tree NAME with
# the ARGs; it must exit CODE and print each LINE as a whole line, but a
# LINE that starts with ! must not be printed.
expect() {
    name=$1
    code=$2
    shift 2
    args=
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        args="$args $1"
        shift
    done
    [ $# -gt 0 ] && shift
    # shellcheck disable=SC2086
    out=$(sh "$check" $args "$tmp/$name" 2>&1)
    rc=$?
    ok=1
    [ "$rc" = "$code" ] || { echo "FAIL $name: exit $rc, not $code"; ok=0; }
    for line in "$@"; do
        case $line in
        !*)
            ! printf '%s\n' "$out" | grep -qxF -- "${line#!}" ||
                { echo "FAIL $name: a line '${line#!}'"; ok=0; } ;;
        *)
            printf '%s\n' "$out" | grep -qxF -- "$line" ||
                { echo "FAIL $name: no line '$line'"; ok=0; } ;;
        esac
    done
    if [ $ok = 1 ]; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        printf '%s\n' "$out" | sed 's/^/    /'
    fi
}

good good
expect good 0 -- \
    'check_layers: 23 files, 29 includes; 0 across folders, 0 of broker.h, 0 circles, 0 files over 2000 lines (warnings): ok'
expect good 0 --list -- \
    'broker/broker -> broker/api: broker/broker.h' \
    'client/client -> proto/proto: client/client.c'

good circle
put broker/sched.h '#include "../proto/proto.h"' '#include "api.h"'
put agent/spool.h '#include "executor.h"'
put agent/executor.h '#include "orphans.h"'
put agent/orphans.h '#include "spool.h"'
put agent/orphans.c '#include "orphans.h"'
expect circle 1 -- \
    'circle: agent/executor -> agent/orphans -> agent/spool -> agent/executor' \
    'circle: broker/api -> broker/sched -> broker/api' \
    'check_layers: 27 files, 34 includes; 0 across folders, 0 of broker.h, 2 circles, 0 files over 2000 lines (warnings): FAIL'

good handler
put broker/api.c '#include "api.h"' '#include "broker.h"'
put broker/reload.c '#include "broker.h"'
expect handler 1 -- \
    'broker/api.c includes broker/broker.h: a handler may not see broker_t' \
    'broker/reload.c includes broker/broker.h: a handler may not see broker_t' \
    'check_layers: 24 files, 30 includes; 0 across folders, 2 of broker.h, 1 circles, 0 files over 2000 lines (warnings): FAIL' \
    'circle: broker/api -> broker/broker -> broker/api'

good proto_store
put proto/pv.c '#include "pv.h"' '#include "../store/store.h"'
expect proto_store 1 -- \
    'proto/pv.c includes store/store.h: proto/ may include only proto/'

good folders
put relay/relay.c '#include "../broker/sched.h"'
put agent/agent.c '#include "agent.h"' '#include "broker/broker.h"'
put cli/cli.c '#include "cli.h"' '#include "../agent/agent.h"'
put backends/ping.c '#include "backend.h"' '#include "../store/store.h"'
put client/client.c '#include "client.h"' '#include "../cli/cli.h"'
expect folders 1 -- \
    'relay/relay.c includes broker/sched.h: relay/ may include only relay/ proto/ store/ backends/ client/' \
    'agent/agent.c includes broker/broker.h: agent/ may include only agent/ proto/ store/ backends/ client/' \
    'cli/cli.c includes agent/agent.h: cli/ may include only cli/ proto/ store/ backends/ client/' \
    'backends/ping.c includes store/store.h: backends/ may include only backends/ proto/' \
    'client/client.c includes cli/cli.h: client/ may include only client/ proto/'

good size
awk 'BEGIN { for (i = 0; i < 2001; i++) print "int x" i ";" }' \
    >"$tree/broker/sched.c"
awk 'BEGIN { for (i = 0; i < 2000; i++) print "int x" i ";" }' \
    >"$tree/agent/agent.c"
awk 'BEGIN { for (i = 0; i < 3000; i++) print "int x" i ";" }' \
    >"$tree/cli/cli.c"
expect size 0 -- 'warning: broker/sched.c has 2001 lines: over 2000' \
    '!warning: agent/agent.c has 2000 lines: over 2000' \
    '!warning: cli/cli.c has 3000 lines: over 2000'
expect size 1 --strict-size -- 'broker/sched.c has 2001 lines: over 2000'

mkdir -p "$tmp/empty"
expect empty 0 -- \
    'check_layers: 0 files, 0 includes; 0 across folders, 0 of broker.h, 0 circles, 0 files over 2000 lines (warnings): ok'
expect empty 2 --bogus --

echo "check_layers self-test: $passed passed, $failed failed"
[ "$failed" = 0 ]
