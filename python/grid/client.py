"""The client: one request, one reply, Lazy Pirate retries (PROTOCOL.md 5).

Client has one method per request type of the client API (the table of
PROTOCOL.md 5.1; REQUEST_METHODS maps each type to its method), plus
helpers built on them: ``run`` (one task, optionally waited for),
``wait`` (until a job ends, with a progress callback), ``cells`` (walk a
JOB RECORD) and ``read_output`` (a cell's whole stream, page by page).
Replies are the wire's ``data`` maps, as plain dicts and lists; the type
names below (JobRecord, Node...) say which shape of PROTOCOL.md 5.3 each
method returns.
"""

import base64
import hashlib
import os
import re
import stat
import time
import uuid
from typing import (Any, Callable, Dict, Iterator, List, Mapping, Optional,
                    Tuple, Union)

import msgpack
import zmq
from zmq.utils.monitor import parse_monitor_message

from . import config as _config
from .errors import (ConfigError, GridError, TargetError, Unreachable,
                     UsageError)

PROTOCOL_VERSION = 2          # written in requests
PROTOCOL_VERSIONS = (1, 2)    # read in replies (PROTOCOL.md section 6)
DEFAULT_ENDPOINT = _config.DEFAULT_ENDPOINT
FINISHED = frozenset({"completed", "partial_failure", "failed", "cancelled"})
# The statuses of an attempt in flight (a job.output page's "status")
LIVE_STATUSES = frozenset({"dispatched", "acknowledged", "running"})

# The shapes of PROTOCOL.md 5.2 and 5.3, for the reader: the module hands
# the wire's maps over as dicts without converting them.
Job = Dict[str, Any]            # JOB (5.2): target, tasks, ...
Target = Union[str, Dict[str, Any]]   # "group:web and not node:web-01", or TARGET
Duration = Union[str, int, float]     # "30s", "1h30m", or seconds
Submitted = Dict[str, Any]      # {job, status, ?retry_of, ?schedule}
JobRecord = Dict[str, Any]      # JOB RECORD
Progress = Dict[str, Any]       # PROGRESS
Watch = Dict[str, Any]          # WATCH: {version, changed, progress}
Check = Dict[str, Any]          # CHECK
Summary = Dict[str, Any]        # SUMMARY (job.list)
Event = Dict[str, Any]          # EVENT
OutputPage = Dict[str, Any]     # OUTPUT PAGE (data: bytes)
DlqEntry = Dict[str, Any]       # DLQ ENTRY
Node = Dict[str, Any]           # NODE
Workers = Dict[str, Any]        # WORKERS
HistoryEntry = Dict[str, Any]   # HISTORY ENTRY
AuditEntry = Dict[str, Any]     # AUDIT ENTRY
Delivery = Dict[str, Any]       # NOTIFY DELIVERY
Status = Dict[str, Any]         # STATUS
QueueStats = Dict[str, Any]     # QUEUE STATS
BrokerState = Dict[str, Any]    # {state, running, pending}
Key = Dict[str, Any]            # KEY
Relay = Dict[str, Any]          # RELAY
Schedule = Dict[str, Any]       # SCHEDULE (5.6)
Token = Dict[str, Any]          # {name, role, created, ?last_used}
Whoami = Dict[str, Any]         # {name, role, via}

# Every request type of PROTOCOL.md 5.1 and the method that sends it
REQUEST_METHODS = {
    "job.submit": "submit",
    "job.check": "check",
    "job.get": "get",
    "job.progress": "progress",
    "job.watch": "watch",
    "job.changes": "changes",
    "node.changes": "node_changes",
    "job.list": "list",
    "job.cancel": "cancel",
    "job.events": "events",
    "job.delete": "delete",
    "job.output": "output",
    "job.retry": "retry",
    "dlq.list": "dlq_list",
    "dlq.get": "dlq_get",
    "dlq.retry": "dlq_retry",
    "dlq.purge": "dlq_purge",
    "queue.stats": "queue_stats",
    "node.workers": "workers",
    "node.history": "node_history",
    "node.list": "nodes",
    "node.get": "node",
    "status": "status",
    "metrics.get": "metrics",
    "node.drain": "drain",
    "node.resume": "resume",
    "broker.drain": "broker_drain",
    "broker.resume": "broker_resume",
    "key.list": "keys",
    "relay.list": "relays",
    "key.accept": "key_accept",
    "key.reject": "key_reject",
    "key.delete": "key_delete",
    "broker.rekey": "broker_rekey",
    "broker.keys": "broker_keys",
    "schedule.add": "schedule_add",
    "schedule.list": "schedules",
    "schedule.get": "schedule",
    "schedule.pause": "schedule_pause",
    "schedule.resume": "schedule_resume",
    "schedule.delete": "schedule_delete",
    "schedule.run": "schedule_run",
    "token.add": "token_add",
    "token.list": "tokens",
    "token.revoke": "token_revoke",
    "audit.list": "audit_list",
    "cluster.status": "cluster_status",
    "cluster.switchover": "cluster_switchover",
    "notify.list": "notify_list",
    "notify.retry": "notify_retry",
    "blob.put": "upload",
    "blob.stat": "blob_stat",
    "blob.list": "blobs",
    "blob.delete": "blob_delete",
    "whoami": "whoami",
}

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_Z85_KEY = re.compile(r"^[0-9A-Za-z.\-:+=^!/*?&<>()\[\]{}@%$#]{40}$")
_SIMPLE_TARGET = re.compile(r"^(group|node|label):[^\s()]+$")


def read_cert_key(path: str, which: str) -> bytes:
    """A Z85 key from a CZMQ certificate file: ``which`` is "public-key" or
    "secret-key". Raises ConfigError (a ValueError) when the file holds no
    such key."""
    try:
        with open(os.path.expanduser(path), encoding="utf-8") as cert:
            found = re.search(which + r'\s*=\s*"(.{40})"', cert.read())
    except OSError as error:
        raise ConfigError(f"cannot read the key file {path}: "
                          f"{error.strerror}") from None
    if not found:
        raise ConfigError(f"{path}: no {which} in this certificate")
    return found.group(1).encode()


def _secret_path(path):
    """NAME.key -> NAME.key_secret (a path that is already secret stays)."""
    path = os.path.expanduser(path)
    return path if path.endswith("_secret") else path + "_secret"


