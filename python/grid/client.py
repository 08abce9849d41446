"""The client: one request, one reply, Lazy Pirate retries (PROTOCOL.md 5)."""

import os
import re
import time
import uuid

import msgpack
import zmq

PROTOCOL_VERSION = 1
DEFAULT_ENDPOINT = "tcp://127.0.0.1:7701"
FINISHED = frozenset({"completed", "partial_failure", "failed", "cancelled"})

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_Z85_KEY = re.compile(r"^[0-9A-Za-z.\-:+=^!/*?&<>()\[\]{}@%$#]{40}$")


class GridError(Exception):
    """The broker refused a request: ``code`` is the wire's error code,
    ``message`` its sentence, ``details`` its list of lines (may be empty)."""

    def __init__(self, code, message, details=None, request=None):
        self.code = code
        self.message = message
        self.details = list(details or [])
        self.request = request
        text = f"{code}: {message}"
        if self.details:
            text += "".join("\n  " + line for line in self.details)
        super().__init__(text)


class Unreachable(GridError):
    """No reply from the broker after every try (code ``unreachable``)."""

    def __init__(self, endpoint, request_type, tries, curve=False):
        text = f"no reply to {request_type} from {endpoint} after {tries} tries"
        if curve:
            # The broker drops a handshake it cannot read without a word:
            # a wrong server key looks just like a broker that is not there
            text += ("; a wrong broker key looks like this too: check that "
                     "broker_key is the public key of the broker at this "
                     "endpoint, and that the endpoint is right")
        super().__init__("unreachable", text)
        self.endpoint = endpoint


def read_cert_key(path, which):
    """A Z85 key from a CZMQ certificate file: ``which`` is "public-key" or
    "secret-key". Raises ValueError when the file holds no such key."""
    with open(os.path.expanduser(path), encoding="utf-8") as cert:
        found = re.search(which + r'\s*=\s*"(.{40})"', cert.read())
    if not found:
        raise ValueError(f"{path}: no {which} in this certificate")
    return found.group(1).encode()


def _secret_path(path):
    """NAME.key -> NAME.key_secret (a path that is already secret stays)."""
    path = os.path.expanduser(path)
    return path if path.endswith("_secret") else path + "_secret"


def _broker_public_key(broker_key):
    """The broker's public key from a certificate file or 40 Z85 chars."""
    if isinstance(broker_key, bytes):
        broker_key = broker_key.decode()
    if _Z85_KEY.match(broker_key) and not os.path.exists(broker_key):
        return broker_key.encode()
    return read_cert_key(broker_key, "public-key")


def parse_target(text):
    """A target's text form (``all``, ``group:web``, ``node:a,b``,
    ``label:tier=web.prod``, ``any``, ``any:group:web``) as the wire's
    TARGET map (PROTOCOL.md 5.2). A dict is returned as it is. Raises
    ValueError for any other text."""
    if isinstance(text, dict):
        return text
    body = text.strip()
    any_ = body == "any" or body.startswith("any:")
    if any_:
        body = body[4:] or "all"
    if body == "all":
        target = {"scope": "all"}
    else:
        scope, _, value = body.partition(":")
        if scope not in ("group", "node", "label") or not value:
            raise ValueError(f"bad target {text!r}: expected all, group:G, "
                             "node:ID[,ID...], label:KEY=VALUE, any or any:T")
        target = {"scope": scope, "value": value}
    if any_:
        target["any"] = True
    return target


