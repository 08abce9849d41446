"""grid: a Python client for the grid broker's client API.

It speaks the wire protocol of proto/PROTOCOL.md (ZeroMQ REQ + msgpack,
CurveZMQ by default) with Debian's python3-zmq and python3-msgpack:

    from grid import Client
    client = Client("tcp://127.0.0.1:7701",
                    broker_key="/etc/grid/keys/broker.key",
                    key="~/.config/grid/client.key")
    job = client.run("group:web", "system", "hostname")
    record = client.wait(job)
    for step, node, cell in client.cells(record):
        print(step, node, cell["status"], cell["output"])

Every refusal by the broker raises GridError, whose ``code`` is the wire's
stable error code (``not_found``, ``invalid_job``, ``forbidden``...).
A broker that does not answer raises Unreachable.
"""

from .client import (  # noqa: F401
    FINISHED,
    Client,
    GridError,
    Unreachable,
    parse_target,
    read_cert_key,
)

__all__ = ["Client", "GridError", "Unreachable", "FINISHED", "parse_target",
           "read_cert_key"]
__version__ = "0.1.0"
