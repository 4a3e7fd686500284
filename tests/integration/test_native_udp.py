"""The C UDP loop (gslbd.wire._cfast.UdpLoop) on real loopback sockets: it answers from the responder's C
table, hands the rest to Python, counts exactly with several receiving threads, and answers a datagram
longer than its buffer with FORMERR instead of answering a cut copy."""

from __future__ import annotations

import asyncio
import random
import socket
import struct
import threading
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
from gslbd.model.config import Config, DnsConfig, ListenAddress, RrlConfig
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
from gslbd.wire.guard import Guard

pytestmark = pytest.mark.skipif(not ct.AVAILABLE, reason="gslbd.wire._cfast is not compiled here")

ORIGIN = "gslb.example.com."
APP = f"app.{ORIGIN}"


def responder(native: bool, dns: DnsConfig | None = None) -> Responder:
    """Round robin over three addresses at APP; `dns`: the listener settings (RRL, cookies)."""
    name = APP
    endpoints = tuple(Endpoint(name, f"192.0.2.{i}", EndpointKind.IPV4, "eu") for i in (1, 2, 3))
    service = Service(name, ORIGIN, "app", policy=PolicyName.ROUND_ROBIN, endpoints=endpoints)
    zone = Zone(
        ORIGIN, 30, 30, Soa(f"ns1.{ORIGIN}", "hostmaster.example.com.", 1), (Nameserver(f"ns1.{ORIGIN}"),)
    )
    config = Config(zones=(zone,), services=(service,), dns=dns or DnsConfig())
    view = build_view(config, Snapshot(), PolicyEnv(NoLocator(), {}, random.Random(1)))
    table = compile_table(view, max_udp_payload=1232, use_client_subnet=True)
    return Responder(table, view, random.Random(1), native=native)


class Counting:
    """The responder as the listener sees it, counting (and, for b"boom" questions, failing) the calls
    that reach Python."""

    def __init__(self, inner: Responder) -> None:
        self.inner = inner
        self.slot = inner.slot
        self.calls = 0

    @property
    def guard(self) -> Guard | None:
        return self.inner.guard

    def handle(self, data: bytes, src_ip: int, src_v6: bool, tcp: bool = False) -> bytes | None:
        self.calls += 1
        if data[12:17] == b"\x04boom":
            raise ValueError("boom")
        return self.inner.handle(data, src_ip, src_v6, tcp)


def a_query(qid: int) -> bytes:
    return dns.message.make_query(APP, "A", id=qid).to_wire()


def status_query(qid: int, label: bytes = b"\x02qq") -> bytes:
    """A well-formed query with opcode STATUS: the C table leaves it to the slow path (NOTIMP)."""
    question = label + b"\x00\x00\x01\x00\x01"
    return struct.pack("!HHHHHH", qid, 0x1100, 1, 0, 0, 0) + question


def two_questions(qid: int) -> bytes:
    """QDCOUNT=2: it cannot be a valid query (FORMERR, answered by C)."""
    question = b"\x02qq\x00\x00\x01\x00\x01"
    return struct.pack("!HHHHHH", qid, 0x0100, 2, 0, 0, 0) + question + question


