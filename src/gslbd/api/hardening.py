"""What keeps the admin API standing when clients misbehave (docs/api.md, "Limits").

- `json_body(request)`: the request body as JSON, or a 400 response with a JSON error for anything
  malformed: an unknown charset, bytes that do not decode, invalid JSON, a number beyond Python's
  4,300-digit limit, nesting deep enough to exhaust the recursion limit.
- `HTTP_LIMITS`: aiohttp's request-parser bounds (request line and each header at most 8 KiB, at most
  64 headers) and a 15 s keep-alive: an idle connection does not stay open.
- `quiet_http_logger()`: the logger handed to aiohttp's protocol. A request aiohttp cannot parse (an
  oversized header, a malformed request line) is the client's error: it is answered 400 (414 for a
  request line over 8,190 bytes), counted (gslbd_api_bad_requests_total) and logged on one line at most
  once a minute, never with a traceback. Anything else aiohttp logs (a bug in a handler) keeps its
  traceback.
- `JsonErrorRunner`: aiohttp's AppRunner whose connections answer what they refuse before any route
  (the parser's 400 and 414, a handler's 500) with JSON `{"error": "..."}` that does not echo the
  request, as every route under /api/ does (aiohttp's own answer is plain text quoting the request).
- `count_connections(server, budget)`: every API connection is admitted into the process's connection
  budget (gslbd.limits), shared with DNS over TCP; when full the least recently active connection goes.
"""

from __future__ import annotations

import asyncio
import codecs
import json
import logging
import re
import time
from http import HTTPStatus
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import BadHttpMethod, HttpProcessingError, LineTooLong
from aiohttp.web_protocol import RequestHandler

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


# What the parser quotes when a line is too long: llhttp (aiohttp's C parser) the URL, the pure-Python
# parser the whole request line; either quotes a header by its name, value or "name: value".
_REQUEST_LINE = re.compile(rb"^(/|\*|[a-z][a-z0-9+.-]*://|[A-Z]+ )", re.IGNORECASE)


def refusal(status: int, exc: BaseException | None) -> tuple[int, str]:
    """The status and JSON error text for a request refused before any route: `status` as aiohttp
    chose it, except 414 for a request line (URL) over the limit. The text never quotes the request."""
    if isinstance(exc, LineTooLong):
        line = exc.args[0] if exc.args else b""
        if isinstance(line, bytes | bytearray) and _REQUEST_LINE.match(bytes(line)):
            limit = HTTP_LIMITS["max_line_size"]
            return 414, f"the request line is longer than {limit} bytes; use a shorter URL"
        limit = HTTP_LIMITS["max_field_size"]
        return status, f"malformed HTTP request: a header is longer than {limit} bytes"
    if isinstance(exc, BadHttpMethod):
        return status, "malformed HTTP request: not an HTTP method"
    if isinstance(exc, HttpProcessingError):
        return status, f"malformed HTTP request ({type(exc).__name__})"
    if status == HTTPStatus.INTERNAL_SERVER_ERROR:
        return status, "internal error; the server log has the details"
    try:
        return status, HTTPStatus(status).phrase
    except ValueError:
        return status, "error"


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
            "answered %d to a malformed HTTP request from %s: %s (counted in %s; logged once a minute)"
        )
        status = refusal(exc.code, exc)[0]
        record.args = (status, remote, str(exc.message)[:200], "gslbd_api_bad_requests_total")
        record.exc_info = None
        record.exc_text = None
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def quiet_http_logger() -> logging.Logger:
    logger = logging.getLogger("gslbd.api.http")
    if not any(isinstance(f, _ClientErrors) for f in logger.filters):
        logger.addFilter(_ClientErrors())
    return logger


class _JsonErrorHandler(RequestHandler):
    """aiohttp's protocol, answering what it refuses before any route with JSON (see `refusal`)."""

    __slots__ = ()

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        status, reason = refusal(status, exc)
        super().handle_error(request, status, exc, message)  # logs; refuses when a response was started
        response = web.json_response({"error": reason}, status=status)
        response.force_close()
        return response


class _JsonErrorServer(web.Server):
    def __call__(self) -> RequestHandler:
        return _JsonErrorHandler(self, loop=self._loop, **self._kwargs)


class JsonErrorRunner(web.AppRunner):
    """An AppRunner whose connections are `_JsonErrorHandler`s."""

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        return _JsonErrorServer(
            server.request_handler,
            request_factory=server.request_factory,
            handler_cancellation=server.handler_cancellation,
            loop=server._loop,
            **server._kwargs,
        )


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
