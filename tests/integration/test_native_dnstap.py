"""dnstap with the C UDP loop and the C TCP answerer (log.dnstap, wire/_tap.c): on real loopback sockets C
answers from the C table while the dnstap wrapper is the listener's handler, and every exchange (those
C hands to Python too) reaches the dnstap file once, query and response byte for byte, marked UDP or
TCP; a full ring drops the new exchanges and counts them, and answering goes on."""

from __future__ import annotations

import struct
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import dns.message
import pytest
from gslbd_harness import free_port, running_gslbd
from test_guard_native import events
from test_native_tcp import pipelined, serve_and_ask
from test_native_udp import Counting, a_query, exchange, listening, responder, status_query

from gslbd.server.dnstap.fstrm import file_frames
from gslbd.server.dnstap.message import AUTH_QUERY, AUTH_RESPONSE, Encoder, decode_fields
from gslbd.server.dnstap.sink import DnstapSink
from gslbd.server.dnstap.tap import DnstapHandler
from gslbd.server.stats import ServerStats
from gslbd.wire import ctable as ct

pytestmark = pytest.mark.skipif(not ct.AVAILABLE, reason="gslbd.wire._cfast is not compiled here")


def logged(path: Path) -> list[dict[int, list[int | bytes]]]:
    """The dnstap Message of every frame in the file at `path`."""
    out = []
    for frame in file_frames(path.read_bytes()):
        body = decode_fields(frame)[14][0]
        assert isinstance(body, bytes)
        out.append(decode_fields(body))
    return out


def of_kind(messages: list[dict[int, list[int | bytes]]], kind: int, field: int) -> list[bytes]:
    found = [m[field][0] for m in messages if m[1] == [kind]]
    assert all(isinstance(f, bytes) for f in found)
    return found  # type: ignore[return-value]


class Tapped(NamedTuple):
    stats: ServerStats
    path: Path
    sink: DnstapSink
    inner: Counting
    handler: DnstapHandler


def tapped(tmp_path: Path, *, start: bool = True, **sink_options: Any) -> Tapped:
    """A native Responder (counting what reaches it) inside the dnstap wrapper, its sink writing to a
    file under `tmp_path`; the writer started unless `start` is False (the ring then only fills)."""
    stats = ServerStats()
    path = tmp_path / "tap.fstrm"
    sink = DnstapSink(str(path), Encoder("eu", "gslbd test"), stats, to_file=True, **sink_options)
    if start:
        sink.start()
    inner = Counting(responder(native=True))
    return Tapped(stats, path, sink, inner, DnstapHandler(inner, sink))


def assert_each_from_localhost(messages: list[dict[int, list[int | bytes]]], protocol: int) -> None:
    """Every message INET over `protocol` (1 UDP, 2 TCP) from 127.0.0.1, each response after its query."""
    for m in messages:
        assert (m[2], m[3], m[4]) == ([1], [protocol], [b"\x7f\x00\x00\x01"])
        if m[1] == [AUTH_RESPONSE]:
            assert (m[12][0], m[13][0]) >= (m[8][0], m[9][0])  # answered after it was received


def test_exchanges_the_c_loop_answers_are_logged_once_each_byte_for_byte(tmp_path: Path) -> None:
    stats, path, sink, inner, handler = tapped(tmp_path)
    answered = [a_query(i) for i in range(300)] + [status_query(1000), status_query(1001)]
    not_a_query = struct.pack("!HHHHHH", 2000, 0x8100, 0, 0, 0, 0)  # QR set: dropped, its query logged
    try:
        with listening(handler, stats) as ports:
            replies = exchange(ports[0], [*answered, not_a_query])
    finally:
        sink.stop()
    assert len(replies) == len(answered)
    # C answered the A queries without Python; the STATUS queries went to the Responder itself, not
    # through the wrapper (the C loop logs them): nothing is logged twice.
    assert (stats.udp_native_answers, inner.calls, stats.udp_dropped) == (300, 2, 1)
    messages = logged(path)
    assert Counter(of_kind(messages, AUTH_QUERY, 10)) == Counter([*answered, not_a_query])
    assert Counter(of_kind(messages, AUTH_RESPONSE, 14)) == Counter(replies)
    assert len(messages) == 2 * len(answered) + 1
    assert len({m[6][0] for m in messages}) == 1  # the one client socket's port, C's answers and Python's
    assert_each_from_localhost(messages, 1)  # UDP
    assert (stats.dnstap_written, stats.dnstap_dropped) == (len(answered) + 1, 0)


def test_a_full_ring_drops_the_new_exchanges_counts_them_and_answering_goes_on(tmp_path: Path) -> None:
    stats, path, sink, _, handler = tapped(tmp_path, start=False, capacity=50)  # no writer yet
    payloads = [a_query(i) for i in range(500)]
    with listening(handler, stats) as ports:
        replies = exchange(ports[0], payloads)
    assert len(replies) == 500 and stats.udp_native_answers == 500
    assert sink.ring.counts() == (50, 450)
    sink.start()
    sink.stop()
    assert (stats.dnstap_written, stats.dnstap_dropped) == (50, 450)
    assert of_kind(logged(path), AUTH_QUERY, 10) == payloads[:50]  # the first 50: a full ring keeps its own


def test_with_queries_off_the_c_loop_logs_responses_only(tmp_path: Path) -> None:
    stats, path, sink, _, handler = tapped(tmp_path, queries=False)
    try:
        with listening(handler, stats) as ports:
            replies = exchange(ports[0], [a_query(i) for i in range(20)])
    finally:
        sink.stop()
    messages = logged(path)
    assert {m[1][0] for m in messages} == {AUTH_RESPONSE}
    assert Counter(of_kind(messages, AUTH_RESPONSE, 14)) == Counter(replies)
    assert all(10 not in m for m in messages)