class Client:
    """A connection to one broker's client API.

    ``endpoint``: the broker's client endpoint. ``broker_key``: the broker's
    public key (its ``broker.key`` file, or the 40 characters).
    ``key``: this client's key pair (``NAME.key`` or ``NAME.key_secret``;
    the secret file is read). Leave both keys out (or pass
    ``insecure=True``) against a broker that runs ``--insecure``.
    ``timeout``: seconds to wait for one reply; ``tries``: Lazy Pirate tries,
    each on a fresh socket with the same request id, so a retried submit
    still makes one job.
    """

    def __init__(self, endpoint=None, broker_key=None, key=None,
                 timeout=5.0, tries=3, insecure=False, context=None):
        self.endpoint = endpoint or os.environ.get("GRID_BROKER",
                                                   DEFAULT_ENDPOINT)
        self.timeout = float(timeout)
        self.tries = max(1, int(tries))
        self._context = context or zmq.Context.instance()
        self._watch = True   # False once the broker says it lacks job.watch
        self._curve = None
        if not insecure and (broker_key or key):
            if not (broker_key and key):
                raise ValueError("CURVE needs both broker_key and key "
                                 "(or insecure=True)")
            secret = _secret_path(key)
            self._curve = (_broker_public_key(broker_key),
                           read_cert_key(secret, "public-key"),
                           read_cert_key(secret, "secret-key"))

    # -- transport -------------------------------------------------------

    def _socket(self):
        sock = self._context.socket(zmq.REQ)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.MAXMSGSIZE, 16 * 1024 * 1024)
        if self._curve:
            sock.curve_serverkey, sock.curve_publickey, sock.curve_secretkey = \
                self._curve
        sock.connect(self.endpoint)
        return sock

    def request(self, type_, timeout=None, **fields):
        """Sends one request (fields as in PROTOCOL.md 5.1; None values are
        left out) and returns the ok reply's ``data``. Raises GridError when
        the broker refuses it, Unreachable when it does not answer."""
        request_id = uuid.uuid4().hex
        body = {"v": PROTOCOL_VERSION, "type": type_, "id": request_id}
        body.update({k: v for k, v in fields.items() if v is not None})
        frame = msgpack.packb(body, use_bin_type=True)
        wait_ms = int((self.timeout if timeout is None else timeout) * 1000)
        for _ in range(self.tries):
            sock = self._socket()
            try:
                sock.send(frame)
                if sock.poll(wait_ms):
                    reply = msgpack.unpackb(sock.recv(), raw=False)
                    return self._data(reply, request_id, type_)
            finally:
                sock.close()
        raise Unreachable(self.endpoint, type_, self.tries,
                          curve=self._curve is not None)

    @staticmethod
    def _data(reply, request_id, type_):
        if not isinstance(reply, dict) or reply.get("v") != PROTOCOL_VERSION:
            raise GridError("malformed", f"the reply to {type_} is not a "
                            "version 1 map", request=type_)
        if reply.get("id") not in (request_id, "", None):
            raise GridError("malformed", f"the reply to {type_} answers "
                            "another request", request=type_)
        if reply.get("type") == "error":
            raise GridError(reply.get("code", "internal"),
                            reply.get("message", ""), reply.get("details"),
                            request=type_)
        if reply.get("type") != "ok" or not isinstance(reply.get("data"), dict):
            raise GridError("malformed", f"the reply to {type_} has no data",
                            request=type_)
        return reply["data"]

    # -- jobs ------------------------------------------------------------

    def submit(self, job):
        """Submits a JOB map (PROTOCOL.md 5.2); returns the job id."""
        return self.request("job.submit", job=job)["job"]

    def run(self, target, backend, action, params=None, wait=False,
            timeout=None, retries=None, strategy=None, priority=None,
            job_timeout=None, wait_timeout=None):
        """One task on a target (``"group:web"``, ``"node:a,b"``, ``"all"``,
        ``"any:group:web"``, or a TARGET map). Params are sent as text.
        Returns the job id, or with ``wait=True`` the finished JOB RECORD."""
        task = {"backend": backend, "action": action}
        if params:
            task["params"] = {str(k): v if isinstance(v, (bool, int)) else
                              str(v) for k, v in params.items()}
        if timeout is not None:
            task["timeout"] = _duration(timeout)
        if retries is not None:
            task["max_retries"] = int(retries)
        job = {"target": parse_target(target), "tasks": [task]}
        if strategy is not None:
            job["strategy"] = strategy
        if priority is not None:
            job["priority"] = int(priority)
        if job_timeout is not None:
            job["timeout"] = _duration(job_timeout)
        job_id = self.submit(job)
        return self.wait(job_id, timeout=wait_timeout) if wait else job_id

    def get(self, job_id):
        """The JOB RECORD (every node's result of every step)."""
        return self.request("job.get", job=job_id)

    def progress(self, job_id):
        """PROGRESS: counts only, cheap to poll."""
        return self.request("job.progress", job=job_id)

    def watch(self, job_id, after=None, timeout_ms=None):
        """``{version, changed, progress}`` once the job changes past
        ``after`` (a version from an earlier answer; None: at once), or
        after ``timeout_ms`` (broker default 30 s) with ``changed`` false.
        Keep ``timeout_ms`` below this client's request timeout."""
        wait = None if timeout_ms is None else timeout_ms / 1000
        return self.request("job.watch", job=job_id, after=after,
                            timeout_ms=timeout_ms,
                            timeout=None if wait is None else wait + self.timeout)

    def wait(self, job_id, timeout=None, poll=0.25):
        """Waits until the job is finished and returns its JOB RECORD.
        Uses ``job.watch``, which the broker answers as soon as the job
        changes; against a broker without it, polls ``job.progress`` every
        ``poll`` seconds. ``timeout`` in seconds (None: no limit) raises
        TimeoutError."""
        deadline = None if timeout is None else time.monotonic() + timeout
        version = None
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise TimeoutError(f"job {job_id} did not finish in "
                                   f"{timeout} s")
            if self._watch:
                # Parked in the broker: answered on change, or after the
                # wait asked for, which stays inside the request timeout
                wait_ms = int(min(self.timeout / 2, 10.0,
                                  left if left is not None else 10.0) * 1000)
                try:
                    state = self.request("job.watch", job=job_id,
                                         after=version, timeout_ms=wait_ms)
                except GridError as error:
                    if error.code != "unknown_type":
                        raise
                    self._watch = False
                    continue
                version = state["version"]
                progress = state["progress"]
            else:
                progress = self.progress(job_id)
            if progress["status"] in FINISHED:
                return self.get(job_id)
            if not self._watch:
                time.sleep(poll if left is None else max(0.0, min(poll, left)))

    def list(self, status=None, limit=None):
        """Job summaries, newest first (``{jobs: [...], total}``)."""
        return self.request("job.list", status=status, limit=limit)["jobs"]

    def events(self, job_id, after=None):
        """The job's event log, oldest first (seq > ``after``)."""
        return self.request("job.events", job=job_id, after=after)["events"]

    def cancel(self, job_id, reason=None):
        return self.request("job.cancel", job=job_id, reason=reason)

    def delete(self, job_id):
        return self.request("job.delete", job=job_id)

    @staticmethod
    def cells(record):
        """(step, node, cell) for every cell of a JOB RECORD, in step then
        node order."""
        for step, nodes in sorted(record.get("results", {}).items(),
                                  key=lambda kv: int(kv[0])):
            for node, cell in sorted(nodes.items()):
                yield int(step), node, cell

    # -- nodes, keys, broker ---------------------------------------------

    def nodes(self):
        return self.request("node.list")["nodes"]

    def node(self, node_id):
        return self.request("node.get", node=node_id)

    def drain(self, node_id):
        return self.request("node.drain", node=node_id)

    def resume(self, node_id):
        return self.request("node.resume", node=node_id)

    def status(self):
        return self.request("status")

    def metrics(self):
        """The broker's figures in the Prometheus text format (a str)."""
        return self.request("metrics.get")["text"]

    def keys(self):
        return self.request("key.list")["keys"]

    def key_accept(self, key=None, node=None):
        return self.request("key.accept", **_key_or_node(key, node))

    def key_reject(self, key=None, node=None):
        return self.request("key.reject", **_key_or_node(key, node))

    def key_delete(self, key=None, node=None):
        return self.request("key.delete", **_key_or_node(key, node))


def _key_or_node(key, node):
    if (key is None) == (node is None):
        raise ValueError("give exactly one of key and node")
    if node is not None and not _NAME.match(node):
        raise ValueError(f"bad node id {node!r}")
    return {"key": key} if key is not None else {"node": node}


def _duration(value):
    """Seconds (int/float) or a duration string ("30s", "1h30m")."""
    if isinstance(value, str):
        return value
    ms = int(round(float(value) * 1000))
    return f"{ms}ms"
