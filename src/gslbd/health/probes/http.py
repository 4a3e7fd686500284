"""`http` and `https` checks: a light HTTP/1.1 GET over asyncio streams.

Healthy when the status is expected (default any 2xx) and, with `expect_body`, the regular expression
matches the body (the first 64 KiB). The Host header (and the SNI name for https) is `host`, else the
endpoint's answered address; `headers` are sent as given and may override Host or User-Agent.
"""

from __future__ import annotations

import asyncio
import re
import ssl
from functools import lru_cache

from gslbd import __version__
from gslbd.health.probes.base import MAX_READ, BaseProbe, ProbeFailed, abort, answered_host, probe_host, quote
from gslbd.model.check import Check
from gslbd.model.service import Endpoint
from gslbd.types import CheckType

USER_AGENT = f"gslbd-health/{__version__}"
_DEFAULT_PORT = {CheckType.HTTP: 80, CheckType.HTTPS: 443}


@lru_cache(maxsize=64)
def tls_context(verify: bool, ca_file: str | None) -> ssl.SSLContext:
    """One client context per (verify, ca_file): loading the CA store per probe would dominate."""
    if not verify:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx
    return ssl.create_default_context(cafile=ca_file)


@lru_cache(maxsize=256)
def _pattern(text: str) -> re.Pattern[str]:
    return re.compile(text)


def host_header(endpoint: Endpoint, check: Check) -> str:
    """`host`, else the answered address (IPv6 in brackets) plus the port when it is not the default."""
    if check.host is not None:
        return check.host
    host = answered_host(endpoint)
    if ":" in host:
        host = f"[{host}]"
    port = check.effective_port()
    if port is not None and port != _DEFAULT_PORT.get(check.type):
        host = f"{host}:{port}"
    return host


def build_request(endpoint: Endpoint, check: Check) -> bytes:
    """The GET request bytes: Host, User-Agent, Accept and Connection: close, then `headers`."""
    fields: dict[str, tuple[str, str]] = {}
    for name, value in (
        ("Host", host_header(endpoint, check)),
        ("User-Agent", USER_AGENT),
        ("Accept", "*/*"),
        ("Connection", "close"),
        *check.headers,
    ):
        fields[name.lower()] = (name, value)
    head = "".join(f"{name}: {value}\r\n" for name, value in fields.values())
    return f"GET {check.path} HTTP/1.1\r\n{head}\r\n".encode("latin-1", "replace")


def status_ok(status: int, expected: tuple[int, ...]) -> bool:
    return status in expected if expected else 200 <= status < 300


def _expected_text(expected: tuple[int, ...]) -> str:
    return ", ".join(str(s) for s in expected) if expected else "2xx"


def parse_status_line(line: bytes) -> int:
    if not line:
        raise ProbeFailed("connection closed before a response")
    parts = line.split(None, 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
        raise ProbeFailed(f"not an HTTP response: {quote(line.decode('latin-1').strip())}")
    return int(parts[1])


async def read_headers(reader: asyncio.StreamReader) -> dict[str, str]:
    headers: dict[str, str] = {}
    size = 0
    while True:
        line = await reader.readline()
        size += len(line)
        if size > MAX_READ:
            raise ProbeFailed("HTTP headers too large")
        if line in (b"\r\n", b"\n", b""):
            return headers
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()


async def read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    """The body (at most MAX_READ bytes): chunked, Content-Length, or until the server closes."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = bytearray()
        while len(body) < MAX_READ:
            size_line = await reader.readline()
            try:
                size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
            except ValueError:
                raise ProbeFailed("malformed chunked body") from None
            if size == 0:
                break
            body += await reader.readexactly(size)
            await reader.readline()
        return bytes(body[:MAX_READ])
    length = headers.get("content-length")
    if length is not None and length.isdigit():
        return await reader.readexactly(min(int(length), MAX_READ))
    body = bytearray()
    while len(body) < MAX_READ:
        chunk = await reader.read(MAX_READ - len(body))
        if not chunk:
            break
        body += chunk
    return bytes(body)


class HttpProbe(BaseProbe):
    """GET `path` over plain HTTP (or TLS when `tls` is set)."""

    def __init__(self, tls: bool = False) -> None:
        self.tls = tls

    async def attempt(self, endpoint: Endpoint, check: Check) -> tuple[bool, str]:
        port = check.effective_port() or (443 if self.tls else 80)
        ctx: ssl.SSLContext | None = None
        server_hostname: str | None = None
        if self.tls:
            ctx = tls_context(check.tls_verify, check.ca_file)
            server_hostname = check.host if check.host is not None else answered_host(endpoint)
        reader, writer = await asyncio.open_connection(
            probe_host(endpoint), port, ssl=ctx, server_hostname=server_hostname, limit=MAX_READ
        )
        try:
            writer.write(build_request(endpoint, check))
            status = parse_status_line(await reader.readline())
            if not status_ok(status, check.expect_status):
                return False, f"HTTP {status} (expected {_expected_text(check.expect_status)})"
            if check.expect_body is None:
                return True, f"HTTP {status}"
            body = await read_body(reader, await read_headers(reader))
            text = body.decode("utf-8", "replace")
            if _pattern(check.expect_body).search(text) is None:
                return False, f"HTTP {status}, body does not match {quote(check.expect_body)}"
            return True, f"HTTP {status}, body matches"
        finally:
            abort(writer)
