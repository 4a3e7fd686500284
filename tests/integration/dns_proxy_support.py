"""A DNS forwarder on loopback for the tests, UDP and TCP on one port: each query goes to the loopback
port that `route` picks for it (over the transport it came by), and each answer comes back through
`rewrite`. One thread per transport, one query at a time; stopped when its block ends.

Two uses: dnssec_support.signature_breaking_proxy (one upstream, answers with broken signatures) and
the zone router that stands in for per-zone stub configuration where a resolver has none
(`zone_route`: Knot Resolver 5 forwards a whole request, its DNSKEY and DS lookups too, to one address).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import dns.exception
import dns.message
import dns.name
import dns.rdatatype
from gslbd_harness import free_port


@dataclass
class Proxy:
    """A forwarder on 127.0.0.1:`port`; `broken` counts what its `rewrite` reports."""

    port: int
    broken: int = 0


def zone_route(forwards: dict[str, int]) -> Callable[[bytes], int | None]:
    """The port of the zone a query belongs to: the deepest zone of `forwards` (zone -> port) at or
    above its name, but the parent's for a DS question at a zone's apex (the DS is the parent's
    data); None (the query is dropped) for a name in none of them or a query that does not parse."""
    zones = sorted(((dns.name.from_text(z), p) for z, p in forwards.items()), key=lambda zp: -len(zp[0]))

    def route(wire: bytes) -> int | None:
        try:
            question = dns.message.from_wire(wire).question[0]
        except (dns.exception.DNSException, IndexError, ValueError):
            return None
        candidates = [(z, p) for z, p in zones if question.name.is_subdomain(z)]
        if question.rdtype == dns.rdatatype.DS and candidates and candidates[0][0] == question.name:
            candidates = candidates[1:] or candidates
        return candidates[0][1] if candidates else None

    return route


def _read_exact(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _exchange_tcp(wire: bytes, port: int) -> bytes:
    """One query over TCP to 127.0.0.1:`port`, its answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=2.0) as upstream:
        upstream.sendall(len(wire).to_bytes(2, "big") + wire)
        return _read_exact(upstream, int.from_bytes(_read_exact(upstream, 2), "big"))


def _exchange_udp(wire: bytes, port: int) -> bytes | None:
    """One query over UDP to 127.0.0.1:`port`, its answer (None after 2 s without one)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as upstream:
        upstream.settimeout(2.0)
        upstream.sendto(wire, ("127.0.0.1", port))
        try:
            return upstream.recv(65535)
        except TimeoutError:
            return None


@contextlib.contextmanager
def dns_proxy(
    route: Callable[[bytes], int | None], rewrite: Callable[[bytes], tuple[bytes, int]] | None = None
) -> Iterator[Proxy]:
    """Forward every query (UDP or TCP) to 127.0.0.1:`route(query)` and hand back its answer, through
    `rewrite` (new answer, how many records it broke) when given."""
    port = free_port()
    datagrams = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    datagrams.bind(("127.0.0.1", port))
    datagrams.settimeout(0.05)
    streams = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    streams.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    streams.bind(("127.0.0.1", port))
    streams.listen(16)
    streams.settimeout(0.05)
    proxy = Proxy(port)
    stopping = threading.Event()

    def answer(reply: bytes) -> bytes:
        if rewrite is None:
            return reply
        reply, broken = rewrite(reply)
        proxy.broken += broken
        return reply

    def serve_udp() -> None:
        while not stopping.is_set():
            try:
                query, client = datagrams.recvfrom(65535)
            except TimeoutError:
                continue
            upstream_port = route(query)
            reply = None if upstream_port is None else _exchange_udp(query, upstream_port)
            if reply is not None:
                datagrams.sendto(answer(reply), client)

    def serve_tcp() -> None:
        while not stopping.is_set():
            try:
                conn, _ = streams.accept()
            except TimeoutError:
                continue
            with conn, contextlib.suppress(OSError):
                conn.settimeout(2.0)
                while not stopping.is_set():
                    query = _read_exact(conn, int.from_bytes(_read_exact(conn, 2), "big"))
                    upstream_port = route(query)
                    if upstream_port is None:
                        break
                    reply = answer(_exchange_tcp(query, upstream_port))
                    conn.sendall(len(reply).to_bytes(2, "big") + reply)

    threads = [
        threading.Thread(target=serve, name=f"dns-proxy-{name}-{port}", daemon=True)
        for name, serve in (("udp", serve_udp), ("tcp", serve_tcp))
    ]
    for thread in threads:
        thread.start()
    try:
        yield proxy
    finally:
        stopping.set()
        for thread in threads:
            thread.join(5)
        datagrams.close()
        streams.close()
