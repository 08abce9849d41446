#!/usr/bin/env python3
"""make soak-ha: a broker cluster under faults, checked like a set.

On loopback, in a temporary directory: one etcd, two gridbrokers (a and b)
in a cluster, AGENTS gridagents that know both. For SOAK_SECONDS, client
threads submit a mix of jobs (one node, every node, several steps) with
gridcli against both members' endpoints, while a nemesis SIGKILLs the
active (and starts it again) or SIGSTOPs it past its lease (then
SIGCONT), every 30 to 90 s, and kills and restarts agents. Every submit's
outcome is recorded: ok (with the job's id), error (the broker refused it)
or indeterminate (no answer: it may or may not exist).

At the end, faults stopped and everything running again, every
acknowledged job must exist on the active, have ended, hold a final cell
for each (step, node) it reached, and no (step, node) may have ended
twice (its events). Indeterminate submits are counted apart: they are
allowed to exist or not.

Figures: submits, ok, errors, indeterminate, lost, not ended, duplicated,
failovers and failover times (the fault until another member answers as
the active). Exit 0 when nothing was lost or duplicated.

Environment: BUILD (build), SOAK_SECONDS (600), SOAK_TTL (3, seconds),
SOAK_CLIENTS (3), SOAK_AGENTS (4), SOAK_FAULT_MIN/SOAK_FAULT_MAX (30/90,
seconds between faults of the active), SOAK_KEEP=1 keeps the directory.
Every process is stopped by its pid at the end, on an error or on Ctrl-C.
"""

import concurrent.futures
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

BUILD = os.environ.get("BUILD", "build")
BIN = os.path.abspath(os.path.join(BUILD, "bin"))
SECONDS = float(os.environ.get("SOAK_SECONDS", "600"))
TTL = int(os.environ.get("SOAK_TTL", "3"))
CLIENTS = int(os.environ.get("SOAK_CLIENTS", "3"))
AGENTS = int(os.environ.get("SOAK_AGENTS", "4"))
FAULT_MIN = float(os.environ.get("SOAK_FAULT_MIN", "30"))
FAULT_MAX = float(os.environ.get("SOAK_FAULT_MAX", "90"))
KEEP = os.environ.get("SOAK_KEEP") == "1"

CELL_ENDS = ("succeeded", "failed", "timeout", "lost")
JOB_ENDS = ("completed", "failed", "partial_failure", "cancelled")

lock = threading.Lock()
stop = threading.Event()


def say(text):
    print("[%s] %s" % (time.strftime("%H:%M:%S"), text), flush=True)


def free_ports(count):
    """COUNT distinct free loopback ports (bound once, then released)."""
    socks, ports = [], []
    for _ in range(count):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        socks.append(sock)
        ports.append(sock.getsockname()[1])
    for sock in socks:
        sock.close()
    return ports


