"""The grid Python module against a real gridbroker and two gridagents.

Run by `make test` (through test/python.sh) with GRID_BIN pointing at the
built programs (tests/cluster.py starts them).
"""

import hashlib
import os
import re
import shutil
import time
import unittest

import zmq

from tests.cluster import SRC, Cluster, until

import grid


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = Cluster()
        cls.client = cls.cluster.client()
        cls.cluster.wait_online(cls.client)

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
        later = self.client.events(job_id, after=1)
        self.assertTrue(all(e["seq"] > 1 for e in later))

    def test_facts_filter_nodes_and_targets(self):
        facts = until(lambda: self.client.node("web-01").get("facts"))
        self.assertIn("os", facts)
        self.assertIn("arch", facts)
        where = "group:web and fact:arch=" + facts["arch"]
        self.assertEqual([n["id"] for n in self.client.nodes(where=where)],
                         ["web-01"])
        self.assertEqual(self.client.nodes(where="fact:arch=none-such"), [])
        plan = self.client.check({
            "target": "fact:cpus>=1 and not group:db",
            "tasks": [{"backend": "system", "action": "hostname"}]})
        self.assertEqual(plan["nodes"], ["web-01"])
        with self.assertRaises(grid.GridError) as caught:
            self.client.nodes(where="fact:arch>>x")
        self.assertEqual(caught.exception.code, "bad_request")
        self.assertIn("operator", caught.exception.message)

    def test_blobs_upload_once(self):
        path = os.path.join(self.cluster.dir, "blob.bin")
        data = bytes(range(256)) * 1200          # two pieces of 256 KiB
        with open(path, "wb") as handle:
            handle.write(data)
        first = self.client.upload(path)
        self.assertEqual(first["sha256"], hashlib.sha256(data).hexdigest())
        self.assertEqual(first["size"], len(data))
        self.assertTrue(first["stored"])
        self.assertFalse(self.client.upload(path)["stored"])
        stat = self.client.blob_stat(first["sha256"])
        self.assertTrue(stat["complete"])
        self.assertIn(first["sha256"],
                      [b["sha256"] for b in self.client.blobs()])
        self.client.blob_delete(first["sha256"])
        with self.assertRaises(grid.GridError) as caught:
            self.client.blob_stat(first["sha256"])
        self.assertEqual(caught.exception.code, "not_found")

    def test_broker_keys_without_a_rotation(self):
        keys = self.client.broker_keys()
        self.assertFalse(keys["rotating"])
        self.assertEqual(len(keys["key"]), 40)
        self.assertNotIn("next", keys)

    def test_dry_run_changes_nothing(self):
        job = {"target": "group:web", "tasks": [
            {"backend": "test", "action": "mark",
             "params": {"name": "py-dry", "text": "one"}},
            {"backend": "test", "action": "echo", "params": {"msg": "q"}}]}
        record = self.client.wait(self.client.submit(job, check=True),
                                  timeout=30)
        self.assertTrue(record["check"])
        verdicts = self.client.verdicts(record)
        self.assertEqual([(v["node"], v["step"], v["verdict"])
                          for v in verdicts],
                         [("web-01", 0, "would_change"),
                          ("web-01", 1, "no_change")])
        self.assertIs(verdicts[0]["would_change"], True)
        self.assertIn("+one", verdicts[0]["diff"])
        self.assertEqual(verdicts[0]["task"], "test mark")
        # Nothing was written: the same dry run says the same
        again = self.client.wait(self.client.submit(job, check=True),
                                 timeout=30)
        self.assertEqual(self.client.verdicts(again)[0]["verdict"],
                         "would_change")
        # A job without check is no dry run
        plain = self.client.run("group:web", "test", "echo", {"msg": "p"},
                                wait=True, wait_timeout=30)
        self.assertNotIn("check", plain)

    def test_submit_with_a_traceparent(self):
        given = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        job_id = self.client.submit({"target": "group:web", "tasks": [
            {"backend": "test", "action": "echo", "params": {"msg": "t"}}]},
            traceparent=given)
        record = self.client.wait(job_id, timeout=30)
        self.assertEqual(record["trace"]["traceparent"], given)
        self.assertEqual(record["trace"]["trace_id"],
                         "4bf92f3577b34da6a3ce929d0e0e4736")
        self.assertFalse(record["trace"]["generated"])
        # Without one the broker makes one
        made = self.client.run("group:web", "test", "echo", {"msg": "m"},
                               wait=True, wait_timeout=30)
        self.assertTrue(made["trace"]["generated"])
        self.assertRegex(made["trace"]["traceparent"],
                         r"^00-[0-9a-f]{32}-[0-9a-f]{16}-01$")
        # Uppercase hex is not a traceparent
        with self.assertRaises(grid.GridError) as caught:
            self.client.submit({"target": "group:web", "tasks": [
                {"backend": "test", "action": "echo"}]},
                traceparent=given.upper())
        self.assertEqual(caught.exception.code, "bad_request")
        self.assertIn("uppercase", str(caught.exception))

    def test_run_takes_a_target_expression(self):
        # The text goes to the broker as it is, as submit and gridcli send it
        record = self.client.run("all and not node:web-01", "test", "echo",
                                 {"msg": "expr"}, wait=True, wait_timeout=30)
        self.assertEqual(record["expected"], ["db-01"])
        self.assertEqual(record["target"]["scope"], "expr")
        record = self.client.run("(group:web)", "test", "echo",
                                 {"msg": "one term"}, wait=True,
                                 wait_timeout=30)
        self.assertEqual(record["target"], {"scope": "group", "value": "web"})
        record = self.client.run("any:group:web or group:db and not "
                                 "node:db-01", "test", "echo", {"msg": "a"},
                                 wait=True, wait_timeout=30)
        self.assertEqual(record["expected"], ["web-01"])
        self.assertTrue(record["target"]["any"])
        self.assertEqual(grid.parse_target("group:web and not node:web-01"),
                         {"scope": "expr",
                          "value": "group:web and not node:web-01"})

    def test_a_bad_target_is_a_grid_error(self):
        with self.assertRaises(grid.GridError) as caught:
            self.client.run("group:web and", "test", "echo", {"msg": "x"})
        self.assertEqual(caught.exception.code, "invalid_job")
        self.assertIn("column", str(caught.exception))
        with self.assertRaises(grid.GridError) as caught:
            self.client.run(42, "test", "echo", {"msg": "x"})
        self.assertEqual(caught.exception.code, "invalid_job")
        with self.assertRaises(grid.GridError):
            grid.parse_target("grop:web")
        # Still a ValueError for code written against the older module
        with self.assertRaises(ValueError):
            grid.parse_target("")

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
        self.assertTrue(self.client.delete(job_id)["deleted"])
        with self.assertRaises(grid.GridError) as caught:
            self.client.get(job_id)
        self.assertEqual(caught.exception.code, "not_found")

    def test_wait_reports_progress(self):
        seen = []
        job_id = self.client.run("all", "test", "echo", {"msg": "p"})
        record = self.client.wait(job_id, timeout=30, progress=seen.append)
        self.assertTrue(seen)
        self.assertEqual(seen[-1]["status"], record["status"])
        for progress in seen:
            self.assertEqual(progress["id"], job_id)
            self.assertIn("done", progress)
        seen = []
        self.client.run("node:web-01", "test", "echo", {"msg": "q"},
                        wait=True, wait_timeout=30, progress=seen.append)
        self.assertEqual(seen[-1]["status"], "completed")
        # Polling, as against a broker without job.watch: each new state once
        polling = self.cluster.client()
        polling._watch = False
        seen = []
        job_id = self.client.run("node:db-01", "test", "echo", {"msg": "r"})
        polling.wait(job_id, timeout=30, poll=0.05, progress=seen.append)
        self.assertEqual(seen[-1]["status"], "completed")
        self.assertEqual(len(seen), len({repr(p) for p in seen}))

    def test_watch_and_check(self):
        job_id = self.client.run("node:db-01", "test", "echo", {"msg": "w"})
        state = self.client.watch(job_id)
        self.assertIn("version", state)
        self.client.wait(job_id, timeout=30)
        state = self.client.watch(job_id, after=state["version"],
                                  timeout_ms=100)
        self.assertEqual(state["progress"]["status"], "completed")
        plan = self.client.check({"target": "all and not node:db-01",
                                  "tasks": [{"backend": "test",
                                             "action": "echo",
                                             "params": {"msg": "c"}}]})
        self.assertEqual(plan["nodes"], ["web-01"])
        self.assertEqual(plan["steps"], 1)

    def test_output_pages(self):
        record = self.client.run("node:web-01", "test", "output",
                                 {"bytes": 10000}, wait=True, wait_timeout=30)
        cell = record["results"]["0"]["web-01"]
        self.assertEqual(cell["output_size"], 10000)
        page = self.client.output(record["id"], "web-01", 0, limit=4000)
        self.assertEqual((page["offset"], page["next"], page["size"]),
                         (0, 4000, 10000))
        self.assertIsInstance(page["data"], bytes)
        whole = self.client.read_output(record["id"], "web-01", 0)
        self.assertEqual(len(whole), 10000)
        self.assertEqual(whole[:4000], page["data"])
        self.assertEqual(self.client.read_output(record["id"], "web-01", 0,
                                                 stream="stderr"), b"")

    def test_follow_output(self):
        job_id = self.client.submit({
            "target": "node:web-01",
            "tasks": [{"backend": "test", "action": "lines",
                       "params": {"count": 20, "interval": "100ms"}}]})
        chunks = list(self.client.follow_output(job_id, "web-01", 0,
                                                timeout=60))
        want = "".join(f"line {n}\n" for n in range(1, 21)).encode()
        self.assertEqual(b"".join(chunks), want)
        # It came in more than one piece, while the step ran
        self.assertGreater(len(chunks), 1)
        self.assertEqual(self.client.followed["status"], "success")
        self.assertEqual(self.client.followed["exit_code"], 0)
        self.assertTrue(self.client.followed["complete"])
        # A page from an offset past the end is refused
        with self.assertRaises(grid.GridError) as caught:
            self.client.output(job_id, "web-01", 0, offset=len(want) + 1)
        self.assertEqual(caught.exception.code, "bad_request")
        # A node the job does not run on
        with self.assertRaises(grid.GridError) as caught:
            list(self.client.follow_output(job_id, "db-01", 0, timeout=30))
        self.assertEqual(caught.exception.code, "not_found")

    def test_retry_and_the_dead_letter_queue(self):
        record = self.client.wait(self.client.submit({
            "target": "node:db-01", "dead_letter": True,
            "tasks": [{"backend": "test", "action": "fail",
                       "params": {"msg": "boom"}}]}), timeout=30)
        job_id = record["id"]
        entries = self.client.dlq_list(job=job_id)
        self.assertEqual([e["id"] for e in entries], [job_id + "/0/db-01"])
        entry = self.client.dlq_get(entries[0]["id"])
        self.assertEqual(entry["status"], "failed")
        retried = self.client.retry(job_id, failed_only=True)
        self.assertEqual(retried["retry_of"], job_id)
        self.client.wait(retried["job"], timeout=30)
        again = self.client.dlq_retry(entry["id"])
        self.assertEqual(again["retry_of"], job_id)
        self.client.wait(again["job"], timeout=30)
        other = self.client.retry(job_id, target="node:web-01")
        self.assertEqual(self.client.wait(other["job"], timeout=30)
                         ["expected"], ["web-01"])
        self.assertGreaterEqual(self.client.dlq_purge(job=job_id), 1)
        self.assertEqual(self.client.dlq_list(job=job_id), [])
        self.assertEqual(self.client.dlq_purge(older_than=3600), 0)

    def test_schedules(self):
        job = {"target": "group:web",
               "tasks": [{"backend": "test", "action": "echo",
                          "params": {"msg": "s"}}]}
        added = self.client.schedule_add("py-hourly", job, every="1h")
        self.assertEqual(added["name"], "py-hourly")
        self.assertFalse(added["paused"])
        self.assertIn("py-hourly", [s["name"] for s in self.client.schedules()])
        self.assertTrue(self.client.schedule_pause("py-hourly")["paused"])
        self.assertFalse(self.client.schedule_resume("py-hourly")["paused"])
        run = self.client.schedule_run("py-hourly")
        self.assertEqual(run["schedule"], "py-hourly")
        self.client.wait(run["job"], timeout=30)
        self.assertEqual([j["id"] for j in
                          self.client.list(schedule="py-hourly")], [run["job"]])
        self.assertEqual(self.client.schedule("py-hourly")["runs"], 1)
        self.assertTrue(self.client.schedule_delete("py-hourly")["deleted"])
        with self.assertRaises(grid.GridError) as caught:
            self.client.schedule("py-hourly")
        self.assertEqual(caught.exception.code, "not_found")
        cron = self.client.schedule_add("py-cron", job, cron="0 3 * * *",
                                        tz="UTC", overlap="queue")
        self.assertEqual(cron["overlap"], "queue")
        self.client.schedule_delete("py-cron")

    def test_tokens_and_whoami(self):
        me = self.client.whoami()
        self.assertEqual((me["role"], me["via"]), ("admin", "key"))
        token = self.client.token_add("py-ci", "operator")
        self.assertTrue(token["token"].startswith("grid_"))
        self.assertEqual([(t["name"], t["role"]) for t in self.client.tokens()
                          if t["name"] == "py-ci"], [("py-ci", "operator")])
        self.assertTrue(self.client.token_revoke("py-ci")["revoked"])
        self.assertNotIn("py-ci", [t["name"] for t in self.client.tokens()])

    def test_audit_trail(self):
        started = time.time() - 1
        self.assertTrue(self.client.drain("web-01")["drained"])
        self.client.resume("web-01")
        entries = self.client.audit_list(object="web-01", since=started)
        self.assertEqual([e["type"] for e in entries[:2]],
                         ["node.resume", "node.drain"])
        self.assertEqual((entries[0]["face"], entries[0]["role"],
                          entries[0]["outcome"]), ("zmq", "admin", "ok"))
        one = self.client.audit_list(request_type="node.", limit=1)
        self.assertEqual(len(one), 1)
        older = self.client.audit_list(before=one[0]["id"],
                                       request_type="node.")
        self.assertTrue(all(e["id"] < one[0]["id"] for e in older))
        with self.assertRaises(grid.GridError) as caught:
            self.client.audit_list(before="not-an-id-at-all-at-all-")
        self.assertEqual(caught.exception.code, "bad_request")
        viewer = self.cluster.client("viewer")
        with self.assertRaises(grid.GridError) as caught:
            viewer.audit_list()
        self.assertEqual(caught.exception.code, "forbidden")

    def test_notify_requests(self):
        # This cluster's broker has no webhooks: nothing to list, and a
        # delivery id that is none is not found
        self.assertEqual(self.client.notify_list(status="dead"), [])
        with self.assertRaises(grid.GridError) as caught:
            self.client.notify_retry("0" * 24)
        self.assertEqual(caught.exception.code, "not_found")
        with self.assertRaises(grid.GridError) as caught:
            self.client.notify_list(status="lost")
        self.assertEqual(caught.exception.code, "bad_request")
        with self.assertRaises(grid.GridError) as caught:
            self.cluster.client("viewer").notify_list()
        self.assertEqual(caught.exception.code, "forbidden")

    def test_roles_are_enforced(self):
        viewer = self.cluster.client("viewer")
        self.assertEqual(viewer.status()["nodes"]["online"], 2)
        self.assertIn('grid_nodes{state="online"} 2\n', viewer.metrics())
        self.assertEqual(viewer.whoami()["role"], "viewer")
        with self.assertRaises(grid.GridError) as caught:
            viewer.drain("web-01")
        self.assertEqual(caught.exception.code, "forbidden")

    def test_nodes_queue_and_keys(self):
        nodes = {n["id"]: n for n in self.client.nodes()}
        self.assertEqual(nodes["web-01"]["groups"], ["web"])
        self.assertIn("backends", self.client.node("db-01"))
        self.assertIn("jobs", self.client.status())
        agents = [k for k in self.client.keys() if k["kind"] == "agent"]
        self.assertEqual(sorted(k.get("node") for k in agents),
                         ["db-01", "web-01"])
        workers = self.client.workers("web-01")
        self.assertEqual(workers["node"], "web-01")
        self.assertIn("counters", workers)
        history = self.client.node_history("web-01", limit=5)
        self.assertEqual(history[-1]["event"], "registered")
        self.assertIn("cells", self.client.queue_stats())
        self.assertEqual(self.client.relays(), [])

    def test_drain_and_resume(self):
        self.assertTrue(self.client.drain("db-01")["drained"])
        self.assertFalse(self.client.resume("db-01")["drained"])

    def test_broker_drain_and_resume(self):
        try:
            self.assertIn(self.client.broker_drain()["state"],
                          ("draining", "maintenance"))
            with self.assertRaises(grid.GridError) as caught:
                self.client.run("all", "test", "echo", {"msg": "no"})
            self.assertEqual(caught.exception.code, "maintenance")
        finally:
            self.assertEqual(self.client.broker_resume()["state"], "serving")

    def test_keys_by_node(self):
        # An agent key by its node: accepting an accepted one changes nothing
        accepted = self.client.key_accept(node="web-01")
        self.assertEqual((accepted["node"], accepted["status"]),
                         ("web-01", "accepted"))
        # A key enrolled ahead of its agent, then rejected and forgotten
        public, _ = zmq.curve_keypair()
        public = public.decode()
        self.assertEqual(self.client.key_accept(key=public)["key"], public)
        self.assertEqual(self.client.key_reject(key=public)["status"],
                         "rejected")
        self.assertTrue(self.client.key_delete(key=public)["deleted"])
        with self.assertRaises(grid.GridError) as caught:
            self.client.key_delete(node="nobody-here")
        self.assertEqual(caught.exception.code, "not_found")

    def test_errors_carry_the_wire_code(self):
        with self.assertRaises(grid.GridError) as caught:
            self.client.get("j-000000000000-0000")
        self.assertEqual(caught.exception.code, "not_found")
        with self.assertRaises(grid.GridError) as caught:
            self.client.submit({"target": {"scope": "all"}, "tasks": []})
        self.assertEqual(caught.exception.code, "invalid_job")
        self.assertTrue(caught.exception.details)

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

    def test_several_broker_keys(self):
        # The broker's current and next key while it rotates: a wrong
        # first key costs one failed handshake, not the timeout
        other, _ = zmq.curve_keypair()
        real = grid.client._broker_public_key(self.cluster.broker_key).decode()
        for keys in ([other, self.cluster.broker_key],
                     f"{other.decode()},{real}", (real, other)):
            client = grid.Client(self.cluster.client_ep, broker_key=keys,
                                 key=self.cluster.key("admin"),
                                 timeout=20, tries=1)
            started = time.monotonic()
            self.assertEqual(client.whoami()["role"], "admin")
            self.assertLess(time.monotonic() - started, 10)
        # Only wrong keys: said at once, the keys named
        wrong, _ = zmq.curve_keypair()
        client = grid.Client(self.cluster.client_ep,
                             broker_key=[other, wrong],
                             key=self.cluster.key("admin"), timeout=30,
                             tries=2)
        started = time.monotonic()
        with self.assertRaises(grid.Unreachable) as caught:
            client.status()
        self.assertLess(time.monotonic() - started, 20)
        self.assertIn(other.decode(), str(caught.exception))
        self.assertIn(wrong.decode(), str(caught.exception))
        self.assertIn("fetch-broker", str(caught.exception))
        # Lists that are no lists of keys
        for keys, why in ((",", "empty"), (f"{real},,{real}", "key 2"),
                          (",".join([real] * 9), "more than 8"),
                          ([real, "/nowhere/broker.key"], "key 2"),
                          (42, "expected a key")):
            with self.assertRaises(grid.ConfigError) as caught:
                grid.Client(self.cluster.client_ep, broker_key=keys,
                            key=self.cluster.key("admin"))
            self.assertIn(why, str(caught.exception))

    def test_arguments_are_checked_locally(self):
        self.assertEqual(grid.parse_target("any:group:web"),
                         {"scope": "group", "value": "web", "any": True})
        self.assertEqual(grid.parse_target("label:tier=web.prod"),
                         {"scope": "label", "value": "tier=web.prod"})
        with self.assertRaises(grid.GridError) as caught:
            self.client.key_accept()
        self.assertEqual(caught.exception.code, "bad_request")
        self.assertIsInstance(caught.exception, ValueError)


