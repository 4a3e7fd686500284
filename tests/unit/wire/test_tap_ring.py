"""The C dnstap ring (`_cfast.TapRing`, wire/_tap.c) the C UDP loops and the C TCP answerer write and the
dnstap writer drains: first in, first out across the buffer's wrap-around, bounded in entries and in bytes,
a full ring drops the new entry and counts it; the TCP answerer writes each message it answers or drops,
marked TCP, and none it leaves to Python."""

from __future__ import annotations

import random
import struct
from collections import deque

import pytest
from wire_support import CONFIG, make_view, query

from gslbd.wire import Responder, compile_table
from gslbd.wire import ctable as ct

pytestmark = pytest.mark.skipif(not ct.AVAILABLE, reason="gslbd.wire._cfast is not compiled here")

if ct.AVAILABLE:
    from gslbd.wire import _cfast

Entry = tuple[bytes, bytes | None, int, bool, bool, int, int, int]


def test_entries_come_out_as_they_went_in_with_both_families_ports_and_no_response() -> None:
    ring = _cfast.TapRing(4, 4096, True, True)
    v6 = 0x20010DB8 << 96 | 1
    assert ring.put(b"q1", b"r1", 0x7F000001, False, False, 10, 20, 53)
    assert ring.put(b"q2", None, v6, True, True, 30, 40, 65535)
    assert ring.put(b"q3", b"r3", 1, False, False, 50, 60)  # no port: 0, not known
    assert len(ring) == 3
    assert ring.drain(10) == [
        (b"q1", b"r1", 0x7F000001, False, False, 10, 20, 53),
        (b"q2", None, v6, True, True, 30, 40, 65535),
        (b"q3", b"r3", 1, False, False, 50, 60, 0),
    ]
    assert (len(ring), ring.counts()) == (0, (0, 0))


def test_a_full_ring_drops_the_new_entry_and_counts_it_by_entries_and_by_bytes() -> None:
    ring = _cfast.TapRing(2, 4096, True, True)
    assert [ring.put(b"q", b"r", 1, False, False, 1, 2) for _ in range(3)] == [True, True, False]
    assert ring.counts() == (2, 1)
    roomy = _cfast.TapRing(100, 4096, True, True)
    assert not roomy.put(b"q" * 2000, b"r" * 2100, 1, False, False, 1, 2)  # more bytes than the ring holds
    assert roomy.put(b"q" * 1000, b"r" * 1000, 1, False, False, 1, 2)
    assert not roomy.put(b"q" * 1000, b"r" * 1100, 1, False, False, 1, 2)  # no room left behind the first
    assert roomy.counts() == (1, 2)


def test_what_the_writer_does_not_encode_is_not_kept() -> None:
    responses_only = _cfast.TapRing(10, 4096, False, True)
    assert responses_only.put(b"query", None, 1, False, False, 1, 2)  # nothing to log: not stored
    assert responses_only.put(b"query", b"reply", 1, False, False, 1, 2)
    assert responses_only.drain(10) == [(b"", b"reply", 1, False, False, 1, 2, 0)]
    queries_only = _cfast.TapRing(10, 4096, True, False)
    assert queries_only.put(b"query", b"reply", 1, False, False, 1, 2)
    assert queries_only.drain(10) == [(b"query", None, 1, False, False, 1, 2, 0)]


def test_it_is_a_bounded_fifo_across_wrap_arounds_like_a_deque() -> None:
    rng = random.Random(7)
    ring = _cfast.TapRing(40, 8192, True, True)
    model: deque[Entry] = deque()
    dropped = 0
    for step in range(30_000):
        if rng.random() < 0.55:
            query = rng.randbytes(rng.randint(0, 700))
            response = rng.choice([None, rng.randbytes(rng.randint(0, 900))])
            entry = (query, response, step, False, False, step, step + 1, step & 0xFFFF)
            if ring.put(*entry):
                model.append(entry)
            else:
                dropped += 1
        else:
            n = rng.randint(0, 7)
            assert ring.drain(n) == [model.popleft() for _ in range(min(n, len(model)))]
        assert ring.counts() == (len(model), dropped)
    assert dropped > 50  # the bounds were reached many times


def framed(messages: list[bytes]) -> bytes:
    return b"".join(struct.pack("!H", len(m)) + m for m in messages)


def unframed(stream: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(stream):
        size = struct.unpack_from("!H", stream, pos)[0]
        out.append(stream[pos + 2 : pos + 2 + size])
        pos += 2 + size
    return out


def tcp_answerer(ring: _cfast.TapRing) -> _cfast.TcpAnswerer:
    view = make_view(CONFIG)
    table = compile_table(view, max_udp_payload=1232, use_client_subnet=True)
    slot = Responder(table, view, random.Random(1), native=True).slot
    assert isinstance(slot, _cfast.Slot)
    return _cfast.TcpAnswerer(slot, 1, ring)


def test_the_tcp_answerer_writes_what_c_answers_or_drops_marked_tcp_but_not_what_python_answers() -> None:
    ring = _cfast.TapRing(100, 1 << 16, True, True)
    answerer = tcp_answerer(ring)
    answered = [query("app.gslb.example.com.", qid=i) for i in range(3)]
    status = struct.pack("!HHHHHH", 9, 0x1100, 1, 0, 0, 0) + b"\x02qq\x00\x00\x01\x00\x01"  # to Python
    not_a_query = struct.pack("!HHHHHH", 10, 0x8100, 0, 0, 0, 0)  # QR set: dropped
    stream = framed([*answered, status, *answered, not_a_query])
    v6 = 0x20010DB8 << 96 | 5
    out, pos, count, _, pending = answerer.answer(stream, 0, v6, True, 5353)
    assert (count, pending) == (3, status)
    out2, _, count2, _, pending2 = answerer.answer(stream, pos, v6, True, 5353)
    assert (count2, pending2) == (3, False)
    records = ring.drain(100)
    replies = unframed(out) + unframed(out2)
    assert [(q, r) for q, r, *_ in records] == [*zip(answered * 2, replies, strict=True), (not_a_query, None)]
    assert {(ip, is_v6, tcp, port) for _, _, ip, is_v6, tcp, _, _, port in records} == {
        (v6, True, True, 5353)
    }
    assert all(0 < tq <= tr for *_, tq, tr, _ in records)


def test_a_full_ring_drops_what_the_tcp_answerer_answers_and_counts_it() -> None:
    ring = _cfast.TapRing(2, 4096, True, True)
    answerer = tcp_answerer(ring)
    stream = framed([query("app.gslb.example.com.", qid=i) for i in range(5)])
    assert answerer.answer(stream, 0, 1, False)[2] == 5
    assert ring.counts() == (2, 3)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError):
        _cfast.TapRing(0, 4096, True, True)
    with pytest.raises(ValueError):
        _cfast.TapRing(10, 100, True, True)
    with pytest.raises(TypeError):
        _cfast.UdpLoop(0, _cfast.Slot(), print, None, 1, None, object())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        _cfast.TcpAnswerer(_cfast.Slot(), 1, object())  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        _cfast.TapRing(10, 4096, True, True).put(b"q", None, 1, False, False, 1, 2, 65536)
    with pytest.raises(ValueError):
        _cfast.TcpAnswerer(_cfast.Slot(), 1).answer(b"", 0, 1, False, -1)
