"""What keeps the admin API standing when clients misbehave (docs/api.md, "Limits").

- `json_body(request)`: the request body as JSON, or a 400 response with a JSON error for anything
  malformed: an unknown charset, bytes that do not decode, invalid JSON, a number beyond Python's
  4,300-digit limit, nesting deep enough to exhaust the recursion limit.
- `HTTP_LIMITS`: aiohttp's request-parser bounds (request line and each header at most 8 KiB, at most
  64 headers) and a 15 s keep-alive: an idle connection does not stay open.
- `quiet_http_logger()`: the logger handed to aiohttp's protocol. A request aiohttp cannot parse (an
  oversized header, a malformed request line) is the client's error: it is answered 400, counted
  (gslbd_api_bad_requests_total) and logged on one line at most once a minute, never with a traceback.
  Anything else aiohttp logs (a bug in a handler) keeps its traceback.
- `count_connections(server, budget)`: every API connection is admitted into the process's connection
  budget (gslbd.limits), shared with DNS over TCP; when full the least recently active connection goes.
"""

from __future__ import annotations

import asyncio
import codecs
import json
import logging
import time
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from gslbd.limits import ConnectionBudget
from gslbd.metrics import API_BAD_REQUESTS

LOG_INTERVAL = 60.0
HTTP_LIMITS: dict[str, Any] = {
    "max_line_size": 8190,
    "max_field_size": 8190,
    "max_headers": 64,
    "keepalive_timeout": 15.0,
}


class BodyError(ValueError):
    """The request body is not JSON we can read; the text says why."""


async def json_body(request: web.Request) -> Any:
    """The body parsed as JSON; BodyError when it cannot be (the caller answers 400)."""
    charset = request.charset or "utf-8"
    try:
        codecs.lookup(charset)
    except LookupError:
        raise BodyError(f"unsupported charset {charset[:40]!r}; send UTF-8 JSON") from None
    raw = await request.read()
    try:
        return json.loads(raw.decode(charset))
    except UnicodeDecodeError:
        raise BodyError(f"the body is not valid {charset[:40]}") from None
    except RecursionError:
        raise BodyError("the body is nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, and int() beyond the digit limit
        raise BodyError(f"the body is not valid JSON: {str(exc)[:120]}") from None


class _ClientErrors(logging.Filter):
    """Turns aiohttp's traceback for an unparsable request into one line, at most once a minute."""

    def __init__(self) -> None:
        super().__init__()
        self._logged_at = -LOG_INTERVAL

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if not isinstance(exc, HttpProcessingError):
            return True
        API_BAD_REQUESTS.inc()
        now = time.monotonic()
        if now - self._logged_at < LOG_INTERVAL:
            return False
        self._logged_at = now
        remote = record.args[0] if isinstance(record.args, tuple) and record.args else "?"
        record.msg = (
            "answered 400 to a malformed HTTP request from %s: %s (counted in %s; logged once a minute)"
        )
        record.args = (remote, str(exc.message)[:200], "gslbd_api_bad_requests_total")
        record.exc_info = None
        record.exc_text = None
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def quiet_http_logger() -> logging.Logger:
    logger = logging.getLogger("gslbd.api.http")
    if not any(isinstance(f, _ClientErrors) for f in logger.filters):
        logger.addFilter(_ClientErrors())
    return logger


class _Connection:
    """An API connection in the budget; evicting it aborts the socket."""

    __slots__ = ("_transport",)

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport

    def close(self) -> None:
        self._transport.abort()


def count_connections(server: web.Server, budget: ConnectionBudget) -> None:
    """Admit every connection of `server` into `budget` (and forget it when it closes)."""
    made, lost = server.connection_made, server.connection_lost
    open_: dict[object, _Connection] = {}

    def connection_made(handler: Any, transport: asyncio.Transport) -> None:
        conn = _Connection(transport)
        open_[handler] = conn
        budget.admit(conn, "api")
        made(handler, transport)

    def connection_lost(handler: Any, exc: BaseException | None = None) -> None:
        conn = open_.pop(handler, None)
        if conn is not None:
            budget.forget(conn)
        lost(handler, exc)

    server.connection_made = connection_made  # type: ignore[method-assign]
    server.connection_lost = connection_lost  # type: ignore[method-assign]
