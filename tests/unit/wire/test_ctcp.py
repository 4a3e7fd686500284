"""DNS over TCP answered by the C table (`_cfast.TcpAnswerer`, server/tcp.py): a connection's pipelined
stream gets, byte for byte, the framed answers Python gives (Responder.handle without the C table), in
the order of the queries, however the stream is split into reads; what C declines is answered by the
handler in its place; malformed frames get FORMERR or close the connection as before, and never crash.

The stream is fed to the real TCP protocol (`_DnsStream`) over a socket pair, one `data_received` per
chunk, so every split is exercised exactly; the answers are read from the other end."""

from __future__ import annotations

import asyncio
import random
import socket
import struct
from collections.abc import Sequence
from dataclasses import dataclass, replace

import dns.edns
import dns.message
import dns.rcode
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_wire_fuzz import MUTATION, SEEDS, Mutation, mutate
from wire_support import CONFIG, TAKEN_AT, make_view, query

from gslbd.limits import ConnectionBudget
from gslbd.model.config import Config, CookieConfig, ListenAddress, RrlConfig
from gslbd.server.sockets import bind_tcp
from gslbd.server.stats import ServerStats
from gslbd.server.tcp import TcpListener, _DnsStream
from gslbd.wire import Responder, compile_table
from gslbd.wire import ctable as ct
from gslbd.wire.cguard import NativeGuard

pytestmark = pytest.mark.skipif(not ct.AVAILABLE, reason="gslbd.wire._cfast is not compiled here")

APP = "app.gslb.example.com."


def responder(native: bool, config: Config = CONFIG) -> Responder:
    """A fresh responder (its own table and counters), seeded alike."""
    view = make_view(config)
    table = compile_table(view, max_udp_payload=1232, use_client_subnet=True)
    return Responder(table, view, random.Random(1), native=native)


class Counting:
    """The responder as the listener sees it, counting the messages that reach Python."""

    def __init__(self, inner: Responder) -> None:
        self.inner = inner
        self.slot = inner.slot
        self.calls = 0

    def handle(self, data: bytes, src_ip: int, src_v6: bool, tcp: bool = False) -> bytes | None:
        self.calls += 1
        return self.inner.handle(data, src_ip, src_v6, tcp)


@dataclass
class Streamed:
    replies: bytes  # everything the server wrote, framed
    closed: bool  # the server closed the connection
    stats: ServerStats
    calls: int  # messages handed to the handler


def frame(message: bytes) -> bytes:
    return struct.pack("!H", len(message)) + message


def frames(data: bytes) -> list[bytes]:
    out = []
    while len(data) >= 2:
        size = struct.unpack("!H", data[:2])[0]
        out.append(data[2 : 2 + size])
        data = data[2 + size :]
    assert data == b""
    return out


def stream(handler: Counting, chunks: Sequence[bytes], *, native: bool = True) -> Streamed:
    """Feed `chunks` to one connection of a TCP listener of `handler`, one read each; what it wrote back."""

    async def body() -> Streamed:
        loop = asyncio.get_running_loop()
        stats = ServerStats()
        listener = TcpListener(
            bind_tcp(ListenAddress("127.0.0.1", 0)), handler, stats, budget=ConnectionBudget(8), native=native
        )
        assert (listener.native is not None) == native
        ours, theirs = socket.socketpair()
        theirs.setblocking(False)
        try:
            transport, proto = await loop.connect_accepted_socket(lambda: _DnsStream(listener, loop), ours)
            assert isinstance(proto, _DnsStream)
            for chunk in chunks:
                proto.data_received(chunk)
            closed = transport.is_closing()
            transport.close()  # flushes what was written, then closes
            got = bytearray()
            while True:
                data = await asyncio.wait_for(loop.sock_recv(theirs, 65536), 10)
                if not data:
                    break
                got += data
        finally:
            theirs.close()
            await listener.close()
        return Streamed(bytes(got), closed, stats, handler.calls)

    with asyncio.Runner() as runner:
        return runner.run(body())


def status_query(qid: int) -> bytes:
    """Opcode STATUS: the C table leaves it to Python (NOTIMP)."""
    return struct.pack("!HHHHHH", qid, 0x1100, 1, 0, 0, 0) + b"\x02qq\x00\x00\x01\x00\x01"


def two_questions(qid: int) -> bytes:
    """QDCOUNT=2: it cannot be a valid query (FORMERR, answered by C)."""
    question = b"\x02qq\x00\x00\x01\x00\x01"
    return struct.pack("!HHHHHH", qid, 0x0100, 2, 0, 0, 0) + question + question