class Fleet:
    """Every process of the soak, by pid."""

    def __init__(self, root):
        self.root = root
        self.procs = {}           # name -> Popen
        self.stopped = set()      # names under SIGSTOP
        ports = free_ports(10)
        self.etcd = "http://127.0.0.1:%d" % ports[0]
        self.etcd_peer = "http://127.0.0.1:%d" % ports[1]
        self.members = {}
        for index, name in enumerate(("a", "b")):
            base = 2 + 4 * index
            self.members[name] = {
                "client": "tcp://127.0.0.1:%d" % ports[base],
                "agents": "tcp://127.0.0.1:%d" % ports[base + 1],
                "publish": "tcp://127.0.0.1:%d" % ports[base + 2],
                "replicate": "tcp://127.0.0.1:%d" % ports[base + 3],
            }
        self.endpoints = ",".join(m["client"] for m in self.members.values())

    def spawn(self, name, argv):
        log = open(os.path.join(self.root, name + ".log"), "ab")
        proc = subprocess.Popen(argv, stdout=log, stderr=log,
                                stdin=subprocess.DEVNULL)
        log.close()
        with lock:
            self.procs[name] = proc
        return proc

    def alive(self, name):
        proc = self.procs.get(name)
        return proc is not None and proc.poll() is None

    def signal(self, name, signo):
        proc = self.procs.get(name)
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signo)
        if signo == signal.SIGSTOP:
            self.stopped.add(name)
        elif signo == signal.SIGCONT:
            self.stopped.discard(name)
        elif signo == signal.SIGKILL:
            proc.wait()

    def start_etcd(self):
        self.spawn("etcd", [
            "etcd", "--name", "soak", "--data-dir",
            os.path.join(self.root, "etcd"),
            "--listen-client-urls", self.etcd,
            "--advertise-client-urls", self.etcd,
            "--listen-peer-urls", self.etcd_peer,
            "--initial-advertise-peer-urls", self.etcd_peer,
            "--initial-cluster", "soak=" + self.etcd_peer])
        deadline = time.time() + 20
        port = int(self.etcd.rsplit(":", 1)[1])
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("etcd did not start")

    def write_config(self, name):
        other = "b" if name == "a" else "a"
        me, peer = self.members[name], self.members[other]
        path = os.path.join(self.root, name + ".yaml")
        with open(path, "w") as out:
            out.write("ha:\n  cluster: soak\n  name: %s\n  etcd: %s\n"
                      "  ttl: %ds\n  replicate: %s\n  sync_timeout: 1s\n"
                      "  peers:\n    - name: %s\n      client: %s\n"
                      "      replicate: %s\n"
                      % (name, self.etcd, TTL, me["replicate"], other,
                         peer["client"], peer["replicate"]))
        return path

    def start_broker(self, name):
        m = self.members[name]
        self.spawn("broker-" + name, [
            os.path.join(BIN, "gridbroker"), "--config",
            self.write_config(name), "--data-dir",
            os.path.join(self.root, "data-" + name), "--client", m["client"],
            "--agents", m["agents"], "--publish", m["publish"],
            "--heartbeat", "1s", "--insecure"])

    def start_agent(self, node):
        self.spawn(node, [
            os.path.join(BIN, "gridagent"), "--id", node, "--groups", "soak",
            "--broker", ",".join(m["agents"] for m in self.members.values()),
            "--publish", ",".join(m["publish"]
                                  for m in self.members.values()),
            "--failover", "2s", "--concurrency", "4",
            "--state-dir", os.path.join(self.root, node),
            "--insecure"])

    def stop_all(self):
        for name, proc in list(self.procs.items()):
            if proc.poll() is None:
                try:
                    proc.send_signal(signal.SIGCONT)
                    proc.terminate()
                except OSError:
                    pass
        deadline = time.time() + 5
        for proc in self.procs.values():
            try:
                proc.wait(max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def cli(fleet, args, timeout="10s", broker=None):
    """gridcli --output json ARGS: (exit code, parsed JSON or None, stderr)."""
    argv = [os.path.join(BIN, "gridcli"), "--broker",
            broker or fleet.endpoints, "--insecure", "--request-timeout",
            timeout, "--output", "json"] + args
    try:
        done = subprocess.run(argv, capture_output=True, timeout=120)
    except subprocess.TimeoutExpired:
        return -1, None, "gridcli did not exit"
    data = None
    if done.stdout.strip():
        try:
            data = json.loads(done.stdout)
        except ValueError:
            data = None
    return done.returncode, data, done.stderr.decode(errors="replace")


def active_name(fleet, broker=None):
    code, data, _ = cli(fleet, ["cluster", "status"], "2s", broker)
    if code == 0 and data and data.get("role") == "active":
        return data.get("name")
    return None


def wait_active(fleet, not_name=None, seconds=60):
    deadline = time.time() + seconds
    while time.time() < deadline:
        name = active_name(fleet)
        if name and name != not_name:
            return name
        time.sleep(0.2)
    return None


# ---------------------------------------------------------------- clients

SPECS = []


def job_file(root, kind, nodes, serial):
    node = random.choice(nodes)
    if kind == "one":
        target = "{scope: node, value: %s}" % node
        tasks = "  - {backend: test, action: echo, params: {msg: s%d}}\n" \
            % serial
    elif kind == "all":
        target = "{scope: all}"
        tasks = "  - {backend: test, action: sleep, params: {seconds: 1}}\n"
    else:
        target = "{scope: group, value: soak}"
        tasks = ("  - {backend: test, action: echo, params: {msg: one}}\n"
                 "  - {backend: test, action: sleep, params: {seconds: 1}}\n"
                 "  - {backend: test, action: echo, params: {msg: three}}\n")
    path = os.path.join(root, "job-%d.yaml" % serial)
    with open(path, "w") as out:
        out.write("target: %s\ntasks:\n%s" % (target, tasks))
    return path


def client(fleet, nodes, number, outcomes):
    serial = 0
    rng = random.Random(number)
    while not stop.is_set():
        serial += 1
        kind = rng.choice(("one", "one", "all", "steps"))
        path = job_file(fleet.root, kind, nodes, number * 1000000 + serial)
        code, data, err = cli(fleet, ["job", "run", "-f", path], "10s")
        os.unlink(path)
        if code == 0 and data and data.get("job"):
            outcome = ("ok", data["job"], kind)
        elif code == 4:      # an error reply: refused, nothing made
            outcome = ("error", err.strip()[:200], kind)
        else:                # no answer (3), or anything else: unknown
            outcome = ("indeterminate", err.strip()[:200], kind)
        with lock:
            outcomes.append(outcome)
        # The fleet keeps up: a client waits while jobs pile up
        while not stop.is_set() and backlog(fleet) > 40:
            stop.wait(1)
        time.sleep(rng.uniform(0.05, 0.3))


def backlog(fleet):
    """Jobs pending or running on the active (0 when it cannot tell)."""
    code, data, _ = cli(fleet, ["job", "list", "--limit", "1"], "3s")
    if code != 0 or not data:
        return 0
    by = data.get("by_status") or {}
    return by.get("pending", 0) + by.get("running", 0)


# ---------------------------------------------------------------- nemesis

def nemesis(fleet, nodes, failovers, faults):
    rng = random.Random(7)
    next_agent = time.time() + rng.uniform(10, 25)
    next_active = time.time() + rng.uniform(FAULT_MIN, FAULT_MAX)
    while not stop.is_set():
        now = time.time()
        if now >= next_agent:
            node = rng.choice(nodes)
            say("nemesis: SIGKILL agent %s, started again in 3 s" % node)
            fleet.signal(node, signal.SIGKILL)
            faults.append(("agent-kill", node))
            stop.wait(3)
            fleet.start_agent(node)
            next_agent = time.time() + rng.uniform(10, 25)
        elif now >= next_active:
            active = active_name(fleet)
            if not active:
                stop.wait(1)
                continue
            # Turn about: SIGKILL, then SIGSTOP past the lease, ...
            how = ("kill", "stop")[sum(1 for f in faults
                                       if f[0].startswith("active")) % 2]
            began = time.time()
            if how == "kill":
                say("nemesis: SIGKILL the active %s" % active)
                fleet.signal("broker-" + active, signal.SIGKILL)
            else:
                say("nemesis: SIGSTOP the active %s for %d s (past its "
                    "lease)" % (active, TTL + 3))
                fleet.signal("broker-" + active, signal.SIGSTOP)
            faults.append(("active-" + how, active))
            successor = wait_active(fleet, not_name=active, seconds=60)
            took = time.time() - began
            if successor:
                failovers.append(took)
                say("nemesis: %s is the active %.1f s after the fault"
                    % (successor, took))
            else:
                say("nemesis: no new active within 60 s")
            if how == "stop":
                rest = began + TTL + 3 - time.time()
                if rest > 0:
                    stop.wait(rest)
                fleet.signal("broker-" + active, signal.SIGCONT)
                say("nemesis: SIGCONT %s (it demotes and follows)" % active)
            else:
                stop.wait(2)
                fleet.start_broker(active)
                say("nemesis: %s started again (a standby)" % active)
            next_active = time.time() + rng.uniform(FAULT_MIN, FAULT_MAX)
        stop.wait(0.5)


# ---------------------------------------------------------------- checks

def check_job(fleet, job):
    """(verdict, duplicates): verdict is ok, lost or running."""
    deadline = time.time() + 120
    record = None
    while time.time() < deadline:
        code, record, err = cli(fleet, ["job", "status", job], "5s")
        if code == 4 and "not_found" in err:
            return "lost", 0
        if code in (0, 1) and record and record.get("status") in JOB_ENDS:
            break
        time.sleep(1)
    else:
        return "running", 0
    code, events, _ = cli(fleet, ["job", "events", job], "5s")
    ended, retried = {}, set()
    for event in (events or {}).get("events", []):
        key = (event.get("step"), event.get("node"))
        if event.get("event") in CELL_ENDS and key[1] is not None:
            ended[key] = ended.get(key, 0) + 1
        if event.get("event") == "retried":
            retried.add(key)
    duplicates = sum(count - 1 for key, count in ended.items()
                     if count > 1 and key not in retried)
    # Every (step, node) the job reached holds one final cell
    for step, cells in (record.get("results") or {}).items():
        for node, cell in cells.items():
            if cell.get("status") in ("running", "pending", "dispatched"):
                return "running", duplicates
    return "ok", duplicates


def main():
    if not shutil.which("etcd"):
        print("soak-ha: etcd is not installed (make soak-ha installs "
              "etcd-server as root)", file=sys.stderr)
        return 2
    root = tempfile.mkdtemp(prefix="grid-soak-ha-")
    fleet = Fleet(root)
    outcomes, failovers, faults = [], [], []

    def interrupted(signo, frame):
        raise KeyboardInterrupt()
    signal.signal(signal.SIGTERM, interrupted)
    started = time.time()
    try:
        fleet.start_etcd()
        fleet.start_broker("a")
        if wait_active(fleet, seconds=30) != "a":
            raise RuntimeError("broker a did not become the active")
        fleet.start_broker("b")
        nodes = ["soak-%02d" % index for index in range(1, AGENTS + 1)]
        for node in nodes:
            fleet.start_agent(node)
        time.sleep(3)
        say("etcd (one member), brokers a and b (ttl %ds), %d agents; "
            "%d clients for %.0f s, a fault of the active every %.0f-%.0f s"
            % (TTL, AGENTS, CLIENTS, SECONDS, FAULT_MIN, FAULT_MAX))
        threads = [threading.Thread(target=client, daemon=True,
                                    args=(fleet, nodes, n, outcomes))
                   for n in range(1, CLIENTS + 1)]
        threads.append(threading.Thread(
            target=nemesis, daemon=True,
            args=(fleet, nodes, failovers, faults)))
        for thread in threads:
            thread.start()
        while time.time() - started < SECONDS:
            time.sleep(1)
        stop.set()
        for thread in threads:
            thread.join()
        say("faults over: everything running again, then the checks")
        for name in list(fleet.stopped):
            fleet.signal(name, signal.SIGCONT)
        for name in ("a", "b"):
            if not fleet.alive("broker-" + name):
                fleet.start_broker(name)
        for node in nodes:
            if not fleet.alive(node):
                fleet.start_agent(node)
        if not wait_active(fleet, seconds=60):
            raise RuntimeError("no active after the faults")
        deadline = time.time() + 300
        while backlog(fleet) and time.time() < deadline:
            time.sleep(1)
        oks = [o for o in outcomes if o[0] == "ok"]
        lost, running, duplicated = [], [], 0
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            verdicts = list(pool.map(lambda o: check_job(fleet, o[1]), oks))
        for (_, job, _), (verdict, dups) in zip(oks, verdicts):
            duplicated += dups
            if verdict == "lost":
                lost.append(job)
            elif verdict == "running":
                running.append(job)
        indeterminate = [o for o in outcomes if o[0] == "indeterminate"]
        errors = [o for o in outcomes if o[0] == "error"]
        print()
        print("soak-ha: %.0f s, ttl %d s, %d clients, %d agents"
              % (time.time() - started, TTL, CLIENTS, AGENTS))
        print("  submits        %d" % len(outcomes))
        print("  ok             %d (one node %d, every node %d, 3 steps %d)"
              % (len(oks), sum(1 for o in oks if o[2] == "one"),
                 sum(1 for o in oks if o[2] == "all"),
                 sum(1 for o in oks if o[2] == "steps")))
        print("  errors         %d (refused with an answer)" % len(errors))
        print("  indeterminate  %d (no answer: may or may not exist)"
              % len(indeterminate))
        print("  lost           %d%s" % (len(lost),
                                         (": " + " ".join(lost[:10]))
                                         if lost else ""))
        print("  not ended      %d%s" % (len(running),
                                         (": " + " ".join(running[:10]))
                                         if running else ""))
        print("  duplicated     %d (a (step, node) that ended twice)"
              % duplicated)
        print("  faults         %d of the active, %d agent kills"
              % (sum(1 for f in faults if f[0].startswith("active")),
                 sum(1 for f in faults if f[0] == "agent-kill")))
        if failovers:
            print("  failovers      %d: p50 %.1f s, max %.1f s (fault to a "
                  "new active answering)" % (len(failovers),
                                             statistics.median(failovers),
                                             max(failovers)))
        else:
            print("  failovers      0")
        reasons = {}
        for o in errors:
            reasons[o[1][:80]] = reasons.get(o[1][:80], 0) + 1
        for reason, count in sorted(reasons.items(), key=lambda r: -r[1])[:5]:
            print("    error x%d: %s" % (count, reason))
        return 0 if not lost and not duplicated and not running else 1
    except KeyboardInterrupt:
        print("\nsoak-ha: interrupted, stopping everything", file=sys.stderr)
        return 130
    except RuntimeError as error:
        print("soak-ha: %s (logs in %s)" % (error, root), file=sys.stderr)
        for name in sorted(os.listdir(root)):
            if name.endswith(".log"):
                with open(os.path.join(root, name), "rb") as log:
                    tail = log.read()[-1500:].decode(errors="replace")
                print("--- %s\n%s" % (name, tail), file=sys.stderr)
        return 1
    finally:
        stop.set()
        fleet.stop_all()
        if KEEP:
            print("soak-ha: kept %s" % root)
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
