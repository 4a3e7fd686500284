"""A UDP DNS forwarder on loopback for the tests: each query goes to the loopback port that `route`
picks for it, and each answer comes back through `rewrite`. One thread with a socket, one query at a
time; stopped when its block ends.

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


@contextlib.contextmanager
def udp_proxy(
    route: Callable[[bytes], int | None], rewrite: Callable[[bytes], tuple[bytes, int]] | None = None
) -> Iterator[Proxy]:
    """Forward every UDP query to 127.0.0.1:`route(query)` and hand back its answer, through
    `rewrite` (new answer, how many records it broke) when given."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    port = free_port()
    listener.bind(("127.0.0.1", port))
    listener.settimeout(0.05)
    proxy = Proxy(port)
    stopping = threading.Event()

    def serve() -> None:
        while not stopping.is_set():
            try:
                query, client = listener.recvfrom(65535)
            except TimeoutError:
                continue
            upstream_port = route(query)
            if upstream_port is None:
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as upstream:
                upstream.settimeout(2.0)
                upstream.sendto(query, ("127.0.0.1", upstream_port))
                try:
                    reply, _ = upstream.recvfrom(65535)
                except TimeoutError:
                    continue
            if rewrite is not None:
                reply, broken = rewrite(reply)
                proxy.broken += broken
            listener.sendto(reply, client)

    thread = threading.Thread(target=serve, name=f"dns-proxy-{port}", daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        stopping.set()
        thread.join(5)
        listener.close()
