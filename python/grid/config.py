"""Where a client finds its broker, keys and config file: gridcli's rules.

The order is gridcli's (cli/settings.c, cli/secure.c, docs/CLI.md), with
the arguments of Client in place of its flags:

- config file: ``config=``, else ``GRID_CONFIG``, else
  ``/etc/grid/gridcli.yaml`` when it exists (``"none"``: no file). A file
  named by ``config=`` or ``GRID_CONFIG`` must exist.
- endpoint: ``endpoint=``, else ``GRID_BROKER``, else the file's
  ``broker``, else ``tcp://127.0.0.1:7701``.
- plaintext: ``insecure=True``, or the file's ``insecure: true``.
- key pair: ``key=``, else ``GRID_KEY``, else the file's ``key``, else
  ``~/.config/grid/client.key`` when its secret file exists.
- broker key: ``broker_key=``, else ``GRID_BROKER_KEY``, else the file's
  ``broker_key``, else ``/etc/grid/keys/broker.key`` or
  ``~/.config/grid/broker.key``, whichever is readable. Each but the
  defaults may name several keys, comma-separated (the file's also as a
  YAML list): the broker's current and next key while it rotates its key.
- timeout: the file's ``request_timeout`` is the total for one answer
  over every try, as in gridcli.

The config file is the small YAML gridcli reads (conf/gridcli.yaml): one
mapping of scalars, comments, optional quotes; broker_key may be a list. It is read here without a
YAML library.
"""

import os
import re

from .errors import ConfigError

DEFAULT_ENDPOINT = "tcp://127.0.0.1:7701"
DEFAULT_CONFIG = "/etc/grid/gridcli.yaml"
DEFAULT_BROKER_KEY = "/etc/grid/keys/broker.key"
CONFIG_KEYS = ("broker", "output", "request_timeout", "key", "broker_key",
               "insecure")

_DURATION_UNITS = (("d", 86400000), ("h", 3600000), ("m", 60000),
                   ("s", 1000), ("ms", 1))
_DURATION_MAX_MS = 30 * 86400000
_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)[ \t]*:(?:[ \t]+(.*))?$")



def parse_duration_ms(text):
    """``"500ms"``, ``"5s"``, ``"1h30m"`` (units largest first, each once,
    at most 30 days) as milliseconds, as gridcli reads it. Raises
    ValueError."""
    rest = text
    total = 0
    next_unit = 0
    if not rest:
        raise ValueError(f"'{text}' is not a duration")
    while rest:
        digits = re.match(r"[0-9]+", rest)
        if not digits:
            raise ValueError(f"'{text}' is not a duration (like 500ms, 10s, "
                             "5m or 1h30m)")
        count = int(digits.group(0))
        rest = rest[digits.end():]
        unit = 4 if rest.startswith("ms") else next(
            (i for i, (u, _) in enumerate(_DURATION_UNITS[:4])
             if rest.startswith(u)), None)
        if unit is None or unit < next_unit:
            raise ValueError(f"'{text}' is not a duration (like 500ms, 10s, "
                             "5m or 1h30m)")
        next_unit = unit + 1
        rest = rest[len(_DURATION_UNITS[unit][0]):]
        total += count * _DURATION_UNITS[unit][1]
        if total > _DURATION_MAX_MS:
            raise ValueError(f"'{text}' is longer than 30 days")
    return total


def _scalar(text):
    """One YAML scalar of the subset: quoted text, true/false, or plain
    text up to a comment."""
    text = text.strip()
    if text[:1] in ("'", '"'):
        quote = text[0]
        end = text.find(quote, 1)
        while quote == "'" and end != -1 and text[end + 1:end + 2] == "'":
            end = text.find(quote, end + 2)
        if end == -1:
            raise ValueError("a quoted value without its closing quote")
        after = text[end + 1:].strip()
        if after and not after.startswith("#"):
            raise ValueError(f"text after the quoted value: {after}")
        body = text[1:end]
        if quote == "'":
            return body.replace("''", "'")
        return (body.replace('\\"', '"').replace("\\\\", "\\"))
    comment = re.search(r"[ \t]#", text)
    if comment:
        text = text[:comment.start()].rstrip()
    if text.startswith("#"):
        text = ""
    if text in ("true", "True", "TRUE"):
        return True
    if text in ("false", "False", "FALSE"):
        return False
    if text in ("", "~", "null", "Null", "NULL"):
        return None
    return text