def _check_secret_mode(path):
    """Refuses a secret key file that group or others may read, or that
    is not a regular file, as gridcli does (proto/keys.c)."""
    try:
        info = os.stat(path)
    except OSError as error:
        raise ConfigError(f"cannot read the secret key {path}: "
                          f"{error.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"{path} is not a regular file")
    if info.st_mode & 0o077:
        mode = stat.S_IMODE(info.st_mode)
        raise ConfigError(f"{path} is readable by others (mode {mode:04o}): "
                          f"run 'chmod 600 {path}', and replace the key pair "
                          "if anyone may have copied it")


def _broker_public_key(broker_key):
    """The broker's public key from a certificate file or 40 Z85 chars."""
    if isinstance(broker_key, bytes):
        broker_key = broker_key.decode()
    if _Z85_KEY.match(broker_key) and not os.path.exists(broker_key):
        return broker_key.encode()
    return read_cert_key(broker_key, "public-key")


BROKER_KEYS_MAX = 8


def _broker_public_keys(broker_key):
    """The broker's public keys: one (a file or 40 Z85 characters), or
    several, comma-separated or a list (the broker's current and next key
    while it rotates its key), at most BROKER_KEYS_MAX. Raises
    ConfigError for an empty element, one that is no key, or too many."""
    if isinstance(broker_key, bytes):
        broker_key = broker_key.decode()
    if isinstance(broker_key, str):
        items = broker_key.split(",")
    elif isinstance(broker_key, (list, tuple)):
        items = [k.decode() if isinstance(k, bytes) else k
                 for k in broker_key]
    else:
        raise ConfigError("broker_key: expected a key, a comma-separated "
                          f"list or a list of keys, not "
                          f"{type(broker_key).__name__}")
    if len(items) > BROKER_KEYS_MAX:
        raise ConfigError(f"broker_key: more than {BROKER_KEYS_MAX} keys")
    keys = []
    for number, item in enumerate(items, 1):
        if not isinstance(item, str) or not item or "," in item:
            raise ConfigError(f"broker_key: key {number} is empty or no key "
                              "(give keys as KEY or OLD,NEW)")
        try:
            keys.append(_broker_public_key(item))
        except ConfigError as error:
            raise ConfigError(f"broker_key: key {number}: "
                              f"{error.message}") from None
    return keys


def parse_target(text: Target) -> Dict[str, Any]:
    """A target in its text form as the wire's TARGET map (PROTOCOL.md
    5.2): ``all``, ``group:web``, ``node:a,b``, ``label:tier=web.prod``
    become that scope; anything else (``group:web and not node:web-01``,
    ``(group:a or group:b)``) is an ``expr`` target that the broker parses
    and checks. ``any``/``any:...`` sets ``any``. A dict is returned as it
    is. Raises TargetError (a GridError and a ValueError) for what is no
    target at all: empty text, a single term of an unknown kind.

    >>> parse_target("any:group:web")
    {'scope': 'group', 'value': 'web', 'any': True}
    """
    if isinstance(text, dict):
        return text
    if not isinstance(text, str):
        raise TargetError(f"expected a target's text or a TARGET map, not "
                          f"{type(text).__name__}")
    body = text.strip()
    any_ = body == "any" or body.startswith("any:")
    if any_:
        body = body[4:].strip() or "all"
    if not body:
        raise TargetError(f"bad target {text!r}: empty")
    if body == "all":
        target = {"scope": "all"}
    elif _SIMPLE_TARGET.match(body):
        scope, _, value = body.partition(":")
        target = {"scope": scope, "value": value}
    elif re.search(r"[\s()]", body) or body.startswith("not"):
        target = {"scope": "expr", "value": body}
    else:
        raise TargetError(f"bad target {text!r}: expected all, group:G, "
                          "node:ID[,ID...], label:KEY=VALUE, an expression "
                          "of them with and, or, not and parentheses, or "
                          "any:TARGET")
    if any_:
        target["any"] = True
    return target


def _target_field(target):
    """A target as the wire takes it: text is sent as it is (the broker
    parses the whole grammar and says where it is wrong), a map as it is."""
    if isinstance(target, (str, dict)):
        return target
    raise TargetError(f"expected a target's text or a TARGET map, not "
                      f"{type(target).__name__}")


class Client:
    """A connection to one broker's client API.

    Every argument is optional: what is not given is found as gridcli
    finds it (grid.config: the ``GRID_BROKER``, ``GRID_KEY``,
    ``GRID_BROKER_KEY`` and ``GRID_CONFIG`` environment, the config file
    ``/etc/grid/gridcli.yaml``, and the keys in ``~/.config/grid/`` and
    ``/etc/grid/keys/``), so on a host where gridcli works,
    ``Client()`` works.

    ``endpoint``: the broker's client endpoint; a broker cluster's
    members comma-separated (``"tcp://a:7701,tcp://b:7701"``) are tried in
    turn, and a standby's ``not_leader`` answer is followed to the active
    it names (the members share the broker key, or run insecure).
    ``broker_key``: the
    broker's public key (its ``broker.key`` file, or the 40 characters),
    or several, comma-separated or a list (``"OLD,NEW"`` while the broker
    rotates its key): the first is used, and a failed handshake moves to
    the next within the same request; when every key fails, Unreachable
    says so at once, naming them.
    ``key``: this client's key pair (``NAME.key`` or ``NAME.key_secret``;
    the secret file is read). ``insecure=True``: plaintext, against a
    broker that runs ``--insecure``. ``config``: a gridcli config file
    (``"none"``: none). ``timeout``: seconds to wait for one reply (default
    the file's ``request_timeout`` shared among the tries, else 5);
    ``tries``: Lazy Pirate tries, each on a fresh socket with the same
    request id, so a retried submit still makes one job. Raises
    ConfigError (a GridError) when no key or config can be read.

        client = Client()                       # gridcli's settings
        client = Client("tcp://broker:7701", broker_key="/etc/grid/keys/broker.key",
                        key="~/.config/grid/client.key")
    """

    def __init__(self, endpoint: Optional[str] = None,
                 broker_key: Optional[Union[str, bytes]] = None,
                 key: Optional[str] = None, timeout: Optional[float] = None,
                 tries: int = 3, insecure: bool = False,
                 context: Optional[zmq.Context] = None,
                 config: Optional[str] = None):
        settings = _config.resolve(endpoint, broker_key, key, insecure,
                                   config)
        self.endpoints = [part for part in settings["endpoint"].split(",")
                          if part] or [settings["endpoint"]]
        self.endpoint = self.endpoints[0]
        self.config = settings["config"]
        self.tries = max(1, int(tries))
        if timeout is None:
            total_ms = settings["request_timeout_ms"]
            timeout = 5.0 if total_ms is None else total_ms / 1000 / self.tries
        self.timeout = float(timeout)
        self._context = context or zmq.Context.instance()
        self._watch = True   # False once the broker says it lacks job.watch
        self.followed: Optional[Dict[str, Any]] = None  # follow_output's last page
        self._curve = None
        self._broker_keys: List[bytes] = []
        self._key_at = 0   # the broker key new sockets use
        if not settings["insecure"]:
            secret = _secret_path(settings["key"])
            _check_secret_mode(secret)
            self._broker_keys = _broker_public_keys(settings["broker_key"])
            self._curve = (self._broker_keys[0],
                           read_cert_key(secret, "public-key"),
                           read_cert_key(secret, "secret-key"))

    # -- transport -------------------------------------------------------

    def _socket(self):
        """A REQ socket to the endpoint with the broker key in use, and
        (CURVE) a monitor of its handshakes, or None."""
        sock = self._context.socket(zmq.REQ)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.MAXMSGSIZE, 16 * 1024 * 1024)
        monitor = None
        if self._curve:
            sock.curve_serverkey = self._broker_keys[self._key_at]
            sock.curve_publickey, sock.curve_secretkey = self._curve[1:]
            monitor = sock.get_monitor_socket(
                zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
                | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                | zmq.EVENT_HANDSHAKE_SUCCEEDED)
        sock.connect(self.endpoint)
        return sock, monitor

    @staticmethod
    def _close(sock, monitor):
        if monitor is not None:
            sock.disable_monitor()
            monitor.close()
        sock.close()

    def _answer(self, frame, wait_ms, failed, type_):
        """One try: FRAME on a fresh socket, waiting WAIT_MS for the
        reply. A failed handshake moves to the next broker key and sends
        again; FAILED counts, per key, the handshakes that failed in this
        request. Returns the reply's bytes, None when the try ran out, or
        raises Unreachable when every key failed its handshake."""
        deadline = time.monotonic() + wait_ms / 1000
        sock, monitor = self._socket()
        try:
            sock.send(frame)
            while True:
                left_ms = int((deadline - time.monotonic()) * 1000)
                if left_ms <= 0:
                    return None
                poller = zmq.Poller()
                poller.register(sock, zmq.POLLIN)
                if monitor is not None:
                    poller.register(monitor, zmq.POLLIN)
                ready = dict(poller.poll(left_ms))
                if sock in ready:
                    return sock.recv()
                if monitor is None or monitor not in ready:
                    continue
                event = parse_monitor_message(
                    monitor.recv_multipart())["event"]
                if event not in (zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL,
                                 zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL):
                    continue
                # A broker that cannot read our hello closes the
                # connection without a word: twice is the key's fault
                failed[self._key_at] = failed.get(self._key_at, 0) + (
                    2 if event == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL else 1)
                if all(failed.get(at, 0) >= 2
                       for at in range(len(self._broker_keys))):
                    raise Unreachable(self.endpoint, type_, 0, curve=True,
                                      keys=[k.decode() for k in
                                            self._broker_keys])
                if len(self._broker_keys) > 1:
                    # The next key, the same request on a new socket
                    self._key_at = (self._key_at + 1) % len(self._broker_keys)
                    self._close(sock, monitor)
                    sock, monitor = self._socket()
                    sock.send(frame)
        finally:
            self._close(sock, monitor)

    def request(self, type_: str, timeout: Optional[float] = None,
                **fields: Any) -> Dict[str, Any]:
        """Sends one request of any type (fields as in PROTOCOL.md 5.1;
        None values are left out) and returns the ok reply's ``data``.
        Raises GridError when the broker refuses it, Unreachable when it
        does not answer.

            client.request("job.list", status="running", limit=20)
        """
        request_id = uuid.uuid4().hex
        body = {"v": PROTOCOL_VERSION, "type": type_, "id": request_id}
        body.update({k: v for k, v in fields.items() if v is not None})
        frame = msgpack.packb(body, use_bin_type=True)
        wait_ms = int((self.timeout if timeout is None else timeout) * 1000)
        hops = 0
        attempt = 0
        failed: Dict[int, int] = {}
        while attempt < self.tries:
            if attempt > 0 and len(self.endpoints) > 1:
                # A cluster's members take turns, a try each
                at = self.endpoints.index(self.endpoint) \
                    if self.endpoint in self.endpoints else -1
                self.endpoint = self.endpoints[(at + 1) % len(self.endpoints)]
            attempt += 1
            answer = self._answer(frame, wait_ms, failed, type_)
            if answer is None:
                continue
            reply = msgpack.unpackb(answer, raw=False)
            active = self._redirect(reply)
            if active and active != self.endpoint and hops < 3:
                # A standby named the active: the same request goes there
                hops += 1
                attempt -= 1
                self.endpoint = active
                continue
            return self._data(reply, request_id, type_)
        raise Unreachable(self.endpoint, type_, self.tries,
                          curve=self._curve is not None)

    @staticmethod
    def _redirect(reply):
        """The active's endpoint a standby's not_leader names, or None."""
        if (not isinstance(reply, dict) or reply.get("type") != "error"
                or reply.get("code") != "not_leader"):
            return None
        details = reply.get("details")
        if not isinstance(details, list) or not details:
            return None
        first = details[0]
        if (isinstance(first, str) and len(first) <= 1000
                and first.startswith(("tcp://", "ipc://"))):
            return first
        return None

    @staticmethod
    def _data(reply, request_id, type_):
        if (not isinstance(reply, dict)
                or reply.get("v") not in PROTOCOL_VERSIONS):
            raise GridError("malformed", f"the reply to {type_} is not a "
                            "map of protocol version 1 or 2", request=type_)
        if reply.get("id") not in (request_id, "", None):
            raise GridError("malformed", f"the reply to {type_} answers "
                            "another request", request=type_)
        if reply.get("type") == "error":
            message = reply.get("message", "")
            if reply.get("code") == "unsupported_version":
                message += (f"; this module speaks protocol {PROTOCOL_VERSION}:"
                            " use the module of the broker's release, or "
                            "upgrade gridbroker")
            raise GridError(reply.get("code", "internal"), message,
                            reply.get("details"), request=type_)
        if reply.get("type") != "ok" or not isinstance(reply.get("data"), dict):
            raise GridError("malformed", f"the reply to {type_} has no data",
                            request=type_)
        return reply["data"]

    # -- jobs ------------------------------------------------------------

    def submit(self, job: Job, traceparent: Optional[str] = None,
               check: bool = False) -> str:
        """Submits a JOB map (PROTOCOL.md 5.2); returns the job id. The
        target may be text in the whole expression grammar. TRACEPARENT,
        a W3C trace context (``00-<32 hex>-<16 hex>-<2 hex>``, lowercase),
        makes the job's spans part of the caller's trace; without it the
        broker makes one (``get(job_id)["trace"]`` shows either). A bad
        one is a GridError ``bad_request``. ``check=True`` makes it a dry
        run on the nodes (PROTOCOL.md 5.10): each runs its actions'
        checks instead of the actions, nothing changes; ``verdicts`` reads
        the finished record.

            job_id = client.submit({"target": "group:web and not node:web-01",
                                    "tasks": [{"backend": "apt", "action": "update"}]},
                                   traceparent="00-4bf92f3577b34da6a3ce929d0e0e4736-"
                                               "00f067aa0ba902b7-01")
            dry = client.submit({"target": "group:web",
                                 "tasks": [{"backend": "apt", "action": "install",
                                            "params": {"package": "nginx"}}]},
                                check=True)
        """
        return self.request("job.submit", job=job, traceparent=traceparent,
                            check=True if check else None)["job"]

    def check(self, job: Job) -> Check:
        """A dry run of a JOB map (``job.check``): validated as a submit,
        the target resolved now, nothing run or stored. Returns CHECK:
        ``{target, any, nodes, not_run, steps, order, plan, batches,
        strategy, ?max_failures}``.

            plan = client.check({"target": "group:web",
                                 "tasks": [{"backend": "system", "action": "hostname"}]})
            print(plan["nodes"], plan["not_run"])
        """
        return self.request("job.check", job=job)

    def run(self, target: Target, backend: str, action: str,
            params: Optional[Mapping[str, Any]] = None, wait: bool = False,
            timeout: Optional[Duration] = None, retries: Optional[int] = None,
            strategy: Optional[str] = None, priority: Optional[int] = None,
            job_timeout: Optional[Duration] = None,
            wait_timeout: Optional[float] = None,
            progress: Optional[Callable[[Progress], Any]] = None
            ) -> Union[str, JobRecord]:
        """One task on a target: its text form (``"group:web"``,
        ``"node:a,b"``, ``"all"``, ``"any:group:web"``, ``"group:web and
        not node:web-01"``: sent as it is, so the broker reads the whole
        grammar, as for ``submit`` and gridcli) or a TARGET map. Params are
        sent as text. Returns the job id, or with ``wait=True`` the
        finished JOB RECORD (``progress`` as in ``wait``). A bad target is
        a GridError ``invalid_job`` naming the column.

            record = client.run("group:web and not node:web-01", "system",
                                "hostname", wait=True)
        """
        task = {"backend": backend, "action": action}
        if params:
            task["params"] = {str(k): v if isinstance(v, (bool, int)) else
                              str(v) for k, v in params.items()}
        if timeout is not None:
            task["timeout"] = _duration(timeout)
        if retries is not None:
            task["max_retries"] = int(retries)
        job = {"target": _target_field(target), "tasks": [task]}
        if strategy is not None:
            job["strategy"] = strategy
        if priority is not None:
            job["priority"] = int(priority)
        if job_timeout is not None:
            job["timeout"] = _duration(job_timeout)
        job_id = self.submit(job)
        if not wait:
            return job_id
        return self.wait(job_id, timeout=wait_timeout, progress=progress)

    def get(self, job_id: str) -> JobRecord:
        """The JOB RECORD (every node's result of every step).

            record = client.get("j-0193a1b2c3d4-0001")
            print(record["status"], record["results"]["0"]["web-01"]["output"])
        """
        return self.request("job.get", job=job_id)

    def progress(self, job_id: str) -> Progress:
        """PROGRESS: counts only, cheap to poll.

            p = client.progress(job_id)
            print(f"{p['done']}/{p['nodes']} nodes, step {p['step']}/{p['steps']}")
        """
        return self.request("job.progress", job=job_id)

    def watch(self, job_id: str, after: Optional[int] = None,
              timeout_ms: Optional[int] = None) -> Watch:
        """``{version, changed, progress}`` once the job changes past
        ``after`` (a version from an earlier answer; None: at once), or
        after ``timeout_ms`` (broker default 30 s) with ``changed`` false.
        The request waits ``timeout_ms`` more than this client's timeout.

            state = client.watch(job_id)
            state = client.watch(job_id, after=state["version"], timeout_ms=2000)
        """
        wait = 30.0 if timeout_ms is None else timeout_ms / 1000
        return self.request("job.watch", job=job_id, after=after,
                            timeout_ms=timeout_ms,
                            timeout=wait + self.timeout)

    def changes(self, after: Optional[int] = None,
                timeout_ms: Optional[int] = None) -> Dict[str, Any]:
        """``{version, changed}`` once any job was submitted, moved on,
        ended or was deleted past ``after`` (a version from an earlier
        answer; None: at once), or after ``timeout_ms`` (broker default
        30 s) with ``changed`` false. A job list waits on it, then reads.

            seen = client.changes()["version"]
            news = client.changes(after=seen, timeout_ms=10000)
            if news["changed"]:
                jobs = client.list()
        """
        wait = 30.0 if timeout_ms is None else timeout_ms / 1000
        return self.request("job.changes", after=after, timeout_ms=timeout_ms,
                            timeout=wait + self.timeout)

    def node_changes(self, after: Optional[int] = None,
                     timeout_ms: Optional[int] = None) -> Dict[str, Any]:
        """``{version, changed}`` once any node was registered, came
        online, went offline, was drained or resumed past ``after`` (a
        version from an earlier answer; None: at once), or after
        ``timeout_ms`` (broker default 30 s) with ``changed`` false. A
        node list waits on it, then reads.

            seen = client.node_changes()["version"]
            news = client.node_changes(after=seen, timeout_ms=10000)
            if news["changed"]:
                nodes = client.nodes()
        """
        wait = 30.0 if timeout_ms is None else timeout_ms / 1000
        return self.request("node.changes", after=after,
                            timeout_ms=timeout_ms,
                            timeout=wait + self.timeout)

    def wait(self, job_id: str, timeout: Optional[float] = None,
             poll: float = 0.25,
             progress: Optional[Callable[[Progress], Any]] = None
             ) -> JobRecord:
        """Waits until the job is finished and returns its JOB RECORD.
        Uses ``job.watch``, which the broker answers as soon as the job
        changes; against a broker without it, polls ``job.progress`` every
        ``poll`` seconds. ``progress``, when given, is called with each
        new PROGRESS seen (the first at once, the last one final).
        ``timeout`` in seconds (None: no limit) raises TimeoutError.

            def show(p):
                print(p["status"], p["done"], "/", p["nodes"])
            record = client.wait(job_id, timeout=600, progress=show)
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        version = None
        last = None
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise TimeoutError(f"job {job_id} did not finish in "
                                   f"{timeout} s")
            changed = True
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
                changed = state["changed"]
                seen = state["progress"]
            else:
                seen = self.progress(job_id)
                changed = seen != last
            last = seen
            if progress is not None and changed:
                progress(seen)
            if seen["status"] in FINISHED:
                return self.get(job_id)
            if not self._watch:
                time.sleep(poll if left is None else max(0.0, min(poll, left)))

    def list(self, status: Optional[str] = None, limit: Optional[int] = None,
             schedule: Optional[str] = None,
             before: Optional[str] = None) -> List[Summary]:
        """Job summaries, newest first: only ``status``, at most ``limit``
        (broker default 50), only the runs of ``schedule``, only jobs older
        than the job id ``before`` (paging). ``request("job.list")`` gives
        ``total`` too.

            for job in client.list(status="running", limit=20):
                print(job["id"], job["target"], job["status"])
        """
        return self.request("job.list", status=status, limit=limit,
                            schedule=schedule, before=before)["jobs"]

    def events(self, job_id: str, after: Optional[int] = None) -> List[Event]:
        """The job's event log, oldest first (seq > ``after``).

            for event in client.events(job_id):
                print(event["seq"], event["event"], event.get("node", ""))
        """
        return self.request("job.events", job=job_id, after=after)["events"]

    def cancel(self, job_id: str,
               reason: Optional[str] = None) -> Dict[str, Any]:
        """Cancels a job: ``{job, status: "cancelled"}``.

            client.cancel(job_id, reason="wrong package")
        """
        return self.request("job.cancel", job=job_id, reason=reason)

    def delete(self, job_id: str) -> Dict[str, Any]:
        """Deletes a finished job, its outputs and dead-letter entries:
        ``{job, deleted: true}``.

            client.delete(job_id)
        """
        return self.request("job.delete", job=job_id)

    def output(self, job_id: str, node: str, step: int,
               stream: Optional[str] = None, attempt: Optional[int] = None,
               offset: Optional[int] = None,
               limit: Optional[int] = None) -> OutputPage:
        """One page of a cell's whole stream (``job.output``): ``{job,
        node, step, attempt, stream, offset, data: bytes, next, size,
        dropped}``. ``stream`` is ``"stdout"`` (default) or ``"stderr"``;
        ``attempt`` defaults to the latest. ``read_output`` reads it all.

            page = client.output(job_id, "web-01", 0, limit=65536)
            print(page["data"].decode(errors="replace"), page["size"])
        """
        return self.request("job.output", job=job_id, node=node,
                            step=int(step), stream=stream, attempt=attempt,
                            offset=offset, limit=limit)

    def read_output(self, job_id: str, node: str, step: int,
                    stream: Optional[str] = None,
                    attempt: Optional[int] = None) -> bytes:
        """A cell's whole stream as bytes, asked page by page until
        ``next`` reaches ``size`` (or a page comes back empty: the rest
        has not reached the broker yet). Where the agent dropped the middle
        of a long stream, the bytes are its start and its end.

            text = client.read_output(job_id, "web-01", 0).decode()
        """
        data = bytearray()
        offset = 0
        while True:
            page = self.output(job_id, node, step, stream=stream,
                               attempt=attempt, offset=offset)
            data += page["data"]
            if page["next"] >= page["size"] or not page["data"]:
                return bytes(data)
            offset = page["next"]
            attempt = page["attempt"]   # every page from the same attempt

    def follow_output(self, job_id: str, node: str, step: int,
                      stream: Optional[str] = None,
                      timeout: Optional[float] = None) -> Iterator[bytes]:
        """Yields a step's output as it arrives, while it runs, until the
        step ends on ``node`` (a generator). Between pages it waits with
        ``job.watch``, which the broker answers as soon as a piece arrives
        (against a broker without it, it asks every second). A retried
        step is followed into its next attempt. When the generator ends,
        ``self.followed`` holds the last page: its ``status`` and
        ``exit_code`` say how the step ended. Raises GridError
        (``not_found``) when the job ends without the step running on the
        node, TimeoutError after ``timeout`` seconds (None: no limit).

            for chunk in client.follow_output(job_id, "web-01", 0):
                sys.stdout.buffer.write(chunk)
            print(client.followed["exit_code"])
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        attempt: Optional[int] = None
        offset = 0
        version = None
        finished = False
        while True:
            try:
                page = self.output(job_id, node, step, stream=stream,
                                   attempt=attempt, offset=offset)
            except GridError as error:
                # Not started yet: wait for it, unless the job has ended
                if error.code != "not_found" or finished:
                    raise
                page = None
            if page is not None:
                attempt = page["attempt"]
                if page["data"]:
                    yield page["data"]
                offset = page["next"]
                if page["next"] < page["size"] and page["data"]:
                    continue            # more has arrived than one page
                # A broker before live output has no "complete"
                if page.get("complete", True) and page["next"] >= page["size"]:
                    self.followed = page
                    return
                if (not page.get("complete", True)
                        and page["next"] >= page["size"]
                        and page.get("status") not in LIVE_STATUSES):
                    attempt += 1        # that attempt ended; a retry comes
                    offset = 0
                    continue
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise TimeoutError(f"step {step} of job {job_id} on {node} "
                                   f"did not end in {timeout} s")
            if finished:
                # The job ended: one more page said all there is
                raise GridError("not_found", f"job {job_id} ended without "
                                f"step {step} on node {node}")
            wait_ms = int(min(self.timeout / 2, 10.0,
                              left if left is not None else 10.0) * 1000)
            if self._watch:
                try:
                    state = self.request("job.watch", job=job_id,
                                         after=version, timeout_ms=wait_ms)
                    version = state["version"]
                    finished = state["progress"]["status"] in FINISHED
                    continue
                except GridError as error:
                    if error.code != "unknown_type":
                        raise
                    self._watch = False
            time.sleep(1.0 if left is None else max(0.0, min(1.0, left)))
            finished = self.progress(job_id)["status"] in FINISHED

    def retry(self, job_id: str, failed_only: Optional[bool] = None,
              target: Optional[str] = None) -> Submitted:
        """A new job with the job's tasks (``job.retry``): ``{job: NEW ID,
        status, retry_of}``. ``failed_only``: only on the nodes that
        failed; ``target``: another target, in its text form.

            new = client.retry(job_id, failed_only=True)["job"]
        """
        if target is not None and not isinstance(target, str):
            raise TargetError("a retry's target is its text form")
        return self.request("job.retry", job=job_id, failed_only=failed_only,
                            target=target)

    @staticmethod
    def cells(record: JobRecord) -> Iterator[Tuple[int, str, Dict[str, Any]]]:
        """(step, node, cell) for every cell of a JOB RECORD, in step then
        node order.

            for step, node, cell in client.cells(record):
                print(step, node, cell["status"], cell["exit_code"])
        """
        for step, nodes in sorted(record.get("results", {}).items(),
                                  key=lambda kv: int(kv[0])):
            for node, cell in sorted(nodes.items()):
                yield int(step), node, cell

    @staticmethod
    def verdicts(record: JobRecord) -> List[Dict[str, Any]]:
        """The verdicts of a finished dry run's JOB RECORD (``submit(...,
        check=True)``), as gridcli ``job run --check --diff --output
        json`` lists them: one ``{node, step, task, verdict,
        would_change, current, desired, diff, reason}`` per node and step,
        then the nodes set apart (step None). ``verdict`` is
        ``"would_change"``, ``"no_change"`` or ``"cannot_tell"``;
        ``would_change`` True, False or None.

            record = client.wait(client.submit(job, check=True))
            for v in client.verdicts(record):
                print(v["node"], v["step"], v["verdict"], v["diff"] or "")
        """
        tasks = []
        for phase in record.get("tasks", []):
            tasks.extend(phase.get("tasks", [phase]) if isinstance(phase, dict)
                         else [])
        out = []
        for step, node, cell in Client.cells(record):
            data = cell.get("data") or {}
            said = data.get("would_change")
            ok = cell.get("status") == "success"
            would = (True if ok and said == "true" else
                     False if ok and said == "false" else None)
            reason = None
            if would is None:
                reason = (data.get("reason") or cell.get("reason")
                          or cell.get("error") or cell.get("output")
                          or cell.get("status"))
                if reason and not ok and cell.get("status") not in reason:
                    reason = f"{cell.get('status')}: {reason}"
                reason = reason.split("\n")[0] if reason else None
            task = tasks[step] if step < len(tasks) else {}
            out.append({
                "node": node, "step": step,
                "task": (f"{task.get('backend')} {task.get('action')}"
                         if task else None),
                "verdict": ("would_change" if would else "no_change"
                            if would is False else "cannot_tell"),
                "would_change": would,
                "current": data.get("current"), "desired": data.get("desired"),
                "diff": data.get("diff"), "reason": reason})
        for entry in record.get("not_run", []):
            out.append({"node": entry.get("node"), "step": None, "task": None,
                        "verdict": "cannot_tell", "would_change": None,
                        "current": None, "desired": None, "diff": None,
                        "reason": entry.get("reason")})
        return out

    # -- the dead-letter queue -------------------------------------------

    def dlq_list(self, job: Optional[str] = None,
                 limit: Optional[int] = None) -> List[DlqEntry]:
        """Dead-letter entries, oldest job first: only ``job``'s, at most
        ``limit`` (broker default 50). ``request("dlq.list")`` gives
        ``total`` too.

            for entry in client.dlq_list():
                print(entry["id"], entry["status"], entry["error"])
        """
        return self.request("dlq.list", job=job, limit=limit)["entries"]

    def dlq_get(self, entry: str) -> DlqEntry:
        """One dead-letter entry by its id ``"<job>/<step>/<node>"``.

            entry = client.dlq_get("j-0193a1b2c3d4-0001/0/web-02")
        """
        return self.request("dlq.get", entry=entry)

    def dlq_retry(self, entry: str) -> Submitted:
        """Retries an entry (or every entry of a job, given its id) as a
        new job: ``{job, status, retry_of}``.

            client.dlq_retry("j-0193a1b2c3d4-0001")
        """
        return self.request("dlq.retry", entry=entry)

    def dlq_purge(self, entry: Optional[str] = None, job: Optional[str] = None,
                  older_than: Optional[Duration] = None,
                  all: Optional[bool] = None) -> int:
        """Removes dead-letter entries (at least one of ``entry``, ``job``,
        ``older_than`` (a duration), ``all=True``); returns how many.

            client.dlq_purge(older_than="7d")
        """
        if older_than is not None:
            older_than = _duration(older_than)
        return self.request("dlq.purge", entry=entry, job=job,
                            older_than=older_than, all=all)["purged"]

    # -- nodes, queue, broker --------------------------------------------

    def nodes(self, where: Optional[str] = None) -> List[Node]:
        """Every node, sorted by id; with ``where`` (a target) only the
        nodes it selects, online or not.

            online = [n["id"] for n in client.nodes() if n["status"] == "online"]
            debian = [n["id"] for n in client.nodes(where="fact:os=debian")]
        """
        return self.request("node.list", where=where)["nodes"]

    def node(self, node_id: str) -> Node:
        """One NODE with its ``backends`` (their actions and params) and
        its ``facts`` (what it reports about its host).

            actions = [b["name"] for b in client.node("web-01")["backends"]]
            os_name = client.node("web-01")["facts"].get("os")
        """
        return self.request("node.get", node=node_id)

    def workers(self, node_id: str) -> Workers:
        """What the node runs now (``slots``) and its counters.

            for slot in client.workers("web-01")["slots"]:
                print(slot["job"], slot["action"], slot["status"])
        """
        return self.request("node.workers", node=node_id)

    def node_history(self, node_id: str,
                     limit: Optional[int] = None) -> List[HistoryEntry]:
        """The node's registrations, newest first: actions added and
        removed, versions changed, refused duplicates.

            for entry in client.node_history("web-01", limit=10):
                print(entry["time"], entry["event"], entry["added"])
        """
        return self.request("node.history", node=node_id,
                            limit=limit)["history"]

    def drain(self, node_id: str) -> Node:
        """The node takes no new jobs (admin); returns its NODE.

            client.drain("web-01")["drained"]      # True
        """
        return self.request("node.drain", node=node_id)

    def resume(self, node_id: str) -> Node:
        """The node takes jobs again (admin); returns its NODE.

            client.resume("web-01")
        """
        return self.request("node.resume", node=node_id)

    def status(self) -> Status:
        """The broker's STATUS: version, state, nodes, jobs, store...

            print(client.status()["nodes"]["online"])
        """
        return self.request("status")

    def whoami(self) -> Whoami:
        """The caller as the broker sees it: ``{name, role, via}``.

            client.whoami()["role"]                # "admin"
        """
        return self.request("whoami")

    def queue_stats(self) -> QueueStats:
        """QUEUE STATS: jobs and cells by state, priority and action, wait
        and run times, limits.

            stats = client.queue_stats()
            print(stats["jobs"]["pending"], stats["wait_ms"]["5m"]["p99"])
        """
        return self.request("queue.stats")

    def metrics(self) -> str:
        """The broker's figures in the Prometheus text format (a str).

            text = client.metrics()
        """
        return self.request("metrics.get")["text"]

    def broker_drain(self) -> BrokerState:
        """No new job is admitted; running ones finish (admin):
        ``{state, running, pending}``.

            client.broker_drain()["state"]         # "draining"
        """
        return self.request("broker.drain")

    def broker_resume(self) -> BrokerState:
        """The broker admits jobs again (admin): ``{state: "serving",
        running, pending}``.

            client.broker_resume()
        """
        return self.request("broker.resume")

    def relays(self) -> List[Relay]:
        """The relays, sorted by name.

            for relay in client.relays():
                print(relay["name"], relay["agents"], relay["connected"])
        """
        return self.request("relay.list")["relays"]

    # -- a broker cluster -------------------------------------------------

    def cluster_status(self) -> Dict[str, Any]:
        """The cluster as its active sees it: ``role`` (``"active"``, or
        ``"alone"`` for a broker without ``ha:``), ``cluster``, ``name``,
        ``epoch``, ``pass`` and ``released``, and ``standbys``: each with
        ``name``, ``state``, ``sync``, ``pass``, ``lag_passes`` and
        ``lag_ms``.

            status = client.cluster_status()
            in_sync = [s["name"] for s in status.get("standbys", []) if s["sync"]]
        """
        return self.request("cluster.status")

    def cluster_switchover(self, to: Optional[str] = None) -> None:
        """Hands the lead to a standby in sync (admin), ``to`` naming the
        one expected; raises GridError ``conflict`` when none is in sync.

            client.cluster_switchover(to="broker-b")
        """
        self.request("cluster.switchover", to=to)

    # -- keys and tokens (admin) -----------------------------------------

    def keys(self) -> List[Key]:
        """Every key the broker knows (clients, agents, relays).

            pending = [k["key"] for k in client.keys() if k["status"] == "pending"]
        """
        return self.request("key.list")["keys"]

    def key_accept(self, key: Optional[str] = None,
                   node: Optional[str] = None) -> Dict[str, Any]:
        """Accepts a key, by its 40 characters or by the node it claims:
        ``{key, status: "accepted", ?node, ?already}``.

            client.key_accept(node="web-03")
        """
        return self.request("key.accept", **_key_or_node(key, node))

    def key_reject(self, key: Optional[str] = None,
                   node: Optional[str] = None) -> Dict[str, Any]:
        """Refuses a key from now on; its node goes offline:
        ``{key, status: "rejected", ?node}``.

            client.key_reject(node="web-03")
        """
        return self.request("key.reject", **_key_or_node(key, node))

    def key_delete(self, key: Optional[str] = None,
                   node: Optional[str] = None) -> Dict[str, Any]:
        """Forgets a key; its node is free for another key:
        ``{key, deleted: true, ?node}``.

            client.key_delete(node="web-03")
        """
        return self.request("key.delete", **_key_or_node(key, node))

    def broker_rekey(self, deadline: Optional[str] = None) -> Dict[str, Any]:
        """Starts the rotation of the broker's own key (admin): ``{key,
        next, deadline}``; the old key is retired when every node has the
        next one, or at the deadline (a duration, default 24h).

            client.broker_rekey(deadline="2h")
        """
        fields = {"deadline": deadline} if deadline is not None else {}
        return self.request("broker.rekey", **fields)

    def broker_keys(self) -> Dict[str, Any]:
        """The broker's public key and, while a rotation runs, the next
        one and how far it has come: ``{key, rotating, retired, ?next,
        ?deadline, ?nodes, ?acknowledged, ?unable, ?relayed}``.

            next_key = client.broker_keys().get("next")
        """
        return self.request("broker.keys")

    def token_add(self, name: str, role: str) -> Token:
        """A bearer token for the HTTP API: ``{name, role, token,
        created}``; ``token`` is shown only here.

            secret = client.token_add("ci", "operator")["token"]
        """
        return self.request("token.add", name=name, role=role)

    def tokens(self) -> List[Token]:
        """The tokens, sorted by name (never the tokens themselves).

            names = [t["name"] for t in client.tokens()]
        """
        return self.request("token.list")["tokens"]

    def token_revoke(self, name: str) -> Dict[str, Any]:
        """Revokes a token: ``{name, revoked: true}``.

            client.token_revoke("ci")
        """
        return self.request("token.revoke", name=name)

    # -- the audit trail -------------------------------------------------

    def audit_list(self, who: Optional[str] = None,
                   request_type: Optional[str] = None,
                   object: Optional[str] = None,
                   outcome: Optional[str] = None,
                   since: Optional[float] = None,
                   before: Optional[str] = None,
                   limit: Optional[int] = None) -> List[AuditEntry]:
        """The audit trail, newest first (admin): who changed what, through
        which face, and how it ended; refused attempts too. Filters: the
        caller's name ``who``, a ``request_type`` (``"job.cancel"``, or a
        prefix ``"job."``), the ``object`` acted on, the ``outcome``
        (``"ok"``, ``"error"``, ``"refused"`` or an error code), entries
        ``since`` a time (seconds since the epoch, as ``time.time()``),
        entries ``before`` an entry id (paging), at most ``limit`` (1..1000,
        broker default 50). ``request("audit.list")`` gives ``next`` too.

            for entry in client.audit_list(who="alice", since=time.time() - 3600):
                print(entry["time"], entry["type"], entry.get("object"),
                      entry["outcome"])
        """
        since_ms = None if since is None else max(0, int(since * 1000))
        return self.request("audit.list", who=who, request_type=request_type,
                            object=object, outcome=outcome, since=since_ms,
                            before=before, limit=limit)["entries"]

    # -- job notifications (webhooks) ------------------------------------

    def notify_list(self, status: Optional[str] = None,
                    job: Optional[str] = None,
                    limit: Optional[int] = None) -> List[Delivery]:
        """The webhook deliveries of jobs' ends, newest first (admin):
        ``status`` ``"pending"``, ``"sent"`` or ``"dead"``, one ``job``'s,
        at most ``limit`` (1..1000, broker default 100). A URL is shown
        without its query (docs/NOTIFY.md).

            for d in client.notify_list(status="dead"):
                print(d["id"], d["job"], d["url"], d.get("error"))
        """
        return self.request("notify.list", status=status, job=job,
                            limit=limit)["deliveries"]

    def notify_retry(self, delivery: str) -> Dict[str, Any]:
        """Sends a sent or dead delivery again, now, with a new retry
        window (admin): ``{delivery, job, status: "pending"}``.

            client.notify_retry(client.notify_list(status="dead")[0]["id"])
        """
        return self.request("notify.retry", delivery=delivery)

    # -- blobs (file contents for file.put) ------------------------------

    def upload(self, path: str) -> Dict[str, Any]:
        """Stores the local file ``path`` in the broker as a blob named by
        its sha256, in pieces of 256 KiB; what the broker has of it (all of
        it, or the start of an upload cut short) is not sent again.
        Returns ``{sha256, size, stored}``; then a task
        ``{"backend": "file", "action": "put", "params": {"path": "/etc/x",
        "sha256": ..., "size": ...}}`` puts it on nodes, which fetch it
        once each.

            blob = client.upload("nginx.conf")
        """
        digest = hashlib.sha256()
        with open(path, "rb") as file:
            for block in iter(lambda: file.read(1 << 16), b""):
                digest.update(block)
            size = file.tell()
        sha256 = digest.hexdigest()
        offset = 0
        try:
            have = self.request("blob.stat", sha256=sha256)
            if have["size"] == size:
                offset = have["received"]
        except GridError:
            pass
        if offset == size and size > 0:
            return {"sha256": sha256, "size": size, "stored": False}
        chunk = 256 * 1024
        with open(path, "rb") as file:
            file.seek(offset)
            while True:
                piece = file.read(min(chunk, size - offset))
                self.request("blob.put", sha256=sha256, size=size,
                             offset=offset,
                             data=base64.b64encode(piece).decode("ascii"))
                offset += len(piece)
                if offset >= size:
                    break
        return {"sha256": sha256, "size": size, "stored": True}

    def blob_stat(self, sha256: str) -> Dict[str, Any]:
        """A blob's ``{sha256, size, received, complete, created, used}``.

            done = client.blob_stat(blob["sha256"])["complete"]
        """
        return self.request("blob.stat", sha256=sha256)

    def blobs(self) -> List[Dict[str, Any]]:
        """Every blob the broker stores (as blob_stat gives each);
        ``request("blob.list")`` gives what it sent agents too.

            for blob in client.blobs():
                print(blob["sha256"], blob["size"])
        """
        return self.request("blob.list")["blobs"]

    def blob_delete(self, sha256: str) -> Dict[str, Any]:
        """Deletes a blob (operator): ``{sha256, deleted: true}``.

            client.blob_delete(blob["sha256"])
        """
        return self.request("blob.delete", sha256=sha256)

    # -- schedules -------------------------------------------------------

    def schedule_add(self, name: str, job: Job, cron: Optional[str] = None,
                     every: Optional[Duration] = None, tz: Optional[str] = None,
                     overlap: Optional[str] = None,
                     catch_up: Optional[str] = None,
                     catch_up_window: Optional[Duration] = None) -> Schedule:
        """A schedule that submits ``job`` on ``cron`` (5 fields, with
        ``tz``) or ``every`` (a duration); ``overlap`` skip|queue|allow,
        ``catch_up`` one|none (PROTOCOL.md 5.6). Returns the SCHEDULE.

            client.schedule_add("nightly-update",
                                {"target": "group:web",
                                 "tasks": [{"backend": "apt", "action": "update"}]},
                                cron="0 3 * * *", tz="Europe/Berlin")
        """
        return self.request(
            "schedule.add", name=name, job=job, cron=cron,
            every=None if every is None else _duration(every), tz=tz,
            overlap=overlap, catch_up=catch_up,
            catch_up_window=None if catch_up_window is None
            else _duration(catch_up_window))

    def schedules(self) -> List[Schedule]:
        """Every schedule, sorted by name.

            for s in client.schedules():
                print(s["name"], s.get("next_run"), s["last_status"])
        """
        return self.request("schedule.list")["schedules"]

    def schedule(self, name: str) -> Schedule:
        """One SCHEDULE.

            client.schedule("nightly-update")["runs"]
        """
        return self.request("schedule.get", name=name)

    def schedule_pause(self, name: str) -> Schedule:
        """No run starts until resumed; returns the SCHEDULE.

            client.schedule_pause("nightly-update")["paused"]   # True
        """
        return self.request("schedule.pause", name=name)

    def schedule_resume(self, name: str) -> Schedule:
        """Runs again from the next due time; returns the SCHEDULE.

            client.schedule_resume("nightly-update")
        """
        return self.request("schedule.resume", name=name)

    def schedule_delete(self, name: str) -> Dict[str, Any]:
        """Deletes a schedule (the jobs it started stay):
        ``{name, deleted: true}``.

            client.schedule_delete("nightly-update")
        """
        return self.request("schedule.delete", name=name)

    def schedule_run(self, name: str) -> Submitted:
        """One run now, whatever the time, overlap or pause:
        ``{job, schedule, status}``.

            job_id = client.schedule_run("nightly-update")["job"]
        """
        return self.request("schedule.run", name=name)


def _key_or_node(key, node):
    if (key is None) == (node is None):
        raise UsageError("give exactly one of key and node")
    if node is not None and not _NAME.match(node):
        raise UsageError(f"bad node id {node!r}")
    return {"key": key} if key is not None else {"node": node}


def _duration(value):
    """Seconds (int/float) or a duration string ("30s", "1h30m")."""
    if isinstance(value, str):
        return value
    ms = int(round(float(value) * 1000))
    return f"{ms}ms"