def mixed_queries() -> list[bytes]:
    """Queries of many shapes: C answers most, some go to Python, some are malformed."""
    return [
        query(APP, qid=1),
        query(APP, "AAAA", edns=0, qid=2),
        query(APP, rd=False, qid=3),
        query("big.gslb.example.com.", edns=0, payload=512, qid=4),  # over 512 bytes: never TC on TCP
        query("big.gslb.example.com.", qid=5),  # no EDNS: 512 on UDP, the whole answer on TCP
        query("nope.gslb.example.com.", qid=6),  # NXDOMAIN
        query("www.example.net.", "MX", qid=7),  # outside every zone: REFUSED
        query("sticky.gslb.example.com.", ecs="10.1.2.0/24", qid=8),
        query(APP, "MX", edns=0, qid=9),  # NODATA
        status_query(10),  # Python
        two_questions(11),  # C: FORMERR
        query(APP, qid=12)[:20],  # cut in the name: FORMERR
        query("x.deep.inner.gslb.example.com.", "ANY", qid=13),
        query(APP, "AXFR", qid=14),  # REFUSED
        query(APP, edns=1, qid=15),  # BADVERS, in Python
        query(APP, qid=16),
    ]


def test_a_pipelined_stream_gets_the_python_answers_from_c_in_order() -> None:
    queries = mixed_queries()
    wire = b"".join(frame(q) for q in queries)
    oracle = responder(native=False)
    expected = [oracle.handle(q, 0, False, True) for q in queries]
    assert all(e is not None for e in expected)
    native = stream(Counting(responder(native=True)), [wire])
    python = stream(Counting(responder(native=False)), [wire], native=False)
    assert frames(native.replies) == expected == frames(python.replies)
    assert not native.closed and not python.closed
    assert not any(dns.message.from_wire(r).flags & 0x0200 for r in frames(native.replies))  # never TC
    assert len(frames(native.replies)[3]) > 512
    # Counted as the one-message-at-a-time loop counts, plus what C answered without the handler.
    for stats in (native.stats, python.stats):
        assert (stats.tcp_queries, stats.tcp_responses) == (len(queries), len(queries))
        assert stats.tcp_rcodes == _rcodes(expected)
    stats, before = native.stats, python.stats
    assert native.calls == len(queries) - stats.tcp_native_answers == 2  # STATUS and EDNS version 1
    assert python.calls == len(queries) and before.tcp_native_answers == 0


def _rcodes(replies: Sequence[bytes | None]) -> list[int]:
    counts = [0] * 16
    for reply in replies:
        assert reply is not None
        counts[reply[3] & 15] += 1
    return counts


def test_every_split_of_the_stream_into_two_reads_gives_the_same_answers() -> None:
    queries = [*mixed_queries()[:6], status_query(40), query(APP, qid=41)]
    wire = b"".join(frame(q) for q in queries)
    whole = stream(Counting(responder(native=True)), [wire]).replies
    for at in range(len(wire) + 1):
        # Round robin rotates with every answer: a fresh responder per split starts at the same place.
        got = stream(Counting(responder(native=True)), [wire[:at], wire[at:]])
        assert got.replies == whole, at
        assert got.stats.tcp_queries == len(queries)


def test_a_stream_fed_one_byte_per_read_gives_the_same_answers() -> None:
    queries = mixed_queries()
    wire = b"".join(frame(q) for q in queries)
    whole = stream(Counting(responder(native=True)), [wire])
    bytewise = stream(Counting(responder(native=True)), [wire[i : i + 1] for i in range(len(wire))])
    assert bytewise.replies == whole.replies
    assert bytewise.stats.tcp_native_answers == whole.stats.tcp_native_answers == len(queries) - 2


@pytest.mark.parametrize(
    "bad",
    [b"", b"\x12\x34\x01\x00", query(APP, qid=50)[:2] + bytes([0x81]) + query(APP)[3:]],
    ids=["length-0", "shorter-than-a-header", "qr-set"],
)
@pytest.mark.parametrize("native", [True, False], ids=["c", "python"])
def test_a_frame_that_is_no_query_closes_the_connection_after_the_answers_before_it(
    bad: bytes, native: bool
) -> None:
    handler = Counting(responder(native=native))
    got = stream(handler, [frame(query(APP, qid=1)) + frame(bad) + frame(query(APP, qid=2))], native=native)
    assert [dns.message.from_wire(r).id for r in frames(got.replies)] == [1]
    assert got.closed
    assert (got.stats.tcp_queries, got.stats.tcp_responses) == (2, 1)
    assert got.calls == (0 if native else 2)


