#!/bin/sh
# Mixed releases, through the real programs: the previous release (the
# newest line of RELEASES that is not this tree's own commit) is built
# from its commit, once, into a cache outside the tree, and run against
# this tree's programs as a fleet meets them during an upgrade: old
# agents and a new broker, old gridcli and the old Python module against
# a new broker, an old broker's store and an old agent's spool opened by
# the new programs (and the new store and spool by the old ones: a
# downgrade within one store schema), five agents upgraded one at a time
# while a job runs on them, a new agent and new clients refused clearly
# by an old broker, and an old relay carrying old agents and refusing a
# new one until it is upgraded; a dry run that an old agent cannot tell
# and an old broker never resumes. Without git history (a tarball) or without the release's
# commit, it says so and checks nothing.
#
# usage: sh test/upgrade.sh SRC_DIR BUILD_DIR
# GRID_RELEASE_CACHE: where built releases are kept
#                     [${XDG_CACHE_HOME:-~/.cache}/grid/releases]
# Prints cmocka-style lines, so test/run_tests.sh counts each check.
set -u
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
new="$build/bin"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/grid-upgrade-XXXXXX")
pids=""
passed=0
failed=0

cleanup() {
    for pid in $pids; do
        kill -CONT "$pid" 2>/dev/null
        kill -KILL "$pid" 2>/dev/null
    done
    for pid in $pids; do
        wait "$pid" 2>/dev/null
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

finish() {
    echo "[==========] $((passed + failed)) test(s) run."
    echo "[  PASSED  ] $passed test(s)."
    [ "$failed" = 0 ] || echo "[  FAILED  ] $failed test(s), listed above."
    [ "$failed" = 0 ]
    exit $?
}

# The previous release: the newest line of RELEASES ("VERSION COMMIT
# PROTOCOL", # comments) whose commit is not HEAD.
head=$(git -C "$src" rev-parse HEAD 2>/dev/null || echo none)
release=""
commit=""
while read -r r_version r_commit r_protocol; do
    case "$r_version" in ''|'#'*) continue ;; esac
    case "$head" in "$r_commit"*) continue ;; esac
    release=$r_version
    commit=$r_commit
done <"$src/RELEASES"
if [ -z "$release" ]; then
    echo "upgrade: RELEASES names no release before this tree: nothing to mix"
    finish
fi
if ! git -C "$src" cat-file -e "$commit^{commit}" 2>/dev/null; then
    echo "upgrade: skipped: release $release's commit $commit is not in this"
    echo "tree's git history (a tarball, or a shallow clone): the mixed-release"
    echo "checks need it (git fetch --unshallow)"
    finish
fi

# The release, built once per commit into the cache
cache_root=${GRID_RELEASE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/grid/releases}
old_dir="$cache_root/$release-$commit"
old="$old_dir/bin"
if [ ! -x "$old/gridagent" ] || [ ! -x "$old/gridbroker" ] \
   || [ ! -x "$old/gridrelay" ]; then
    echo "upgrade: building release $release ($commit) into $old_dir"
    mkdir -p "$cache_root" || finish
    work="$tmp/release-src"
    mkdir -p "$work"
    if ! git -C "$src" archive "$commit" | tar -x -C "$work"; then
        echo "upgrade: cannot unpack release $release from git" >&2
        failed=1
        finish
    fi
    if ! (cd "$work" && make -j2 BUILD=build GRID_COMMIT="$(echo "$commit" | cut -c1-12)" \
            CFLAGS="-O1 -g0" build/bin/gridbroker build/bin/gridagent \
            build/bin/gridcli build/bin/gridrelay) \
            >"$tmp/release-build.log" 2>&1; then
        tail -n 30 "$tmp/release-build.log" >&2
        echo "upgrade: release $release does not build" >&2
        failed=1
        finish
    fi
    # Into place whole (another run may have built it meanwhile)
    fresh="$old_dir.new.$$"
    mkdir -p "$fresh"
    cp -r "$work/build/bin" "$fresh/bin"
    cp -r "$work/python" "$fresh/python"
    [ -x "$old/gridrelay" ] || rm -rf "$old_dir"
    mv -T "$fresh" "$old_dir" 2>/dev/null || rm -rf "$fresh"
    rm -rf "$work"