class SettingsTest(unittest.TestCase):
    """Client() finds what gridcli finds: environment, config file, keys."""

    NAMES = ("GRID_BROKER", "GRID_KEY", "GRID_BROKER_KEY", "GRID_CONFIG",
             "HOME")

    @classmethod
    def setUpClass(cls):
        cls.cluster = Cluster()
        cls.cluster.wait_online(cls.cluster.client())

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()

    def setUp(self):
        self.saved = {name: os.environ.pop(name, None) for name in self.NAMES}
        self.home = os.path.join(self.cluster.dir, "home-" + self.id()
                                 .rsplit(".", 1)[-1])
        os.makedirs(self.home)
        os.environ["HOME"] = self.home
        os.environ["GRID_CONFIG"] = "none"   # never the host's own file

    def tearDown(self):
        for name, value in self.saved.items():
            os.environ.pop(name, None)
            if value is not None:
                os.environ[name] = value

    def install_keys(self, broker=True):
        """The admin pair as ~/.config/grid/client.key, as `gridcli keygen`
        leaves it, and the broker's public key beside it."""
        directory = os.path.join(self.home, ".config", "grid")
        os.makedirs(directory, mode=0o700)
        for suffix in (".key", ".key_secret"):
            shutil.copy2(self.cluster.key("admin")[:-4] + suffix,
                         os.path.join(directory, "client" + suffix))
        if broker:
            shutil.copy2(self.cluster.broker_key,
                         os.path.join(directory, "broker.key"))

    def test_no_arguments_use_gridcli_default_keys(self):
        self.install_keys()
        os.environ["GRID_BROKER"] = self.cluster.client_ep
        if os.access(grid.config.DEFAULT_BROKER_KEY, os.R_OK):
            # This host's broker key comes before ~/.config/grid/broker.key
            os.environ["GRID_BROKER_KEY"] = self.cluster.broker_key
        client = grid.Client()
        self.assertEqual(client.endpoint, self.cluster.client_ep)
        self.assertEqual(client.whoami()["role"], "admin")

    def test_the_config_file(self):
        self.install_keys(broker=False)
        path = os.path.join(self.home, "gridcli.yaml")
        with open(path, "w") as handle:
            handle.write("# as conf/gridcli.yaml\n"
                         f"broker: {self.cluster.client_ep}   # ipc\n"
                         "output: json\n"
                         "request_timeout: 6s\n"
                         f"broker_key: \"{self.cluster.broker_key}\"\n"
                         "insecure: false\n")
        os.environ["GRID_CONFIG"] = path
        client = grid.Client(tries=3)
        self.assertEqual(client.config, path)
        self.assertEqual(client.timeout, 2.0)    # 6 s over 3 tries
        self.assertEqual(client.whoami()["role"], "admin")
        # The environment wins over the file, arguments over both
        os.environ["GRID_BROKER"] = "ipc:///nowhere"
        self.assertEqual(grid.Client().endpoint, "ipc:///nowhere")
        self.assertEqual(grid.Client(self.cluster.client_ep).endpoint,
                         self.cluster.client_ep)
        # The file's own key, in a place gridcli would not look by itself
        moved = os.path.join(self.home, "elsewhere.key")
        for suffix in ("", "_secret"):
            os.rename(os.path.join(self.home, ".config", "grid",
                                   "client.key" + suffix), moved + suffix)
        with self.assertRaises(grid.ConfigError):
            grid.Client(config=path)
        with open(path, "a") as handle:
            handle.write(f"key: '{moved}'\n")
        self.assertEqual(grid.Client(self.cluster.client_ep)
                         .whoami()["role"], "admin")

    def test_broker_keys_as_a_list_in_the_config_file(self):
        self.install_keys(broker=False)
        other, _ = zmq.curve_keypair()
        path = os.path.join(self.home, "gridcli.yaml")
        for text in (f"broker_key:\n  - '{other.decode()}'\n"
                     f"  - {self.cluster.broker_key}\n",
                     f"broker_key: ['{other.decode()}', "
                     f"{self.cluster.broker_key}]\n"):
            with open(path, "w") as handle:
                handle.write(f"broker: {self.cluster.client_ep}\n" + text)
            self.assertEqual(grid.Client(config=path).whoami()["role"],
                             "admin")
        with open(path, "w") as handle:
            handle.write("broker_key:\n  - ''\n")
        with self.assertRaises(grid.ConfigError) as caught:
            grid.Client(config=path)
        self.assertIn("broker_key", str(caught.exception))

    def test_insecure_in_the_config_file(self):
        path = os.path.join(self.home, "gridcli.yaml")
        with open(path, "w") as handle:
            handle.write("insecure: true\n")
        client = grid.Client(config=path)
        self.assertIsNone(client._curve)
        self.assertEqual(client.endpoint, "tcp://127.0.0.1:7701")

    def test_what_gridcli_refuses_is_refused(self):
        with self.assertRaises(grid.ConfigError) as caught:
            grid.Client(self.cluster.client_ep)      # no key anywhere
        self.assertIn("gridcli keygen", str(caught.exception))
        self.assertEqual(caught.exception.code, "config")
        path = os.path.join(self.home, "gridcli.yaml")
        for text, why in (("brokr: x\n", "unknown key 'brokr'"),
                          ("request_timeout: soon\n", "request_timeout"),
                          ("output: xml\n", "expected table or json"),
                          ("insecure: maybe\n", "true or false")):
            with open(path, "w") as handle:
                handle.write(text)
            with self.assertRaises(grid.ConfigError) as caught:
                grid.Client(config=path)
            self.assertIn(why, str(caught.exception))
        with self.assertRaises(grid.ConfigError):
            grid.Client(config=os.path.join(self.home, "missing.yaml"))
        # A secret key others may read is refused, as gridcli refuses it
        self.install_keys()
        secret = os.path.join(self.home, ".config", "grid", "client.key_secret")
        os.chmod(secret, 0o644)
        with self.assertRaises(grid.ConfigError) as caught:
            grid.Client(self.cluster.client_ep, config="none")
        self.assertIn("chmod 600", str(caught.exception))


