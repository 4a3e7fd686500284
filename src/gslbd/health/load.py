"""Fetching load figures (`endpoints[].load`, docs/policies/load.md): one GET of the load URL, read with
the HTTP probe's reader (health/probes/http.py), and the body turned into a number.

    a plain number           "0.42"
    JSON                     {"load": 0.42}
    Prometheus text          with `metric: name`, the first sample of that metric (any labels)

A body that is none of these is garbage (`Garbage`); a connection that fails, an HTTP status other than
2xx or a timeout is `Unreachable`. The scheduler (health/scheduler.py) counts both and reports them to
the app, which keeps the last good figure (policy/load.py `missed`).
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import ssl
from urllib.parse import urlsplit

from gslbd import __version__
from gslbd.health.probes.base import MAX_READ, ProbeFailed, abort, probe_host
from gslbd.health.probes.http import parse_status_line, read_body, read_headers, status_ok, tls_context
from gslbd.model.load import LoadSource
from gslbd.model.service import Endpoint

USER_AGENT = f"gslbd-load/{__version__}"
_SAMPLE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


class LoadFailed(Exception):
    """No figure this time; `str()` says why in one line."""


class Unreachable(LoadFailed):
    """The URL did not answer with a 2xx status in time."""


class Garbage(LoadFailed):
    """The body is not a load figure."""


def _finite(value: float, what: str) -> float:
    if not math.isfinite(value) or value < 0:
        raise Garbage(f"{what} {value!r} is not a finite number >= 0")
    return value


def parse_load(body: bytes, metric: str | None) -> float:
    """The load figure in a body (see the module docstring); Garbage when there is none."""
    text = body.decode("utf-8", "replace").strip()
    if metric is not None:
        for line in text.splitlines():
            found = _SAMPLE.match(line.strip())
            if found is not None and found.group(1) == metric:
                try:
                    return _finite(float(found.group(3)), f"metric {metric}")
                except ValueError:
                    raise Garbage(f"metric {metric} has the value {found.group(3)[:40]!r}") from None
        raise Garbage(f"no sample of metric {metric} in the body")
    try:
        return _finite(float(text), "the body")
    except ValueError:
        pass
    try:
        value = json.loads(text)
    except ValueError:
        raise Garbage(f"the body {text[:40]!r} is neither a number nor JSON") from None
    figure = value.get("load") if isinstance(value, dict) else None
    if isinstance(figure, bool) or not isinstance(figure, int | float):
        raise Garbage('the JSON body has no number "load"')
    return _finite(float(figure), '"load"')


async def fetch_load(endpoint: Endpoint, source: LoadSource) -> float:
    """GET the endpoint's load URL once and read its figure (the caller enforces `source.timeout`)."""
    url = urlsplit(source.url_for(probe_host(endpoint)))
    tls = url.scheme == "https"
    host = url.hostname or probe_host(endpoint)
    port = url.port or (443 if tls else 80)
    ctx: ssl.SSLContext | None = tls_context(True, None) if tls else None
    try:
        reader, writer = await asyncio.open_connection(
            host, port, ssl=ctx, server_hostname=host if tls else None, limit=MAX_READ
        )
    except OSError as exc:
        raise Unreachable(f"cannot connect to {host}:{port}: {exc.strerror or exc}") from None
    try:
        path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        netloc = url.netloc.rpartition("@")[2]
        request = (
            f"GET {path} HTTP/1.1\r\nHost: {netloc}\r\nUser-Agent: {USER_AGENT}\r\nAccept: */*\r\n"
            "Connection: close\r\n\r\n"
        )
        writer.write(request.encode("latin-1", "replace"))
        try:
            status = parse_status_line(await reader.readline())
            if not status_ok(status, ()):
                raise Unreachable(f"HTTP {status}")
            body = await read_body(reader, await read_headers(reader))
        except (OSError, asyncio.IncompleteReadError) as exc:
            raise Unreachable(f"reading the reply failed: {exc}") from None
        except ProbeFailed as exc:  # not HTTP
            raise Garbage(str(exc)) from None
        return parse_load(body, source.metric)
    finally:
        abort(writer)
