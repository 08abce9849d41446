"""The exceptions of the grid module: every refusal is a GridError."""


class GridError(Exception):
    """The broker refused a request: ``code`` is the wire's error code,
    ``message`` its sentence, ``details`` its list of lines (may be empty).
    Also raised by the module itself with codes of its own (below)."""

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

    def __init__(self, endpoint, request_type, tries, curve=False,
                 keys=None):
        text = f"no reply to {request_type} from {endpoint} after {tries} tries"
        if keys:
            # Every broker key failed its handshake: said without waiting
            text = (f"no reply to {request_type} from {endpoint}: no "
                    "handshake went through with the broker key"
                    f"{'s' if len(keys) > 1 else ''} {', '.join(keys)}; "
                    "check that broker_key is the public key of the broker "
                    "at this endpoint: fetch it with 'gridcli key "
                    "fetch-broker --out FILE' where a client still "
                    "connects, or copy broker.key from the broker's host")
        elif curve:
            # The broker drops a handshake it cannot read without a word:
            # a wrong server key looks just like a broker that is not there
            text += ("; a wrong broker key looks like this too: check that "
                     "broker_key is the public key of the broker at this "
                     "endpoint, and that the endpoint is right")
        super().__init__("unreachable", text)
        self.endpoint = endpoint
        self.keys = list(keys or [])


class ConfigError(GridError, ValueError):
    """Code ``config``: the config file cannot be read or says something
    wrong, or no key pair or broker key is to be found (the message says
    what to do). A ValueError too."""

    def __init__(self, message):
        super().__init__("config", message)


class TargetError(GridError, ValueError):
    """Code ``invalid_job``: a target that is neither text nor a TARGET
    map, or text that is no target. A ValueError too, as before."""

    def __init__(self, message):
        super().__init__("invalid_job", message, ["target: " + message])


class UsageError(GridError, ValueError):
    """Code ``bad_request``, raised before anything is sent: arguments
    that make no request (``key_accept()`` with neither key nor node). A
    ValueError too."""

    def __init__(self, message):
        super().__init__("bad_request", message)
