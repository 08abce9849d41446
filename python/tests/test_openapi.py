"""docs/openapi.json against the answers of a real broker.

A broker with its HTTP face and two agents (tests/cluster.py) is asked
every route that answers JSON, and each answer is validated against the
schema the document gives for its status (tests/openapi_check.py).
"""

import copy
import json
import os
import unittest
import urllib.error
import urllib.request

import zmq

from tests.cluster import SRC, Cluster, free_port, until
from tests.openapi_check import response_schema, validate


class OpenApiTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(os.path.join(SRC, "docs", "openapi.json")) as handle:
            cls.doc = json.load(handle)
        # A failed job's webhook to a port nobody listens on is dead at
        # once: a delivery to list and to retry
        cls.cluster = Cluster(http=True, config=(
            "notify:\n  retry_for: 1ms\n  timeout: 2s\n  targets:\n"
            f"    - {{url: \"http://127.0.0.1:{free_port()}/hook\", "
            "on: [failed]}\n"))
        try:
            cls.client = cls.cluster.client()
            cls.cluster.wait_online(cls.client)
            cls.token = cls.client.token_add("api-admin", "admin")["token"]
            until(cls.ready)
            cls.answers = []          # (method, template, status, body)
            cls.ask_every_route()
        except BaseException:
            cls.cluster.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()

    @classmethod
    def ready(cls):
        try:
            return cls.call("GET", "/readyz")[0] == 200
        except OSError:          # not listening yet
            return False

    @classmethod
    def call(cls, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            cls.cluster.http + path, data=data, method=method,
            headers={"Authorization": "Bearer " + cls.token})
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    @classmethod
    def ask(cls, method, template, path=None, body=None, status=200):
        """Asks METHOD PATH (TEMPLATE when no PATH) and keeps the answer."""
        got, answer = cls.call(method, path or template, body)
        if got != status:
            raise AssertionError(f"{method} {path or template}: {got} "
                                 f"{answer}, expected {status}")
        cls.answers.append((method, template, got, answer))
        return answer

    @classmethod
    def ask_every_route(cls):
        ask = cls.ask
        job = "/api/v1/jobs/{id}"
        echo = {"backend": "test", "action": "echo", "params": {"msg": "e"}}
        ask("GET", "/healthz")
        ask("GET", "/readyz")
        ask("GET", "/api/v1/leader")    # a broker alone leads: 200
        ask("GET", "/api/v1/openapi.json")
        flaky = ask("POST", "/api/v1/jobs", body={
            "target": "node:web-01",
            "tasks": [{"backend": "test", "action": "flaky", "max_retries": 1,
                       "params": {"failures": 1}},
                      {"backend": "system", "action": "hostname"}]},
            status=201)["job"]
        failed = ask("POST", "/api/v1/jobs", body={
            "target": "all", "dead_letter": True,
            "tasks": [{"backend": "test", "action": "fail",
                       "params": {"msg": "boom"}}, echo]}, status=201)["job"]
        output = ask("POST", "/api/v1/jobs", body={
            "target": "node:web-01",
            "tasks": [{"backend": "test", "action": "output",
                       "params": {"bytes": 5000}}]}, status=201)["job"]
        running = ask("POST", "/api/v1/jobs", body={
            "target": "node:db-01",
            "tasks": [{"backend": "test", "action": "sleep",
                       "params": {"seconds": 60}}]}, status=201)["job"]
        cls.client.wait(failed, timeout=30)
        cls.client.wait(flaky, timeout=30)
        cls.client.wait(output, timeout=30)
        until(lambda: cls.client.progress(running)["status"] == "running")
        ask("GET", "/api/v1/jobs")
        ask("GET", "/api/v1/jobs", "/api/v1/jobs?status=failed&limit=5")
        for one in (flaky, failed, output, running):
            ask("GET", job, f"/api/v1/jobs/{one}")
            ask("GET", job + "/progress", f"/api/v1/jobs/{one}/progress")
            ask("GET", job + "/events", f"/api/v1/jobs/{one}/events")
        ask("GET", job + "/watch", f"/api/v1/jobs/{failed}/watch")
        ask("GET", job + "/watch",
            f"/api/v1/jobs/{running}/watch?after=0&timeout_ms=10")
        ask("GET", "/api/v1/jobs/changes")
        ask("GET", "/api/v1/jobs/changes",
            "/api/v1/jobs/changes?after=0&timeout_ms=10")
        ask("GET", "/api/v1/nodes/changes",
            "/api/v1/nodes/changes?after=0&timeout_ms=10")
        ask("GET", job + "/output",
            f"/api/v1/jobs/{output}/output?node=web-01&step=0&limit=10")
        ask("POST", "/api/v1/jobs/check", body={
            "target": "all and not node:web-01", "tasks": [echo]})
        ask("GET", "/api/v1/nodes")
        for node in ("web-01", "db-01"):
            ask("GET", "/api/v1/nodes/{id}", f"/api/v1/nodes/{node}")
            ask("GET", "/api/v1/nodes/{id}/workers",
                f"/api/v1/nodes/{node}/workers")
            ask("GET", "/api/v1/nodes/{id}/history",
                f"/api/v1/nodes/{node}/history?limit=5")
        ask("POST", "/api/v1/nodes/{id}/drain", "/api/v1/nodes/web-01/drain",
            body={})
        ask("POST", "/api/v1/nodes/{id}/resume",
            "/api/v1/nodes/web-01/resume", body={})
        ask("GET", "/api/v1/status")
        ask("GET", "/api/v1/whoami")
        ask("GET", "/api/v1/queue/stats")
        ask("GET", "/api/v1/relays")
        ask("GET", "/api/v1/dlq")
        ask("GET", "/api/v1/dlq/{entry}", f"/api/v1/dlq/{failed}/0/db-01")
        schedule = "/api/v1/schedules/{name}"
        ask("POST", "/api/v1/schedules", body={
            "name": "api-hourly", "every": "1h",
            "job": {"target": "group:web", "tasks": [echo]}}, status=201)
        ask("POST", "/api/v1/schedules", body={
            "name": "api-cron", "cron": "0 3 * * *", "tz": "UTC",
            "job": {"target": "group:web", "tasks": [echo]}}, status=201)
        ask("GET", "/api/v1/schedules")
        ask("POST", schedule + "/pause", "/api/v1/schedules/api-hourly/pause",
            body={})
        ask("GET", schedule, "/api/v1/schedules/api-hourly")
        ask("POST", schedule + "/resume",
            "/api/v1/schedules/api-hourly/resume", body={})
        ran = ask("POST", schedule + "/run", "/api/v1/schedules/api-hourly/run",
                  body={}, status=201)["job"]
        cls.client.wait(ran, timeout=30)
        ask("GET", schedule, "/api/v1/schedules/api-hourly")
        ask("DELETE", schedule, "/api/v1/schedules/api-hourly")
        ask("GET", "/api/v1/keys")
        ask("POST", "/api/v1/keys/accept", body={"node": "web-01"})
        public = zmq.curve_keypair()[0].decode()
        ask("POST", "/api/v1/keys/accept", body={"key": public})
        ask("POST", "/api/v1/keys/reject", body={"key": public})
        ask("GET", "/api/v1/keys")
        ask("POST", "/api/v1/keys/delete", body={"key": public})
        ask("POST", "/api/v1/tokens", body={"name": "api-viewer",
                                            "role": "viewer"}, status=201)
        ask("GET", "/api/v1/tokens")
        ask("DELETE", "/api/v1/tokens/{name}", "/api/v1/tokens/api-viewer")
        ask("POST", job + "/cancel", f"/api/v1/jobs/{running}/cancel",
            body={"reason": "done with it"})
        cls.client.wait(running, timeout=30)
        ask("GET", job, f"/api/v1/jobs/{running}")
        retry = ask("POST", job + "/retry", f"/api/v1/jobs/{failed}/retry",
                    body={"failed_only": True}, status=201)["job"]
        cls.client.wait(retry, timeout=30)
        ask("POST", "/api/v1/dlq/retry", body={"entry": failed}, status=201)
        ask("GET", "/api/v1/dlq")
        ask("POST", "/api/v1/dlq/purge", body={"all": True})
        ask("POST", "/api/v1/broker/drain", body={})
        ask("GET", "/api/v1/status")
        ask("POST", "/api/v1/broker/resume", body={})
        ask("DELETE", job, f"/api/v1/jobs/{output}")
        ask("GET", job, "/api/v1/jobs/j-000000000000-0000", status=404)
        ask("POST", "/api/v1/jobs", body={"target": "all and", "tasks": [echo]},
            status=400)
        ask("GET", "/api/v1/cluster")
        ask("GET", "/api/v1/audit")
        ask("GET", "/api/v1/audit",
            "/api/v1/audit?request_type=job.&who=api-admin&limit=2")
        ask("GET", "/api/v1/audit", "/api/v1/audit?since=0&outcome=error")
        blob = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
        ask("POST", "/api/v1/blobs", body={"sha256": blob, "size": 4,
                                           "offset": 0, "data": "dGVzdA=="})
        ask("GET", "/api/v1/blobs")
        ask("GET", "/api/v1/blobs/{sha256}", f"/api/v1/blobs/{blob}")
        ask("DELETE", "/api/v1/blobs/{sha256}", f"/api/v1/blobs/{blob}")
        ask("GET", "/api/v1/notify")
        ask("GET", "/api/v1/notify", "/api/v1/notify?status=dead&limit=5")
        ask("POST", "/api/v1/notify/{id}/retry",
            "/api/v1/notify/000000000000000000000000/retry", body={},
            status=404)
        until(lambda: cls.call("GET", "/api/v1/notify?status=dead")[1]
              ["deliveries"])
        dead = ask("GET", "/api/v1/notify",
                   "/api/v1/notify?status=dead")["deliveries"][0]["id"]
        ask("POST", "/api/v1/notify/{id}/retry",
            f"/api/v1/notify/{dead}/retry", body={})
        # Last: a rotation of the broker's key (an admin's) retires the
        # key the ZeroMQ clients here trust once both agents have the next
        ask("GET", "/api/v1/broker/keys")
        ask("POST", "/api/v1/broker/rekey", body={"deadline": "1h"})
        ask("GET", "/api/v1/broker/keys")

    def test_every_answer_fits_its_schema(self):
        for method, template, status, body in self.answers:
            with self.subTest(f"{method} {template} {status}"):
                schema = response_schema(self.doc, method, template, status)
                self.assertIsNotNone(schema, "no JSON schema for this answer")
                self.assertNotEqual(schema, {"type": "object"},
                                    "a bare object is no schema")
                self.assertEqual(validate(self.doc, schema, body), [])

    def test_the_answers_hold_what_the_schemas_describe(self):
        # Retried attempts, structured data: the parts of a record that
        # only some jobs have are validated too
        record = self.answer("/api/v1/jobs/{id}",
                             lambda b: len(b.get("tasks", ())) == 2 and
                             b["tasks"][0]["action"] == "flaky")
        cell = record["results"]["0"]["web-01"]
        self.assertEqual(cell["history"][0]["status"], "failed")
        self.assertIn("hostname", record["results"]["1"]["web-01"]["data"])
        workers = self.answer("/api/v1/nodes/{id}/workers",
                              lambda b: b["node"] == "db-01")
        self.assertEqual(workers["slots"][0]["status"], "running")

    def test_every_json_route_was_asked(self):
        asked = {(m.lower(), t) for m, t, s, _ in self.answers
                 if 200 <= s < 300}
        for path, operations in self.doc["paths"].items():
            for method, operation in operations.items():
                if method == "parameters":
                    continue
                for status, response in operation["responses"].items():
                    content = response.get("content", {})
                    if status.startswith("2") and "application/json" in content:
                        self.assertIn((method, path), asked,
                                      f"{method.upper()} {path} was not asked")
                        schema = content["application/json"]["schema"]
                        self.assertIn("$ref", schema,
                                      f"{method.upper()} {path}: no schema")

    def test_the_served_document_is_docs_openapi_json(self):
        served = [b for m, t, s, b in self.answers
                  if t == "/api/v1/openapi.json"]
        self.assertTrue(served == [self.doc], "the broker serves another "
                        "document than docs/openapi.json: is it built from "
                        "this tree?")

    def answer(self, template, check=lambda body: True):
        return copy.deepcopy(next(b for m, t, s, b in self.answers
                                  if m == "GET" and t == template and
                                  check(b)))

    def test_a_broken_answer_does_not_fit(self):
        schema = response_schema(self.doc, "GET", "/api/v1/jobs/{id}", 200)
        record = self.answer("/api/v1/jobs/{id}",
                             lambda b: b["status"] == "failed")
        self.assertEqual(validate(self.doc, schema, record), [])
        broken = copy.deepcopy(record)
        del broken["results"]
        self.assertEqual(validate(self.doc, schema, broken),
                         ["$: lacks the required field 'results'"])
        broken = copy.deepcopy(record)
        broken["results"]["0"]["db-01"]["exit_code"] = "1"
        errors = validate(self.doc, schema, broken)
        self.assertEqual(len(errors), 1)
        self.assertIn("$.results.0.db-01.exit_code: expected integer", errors[0])
        broken = copy.deepcopy(record)
        del broken["results"]["0"]["web-01"]["status"]
        self.assertEqual(validate(self.doc, schema, broken),
                         ["$.results.0.web-01: lacks the required field "
                          "'status'"])
        broken = copy.deepcopy(record)
        broken["status"] = "exploded"
        self.assertEqual(len(validate(self.doc, schema, broken)), 1)
        broken = copy.deepcopy(record)
        broken["steps"] = True          # a bool is no integer
        self.assertEqual(len(validate(self.doc, schema, broken)), 1)
        broken = copy.deepcopy(record)
        broken["target"] = None         # not nullable
        self.assertEqual(len(validate(self.doc, schema, broken)), 1)
        # Fields the document does not know are let through
        record["late"] = True
        self.assertEqual(validate(self.doc, schema, record), [])

    def test_nullable_oneof_and_nested_lists(self):
        schema = response_schema(self.doc, "GET", "/api/v1/queue/stats", 200)
        stats = self.answer("/api/v1/queue/stats")
        stats["oldest_pending"] = None
        self.assertEqual(validate(self.doc, schema, stats), [])
        stats["oldest_pending"] = {"job": "j-x"}
        self.assertEqual(validate(self.doc, schema, stats),
                         ["$.oldest_pending: lacks the required field "
                          "'age_ms'"])
        schema = response_schema(self.doc, "GET", "/api/v1/nodes/{id}", 200)
        node = self.answer("/api/v1/nodes/{id}")
        node["backends"][0]["actions"][0]["kind"] = "destroy"
        errors = validate(self.doc, schema, node)
        self.assertEqual(len(errors), 1)
        self.assertIn("$.backends[0].actions[0].kind", errors[0])
        del node["backends"]
        self.assertIn("$: lacks the required field 'backends'",
                      validate(self.doc, schema, node))
        spec = {"$ref": "#/components/schemas/JobSpec"}
        self.assertEqual(validate(self.doc, spec, {"target": "group:web",
                                                   "tasks": []}), [])
        self.assertEqual(len(validate(self.doc, spec, {"target": 5,
                                                       "tasks": []})), 1)


if __name__ == "__main__":
    unittest.main()
