"""The `log` section: log format and level, and the dnstap query log."""

from __future__ import annotations

import stat

from gslbd.config.fields import MapReader, boolean, enum, nonempty_string
from gslbd.model.config import DnstapConfig, LogConfig
from gslbd.types import LogFormat, LogLevel

# sockaddr_un.sun_path holds 108 bytes on Linux, one of them the terminating NUL.
MAX_SOCKET_PATH = 107


def read_log(r: MapReader | None) -> LogConfig:
    """`log: {format: text | json, level: debug | info | warning | error, dnstap: {...}}`."""
    if r is None:
        return LogConfig()
    r.check_keys(("format", "level", "dnstap"))
    return LogConfig(
        format=r.get("format", enum(LogFormat, "log format"), LogFormat.TEXT),
        level=r.get("level", enum(LogLevel, "log level"), LogLevel.INFO),
        dnstap=_read_dnstap(r.sub("dnstap")),
    )


def _read_dnstap(r: MapReader | None) -> DnstapConfig | None:
    """`dnstap: {socket: PATH, queries: true, responses: true}`. The socket belongs to the dnstap reader,
    which may start after gslbd (gslbd connects and reconnects by itself): a missing socket is fine, a
    missing directory only a warning, something that is not a socket an error."""
    if r is None:
        return None
    r.check_keys(("socket", "file", "queries", "responses"))
    queries = r.get("queries", boolean, True)
    responses = r.get("responses", boolean, True)
    if not queries and not responses:
        r.warn("queries", "queries and responses are both false: the dnstap log stays empty")
    if r.has("file"):
        return _read_dnstap_file(r, queries, responses)
    text = r.req("socket", nonempty_string)
    if text is None:
        return None
    path = r.rep.resolve_path(text)
    if len(str(path).encode()) > MAX_SOCKET_PATH:
        r.error(
            "socket", f"{str(path)!r} is longer than {MAX_SOCKET_PATH} bytes, the limit for a unix socket"
        )
    elif path.exists() and not stat.S_ISSOCK(path.stat().st_mode):
        r.error("socket", f"{str(path)!r} exists and is not a unix socket")
    elif not path.parent.is_dir():
        r.warn("socket", f"the directory of {str(path)!r} does not exist (yet); dnstap waits for it")
    return DnstapConfig(str(path), queries=queries, responses=responses)


def _read_dnstap_file(r: MapReader, queries: bool, responses: bool) -> DnstapConfig | None:
    """`dnstap: {file: PATH}`: Frame Streams appended to a file gslbd writes itself (a worker process
    writes PATH.N, N counting from 1). Its directory must exist; not with `socket` too."""
    if r.has("socket"):
        r.error("file", "give socket or file, not both")
        return None
    text = r.req("file", nonempty_string)
    if text is None:
        return None
    path = r.rep.resolve_path(text)
    if path.is_dir() or (path.exists() and not path.is_file()):
        r.error("file", f"{str(path)!r} exists and is not a regular file")
    elif not path.parent.is_dir():
        r.error("file", f"the directory of {str(path)!r} does not exist")
    return DnstapConfig(None, queries=queries, responses=responses, file=str(path))