def test_several_c_loops_share_one_ring_while_the_writer_drains_it(tmp_path: Path) -> None:
    stats, path, sink, _, handler = tapped(tmp_path)
    sent = [[a_query(i) for i in range(start, start + 1200)] for start in range(0, 7200, 1200)]
    try:
        with listening(handler, stats, count=3) as ports, ThreadPoolExecutor(6) as pool:
            replies = list(pool.map(lambda job: exchange(job[0], job[1]), zip(ports * 2, sent, strict=True)))
    finally:
        sink.stop()
    assert [len(r) for r in replies] == [1200] * 6 and stats.udp_native_answers == 7200
    messages = logged(path)
    assert Counter(of_kind(messages, AUTH_QUERY, 10)) == Counter(q for job in sent for q in job)
    assert Counter(of_kind(messages, AUTH_RESPONSE, 14)) == Counter(r for got in replies for r in got)
    assert (stats.dnstap_written, stats.dnstap_dropped) == (7200, 0)


def test_pipelined_tcp_is_answered_by_c_and_each_message_logged_once_as_tcp(tmp_path: Path) -> None:
    stats, path, sink, inner, handler = tapped(tmp_path)
    # Per connection: C's answers around two STATUS queries the Responder answers in their place.
    batches = [[a_query(i) for i in range(n, n + 100)] for n in range(0, 300, 100)]
    for n, batch in enumerate(batches):
        batch[50:50] = [status_query(1000 + 2 * n), status_query(1001 + 2 * n)]
    try:
        replies = serve_and_ask(handler, stats, batches, native=True)
    finally:
        sink.stop()
    sent = [q for batch in batches for q in batch]
    assert [len(r) for r in replies] == [102] * 3
    assert (stats.tcp_native_answers, inner.calls, stats.tcp_responses) == (300, 6, 306)
    messages = logged(path)
    assert Counter(of_kind(messages, AUTH_QUERY, 10)) == Counter(sent)
    assert Counter(of_kind(messages, AUTH_RESPONSE, 14)) == Counter(r for got in replies for r in got)
    assert len(messages) == 2 * len(sent)  # the Responder's answers too: none twice
    assert sorted(Counter(m[6][0] for m in messages).values()) == [204] * 3  # one port per connection
    assert_each_from_localhost(messages, 2)  # TCP
    assert (stats.dnstap_written, stats.dnstap_dropped) == (len(sent), 0)


def test_a_full_ring_drops_new_tcp_exchanges_counts_them_and_tcp_is_answered(tmp_path: Path) -> None:
    stats, path, sink, _, handler = tapped(tmp_path, start=False, capacity=50)  # no writer yet
    payloads = [a_query(i) for i in range(400)]
    payloads[200:200] = [status_query(1000)]
    (replies,) = serve_and_ask(handler, stats, [payloads], native=True)
    assert len(replies) == 401 and stats.tcp_native_answers == 400
    assert sink.ring.counts() == (50, 351)
    sink.start()
    sink.stop()
    assert (stats.dnstap_written, stats.dnstap_dropped) == (50, 351)
    assert of_kind(logged(path), AUTH_QUERY, 10) == payloads[:50]


def test_a_real_gslbd_logs_each_pipelined_tcp_message_once_as_tcp_whichever_path_answered(
    tmp_path: Path,
) -> None:
    zone, api, path = "gslb.example.com.", free_port(), tmp_path / "tap.fstrm"
    config = f"""
version: 1
dns: {{listen: @LISTEN@, lame_duck: 0s}}
api: {{listen: "127.0.0.1:{api}"}}
zones: [{{origin: {zone}, nameservers: [{{name: ns1.{zone}, address: 127.0.0.1}}]}}]
services:
  - {{name: app.{zone}, check: none, endpoints: [{{address: 192.0.2.10}}]}}
log: {{dnstap: {{file: {path}}}}}
"""
    chaos = dns.message.make_query("version.bind.", "TXT", "CH", id=7000).to_wire()  # Python answers it
    batches = [[a_query(i) for i in range(n, n + 40)] for n in range(0, 120, 40)]
    for n, batch in enumerate(batches):
        batch[10:10] = [chaos, status_query(7001 + n)]
    with running_gslbd(tmp_path, config, zone=zone) as server:
        before = events(api)
        replies = [pipelined(server.port, batch) for batch in batches]
        after = events(api)
        assert server.stop() == 0  # the writer flushes the file on the way out
    sent = [q for batch in batches for q in batch]
    assert [len(r) for r in replies] == [42] * 3
    asked = {k: after[k] - before.get(k, 0.0) for k in ("tcp_queries", "tcp_native_answers")}
    assert asked == {"tcp_queries": 126, "tcp_native_answers": 120}
    messages = [m for m in logged(path) if m[3] == [2]]  # TCP (the harness's readiness probes are UDP)
    assert Counter(of_kind(messages, AUTH_QUERY, 10)) == Counter(sent)
    assert Counter(of_kind(messages, AUTH_RESPONSE, 14)) == Counter(r for got in replies for r in got)
    assert len(messages) == 2 * len(sent)
    assert {(m[2][0], m[4][0]) for m in messages} == {(1, b"\x7f\x00\x00\x01")}  # INET, 127.0.0.1
    assert sorted(Counter(m[6][0] for m in messages).values()) == [84] * 3  # one port per connection
