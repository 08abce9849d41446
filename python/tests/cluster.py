"""A real gridbroker and two gridagents for the module's tests.

Everything speaks CURVE on ipc:// endpoints in a temporary directory
(HTTP on a free loopback port when asked), and every process started is
killed by its pid.
"""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import grid  # noqa: E402

BIN = os.environ.get("GRID_BIN", os.path.join(os.path.dirname(__file__),
                                              "..", "..", "build", "bin"))
SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def until(predicate, seconds=20.0, every=0.05):
    """Polls PREDICATE until it returns a true value or SECONDS pass."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {seconds} s waiting for "
                         f"{predicate.__name__}")


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on just now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Cluster:
    """A broker, admin and viewer keys, and agents web-01 (group web) and
    db-01 (group db); with ``http=True`` the broker serves HTTP too; CONFIG
    is the text of a config file for the broker."""

    def __init__(self, http=False, config=None):
        self.dir = tempfile.mkdtemp(prefix="grid-py-")
        self.procs = []
        self.keys = os.path.join(self.dir, "keys")
        run = lambda *argv: subprocess.run(argv, check=True,  # noqa: E731
                                           stdout=subprocess.DEVNULL)
        run(os.path.join(BIN, "gridbroker"), "keygen", "--out", self.keys)
        for name in ("admin", "viewer"):
            run(os.path.join(BIN, "gridcli"), "keygen", "--out", self.keys,
                "--name", name)
        self.client_ep = f"ipc://{self.dir}/client"
        agents_ep = f"ipc://{self.dir}/agents"
        publish_ep = f"ipc://{self.dir}/publish"
        self.broker_key = os.path.join(self.keys, "broker.key")
        extra = ()
        self.http = None
        if http:
            port = free_port()
            self.http = f"http://127.0.0.1:{port}"
            extra = ("--http", f"127.0.0.1:{port}")
        if config:
            path = os.path.join(self.dir, "broker.yaml")
            with open(path, "w") as handle:
                handle.write(config)
            extra += ("--config", path)
        self.start("broker", "gridbroker", "--data-dir",
                   os.path.join(self.dir, "data"), "--client", self.client_ep,
                   "--agents", agents_ep, "--publish", publish_ep,
                   "--heartbeat", "200ms", "--key", self.broker_key,
                   "--client-key", "admin:" + self.key("admin"),
                   "--client-key", "viewer:" + self.key("viewer"),
                   "--auto-accept", *extra)
        for node, group in (("web-01", "web"), ("db-01", "db")):
            run(os.path.join(BIN, "gridagent"), "keygen", "--out", self.keys,
                "--name", node)
            self.start(node, "gridagent", "--id", node, "--groups", group,
                       "--broker", agents_ep, "--publish", publish_ep,
                       "--state-dir", os.path.join(self.dir, node),
                       "--key", self.key(node), "--broker-key", self.broker_key)

    def key(self, name):
        return os.path.join(self.keys, name + ".key")

    def start(self, name, program, *argv):
        log = open(os.path.join(self.dir, name + ".log"), "wb")
        self.procs.append(subprocess.Popen((os.path.join(BIN, program),) + argv,
                                           stdout=log, stderr=log))
        log.close()

    def client(self, name="admin", **kwargs):
        return grid.Client(self.client_ep, broker_key=self.broker_key,
                           key=self.key(name), config="none", **kwargs)

    def wait_online(self, client):
        def both_online():
            try:
                nodes = client.nodes()
            except grid.Unreachable:
                return False
            return sum(n["status"] == "online" for n in nodes) == 2
        until(both_online)

    def stop(self):
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
