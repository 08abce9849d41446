#!/bin/sh
# make demo: a broker and three agents on loopback in a temporary
# directory, a fan-out job on every node and one on the web group, the
# per-node results, then every process stopped. Everything speaks
# CurveZMQ with keys made in the temporary directory; the broker enrols
# the demo agents' keys itself (--auto-accept, for labs and demos only).
set -u
BUILD=${BUILD:-build}
BIN=$(cd "$BUILD/bin" && pwd)
dir=$(mktemp -d "${TMPDIR:-/tmp}/grid-demo-XXXXXX")
pids=""

cleanup() {
    for pid in $pids; do
        kill "$pid" 2>/dev/null
    done
    for pid in $pids; do
        wait "$pid" 2>/dev/null
    done
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
fail() {
    echo "demo: $*" >&2
    for log in "$dir"/*.log; do
        echo "--- $log" >&2
        tail -n 20 "$log" >&2
    done
    exit 1
}

# Key pairs: the broker's, an admin client's, one per agent.
keys="$dir/keys"
"$BIN/gridbroker" keygen --out "$keys" >/dev/null || fail "gridbroker keygen failed"
"$BIN/gridcli" keygen --out "$keys" --name admin >/dev/null || fail "gridcli keygen failed"
for node in web-01 web-02 db-01; do
    "$BIN/gridagent" keygen --out "$keys" --name "$node" >/dev/null \
        || fail "gridagent keygen failed"
done
export GRID_KEY="$keys/admin.key" GRID_BROKER_KEY="$keys/broker.key"

# Free loopback ports: try a few bases until the broker binds.
broker_pid=""
for try in 1 2 3 4 5 6 7 8; do
    base=$(( 20000 + ( ($$ * 31 + try * 7919) % 30000 ) ))
    CLIENT="tcp://127.0.0.1:$base"
    AGENTS="tcp://127.0.0.1:$((base + 1))"
    PUBLISH="tcp://127.0.0.1:$((base + 2))"
    "$BIN/gridbroker" --data-dir "$dir/broker" --client "$CLIENT" \
        --agents "$AGENTS" --publish "$PUBLISH" --heartbeat 1s \
        --key "$keys/broker.key" --client-key "admin:$keys/admin.key" \
        --auto-accept >"$dir/broker.log" 2>&1 &
    broker_pid=$!
    ok=""
    for i in $(seq 1 50); do
        if "$BIN/gridcli" --broker "$CLIENT" --request-timeout 1s status >/dev/null 2>&1; then
            ok=yes
            break
        fi
        kill -0 "$broker_pid" 2>/dev/null || break
        sleep 0.1
    done
    if [ -n "$ok" ]; then
        pids="$broker_pid"
        break
    fi
    kill "$broker_pid" 2>/dev/null
    wait "$broker_pid" 2>/dev/null
    broker_pid=""
done
[ -n "$broker_pid" ] || fail "the broker did not start"
export GRID_BROKER="$CLIENT"
say "gridbroker is up (clients $CLIENT, agents $AGENTS, commands $PUBLISH), CurveZMQ on each"

start_agent() {
    "$BIN/gridagent" --id "$1" --groups "$2" --broker "$AGENTS" \
        --publish "$PUBLISH" --state-dir "$dir/$1" --key "$keys/$1.key" \
        --broker-key "$keys/broker.key" >"$dir/agent-$1.log" 2>&1 &
    pids="$pids $!"
}
start_agent web-01 web
start_agent web-02 web
start_agent db-01 db

online=0
for i in $(seq 1 100); do
    online=$("$BIN/gridcli" node list 2>/dev/null | grep -c ' online ' || true)
    [ "$online" -ge 3 ] && break
    sleep 0.1
done
[ "$online" -ge 3 ] || fail "the agents did not come online"

say "gridcli node list"
"$BIN/gridcli" node list || fail "node list failed"

say "gridcli key list (each agent's key is bound to its node id)"
"$BIN/gridcli" key list || fail "key list failed"

say "a client whose key the broker does not know is refused"
"$BIN/gridcli" keygen --out "$keys" --name stranger >/dev/null || fail "gridcli keygen failed"
if "$BIN/gridcli" --key "$keys/stranger.key" --request-timeout 2s node list; then
    fail "the broker answered an unknown key"
fi

say "gridcli job run --target all system hostname --wait"
"$BIN/gridcli" job run --target all system hostname --wait || fail "the job on all failed"

say "gridcli job run --target group:web test echo --msg 'hello from grid' --wait"
"$BIN/gridcli" job run --target group:web test echo --msg 'hello from grid' --wait \
    || fail "the job on group:web failed"

say "gridcli job list"
"$BIN/gridcli" job list || fail "job list failed"

say "demo finished: stopping the broker and the agents"
exit 0