fi
echo "upgrade: release $release ($commit) against this tree ($head)"

check() {
    name=$1
    shift
    # GRID_UPGRADE_ONLY=NAME runs only that check
    case "${GRID_UPGRADE_ONLY:-$name}" in "$name") ;; *) return 0 ;; esac
    echo "[ RUN      ] $name"
    if "$@" >"$tmp/log" 2>&1; then
        passed=$((passed + 1))
        echo "[       OK ] $name"
    else
        failed=$((failed + 1))
        sed 's/^/    /' "$tmp/log" | tail -n 40
        for log in "$run"/*.log; do
            [ -f "$log" ] || continue
            echo "    --- $log"
            tail -n 15 "$log" | sed 's/^/    /'
        done
        echo "[  FAILED  ] $name"
    fi
    stop_all
}

# A run's processes (plaintext, ipc:// endpoints in $tmp/run-N, a new
# directory for each check)
runs=1
run="$tmp/run-$runs"
broker_pid=""

# wait_gone PID TENTHS: until PID has exited, at most TENTHS tenths of a
# second, then SIGKILL. Agents started in $(...) are not this shell's
# children, so it waits by pid.
wait_gone() {
    for i in $(seq 1 "$2"); do
        kill -0 "$1" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$1" 2>/dev/null
    wait "$1" 2>/dev/null
}

stop_all() {
    for pid in $pids; do
        kill -CONT "$pid" 2>/dev/null
        kill -TERM "$pid" 2>/dev/null
    done
    for pid in $pids; do
        wait_gone "$pid" 100
    done
    pids=""
    broker_pid=""
    rm -rf "$run"
    runs=$((runs + 1))
    run="$tmp/run-$runs"
}

# start_broker BIN: a broker of BIN on $run's endpoints and data dir
start_broker() {
    mkdir -p "$run"
    "$1/gridbroker" --config none --insecure --data-dir "$run/broker" \
        --client "ipc://$run/client" --agents "ipc://$run/agents" \
        --publish "ipc://$run/publish" --heartbeat 1s \
        >>"$run/broker.log" 2>&1 &
    broker_pid=$!
    pids="$pids $broker_pid"
    for i in $(seq 1 100); do
        cli "$1" status >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "the broker did not start"
    return 1
}

# start_agent BIN ID [PREFIX]: an agent of BIN named ID (state in
# $run/ID) on the endpoints ipc://$run/PREFIX{agents,publish} (the
# broker's by default); prints its pid
start_agent() {
    "$1/gridagent" --config none --insecure --id "$2" --groups up \
        --broker "ipc://$run/${3:-}agents" \
        --publish "ipc://$run/${3:-}publish" \
        --state-dir "$run/$2" >>"$run/agent-$2.log" 2>&1 &
    echo $!
}

# start_relay BIN: a relay of BIN named r1 between the broker and the
# endpoints ipc://$run/r1-{agents,publish}; prints its pid
start_relay() {
    "$1/gridrelay" --config none --insecure --name r1 \
        --agents "ipc://$run/r1-agents" --publish "ipc://$run/r1-publish" \
        --upstream "ipc://$run/agents" \
        --upstream-publish "ipc://$run/publish" --heartbeat 1s \
        >>"$run/relay.log" 2>&1 &
    echo $!
}

# count_in FILE PATTERN: lines of FILE that hold PATTERN (0 if none)
count_in() {
    grep -c "$2" "$1" 2>/dev/null || true
}

# The job id in gridcli's JSON answer on stdin (a submit's "job", a
# record's "id")
job_id() {
    /usr/bin/python3 -c 'import json, sys
answer = json.load(sys.stdin)
print(answer.get("job") or answer.get("id") or "")'
}

cli() {
    bin=$1
    shift
    "$bin/gridcli" --config none --insecure --broker "ipc://$run/client" \
        --request-timeout 5s "$@"
}

# wait_online N [BIN]: until N nodes read online to BIN's gridcli [$new]
wait_online() {
    for i in $(seq 1 150); do
        count=$(cli "${2:-$new}" node list 2>/dev/null | grep -c ' online ')
        [ "$count" -ge "$1" ] && return 0
        sleep 0.1
    done
    cli "${2:-$new}" node list
    echo "not $1 nodes online"
    return 1
}

old_agents_run_jobs_on_a_new_broker() {
    start_broker "$new" || return 1
    pids="$pids $(start_agent "$old" old-01) $(start_agent "$old" old-02)"
    wait_online 2 || return 1
    cli "$new" job run --target group:up --wait test echo --msg mixed \
        >"$run/out" 2>&1 || { cat "$run/out"; return 1; }
    cat "$run/out"
    [ "$(grep -c 'success' "$run/out")" -ge 2 ] || return 1
    grep -q 'mixed' "$run/out"
}

old_clients_talk_to_a_new_broker() {
    start_broker "$new" || return 1
    pids="$pids $(start_agent "$new" new-01)"
    wait_online 1 || return 1
    cli "$old" status || return 1
    cli "$old" job run --target node:new-01 --wait test echo --msg old-cli \
        >"$run/out" 2>&1 || { cat "$run/out"; return 1; }
    grep -q 'old-cli' "$run/out" || { cat "$run/out"; return 1; }
    cli "$old" --output json node list | grep -q '"new-01"' || return 1
    cli "$old" job list | grep -q completed || return 1
    cli "$old" queue stats >/dev/null || return 1
    # The old Python module, from the release's tree
    PYTHONPATH="$old_dir/python" PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 - \
        "ipc://$run/client" <<'EOF'
import sys
import grid
try:
    client = grid.Client(sys.argv[1], insecure=True)
except TypeError:
    client = grid.Client(sys.argv[1])
record = client.run("node:new-01", "test", "echo", {"msg": "old-py"},
                    wait=True)
statuses = [cell["status"] for _, _, cell in client.cells(record)]
print(record["status"], statuses)
assert statuses == ["success"], statuses
EOF
}

# A dry run (job run --check --diff) on a new broker: the new agent
# answers, the old one, which runs no checks, is never sent the command
# and reads "cannot tell" (exit 1)
an_old_agent_cannot_tell_in_a_dry_run() {
    start_broker "$new" || return 1
    pids="$pids $(start_agent "$old" old-01) $(start_agent "$new" new-01)"
    wait_online 2 || return 1
    cli "$new" job run --check --diff --target group:up test echo \
        --msg dry >"$run/out" 2>&1
    rc=$?
    cat "$run/out"
    [ "$rc" = 1 ] || { echo "exit $rc, not 1"; return 1; }
    grep -q 'new-01 .*no change' "$run/out" || return 1
    grep -q 'old-01 .*cannot tell.*runs no checks' "$run/out" || return 1
    [ "$(count_in "$run/agent-old-01.log" dry)" = 0 ]
}

# A dry run still running when the broker is downgraded: the old broker
# shows it but never restores it, so never runs its steps for real
a_dry_run_is_never_resumed_by_the_old_broker() {
    start_broker "$new" || return 1
    pids="$pids $(start_agent "$new" dr-01)"
    wait_online 1 || return 1
    # A step that runs a while (a query runs as itself in a dry run)
    cli "$new" job run --check --diff --target node:dr-01 test sleep \
        --seconds 20 >/dev/null 2>&1 &
    pids="$pids $!"
    id=""
    for i in $(seq 1 50); do
        id=$(cli "$new" --output json job list --status running \
            2>/dev/null | /usr/bin/python3 -c '
import json, sys
jobs = json.load(sys.stdin)["jobs"]
print(jobs[0]["id"] if jobs else "")')
        [ -n "$id" ] && break
        sleep 0.1
    done
    [ -n "$id" ] || { echo "no running dry run"; return 1; }
    kill -TERM "$broker_pid"
    wait "$broker_pid" 2>/dev/null
    start_broker "$old" || return 1
    cli "$old" job status "$id" >"$run/out" 2>&1
    cat "$run/out"
    grep -q "$id" "$run/out" || return 1
    grep -q "job $id could not be restored" "$run/broker.log"
}

# store_crosses FROM TO NODE MSG: a broker and an agent of release FROM
# run a job echoing MSG on NODE, then a broker of release TO opens the
# same store and shows that job, succeeded, to its own gridcli.
store_crosses() {
    start_broker "$1" || return 1
    pids="$pids $(start_agent "$1" "$3")"
    wait_online 1 "$1" || return 1
    id=$(cli "$1" --output json job run --target "node:$3" --wait \
        test echo --msg "$4" | job_id)
    [ -n "$id" ] || { echo "no job id"; return 1; }
    kill -TERM "$broker_pid"
    wait "$broker_pid" 2>/dev/null
    start_broker "$2" || return 1
    cli "$2" job status "$id" >"$run/out" 2>&1 || { cat "$run/out"; return 1; }
    cat "$run/out"
    grep -q "$4" "$run/out" && grep -q 'success' "$run/out"
}

an_old_store_opens_in_a_new_broker() {
    store_crosses "$old" "$new" st-01 kept || return 1
    # and the new broker still runs jobs on the old agent
    wait_online 1 || return 1
    cli "$new" job run --target node:st-01 --wait test echo --msg again \
        | grep -q again
}

# A downgrade within one store schema: the store the new broker wrote
# opens in the old one, its jobs readable.
a_new_store_opens_in_the_old_broker() {
    store_crosses "$new" "$old" dn-01 back
}

# spool_crosses FROM TO: a result an agent of release FROM spooled while
# its broker could not take it is delivered by an agent of release TO
# started on the same state dir.
spool_crosses() {
    start_broker "$new" || return 1
    agent=$(start_agent "$1" sp-01)
    pids="$pids $agent"
    wait_online 1 || return 1
    id=$(cli "$new" --output json job run --target node:sp-01 \
        test sleep --seconds 2 | job_id)
    [ -n "$id" ] || { echo "no job id"; return 1; }
    for i in $(seq 1 50); do
        cli "$new" job status "$id" | grep -q running && break
        sleep 0.1
    done
    kill -STOP "$broker_pid"
    sleep 3
    # The task ended with no broker to hear it: its result is spooled
    kill -TERM "$agent"
    wait_gone "$agent" 100
    kill -CONT "$broker_pid"
    pids="$pids $(start_agent "$2" sp-01)"
    for i in $(seq 1 200); do
        cli "$new" job status "$id" >"$run/out" 2>&1
        grep -q '^status *\(completed\|failed\|partial_failure\)' \
            "$run/out" && break
        sleep 0.1
    done
    cat "$run/out"
    grep -q ' success ' "$run/out" || return 1
    # ... and it came from the spool, not from a run of its own. The
    # broker may read the result the first agent sent before it was
    # stopped (it waited in the socket) and end the job before the
    # second agent has said what its spool holds: wait for that line
    for i in $(seq 1 100); do
        grep -q '1 result(s) to deliver' "$run/agent-sp-01.log" && return 0
        sleep 0.1
    done
    echo "the second agent did not deliver from its spool:"
    tail -n 20 "$run/agent-sp-01.log"
    return 1
}

an_old_spool_is_delivered_by_a_new_agent() {
    spool_crosses "$old" "$new"
}

# A downgraded agent delivers what the new one spooled.
a_new_spool_is_delivered_by_an_old_agent() {
    spool_crosses "$new" "$old"
}

# Five old agents replaced one at a time by new ones (each stopped the
# way a package upgrade stops it) while a job of several steps runs on
# all five: every cell ends success.
five_agents_upgrade_one_at_a_time_under_a_job() {
    start_broker "$new" || return 1
    agents=""
    for n in 1 2 3 4 5; do
        pid=$(start_agent "$old" ru-0$n)
        agents="$agents $pid"
        pids="$pids $pid"
    done
    wait_online 5 || return 1
    cat >"$run/job.yaml" <<'EOF'
target: { scope: group, value: up }
tasks:
  - { backend: test, action: sleep, params: { seconds: 1 } }
  - { backend: test, action: sleep, params: { seconds: 1 } }
  - { backend: test, action: sleep, params: { seconds: 1 } }
  - { backend: test, action: sleep, params: { seconds: 1 } }
  - { backend: test, action: echo, params: { msg: done } }
EOF
    id=$(cli "$new" --output json job run -f "$run/job.yaml" \
        | job_id)
    [ -n "$id" ] || { echo "no job id"; return 1; }
    n=0
    for pid in $agents; do
        n=$((n + 1))
        kill -TERM "$pid"
        wait_gone "$pid" 150
        pids="$pids $(start_agent "$new" ru-0$n)"
    done
    for i in $(seq 1 600); do
        cli "$new" job status "$id" >"$run/out" 2>&1
        grep -q '^status *\(completed\|failed\|partial_failure\|cancelled\)' \
            "$run/out" && break
        sleep 0.1
    done
    cat "$run/out"
    [ "$(grep -c ' success ' "$run/out")" = 25 ]
}

# A new agent and an old broker: refused once, clearly, on both sides.
# The node ran on the old release first, so the old broker knows it and
# shows it incompatible; the agent asks again once a minute, not every
# second, and never reads online.
a_new_agent_is_refused_clearly_by_an_old_broker() {
    start_broker "$old" || return 1
    agent=$(start_agent "$old" nb-01)
    pids="$pids $agent"
    for i in $(seq 1 100); do
        cli "$old" node list 2>/dev/null | grep -q ' online ' && break
        sleep 0.1
    done
    kill -TERM "$agent"
    wait_gone "$agent" 100
    pids="$pids $(start_agent "$new" nb-01)"
    for i in $(seq 1 100); do
        cli "$old" node list >"$run/out" 2>&1
        grep -q 'incompatible' "$run/out" && break
        sleep 0.1
    done
    cat "$run/out"
    grep -q 'nb-01 .*incompatible' "$run/out" || return 1
    # The old broker says why at warn level, naming the node
    grep 'nb-01 is incompatible' "$run/broker.log" || return 1
    grep -q 'unsupported version 2' "$run/broker.log" || return 1
    # The agent says what to do, once, and then waits
    sleep 3
    grep "does not speak this agent's protocol" "$run/agent-nb-01.log" \
        || return 1
    [ "$(count_in "$run/agent-nb-01.log" "does not speak")" = 1 ] || return 1
    grep -q 'upgrade the broker first' "$run/agent-nb-01.log" \
        || return 1
    # one hello, not one a second: the old broker logged one refusal
    [ "$(count_in "$run/broker.log" 'nb-01 is incompatible')" = 1 ] \
        || return 1
    cli "$old" node list | grep -q 'nb-01 .*online' && return 1
    cli "$old" --output json node info nb-01 | grep -q 'upgrade'
}

# A new gridcli and the new Python module against an old broker: one
# clear error that says what to do.
new_clients_are_refused_clearly_by_an_old_broker() {
    start_broker "$old" || return 1
    cli "$new" status >"$run/out" 2>&1 && { cat "$run/out"; return 1; }
    cat "$run/out"
    grep -q 'unsupported version 2' "$run/out" || return 1
    grep -q 'upgrade gridbroker' "$run/out" || return 1
    PYTHONPATH="$src/python" PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 - \
        "ipc://$run/client" <<'EOF'
import sys
import grid
client = grid.Client(sys.argv[1], insecure=True)
try:
    client.status()
except grid.GridError as error:
    print(error)
    assert error.code == "unsupported_version", error.code
    assert "upgrade gridbroker" in str(error), str(error)
else:
    raise SystemExit("the old broker answered a new client")
EOF
}

# Relays: an old relay carries old agents to a new broker and runs their
# jobs; a new agent behind it is refused clearly (the relay cannot read
# its hello); once the relay is upgraded, the new agent runs jobs
# through it.
relays_upgrade_before_their_agents() {
    start_broker "$new" || return 1
    relay=$(start_relay "$old")
    pids="$pids $relay $(start_agent "$old" rl-01 r1-)"
    wait_online 1 || return 1
    cli "$new" job run --target node:rl-01 --wait test echo --msg via-old \
        | grep -q via-old || return 1
    agent=$(start_agent "$new" rl-02 r1-)
    pids="$pids $agent"
    for i in $(seq 1 100); do
        grep -q "does not speak" "$run/agent-rl-02.log" && break
        sleep 0.1
    done
    grep "through relay r1, which speaks 1" "$run/agent-rl-02.log" \
        || return 1
    cli "$new" node list | grep -q 'rl-02 .*online' && return 1
    # The relay upgraded in place; rl-02 would ask again within its
    # minute of back-off, so it is restarted as a package upgrade would
    kill -TERM "$relay"
    wait_gone "$relay" 100
    pids="$pids $(start_relay "$new")"
    kill -TERM "$agent"
    wait_gone "$agent" 100
    pids="$pids $(start_agent "$new" rl-02 r1-)"
    wait_online 2 || return 1
    cli "$new" --output json relay list >"$run/out" || return 1
    cat "$run/out"
    grep -q '"protocol": 2' "$run/out" || return 1
    cli "$new" job run --target group:up --wait test echo --msg via-new \
        >"$run/out" 2>&1 || { cat "$run/out"; return 1; }
    cat "$run/out"
    [ "$(grep -c 'success' "$run/out")" -ge 2 ] || return 1
    cli "$new" --output json node info rl-02 | grep -q '"protocol": 2'
}

# A downgrade across a store schema: a store of the new broker, stamped
# with schema 2 and a later release (as that release would leave it), is
# refused by the old broker, which names "newer" and that release and
# leaves the store's file as it was: refused, not corrupted.
a_newer_schema_store_is_refused_by_the_old_broker() {
    stamp="$build/test/tools/storestamp"
    [ -x "$stamp" ] || { echo "no $stamp (make test-build)"; return 1; }
    start_broker "$new" || return 1
    kill -TERM "$broker_pid"
    wait "$broker_pid" 2>/dev/null
    "$stamp" "$run/broker" 2 9.0.0 || return 1
    before=$(cksum <"$run/broker/data.mdb")
    timeout 30 "$old/gridbroker" --config none --insecure \
        --data-dir "$run/broker" --client "ipc://$run/client" \
        --agents "ipc://$run/agents" --publish "ipc://$run/publish" \
        >"$run/old.log" 2>&1
    code=$?
    cat "$run/old.log"
    [ "$code" != 0 ] && [ "$code" != 124 ] \
        || { echo "the old broker exited $code"; return 1; }
    grep -q 'schema version 2 is newer' "$run/old.log" || return 1
    grep -q 'written by release 9.0.0' "$run/old.log" || return 1
    [ "$(cksum <"$run/broker/data.mdb")" = "$before" ] \
        || { echo "the old broker changed data.mdb"; return 1; }
}

# A broker cluster's standby redirects to the active only the agents that
# name the redirect feature: an old agent whose list starts with the
# standby is sent nothing (no error it could not read) and reaches the
# active by its failover, as before; a new one beside it is redirected.
an_old_agent_is_not_redirected_by_a_standby() {
    if ! command -v etcd >/dev/null 2>&1; then
        echo "etcd is not installed (make test-deps): nothing to check"
        return 0
    fi
    mkdir -p "$run"
    set -- $(/usr/bin/python3 -c 'import socket
held = [socket.socket() for _ in range(2)]
for s in held:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in held))')
    etcd_url="http://127.0.0.1:$1"
    etcd --name up --data-dir "$run/etcd" --listen-client-urls "$etcd_url" \
        --advertise-client-urls "$etcd_url" \
        --listen-peer-urls "http://127.0.0.1:$2" \
        --initial-advertise-peer-urls "http://127.0.0.1:$2" \
        --initial-cluster "up=http://127.0.0.1:$2" >>"$run/etcd.log" 2>&1 &
    pids="$pids $!"
    for member in a b; do
        other=b
        [ "$member" = b ] && other=a
        cat >"$run/$member.yaml" <<EOF
ha:
  cluster: up
  name: $member
  etcd: $etcd_url
  ttl: 2s
  replicate: ipc://$run/$member-repl
  peers:
    - name: $other
      client: ipc://$run/$other-client
      replicate: ipc://$run/$other-repl
      agents: ipc://$run/$other-agents
EOF
    done
    for member in a b; do
        "$new/gridbroker" --config "$run/$member.yaml" --insecure \
            --data-dir "$run/$member" --client "ipc://$run/$member-client" \
            --agents "ipc://$run/$member-agents" \
            --publish "ipc://$run/$member-publish" --heartbeat 1s \
            >>"$run/broker-$member.log" 2>&1 &
        pids="$pids $!"
        # Every member starts a standby: a is the active before b starts
        says="is a standby of cluster"
        [ "$member" = a ] && says="is the active of cluster"
        for i in $(seq 1 200); do
            grep -q "$says" "$run/broker-$member.log" 2>/dev/null && break
            sleep 0.1
        done
    done
    grep -q "is the active of cluster" "$run/broker-a.log" \
        || { echo "a did not become the active"; return 1; }
    grep -q "is a standby of cluster" "$run/broker-b.log" \
        || { echo "b did not become a standby"; return 1; }
    for bin in old new; do
        eval "dir=\$$bin"
        "$dir/gridagent" --config none --insecure --id "$bin-01" --groups up \
            --broker "ipc://$run/b-agents,ipc://$run/a-agents" \
            --publish "ipc://$run/b-publish,ipc://$run/a-publish" \
            --failover 2s --state-dir "$run/$bin-01" \
            >>"$run/agent-$bin-01.log" 2>&1 &
        pids="$pids $!"
    done
    online=0
    for i in $(seq 1 300); do
        online=$("$new/gridcli" --config none --insecure \
            --broker "ipc://$run/a-client" --request-timeout 5s node list \
            2>/dev/null | grep -c ' online ')
        [ "$online" -ge 2 ] && break
        sleep 0.1
    done
    [ "$online" -ge 2 ] || { echo "not 2 nodes online on the active"; return 1; }
    # The old agent heard nothing from the standby: no refusal, nothing
    # it dropped as malformed; it moved by its failover
    if grep -q "not_leader\|malformed" "$run/agent-old-01.log"; then
        echo "the old agent was sent what it does not know:"
        cat "$run/agent-old-01.log"
        return 1
    fi
    grep -q "is a standby: moving to the active" "$run/agent-new-01.log" \
        || { echo "the new agent was not redirected"; return 1; }
}

check old_agents_run_jobs_on_a_new_broker old_agents_run_jobs_on_a_new_broker
check old_clients_talk_to_a_new_broker old_clients_talk_to_a_new_broker
check an_old_store_opens_in_a_new_broker an_old_store_opens_in_a_new_broker
check an_old_agent_cannot_tell_in_a_dry_run \
    an_old_agent_cannot_tell_in_a_dry_run
check a_dry_run_is_never_resumed_by_the_old_broker \
    a_dry_run_is_never_resumed_by_the_old_broker
check a_new_store_opens_in_the_old_broker a_new_store_opens_in_the_old_broker
check an_old_spool_is_delivered_by_a_new_agent an_old_spool_is_delivered_by_a_new_agent
check a_new_spool_is_delivered_by_an_old_agent a_new_spool_is_delivered_by_an_old_agent
check five_agents_upgrade_one_at_a_time_under_a_job \
    five_agents_upgrade_one_at_a_time_under_a_job
check a_new_agent_is_refused_clearly_by_an_old_broker \
    a_new_agent_is_refused_clearly_by_an_old_broker
check new_clients_are_refused_clearly_by_an_old_broker \
    new_clients_are_refused_clearly_by_an_old_broker
check relays_upgrade_before_their_agents relays_upgrade_before_their_agents
check a_newer_schema_store_is_refused_by_the_old_broker \
    a_newer_schema_store_is_refused_by_the_old_broker
check an_old_agent_is_not_redirected_by_a_standby \
    an_old_agent_is_not_redirected_by_a_standby
finish