class CoverageTest(unittest.TestCase):
    """A typed, documented method for every request type of the protocol."""

    def request_types(self):
        with open(os.path.join(SRC, "proto", "PROTOCOL.md")) as handle:
            text = handle.read()
        table = text[text.index("### 5.1 Requests"):
                     text.index("### 5.2 The job spec")]
        return set(re.findall(r"^\| `([a-z]+(?:\.[a-z]+)?)` \|", table, re.M))

    def test_every_request_of_the_protocol_has_a_method(self):
        documented = self.request_types()
        self.assertGreaterEqual(len(documented), 40)
        with open(os.path.join(SRC, "broker", "requests.c")) as handle:
            served = set(re.findall(r'^\s*\{"([a-z.]+)",\s+[VOA],',
                                    handle.read(), re.M))
        self.assertEqual(documented, served)
        self.assertEqual(set(grid.REQUEST_METHODS), documented)
        for type_, name in grid.REQUEST_METHODS.items():
            method = getattr(grid.Client, name, None)
            self.assertTrue(callable(method), f"{type_}: no Client.{name}")
            self.assertTrue(method.__doc__, f"Client.{name} has no docstring")
            self.assertRegex(method.__doc__, r"\n {12}[^\n]*client\.",
                             f"Client.{name}'s docstring has no example")
            self.assertIn("return", method.__annotations__,
                          f"Client.{name} has no return type")


if __name__ == "__main__":
    unittest.main()
