"""The C UDP loop (gslbd.wire._cfast.UdpLoop) on real loopback sockets: it answers from the responder's C
table, hands the rest to Python, counts exactly with several receiving threads, and answers a datagram
longer than its buffer with FORMERR instead of answering a cut copy."""

from __future__ import annotations

import asyncio
import random
import socket
import struct
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import dns.message
import dns.rcode
import dns.rdatatype
import pytest

from gslbd.answer import build_view
from gslbd.clock import FakeClock
from gslbd.config.dnssec import generate_key_pair, read_key_pair
from gslbd.model.config import Config, ListenAddress
from gslbd.model.dnssec import Dnssec
from gslbd.model.service import Endpoint, Service
from gslbd.model.zone import Nameserver, Soa, Zone
from gslbd.policy.base import NoLocator, PolicyEnv
from gslbd.server import udp
from gslbd.server.build import AnswerBuilder
from gslbd.server.sockets import bind_udp
from gslbd.server.stats import ServerStats
from gslbd.state.snapshot import Snapshot
from gslbd.types import EndpointKind, PolicyName
from gslbd.wire import Responder, compile_table
from gslbd.wire import ctable as ct

pytestmark = pytest.mark.skipif(not ct.AVAILABLE, reason="gslbd.wire._cfast is not compiled here")

ORIGIN = "gslb.example.com."
APP = f"app.{ORIGIN}"


def responder(native: bool) -> Responder:
    name = APP
    endpoints = tuple(Endpoint(name, f"192.0.2.{i}", EndpointKind.IPV4, "eu") for i in (1, 2, 3))
    service = Service(name, ORIGIN, "app", policy=PolicyName.ROUND_ROBIN, endpoints=endpoints)
    zone = Zone(
        ORIGIN, 30, 30, Soa(f"ns1.{ORIGIN}", "hostmaster.example.com.", 1), (Nameserver(f"ns1.{ORIGIN}"),)
    )
    view = build_view(
        Config(zones=(zone,), services=(service,)), Snapshot(), PolicyEnv(NoLocator(), {}, random.Random(1))
    )
    table = compile_table(view, max_udp_payload=1232, use_client_subnet=True)
    return Responder(table, view, random.Random(1), native=native)


class Counting:
    """The responder as the listener sees it, counting (and, for b"boom" questions, failing) the calls
    that reach Python."""

    def __init__(self, inner: Responder) -> None:
        self.inner = inner
        self.slot = inner.slot
        self.calls = 0

    def handle(self, data: bytes, src_ip: int, src_v6: bool, tcp: bool = False) -> bytes | None:
        self.calls += 1
        if data[12:17] == b"\x04boom":
            raise ValueError("boom")
        return self.inner.handle(data, src_ip, src_v6, tcp)


def a_query(qid: int) -> bytes:
    return dns.message.make_query(APP, "A", id=qid).to_wire()


def two_questions(qid: int, label: bytes = b"\x02qq") -> bytes:
    """A query with QDCOUNT=2: the fast paths leave it to the slow path (FORMERR)."""
    question = label + b"\x00\x00\x01\x00\x01"
    return struct.pack("!HHHHHH", qid, 0x0100, 2, 0, 0, 0) + question + question


def exchange(port: int, payloads: list[bytes], timeout: float = 2.0) -> list[bytes]:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 * 1024 * 1024)
        s.settimeout(timeout)
        out = []
        for i, p in enumerate(payloads):
            s.sendto(p, ("127.0.0.1", port))
            if i % 100 == 99:  # let the server keep up: nothing is lost on loopback then
                while len(out) < i - 50:
                    out.append(s.recvfrom(65535)[0])
        try:
            while len(out) < len(payloads):
                out.append(s.recvfrom(65535)[0])
        except TimeoutError:
            pass
        return out


@contextmanager
def listening(handler: object, stats: ServerStats, count: int = 1, **kwargs: bool) -> Iterator[list[int]]:
    """`count` UDP listeners (each its own socket and receiving thread) sharing `stats`."""
    loop = asyncio.new_event_loop()
    listeners = [
        udp.UdpListener(bind_udp(ListenAddress("127.0.0.1", 0)), handler, stats, **kwargs)  # type: ignore[arg-type]
        for _ in range(count)
    ]
    try:
        for listener in listeners:
            listener.start(loop)
        yield [listener.sockname[1] for listener in listeners]
    finally:
        for listener in listeners:
            listener.close()
        loop.close()