def test_a_length_beyond_the_buffer_waits_for_the_rest_of_the_message() -> None:
    message = query(APP, qid=7)
    got = stream(Counting(responder(native=True)), [frame(query(APP, qid=6)), frame(message)[:-1]])
    assert [dns.message.from_wire(r).id for r in frames(got.replies)] == [6]
    assert not got.closed and got.stats.tcp_queries == 1


def test_garbage_frames_get_what_python_answers_them() -> None:
    rng = random.Random(5)
    garbage = [rng.randbytes(rng.randrange(12, 80)) for _ in range(300)]
    garbage = [bytes([g[0], g[1], g[2] & 0x7F]) + g[3:] for g in garbage]  # queries: QR clear
    oracle = responder(native=False)
    expected = [oracle.handle(g, 0, False, True) for g in garbage]
    wire = b"".join(frame(g) for g, e in zip(garbage, expected, strict=True) if e is not None)
    kept = [e for e in expected if e is not None]
    handler = Counting(responder(native=True))
    got = stream(handler, [wire])
    assert frames(got.replies) == kept
    assert got.stats.tcp_native_answers > len(kept) // 2  # most are decided by C
    assert handler.calls == len(kept) - got.stats.tcp_native_answers


@settings(max_examples=150)
@given(
    picks=st.lists(st.tuples(st.integers(0, len(SEEDS) - 1), st.lists(MUTATION, max_size=3)), max_size=12),
    junk=st.lists(st.binary(max_size=40), max_size=3),
    cuts=st.lists(st.integers(0, 4000), max_size=4),
)
def test_mutated_pipelined_queries_get_what_the_message_at_a_time_loop_answers(
    picks: list[tuple[int, list[Mutation]]], junk: list[bytes], cuts: list[int]
) -> None:
    """The C stream against the handler called once per message (Responder.handle, which asks the same
    C table first): the same bytes, the same close; split into reads anywhere."""
    messages = [mutate(SEEDS[i], ops) for i, ops in picks] + junk
    wire = b"".join(frame(m[:65535]) for m in messages)
    points = sorted({c % (len(wire) + 1) for c in cuts})
    chunks = [wire[a:b] for a, b in zip([0, *points], [*points, len(wire)], strict=True)]
    one_by_one = stream(Counting(responder(native=True)), chunks, native=False)
    batched = stream(Counting(responder(native=True)), chunks)
    assert batched.replies == one_by_one.replies
    assert batched.closed == one_by_one.closed
    assert batched.stats.tcp_queries == one_by_one.stats.tcp_queries
    assert batched.stats.tcp_rcodes == one_by_one.stats.tcp_rcodes
    for reply in frames(batched.replies):
        assert dns.message.from_wire(reply).flags & 0x8000


def test_cookies_are_added_in_c_and_rrl_never_limits_tcp() -> None:
    """With RRL (1 response a second) and cookies on, a TCP client asking 100 times over one connection
    gets 100 full answers (TCP is never rate limited, as in BIND and Knot), each with the server cookie
    that the message-at-a-time path gives for the same query."""
    config = replace(
        CONFIG,
        dns=replace(CONFIG.dns, rrl=RrlConfig(responses_per_second=1, slip=1), cookies=CookieConfig()),
    )
    native = responder(native=True, config=config)
    assert isinstance(native.guard, NativeGuard)
    native.guard.pin(1000.0, TAKEN_AT)  # one clock for every answer: one server cookie
    client_cookie = dns.edns.CookieOption(b"clientck", b"")
    queries = [query("solo.gslb.example.com.", options=(client_cookie,), qid=i) for i in range(100)]
    handler = Counting(native)
    got = stream(handler, [b"".join(frame(q) for q in queries)])
    answers = [dns.message.from_wire(r) for r in frames(got.replies)]
    assert [a.id for a in answers] == list(range(100))
    assert all(a.rcode() == dns.rcode.NOERROR and len(a.answer) == 1 for a in answers)
    assert not any(a.flags & 0x0200 for a in answers)  # no slip (TC) either
    assert handler.calls == 0 and got.stats.tcp_native_answers == 100
    cookies = {next(o for o in a.options if isinstance(o, dns.edns.CookieOption)).server for a in answers}
    assert len(cookies) == 1 and len(next(iter(cookies))) == 16
    direct = native.handle(queries[0], 0, False, True)
    assert direct is not None and direct[2:] == frames(got.replies)[0][2:]