def malformed(qid: int) -> list[bytes]:
    """Datagrams that cannot be valid queries, of several kinds, IDs from `qid` on."""
    good = a_query(qid)
    opt = b"\x00\x00\x29\x04\xd0\x00\x00\x80\x00\x00\x00"
    head = struct.pack("!HHHHHH", qid + 5, 0x0100, 1, 0, 0, 1)
    return [
        two_questions(qid),
        good[:20],  # cut in the name
        a_query(qid + 2) + b"junk",  # bytes after the last record
        struct.pack("!H", qid + 3) + good[2:10] + b"\x00\x03" + good[12:],  # ARCOUNT 3, no record
        struct.pack("!HHHHHH", qid + 4, 0x0100, 0, 0, 0, 0),  # a header alone
        head + good[12:-4] + b"\x00\x80\x00\x01" + opt,  # NXNAME, with EDNS
        struct.pack("!H", qid + 6) + good[2:12] + b"\x83app\x80",  # a label type 0x80
        struct.pack("!HHHHHH", qid + 7, 0x1100, 1, 0, 0, 0) + good[12:-1],  # STATUS, cut
    ]


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
    """`count` UDP listeners sharing `stats`: each the C loop in a receiving thread of its own, or (with
    native=False) the asyncio reader, on an event loop that runs in a thread here."""
    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever, daemon=True)
    runner.start()
    listeners = [
        udp.UdpListener(bind_udp(ListenAddress("127.0.0.1", 0)), handler, stats, **kwargs)  # type: ignore[arg-type]
        for _ in range(count)
    ]

    async def each(action: str) -> None:
        for listener in listeners:
            listener.start(loop) if action == "start" else listener.close()

    try:
        asyncio.run_coroutine_threadsafe(each("start"), loop).result()
        yield [listener.sockname[1] for listener in listeners]
    finally:
        asyncio.run_coroutine_threadsafe(each("close"), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        runner.join()
        loop.close()


def test_the_c_loop_answers_from_the_table_and_passes_only_the_rest_to_python() -> None:
    handler = Counting(responder(native=True))
    stats = ServerStats()
    payloads = [a_query(i) for i in range(200)] + [
        status_query(1000),
        status_query(1001),
        status_query(1002, b"\x04boom"),
    ]
    with listening(handler, stats) as ports:
        replies = exchange(ports[0], payloads)
    answers = [dns.message.from_wire(r) for r in replies]
    assert sorted(a.id for a in answers) == [*range(200), 1000, 1001]
    assert all(a.rcode() == dns.rcode.NOERROR and len(a.answer[0]) == 3 for a in answers if a.id < 200)
    assert [a.rcode() for a in answers if a.id >= 1000] == [dns.rcode.NOTIMP] * 2
    assert handler.calls == 3
    assert (stats.udp_queries, stats.udp_responses, stats.udp_native_answers) == (203, 202, 200)
    assert stats.handler_errors == 1
    assert stats.udp_rcodes[0] == 200 and stats.udp_rcodes[4] == 2
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


def test_a_datagram_longer_than_the_buffer_is_counted_and_answered_formerr() -> None:
    stats = ServerStats()
    handler = Counting(responder(native=True))
    big = a_query(77)[:-4] + b"\x00" * 5000  # 5 kB: longer than the C loop's 4 kB receive buffer
    with listening(handler, stats) as ports:
        replies = exchange(ports[0], [big, a_query(78)])
    by_id = {struct.unpack("!H", r[:2])[0]: r for r in replies}
    assert sorted(by_id) == [77, 78]
    assert by_id[77] == struct.pack("!HBBHHHH", 77, 0x81, 1, 0, 0, 0, 0)  # QR, RD, FORMERR, no question
    assert stats.udp_oversized == 1
    assert stats.udp_rcodes[1] == 1
    assert handler.calls == 0  # never handed to the responder


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


@pytest.mark.parametrize("native", [True, False], ids=["c-loop", "python-loop"])
def test_malformed_datagrams_get_the_python_answers_counted_the_same_way(native: bool) -> None:
    """The C loop answers datagrams that cannot be valid queries itself (no call to Python), with the bytes
    and counters the Python loop has for them."""
    oracle = responder(native=False)
    payloads = [p for i in range(0, 400, 10) for p in malformed(i)]
    expected = [oracle.handle(p, 0x7F000001, False) for p in payloads]
    assert all(e is not None for e in expected)
    stats = ServerStats()
    handler = Counting(responder(native=native))
    with listening(handler, stats, native=native) as ports:
        replies = exchange(ports[0], payloads)
    assert sorted(replies) == sorted(e for e in expected if e is not None)
    assert handler.calls == (0 if native else len(payloads))
    assert (stats.udp_queries, stats.udp_responses, stats.udp_dropped) == (len(payloads), len(payloads), 0)
    assert stats.udp_native_answers == (len(payloads) if native else 0)
    rcodes = [e[3] & 15 for e in expected if e is not None]
    assert stats.udp_rcodes[1] == rcodes.count(1) and stats.udp_rcodes[4] == rcodes.count(4) == 40


def flood(port: int, payloads: list[bytes]) -> list[bytes]:
    """Send every payload, then read replies until none comes for 0.5 s (some are dropped)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)
        s.settimeout(0.5)
        for p in payloads:
            s.sendto(p, ("127.0.0.1", port))
        out = []
        try:
            while True:
                out.append(s.recvfrom(65535)[0])
        except TimeoutError:
            return out


def rate_limited(native: bool) -> tuple[int, dict[str, int], tuple[int, int, int], list[bytes]]:
    """Malformed datagrams from one address under RRL: (calls to handle, the guard's counts, (responses,
    dropped, truncated), the replies)."""
    rrl = RrlConfig(responses_per_second=5, errors_per_second=5, nxdomains_per_second=5, window=1.0, slip=3)
    inner = responder(native=native)
    clock = FakeClock()  # stands still: the limiter's decisions follow the count alone
    inner.guard = Guard(rrl, None, bytes(16), monotonic=clock.monotonic, wall=clock.wall)
    handler = Counting(inner)
    stats = ServerStats()
    payloads = [p for i in range(0, 200, 10) for p in malformed(i)]
    with listening(handler, stats, native=native) as ports:
        replies = flood(ports[0], payloads)
    truncated = sum(1 for r in replies if r[2] & 0x02)
    assert stats.udp_queries == len(payloads)
    return handler.calls, inner.guard_counts(), (stats.udp_responses, stats.udp_dropped, truncated), replies


def test_with_rrl_on_the_guard_limits_c_answers_to_malformed_datagrams_as_python_answers() -> None:
    """RRL on (every valid query goes to Python): C still answers the malformed datagrams, and the guard
    decides on each answer as it does in Responder.handle: the same replies, sent, dropped and slipped."""
    c_calls, c_counts, c_stats, c_replies = rate_limited(native=True)
    py_calls, py_counts, py_stats, py_replies = rate_limited(native=False)
    assert (c_calls, py_calls) == (0, 160)
    assert c_counts == py_counts and c_stats == py_stats and sorted(c_replies) == sorted(py_replies)
    responses, dropped, truncated = c_stats
    assert c_counts["rrl_limited"] == 155 and dropped == c_counts["rrl_dropped"] > 0
    assert truncated == c_counts["rrl_slipped"] > 0 and responses == len(c_replies) == 5 + truncated