def test_the_c_loop_answers_from_the_table_and_passes_only_the_rest_to_python() -> None:
    handler = Counting(responder(native=True))
    stats = ServerStats()
    payloads = [a_query(i) for i in range(200)] + [
        two_questions(1000),
        two_questions(1001),
        two_questions(1002, b"\x04boom"),
    ]
    with listening(handler, stats) as ports:
        replies = exchange(ports[0], payloads)
    answers = [dns.message.from_wire(r) for r in replies]
    assert sorted(a.id for a in answers) == [*range(200), 1000, 1001]
    assert all(a.rcode() == dns.rcode.NOERROR and len(a.answer[0]) == 3 for a in answers if a.id < 200)
    assert [a.rcode() for a in answers if a.id >= 1000] == [dns.rcode.FORMERR] * 2
    assert handler.calls == 3
    assert (stats.udp_queries, stats.udp_responses, stats.udp_native_answers) == (203, 202, 200)
    assert stats.handler_errors == 1
    assert stats.udp_rcodes[0] == 200 and stats.udp_rcodes[1] == 2
    assert handler.inner.policy_answers()["round_robin"] == 200


@pytest.mark.parametrize("native", [True, False], ids=["c-loop", "python-loop"])
def test_counters_are_exact_with_several_receiving_threads(native: bool) -> None:
    stats = ServerStats()
    handler = Counting(responder(native=native))
    with listening(handler, stats, count=3, native=native) as ports, ThreadPoolExecutor(6) as pool:
        got = list(pool.map(lambda port: len(exchange(port, [a_query(i) for i in range(1500)])), ports * 2))
    assert got == [1500] * 6
    assert stats.udp_queries == stats.udp_responses == stats.udp_rcodes[0] == 9000
    assert stats.as_dict()["udp_native_answers"] == (9000 if native else 0)
    assert handler.inner.policy_answers()["round_robin"] == 9000


@pytest.mark.parametrize("native", [True, False], ids=["c-loop", "python-loop"])
def test_a_datagram_longer_than_the_buffer_is_counted_and_answered_formerr(native: bool) -> None:
    stats = ServerStats()
    handler = Counting(responder(native=native))
    big = a_query(77)[:-4] + b"\x00" * 5000  # 5 kB: longer than the 4 kB receive buffer
    with listening(handler, stats, native=native) as ports:
        replies = exchange(ports[0], [big, a_query(78)])
    by_id = {struct.unpack("!H", r[:2])[0]: r for r in replies}
    assert sorted(by_id) == [77, 78]
    assert by_id[77] == struct.pack("!HBBHHHH", 77, 0x81, 1, 0, 0, 0, 0)  # QR, RD, FORMERR, no question
    assert stats.udp_oversized == 1
    assert stats.udp_rcodes[1] == 1
    assert handler.calls == (0 if native else 1)  # never handed to the responder


def test_the_c_loop_answers_do_queries_of_a_signed_zone_without_python(tmp_path: Path) -> None:
    """Signed answers, NODATA and, past the denial budget (rate 0), NXDOMAIN from the NSEC chain all come
    from the C table: no datagram reaches Python."""
    plain = responder(native=True)
    zone = plain.view.config.zones[0]
    keys = tuple(read_key_pair(generate_key_pair(ORIGIN, 13, sep, tmp_path), ORIGIN) for sep in (True, False))
    config = replace(plain.view.config, zones=(replace(zone, dnssec=Dnssec(keys, denial_signing_rate=0)),))
    view, table = AnswerBuilder(FakeClock()).build(
        config, Snapshot(), PolicyEnv(NoLocator(), {}, random.Random(1))
    )
    handler = Counting(Responder(table, view, random.Random(1), native=True))
    stats = ServerStats()
    questions = [(APP, "A"), (APP, "MX"), (ORIGIN, "DNSKEY")] + [
        (f"new-{i}.{ORIGIN}", "A") for i in range(50)
    ]
    payloads = [
        dns.message.make_query(n, t, id=i, want_dnssec=True).to_wire() for i, (n, t) in enumerate(questions)
    ]
    with listening(handler, stats) as ports:
        replies = {m.id: m for m in (dns.message.from_wire(r) for r in exchange(ports[0], payloads))}
    assert sorted(replies) == list(range(len(questions)))
    assert handler.calls == 0 and stats.udp_native_answers == len(questions)
    signed = [
        r for r in replies.values() if any(s.rdtype == dns.rdatatype.RRSIG for s in [*r.answer, *r.authority])
    ]
    assert len(signed) == len(questions)
    assert [replies[i].rcode() for i in range(3)] == [dns.rcode.NOERROR] * 3
    assert all(replies[i].rcode() == dns.rcode.NXDOMAIN for i in range(3, len(questions)))