def load_config(path):
    """The settings of a gridcli config file as a dict of its keys (only
    those it sets). Raises ConfigError naming the file and the problem,
    as gridcli does (an unknown key is an error)."""
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError as error:
        raise ConfigError(f"config: cannot read {path}: "
                          f"{error.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"config {path}: not UTF-8 text") from None
    settings = {}
    listing = None   # the key whose block list ("  - item") is being read
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or stripped == "---":
            continue
        if listing and line[0] in " \t" and stripped.startswith("-"):
            # broker_key as a list: the broker's current and next key
            try:
                item = _scalar(stripped[1:])
            except ValueError as error:
                raise ConfigError(f"config {path}: line {number}: "
                                  f"{error}") from None
            settings.setdefault(listing, []).append(item)
            continue
        listing = None
        found = _LINE.match(line)
        if not found or line[0] in " \t":
            raise ConfigError(f"config {path}: line {number}: expected "
                              "'key: value' (gridcli's config is one "
                              "mapping of scalars)")
        name = found.group(1)
        if name not in CONFIG_KEYS:
            raise ConfigError(f"config {path}: unknown key '{name}' "
                              f"(known: {', '.join(CONFIG_KEYS)})")
        if name in settings:
            raise ConfigError(f"config {path}: '{name}' is given twice")
        try:
            value = _scalar(found.group(2) or "")
        except ValueError as error:
            raise ConfigError(f"config {path}: line {number}: "
                              f"{error}") from None
        if value is None:
            listing = name if name == "broker_key" else None
            continue
        if (name == "broker_key" and isinstance(value, str)
                and value.startswith("[") and value.endswith("]")):
            # The flow form: [OLD, NEW]
            value = [_scalar(item) for item in value[1:-1].split(",")]
        settings[name] = value
    return _check(path, settings)


def _check(path, settings):
    keys = settings.get("broker_key")
    if isinstance(keys, list):
        if not keys or not all(isinstance(k, str) and k and "," not in k
                                for k in keys):
            raise ConfigError(f"config {path}: broker_key: expected keys "
                              "(key files or 40 characters of Z85)")
        settings["broker_key"] = ",".join(keys)
    for name in ("broker", "output", "key", "broker_key", "request_timeout"):
        if name in settings and not isinstance(settings[name], str):
            raise ConfigError(f"config {path}: {name}: expected text")
    if "insecure" in settings and not isinstance(settings["insecure"], bool):
        raise ConfigError(f"config {path}: insecure: expected true or false")
    if settings.get("broker") == "":
        raise ConfigError(f"config {path}: broker: expected an endpoint such "
                          "as tcp://127.0.0.1:7701")
    if settings.get("output", "table") not in ("table", "json"):
        raise ConfigError(f"config {path}: output: expected table or json, "
                          f"not '{settings['output']}'")
    if "request_timeout" in settings:
        try:
            ms = parse_duration_ms(settings["request_timeout"])
        except ValueError as error:
            raise ConfigError(f"config {path}: request_timeout: "
                              f"{error}") from None
        if ms <= 0:
            raise ConfigError(f"config {path}: request_timeout: must be "
                              "longer than 0")
        settings["request_timeout_ms"] = ms
    return settings


def key_dir(environ=None):
    """``$HOME/.config/grid`` (``./.config/grid`` without HOME), where
    ``gridcli keygen`` writes the client's pair."""
    home = (os.environ if environ is None else environ).get("HOME") or "."
    return os.path.join(home, ".config", "grid")


def _first(*values):
    return next((v for v in values if v), None)


def resolve(endpoint=None, broker_key=None, key=None, insecure=None,
            config=None, environ=None):
    """The settings a Client uses, by gridcli's rules (module docstring):
    a dict with ``endpoint``, ``insecure``, ``key``, ``broker_key`` (paths
    or key text; None when insecure), ``request_timeout_ms`` (None when
    the file gives none) and ``config`` (the file read, or None). Raises
    ConfigError."""
    env = os.environ if environ is None else environ
    path = _first(config, env.get("GRID_CONFIG"))
    if path is None and os.path.exists(DEFAULT_CONFIG):
        path = DEFAULT_CONFIG
    if path == "none":
        path = None
    settings = load_config(path) if path else {}
    resolved = {
        "endpoint": _first(endpoint, env.get("GRID_BROKER"),
                           settings.get("broker"), DEFAULT_ENDPOINT),
        "insecure": bool(insecure) or settings.get("insecure", False),
        "key": None,
        "broker_key": None,
        "request_timeout_ms": settings.get("request_timeout_ms"),
        "config": path,
    }
    if resolved["insecure"]:
        return resolved
    directory = key_dir(env)
    default_key = os.path.join(directory, "client.key")
    key_path = _first(key, env.get("GRID_KEY"), settings.get("key"))
    if key_path is None and os.path.exists(default_key + "_secret"):
        key_path = default_key
    if key_path is None:
        raise ConfigError(
            "no client key. Create one with 'gridcli keygen' (it writes "
            f"{default_key}), ask the broker's admin to give its public key "
            "a role (clients: in gridbroker.yaml), and pass the broker's "
            "public key with broker_key= or GRID_BROKER_KEY. Only against "
            "a broker that runs --insecure, pass insecure=True.")
    default_broker = os.path.join(directory, "broker.key")
    server = _first(broker_key, env.get("GRID_BROKER_KEY"),
                    settings.get("broker_key"))
    if server is None and os.access(DEFAULT_BROKER_KEY, os.R_OK):
        server = DEFAULT_BROKER_KEY
    if server is None and os.access(default_broker, os.R_OK):
        server = default_broker
    if server is None:
        raise ConfigError(
            "no broker public key: pass broker_key= (the broker's broker.key "
            "file or its 40 characters), or set GRID_BROKER_KEY, or copy "
            f"broker.key to {DEFAULT_BROKER_KEY} or {default_broker}")
    resolved["key"] = key_path
    resolved["broker_key"] = server
    return resolved
