"""The admin API against misbehaving clients: malformed bodies, oversized headers, idle keep-alive
connections and more connections than the budget allows."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from api_support import APP, TOKEN, FakeControl

from gslbd.api.hardening import LOG_INTERVAL, quiet_http_logger
from gslbd.api.server import ApiServer
from gslbd.limits import ConnectionBudget
from gslbd.metrics import API_BAD_REQUESTS
from gslbd.model.config import ListenAddress

PATH = f"/api/v1/services/{APP}/endpoints/192.0.2.1/admin"


@asynccontextmanager
async def api(**kwargs: object) -> AsyncIterator[ApiServer]:
    server = ApiServer(FakeControl(), ListenAddress("127.0.0.1", 0), TOKEN, **kwargs)  # type: ignore[arg-type]
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def raw_request(port: int, head: str, body: bytes = b"", sock: socket.socket | None = None) -> bytes:
    """Send one HTTP/1.1 request (keep-alive) and read one response with a Content-Length."""
    s = sock or socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        s.sendall(head.encode() + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                return data
            data += chunk
        header, _, rest = data.partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in header.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        )
        while len(rest) < length:
            rest += s.recv(65536)
        return header + b"\r\n\r\n" + rest
    finally:
        if sock is None:
            s.close()


def put(
    port: int, body: bytes, content_type: str = "application/json", sock: socket.socket | None = None
) -> bytes:
    head = (
        f"PUT {PATH} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: {content_type}\r\n"
    )
    return raw_request(port, head, body, sock)


def status_and_json(response: bytes) -> tuple[int, object]:
    header, _, body = response.partition(b"\r\n\r\n")
    return int(header.split()[1]), json.loads(body)


BAD_BODIES = [
    ("a 5,000-digit number", b'{"state": ' + b"9" * 5000 + b"}", "application/json"),
    ("deeply nested JSON", b"[" * 30000 + b"]" * 30000, "application/json"),
    ("a bogus charset", b'{"state": "down"}', "application/json; charset=bogus-8"),
    ("bytes that are not UTF-8", b'{"state": "\xff\xfe"}', "application/json"),
    ("not JSON at all", b"down", "application/json"),
]


@pytest.mark.parametrize(("what", "body", "content_type"), BAD_BODIES, ids=[b[0] for b in BAD_BODIES])
def test_a_malformed_body_is_a_400_with_a_json_error_and_no_traceback(
    what: str, body: bytes, content_type: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def run() -> tuple[int, object]:
        async with api() as server:
            return status_and_json(await asyncio.to_thread(put, server.port, body, content_type))

    with caplog.at_level(logging.DEBUG):
        status, doc = asyncio.run(run())
    assert status == 400
    assert isinstance(doc, dict) and "the body must be JSON" in str(doc["error"])
    assert not [r for r in caplog.records if r.exc_info], what


def test_oversized_headers_get_400_counted_and_one_log_line_without_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def run() -> list[bytes]:
        async with api() as server:
            head = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + "a" * 20000 + "\r\n"
            return [await asyncio.to_thread(raw_request, server.port, head) for _ in range(20)]

    before = API_BAD_REQUESTS._value.get()
    with caplog.at_level(logging.DEBUG):
        responses = asyncio.run(run())
    assert all(r.split()[1] == b"400" for r in responses)
    assert {json.dumps(status_and_json(r)[1]) for r in responses} == {
        json.dumps({"error": "malformed HTTP request: a header is longer than 8190 bytes"})
    }
    assert API_BAD_REQUESTS._value.get() - before == 20
    lines = [r for r in caplog.records if r.name == "gslbd.api.http"]
    assert len(lines) == 1 and lines[0].exc_info is None and lines[0].levelname == "WARNING"
    assert "malformed HTTP request" in lines[0].getMessage()


@pytest.mark.parametrize("path", ["/api/v1/services/", "/healthz?q="])
def test_a_url_over_8190_bytes_is_a_414_json_error_that_does_not_echo_it(
    path: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def run() -> bytes:
        async with api() as server:
            head = f"GET {path}{'x' * 8200} HTTP/1.1\r\nHost: x\r\n"
            return await asyncio.to_thread(raw_request, server.port, head)

    for (
        once_a_minute
    ) in quiet_http_logger().filters:  # a line logged by an earlier test must not hide this one
        once_a_minute._logged_at = -LOG_INTERVAL
    with caplog.at_level(logging.DEBUG):
        response = asyncio.run(run())
    assert b"content-type: application/json" in response.lower()
    assert status_and_json(response) == (
        414,
        {"error": "the request line is longer than 8190 bytes; use a shorter URL"},
    )
    assert b"xxxx" not in response
    lines = [r for r in caplog.records if r.name == "gslbd.api.http"]
    assert [(r.levelname, r.exc_info) for r in lines] == [("WARNING", None)]
    assert lines[0].getMessage().startswith("answered 414 to a malformed HTTP request from 127.0.0.1")


def test_a_request_that_is_not_http_gets_a_json_400_without_echo() -> None:
    async def run() -> bytes:
        async with api() as server:

            def client() -> bytes:
                with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
                    s.sendall(b"SECRETSTUFF\x01 / HTTP/1.1\r\n\r\n")
                    data = b""
                    while chunk := s.recv(65536):
                        data += chunk
                    return data

            return await asyncio.to_thread(client)

    response = asyncio.run(run())
    assert status_and_json(response) == (400, {"error": "malformed HTTP request: not an HTTP method"})
    assert b"SECRET" not in response


def test_an_idle_keep_alive_connection_is_closed() -> None:
    async def run() -> bytes:
        async with api(keepalive_timeout=0.3) as server:

            def client() -> bytes:
                with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
                    raw_request(server.port, "GET /healthz HTTP/1.1\r\nHost: x\r\n", sock=s)
                    return s.recv(1)  # b"" once the server closes the idle connection

            return await asyncio.to_thread(client)

    assert asyncio.run(run()) == b""


def test_connections_beyond_the_budget_close_the_least_recently_active() -> None:
    budget = ConnectionBudget(3)

    async def run() -> tuple[list[bytes], bytes]:
        async with api(budget=budget) as server:

            def client() -> tuple[list[bytes], bytes]:
                idle = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(5)]
                fresh = raw_request(server.port, "GET /healthz HTTP/1.1\r\nHost: x\r\n")
                closed = []
                for s in idle[:3]:
                    s.settimeout(2)
                    closed.append(s.recv(1))
                for s in idle:
                    s.close()
                return closed, fresh

            return await asyncio.to_thread(client)

    closed, fresh = asyncio.run(run())
    assert closed == [b"", b"", b""]  # the three oldest made room for the two newer and the request
    assert fresh.startswith(b"HTTP/1.1 200") and fresh.endswith(b"ok\n")
    assert budget.evictions == 3


def test_a_bug_in_a_handler_is_a_500_json_error_whose_traceback_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    control = FakeControl()

    async def broken(force: bool = False) -> list[str]:
        raise RuntimeError("a bug")

    control.reload = broken  # type: ignore[method-assign]

    async def run() -> bytes:
        server = ApiServer(control, ListenAddress("127.0.0.1", 0), TOKEN)
        await server.start()
        try:
            head = f"POST /api/v1/reload HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
            return await asyncio.to_thread(raw_request, server.port, head)
        finally:
            await server.stop()

    with caplog.at_level(logging.ERROR):
        response = asyncio.run(run())
    assert status_and_json(response) == (
        500,
        {"error": "internal error (RuntimeError); the server log has the details"},
    )
    assert [(r.getMessage(), r.exc_info is not None) for r in caplog.records] == [
        ("POST /api/v1/reload failed", True)
    ]
