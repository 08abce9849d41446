"""grid: a Python client for the grid broker's client API.

It speaks the wire protocol of proto/PROTOCOL.md (ZeroMQ REQ + msgpack,
CurveZMQ by default) with Debian's python3-zmq and python3-msgpack, and
finds its broker, keys and config as gridcli does (grid.config):

    from grid import Client
    client = Client()              # GRID_BROKER, ~/.config/grid/, /etc/grid/...
    job = client.run("group:web and not node:web-01", "system", "hostname")
    record = client.wait(job, progress=lambda p: print(p["done"], p["nodes"]))
    for step, node, cell in client.cells(record):
        print(step, node, cell["status"], cell["output"])

Client has a method for every request of the client API (REQUEST_METHODS
maps each wire type to it), and ``request(type, **fields)`` for any.
Every refusal by the broker raises GridError, whose ``code`` is the wire's
stable error code (``not_found``, ``invalid_job``, ``forbidden``...). A
broker that does not answer raises Unreachable; settings that cannot be
read, ConfigError; both are GridErrors.
"""

from .client import (  # noqa: F401
    FINISHED,
    REQUEST_METHODS,
    Client,
    parse_target,
    read_cert_key,
)
from .config import load_config, resolve as resolve_settings  # noqa: F401
from .errors import (  # noqa: F401
    ConfigError,
    GridError,
    TargetError,
    Unreachable,
    UsageError,
)

__all__ = ["Client", "GridError", "Unreachable", "ConfigError", "TargetError",
           "UsageError", "FINISHED", "REQUEST_METHODS", "parse_target",
           "read_cert_key", "load_config", "resolve_settings"]
__version__ = "0.1.0"
