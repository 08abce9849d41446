#!/bin/sh
# make demo-ha: a broker cluster on loopback in a temporary directory. One
# etcd, two gridbrokers (a and b) in cluster "demo", three agents that know
# both; a job that takes a while on every node; the active SIGKILLed in the
# middle of it; the standby taking over, and the job finishing there with
# one result per node. Every process is stopped by its pid at the end, on
# an error or on Ctrl-C.
set -u
BUILD=${BUILD:-build}
BIN=$(cd "$BUILD/bin" && pwd)
TTL=${DEMO_TTL:-3}
dir=$(mktemp -d "${TMPDIR:-/tmp}/grid-demo-ha-XXXXXX")
pids=""
etcd_pid=""

cleanup() {
    trap '' INT TERM
    for pid in $pids $etcd_pid; do
        kill -CONT "$pid" 2>/dev/null
        kill "$pid" 2>/dev/null
    done
    # Whatever did not stop within 5 s is killed
    for i in $(seq 1 50); do
        alive=""
        for pid in $pids $etcd_pid; do
            kill -0 "$pid" 2>/dev/null && alive=yes
        done
        [ -z "$alive" ] && break
        sleep 0.1
    done
    for pid in $pids $etcd_pid; do
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'echo; echo "demo-ha: interrupted, stopping everything"; exit 130' INT TERM

say() { printf '\n\033[1m== [%s] %s\033[0m\n' "$(date +%T)" "$*"; }
fail() {
    echo "demo-ha: $*" >&2
    for log in "$dir"/*.log; do
        echo "--- $log" >&2
        tail -n 20 "$log" >&2
    done
    exit 1
}

command -v etcd >/dev/null 2>&1 \
    || fail "etcd is not installed (make demo-ha installs etcd-server: run it as root)"

# A free loopback port: one nothing listens on (ss from iproute2)
used_ports() { ss -Htanl 2>/dev/null | awk '{ n = split($4, a, ":"); print a[n] }'; }
free_base() {
    used=$(used_ports)
    for try in $(seq 1 40); do
        base=$(( 20000 + ( ($$ * 31 + try * 7919) % 30000 ) ))
        clash=""
        for port in $(seq "$base" $((base + 9))); do
            echo "$used" | grep -qx "$port" && clash=yes
        done
        [ -z "$clash" ] && { echo "$base"; return 0; }
    done
    return 1
}
base=$(free_base) || fail "no free loopback ports"

# Keys: one broker key pair that both members share (agents and clients
# then trust one key whichever is the active), an admin client's, one
# per agent.
keys="$dir/keys"
"$BIN/gridbroker" keygen --out "$keys" >/dev/null || fail "gridbroker keygen failed"
"$BIN/gridcli" keygen --out "$keys" --name admin >/dev/null || fail "gridcli keygen failed"
for node in web-01 web-02 db-01; do
    "$BIN/gridagent" keygen --out "$keys" --name "$node" >/dev/null \
        || fail "gridagent keygen failed"
done
export GRID_KEY="$keys/admin.key" GRID_BROKER_KEY="$keys/broker.key"

ETCD="http://127.0.0.1:$base"
etcd --name demo --data-dir "$dir/etcd" \
    --listen-client-urls "$ETCD" --advertise-client-urls "$ETCD" \
    --listen-peer-urls "http://127.0.0.1:$((base + 1))" \
    --initial-advertise-peer-urls "http://127.0.0.1:$((base + 1))" \
    --initial-cluster "demo=http://127.0.0.1:$((base + 1))" \
    >"$dir/etcd.log" 2>&1 &
etcd_pid=$!
ok=""
for i in $(seq 1 100); do
    if ETCDCTL_API=3 etcdctl --endpoints "$ETCD" endpoint health >/dev/null 2>&1; then
        ok=yes
        break
    fi
    kill -0 "$etcd_pid" 2>/dev/null || break
    sleep 0.1
done
[ -n "$ok" ] || fail "etcd did not start"
say "etcd is up at $ETCD: ONE member, for this demo only"
echo "   Production runs three etcd members (the two broker hosts and a small"
echo "   witness): etcd needs a majority, so with one member (or two) losing"
echo "   one host stops all elections. See docs/HA.md."

# Member a: ports base+2..base+5, member b: base+6..base+9
ep() { echo "tcp://127.0.0.1:$(($1))"; }
A_CLIENT=$(ep "$base + 2"); A_AGENTS=$(ep "$base + 3"); A_PUBLISH=$(ep "$base + 4"); A_REPL=$(ep "$base + 5")
B_CLIENT=$(ep "$base + 6"); B_AGENTS=$(ep "$base + 7"); B_PUBLISH=$(ep "$base + 8"); B_REPL=$(ep "$base + 9")

write_config() { # NAME REPLICATE PEER PEER_CLIENT PEER_REPLICATE
    cat >"$dir/$1.yaml" <<EOF
ha:
  cluster: demo
  name: $1
  etcd: $ETCD
  ttl: ${TTL}s
  replicate: $2
  sync_timeout: 1s
  peers:
    - name: $3
      client: $4
      replicate: $5
      key: $keys/broker.key
EOF
}
write_config a "$A_REPL" b "$B_CLIENT" "$B_REPL"
write_config b "$B_REPL" a "$A_CLIENT" "$A_REPL"

a_pid=""
b_pid=""
start_broker() { # NAME CLIENT AGENTS PUBLISH
    "$BIN/gridbroker" --config "$dir/$1.yaml" --data-dir "$dir/broker-$1" \
        --client "$2" --agents "$3" --publish "$4" --heartbeat 1s \
        --key "$keys/broker.key" --client-key "admin:$keys/admin.key" \
        --auto-accept >>"$dir/broker-$1.log" 2>&1 &
    pids="$pids $!"
    eval "$1_pid=$!"
}

# Who answers cluster status as the active, asked through ENDPOINTS
# (a standby's not_leader is followed), and whether standby NAME is in sync
active_of() {
    "$BIN/gridcli" --broker "$1" --request-timeout 1s --output json \
        cluster status 2>/dev/null | jq -r 'select(.role == "active") | .name'
}
standby_in_sync() {
    "$BIN/gridcli" --broker "$1" --request-timeout 1s --output json \
        cluster status 2>/dev/null \
        | jq -e --arg n "$2" '.standbys[]? | select(.name == $n and .sync == true)' \
        >/dev/null 2>&1
}
wait_active() { # ENDPOINTS NAME SECONDS
    for i in $(seq 1 $(($3 * 5))); do
        [ "$(active_of "$1")" = "$2" ] && return 0
        sleep 0.2
    done
    return 1
}

start_broker a "$A_CLIENT" "$A_AGENTS" "$A_PUBLISH"
wait_active "$A_CLIENT" a 20 || fail "broker a did not become the active"
say "gridbroker a is up and won the election: it is the active (lease TTL ${TTL}s; 10s by default)"
start_broker b "$B_CLIENT" "$B_AGENTS" "$B_PUBLISH"
ok=""
for i in $(seq 1 100); do
    standby_in_sync "$A_CLIENT" b && { ok=yes; break; }
    sleep 0.2
done
[ -n "$ok" ] || fail "broker b did not come in sync as a standby"
say "gridbroker b is up: a standby, following a's store pass by pass"

export GRID_BROKER="$A_CLIENT,$B_CLIENT"
say "gridcli --broker $GRID_BROKER cluster status"
"$BIN/gridcli" cluster status || fail "cluster status failed"

start_agent() {
    "$BIN/gridagent" --id "$1" --groups "$2" \
        --broker "$A_AGENTS,$B_AGENTS" --publish "$A_PUBLISH,$B_PUBLISH" \
        --failover 2s --state-dir "$dir/$1" --key "$keys/$1.key" \
        --broker-key "$keys/broker.key" >"$dir/agent-$1.log" 2>&1 &
    pids="$pids $!"
}
start_agent web-01 web
start_agent web-02 web
start_agent db-01 db
online=0
for i in $(seq 1 200); do
    online=$("$BIN/gridcli" node list 2>/dev/null | grep -c ' online ' || true)
    [ "$online" -ge 3 ] && break
    sleep 0.1
done
[ "$online" -ge 3 ] || fail "the agents did not come online"
say "three agents, each with both members' endpoints (--broker A,B --publish A,B)"
"$BIN/gridcli" node list || fail "node list failed"

say "gridcli job run --target all test lines --count 12 --interval 1s (12 s on each node)"
id=$("$BIN/gridcli" --output json job run --target all test lines --count 12 \
        --interval 1s | jq -r '.job // empty') || fail "the submit failed"
[ -n "$id" ] || fail "the submit answered no job id"
echo "job $id submitted"
sleep 4
"$BIN/gridcli" job status "$id" || fail "job status failed"

say "kill -KILL $a_pid: the active (gridbroker a) dies in the middle of the job"
killed_at=$(date +%s.%N)
kill -KILL "$a_pid"
wait "$a_pid" 2>/dev/null

wait_active "$B_CLIENT" b $((TTL * 3 + 10)) || fail "broker b did not take over"
took=$(echo "$(date +%s.%N) $killed_at" | awk '{ printf "%.1f", $1 - $2 }')
say "gridbroker b took over ${took}s after the kill (the lease lapsed, b won the key)"
"$BIN/gridcli" cluster status || fail "cluster status failed"

say "the agents move to b after --failover (2s here, 10s by default); the job goes on there"
status=""
for i in $(seq 1 400); do
    status=$("$BIN/gridcli" --output json job status "$id" 2>/dev/null | jq -r '.status // empty')
    case $status in completed|failed|cancelled|partial_failure) break ;; esac
    sleep 0.1
done
case $status in completed|failed|cancelled|partial_failure) ;; *) fail "the job did not end on b (status: $status)" ;; esac
say "gridcli job status $id (answered by b, the new active)"
"$BIN/gridcli" job status "$id" || fail "job status failed"
[ "$status" = completed ] || fail "the job ended $status"

say "demo finished: the job acknowledged by a completed on b; stopping etcd, b and the agents"
exit 0
