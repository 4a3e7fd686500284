"""Real loopback servers for the probe tests: an aiohttp HTTP(S) app, raw TCP servers, a DNS server
answered with dnspython, a self-signed certificate made with the openssl CLI, and endpoint helpers."""

from __future__ import annotations

import asyncio
import socket
import ssl
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dns.message
import dns.rcode
import dns.rrset
from aiohttp import web

from gslbd.model.check import Check
from gslbd.model.service import Endpoint
from gslbd.types import EndpointKind

SERVICE = "app.gslb.example.com."


def endpoint(
    address: str = "127.0.0.1",
    *,
    probe_address: str | None = None,
    kind: EndpointKind | None = None,
    **check: Any,
) -> Endpoint:
    """An endpoint of SERVICE whose check is Check(name="t", **check) (type given as CheckType)."""
    if kind is None:
        kind = EndpointKind.IPV6 if ":" in address else EndpointKind.IPV4
        if address.endswith("."):
            kind = EndpointKind.HOSTNAME
    check.setdefault("timeout", 2.0)
    check.setdefault("interval", 5.0)
    return Endpoint(
        service=SERVICE,
        address=address,
        kind=kind,
        site="eu",
        check=Check(name="t", **check),
        probe_address=probe_address,
    )


def closed_port() -> int:
    """A loopback TCP port nobody listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@dataclass
class Cert:
    cert: Path
    key: Path


def self_signed(directory: Path, name: str = "app.test") -> Cert:
    """A self-signed certificate for `name` and 127.0.0.1, made with the openssl CLI."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-subj", f"/CN={name}", "-addext", f"subjectAltName=DNS:{name},IP:127.0.0.1",
            "-keyout", str(key), "-out", str(cert),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return Cert(cert, key)


@dataclass
class Seen:
    """What the HTTP app saw: request headers and TLS server names (SNI)."""

    headers: list[dict[str, str]] = field(default_factory=list)
    server_names: list[str | None] = field(default_factory=list)


def http_app(seen: Seen) -> web.Application:
    async def ok(request: web.Request) -> web.Response:
        seen.headers.append(dict(request.headers))
        return web.Response(text="status: all good\n")

    async def fail(request: web.Request) -> web.Response:
        return web.Response(status=503, text="draining\n")

    async def empty(request: web.Request) -> web.Response:
        return web.Response(status=204)

    async def chunked(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        for part in (b"part one, ", b"version=1.2.3, ", b"the end"):
            await response.write(part)
        await response.write_eof()
        return response

    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(10)
        return web.Response(text="late")

    app = web.Application()
    app.add_routes(
        [
            web.get("/ok", ok),
            web.get("/fail", fail),
            web.get("/empty", empty),
            web.get("/chunked", chunked),
            web.get("/slow", slow),
        ]
    )
    return app


@asynccontextmanager
async def http_server(seen: Seen, tls: ssl.SSLContext | None = None) -> AsyncIterator[int]:
    """The app on 127.0.0.1; yields the port."""
    runner = web.AppRunner(http_app(seen), shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls)
    await site.start()
    server = site._server
    assert isinstance(server, asyncio.base_events.Server)
    port: int = server.sockets[0].getsockname()[1]
    try:
        yield port
    finally:
        await runner.cleanup()


def server_tls(cert: Cert, seen: Seen) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert.cert, cert.key)

    def record(sslobj: ssl.SSLObject, name: str | None, _ctx: ssl.SSLContext) -> None:
        seen.server_names.append(name)

    ctx.sni_callback = record
    return ctx


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def tcp_server(handler: Handler, host: str = "127.0.0.1") -> AsyncIterator[int]:
    server = await asyncio.start_server(handler, host, 0)
    port: int = server.sockets[0].getsockname()[1]
    try:
        yield port
    finally:
        server.close()


class _DnsProtocol(asyncio.DatagramProtocol):
    """Answers A queries for www.example.test. (192.0.2.7), REFUSED for other zones, NXDOMAIN else."""

    def __init__(self, silent: bool) -> None:
        self.silent = silent
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: tuple[str | Any, int]) -> None:
        if self.silent or self.transport is None:
            return
        query = dns.message.from_wire(data)
        response = dns.message.make_response(query)
        question = query.question[0]
        name = question.name.to_text()
        if not name.endswith("example.test."):
            response.set_rcode(dns.rcode.REFUSED)
        elif name == "www.example.test.":
            response.answer.append(dns.rrset.from_text(question.name, 60, "IN", "A", "192.0.2.7"))
        else:
            response.set_rcode(dns.rcode.NXDOMAIN)
        self.transport.sendto(response.to_wire(), addr)


@asynccontextmanager
async def dns_server(silent: bool = False) -> AsyncIterator[int]:
    loop = asyncio.get_running_loop()
    transport, _ = await loop.create_datagram_endpoint(
        lambda: _DnsProtocol(silent), local_addr=("127.0.0.1", 0)
    )
    port: int = transport.get_extra_info("sockname")[1]
    try:
        yield port
    finally:
        transport.close()
