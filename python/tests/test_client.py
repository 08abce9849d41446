"""The grid Python module against a real gridbroker and two gridagents.

Run by `make test` (through test/test_python.sh) with GRID_BIN pointing
at the built programs; everything speaks CURVE on ipc:// endpoints in a
temporary directory, and every process started is killed by pid.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import zmq  # noqa: E402

import grid  # noqa: E402

BIN = os.environ.get("GRID_BIN", os.path.join(os.path.dirname(__file__),
                                              "..", "..", "build", "bin"))


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


class Cluster:
    """A broker, a viewer key, and agents web-01 (group web) and db-01."""

    def __init__(self):
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
        self.start("broker", "gridbroker", "--data-dir",
                   os.path.join(self.dir, "data"), "--client", self.client_ep,
                   "--agents", agents_ep, "--publish", publish_ep,
                   "--heartbeat", "200ms", "--key", self.broker_key,
                   "--client-key", "admin:" + self.key("admin"),
                   "--client-key", "viewer:" + self.key("viewer"),
                   "--auto-accept")
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
                           key=self.key(name), **kwargs)

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


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = Cluster()
        cls.client = cls.cluster.client()

        def both_online():
            try:
                nodes = cls.client.nodes()
            except grid.Unreachable:
                return False
            return sum(n["status"] == "online" for n in nodes) == 2
        until(both_online)

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()

    def test_run_waits_for_every_node(self):
        record = self.client.run("all", "test", "echo", {"msg": "hi there"},
                                 wait=True, wait_timeout=30)
        self.assertEqual(record["status"], "completed")
        cells = list(self.client.cells(record))
        self.assertEqual([(s, n) for s, n, _ in cells],
                         [(0, "db-01"), (0, "web-01")])
        for _, _, cell in cells:
            self.assertEqual(cell["status"], "success")
            self.assertIn("hi there", cell["output"])

    def test_submit_a_pipeline_and_read_it_back(self):
        job_id = self.client.submit({
            "target": {"scope": "group", "value": "web"},
            "tasks": [{"tasks": [{"backend": "test", "action": "echo",
                                  "params": {"msg": "one"}},
                                 {"backend": "test", "action": "echo",
                                  "params": {"msg": "two"}}]}]})
        record = self.client.wait(job_id, timeout=30)
        self.assertEqual(record["id"], job_id)
        self.assertEqual(record["steps"], 2)
        self.assertEqual(record["expected"], ["web-01"])
        self.assertIn(job_id, [j["id"] for j in self.client.list(limit=100)])
        kinds = [e["event"] for e in self.client.events(job_id)]
        self.assertEqual(kinds[0], "submitted")
        self.assertEqual(kinds[-1], "finished")

    def test_a_failing_job_reads_failed(self):
        record = self.client.run("node:db-01", "test", "fail", wait=True,
                                 wait_timeout=30)
        self.assertEqual(record["status"], "failed")
        self.assertEqual(record["results"]["0"]["db-01"]["status"], "failed")

    def test_cancel_a_running_job(self):
        job_id = self.client.run("node:web-01", "test", "sleep",
                                 {"seconds": 30})
        until(lambda: self.client.progress(job_id)["status"] == "running")
        self.assertEqual(self.client.cancel(job_id, reason="py")["status"],
                         "cancelled")
        self.assertEqual(self.client.wait(job_id, timeout=30)["status"],
                         "cancelled")

    def test_errors_carry_the_wire_code(self):
        with self.assertRaises(grid.GridError) as caught:
            self.client.get("j-000000000000-0000")
        self.assertEqual(caught.exception.code, "not_found")
        with self.assertRaises(grid.GridError) as caught:
            self.client.submit({"target": {"scope": "all"}, "tasks": []})
        self.assertEqual(caught.exception.code, "invalid_job")
        self.assertTrue(caught.exception.details)

    def test_roles_are_enforced(self):
        viewer = self.cluster.client("viewer")
        self.assertEqual(viewer.status()["nodes"]["online"], 2)
        self.assertIn('grid_nodes{state="online"} 2\n', viewer.metrics())
        with self.assertRaises(grid.GridError) as caught:
            viewer.drain("web-01")
        self.assertEqual(caught.exception.code, "forbidden")

    def test_nodes_status_and_keys(self):
        nodes = {n["id"]: n for n in self.client.nodes()}
        self.assertEqual(nodes["web-01"]["groups"], ["web"])
        self.assertIn("backends", self.client.node("db-01"))
        self.assertIn("jobs", self.client.status())
        agents = [k for k in self.client.keys() if k["kind"] == "agent"]
        self.assertEqual(sorted(k.get("node") for k in agents),
                         ["db-01", "web-01"])

    def test_drain_and_resume(self):
        self.assertTrue(self.client.drain("db-01")["drained"])
        self.assertFalse(self.client.resume("db-01")["drained"])

    def test_unreachable_broker(self):
        client = grid.Client("ipc://" + self.cluster.dir + "/nobody",
                             broker_key=self.cluster.broker_key,
                             key=self.cluster.key("admin"),
                             timeout=0.2, tries=2)
        with self.assertRaises(grid.Unreachable) as caught:
            client.status()
        self.assertEqual(caught.exception.code, "unreachable")
        self.assertIn("after 2 tries", str(caught.exception))
        self.assertIn("wrong broker key", str(caught.exception))
        # Without CURVE there is no key to blame
        client = grid.Client("ipc://" + self.cluster.dir + "/nobody",
                             insecure=True, timeout=0.2, tries=1)
        with self.assertRaises(grid.Unreachable) as caught:
            client.status()
        self.assertNotIn("broker key", str(caught.exception))

    def test_wrong_broker_key_is_named(self):
        # The real broker, another broker's key: the handshake never
        # completes and the broker says nothing
        other, _ = zmq.curve_keypair()
        client = grid.Client(self.cluster.client_ep, broker_key=other,
                             key=self.cluster.key("admin"),
                             timeout=0.2, tries=2)
        with self.assertRaises(grid.Unreachable) as caught:
            client.status()
        self.assertIn(self.cluster.client_ep, str(caught.exception))
        self.assertIn("broker_key is the public key", str(caught.exception))

    def test_targets_and_keys_are_checked_locally(self):
        self.assertEqual(grid.parse_target("any:group:web"),
                         {"scope": "group", "value": "web", "any": True})
        self.assertEqual(grid.parse_target("label:tier=web.prod"),
                         {"scope": "label", "value": "tier=web.prod"})
        with self.assertRaises(ValueError):
            grid.parse_target("grop:web")
        with self.assertRaises(ValueError):
            grid.Client(self.cluster.client_ep, key=self.cluster.key("admin"))
        with self.assertRaises(ValueError):
            self.client.key_accept()


if __name__ == "__main__":
    unittest.main()
