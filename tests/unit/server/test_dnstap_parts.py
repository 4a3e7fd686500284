"""dnstap pieces without a reader process: the protobuf encoding, Frame Streams control frames and the
handshake, and the bounded queue of the query path (drop and count, never block)."""

from __future__ import annotations

import random
import socket
import struct
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gslbd.server.dnstap.fstrm import (
    ACCEPT,
    CONTENT_TYPE,
    FINISH,
    READY,
    START,
    STOP,
    FrameStreamError,
    close_writer,
    control_frame,
    open_writer,
    parse_control,
    read_control,
)
from gslbd.server.dnstap.message import AUTH_QUERY, AUTH_RESPONSE, NS, Encoder, varint
from gslbd.server.dnstap.message import decode_fields as decode
from gslbd.server.dnstap.sink import DnstapSink
from gslbd.server.dnstap.tap import DnstapHandler
from gslbd.server.stats import ServerStats


def test_varint_is_base_128_little_endian() -> None:
    assert varint(0) == b"\x00"
    assert varint(127) == b"\x7f"
    assert varint(300) == b"\xac\x02"
    assert varint(1 << 32) == b"\x80\x80\x80\x80\x10"


def test_auth_query_carries_family_protocol_address_time_and_the_query() -> None:
    payload = Encoder("eu", "gslbd 1.0").message(
        AUTH_QUERY, 0x7F000001, False, False, 1_764_547_200_123_456_789, b"Q"
    )
    top = decode(payload)
    assert top[1] == [b"eu"] and top[2] == [b"gslbd 1.0"] and top[15] == [1]
    msg = decode(bytes(top[14][0]))  # type: ignore[arg-type]
    assert msg == {
        1: [AUTH_QUERY],
        2: [1],
        3: [1],
        4: [b"\x7f\x00\x00\x01"],
        8: [1_764_547_200],
        9: [123_456_789],
        10: [b"Q"],
    }


def test_auth_response_over_tcp_ipv6_carries_the_port_both_times_and_the_response_only() -> None:
    payload = Encoder("x", "y").message(
        AUTH_RESPONSE, 1, True, True, 5_000_000_001, None, 6_000_000_002, b"R", port=40000
    )
    msg = decode(bytes(decode(payload)[14][0]))  # type: ignore[arg-type]
    assert msg[1] == [AUTH_RESPONSE] and msg[2] == [2] and msg[3] == [2]
    assert msg[4] == [b"\x00" * 15 + b"\x01"] and msg[6] == [40000]  # the client's port
    assert (msg[8], msg[9], msg[12], msg[13]) == ([5], [1], [6], [2])
    assert msg[14] == [b"R"] and 10 not in msg


def test_control_frames_round_trip_and_bad_ones_are_refused() -> None:
    frame = control_frame(READY)
    assert frame[:4] == b"\x00\x00\x00\x00"
    assert parse_control(frame[8:]) == (READY, [CONTENT_TYPE])
    assert parse_control(control_frame(STOP, None)[8:]) == (STOP, [])
    with pytest.raises(FrameStreamError):
        parse_control(b"\x00\x00")
    with pytest.raises(FrameStreamError):
        parse_control(struct.pack(">III", ACCEPT, 1, 99) + b"short")


@pytest.fixture
def listener(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    path = str(tmp_path / "r.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    sock.listen(1)
    try:
        yield sock, path
    finally:
        sock.close()


def test_handshake_ready_accept_start_then_stop_finish(listener: tuple[socket.socket, str]) -> None:
    server, path = listener
    seen: list[tuple[int, list[bytes]]] = []

    def reader() -> None:
        conn, _ = server.accept()
        with conn:
            seen.append(read_control(conn))
            conn.sendall(control_frame(ACCEPT))
            seen.append(read_control(conn))
            seen.append(read_control(conn))
            conn.sendall(control_frame(FINISH, None))

    thread = threading.Thread(target=reader)
    thread.start()
    close_writer(open_writer(path, 2.0))
    thread.join(2)
    assert seen == [(READY, [CONTENT_TYPE]), (START, [CONTENT_TYPE]), (STOP, [])]


def test_a_reader_of_another_content_type_is_refused(listener: tuple[socket.socket, str]) -> None:
    server, path = listener

    def reader() -> None:
        conn, _ = server.accept()
        with conn:
            read_control(conn)
            conn.sendall(control_frame(ACCEPT, b"protobuf:other"))
            conn.recv(1)

    thread = threading.Thread(target=reader)
    thread.start()
    with pytest.raises(FrameStreamError, match="accepts protobuf:other"):
        open_writer(path, 2.0)
    thread.join(2)


class Fixed:
    def handle(self, data: bytes, src_ip: int, src_v6: bool, tcp: bool = False) -> bytes | None:
        return b"reply:" + data


def test_query_path_answers_unchanged_and_drops_and_counts_when_the_queue_is_full(tmp_path: Path) -> None:
    stats = ServerStats()
    sink = DnstapSink(str(tmp_path / "nobody.sock"), Encoder("a", "b"), stats, capacity=2)  # not started
    handler = DnstapHandler(Fixed(), sink)
    assert [handler.handle(b"q%d" % i, 1, False) for i in range(3)] == [b"reply:q0", b"reply:q1", b"reply:q2"]
    assert [entry[:5] for entry in sink.queue] == [
        (b"q0", b"reply:q0", 1, False, False),
        (b"q1", b"reply:q1", 1, False, False),
    ]
    assert stats.dnstap_dropped == 1


def test_without_a_reader_stop_counts_what_was_queued_as_dropped(tmp_path: Path) -> None:
    stats = ServerStats()
    sink = DnstapSink(str(tmp_path / "nobody.sock"), Encoder("a", "b"), stats)
    sink.start()
    handler = DnstapHandler(Fixed(), sink)
    for _ in range(5):
        handler.handle(b"q", 1, False)
    sink.stop()
    assert (stats.dnstap_written, stats.dnstap_dropped, stats.dnstap_connects) == (0, 5, 0)


def test_a_batch_of_frames_is_each_exchange_s_messages_with_their_length_prefixes() -> None:
    """`Encoder.frames` (what the writer sends) gives the bytes of `message()` for every exchange: times
    within one second and across seconds, repeated ones (a receive batch of the C loop), both families
    and transports, ports known and not (0), sizes past the precomputed ones."""
    rng = random.Random(3)
    t0 = 1_764_547_200 * NS
    batch = []
    previous = (t0, t0)
    for _ in range(600):
        query_ns = t0 + rng.choice([0, rng.randrange(NS), rng.randrange(1 << 62)])
        response_ns = query_ns + rng.choice([1000, NS, 3 * NS])
        if rng.random() < 0.3:  # a receive batch of the C loop: one receive time, one send time
            query_ns, response_ns = previous
        previous = (query_ns, response_ns)
        v6 = rng.random() < 0.5
        batch.append(
            (
                rng.randbytes(rng.choice([0, 30, 300, 5000])),
                rng.choice([None, rng.randbytes(rng.choice([1, 200, 20_000]))]),
                rng.choice([0x7F000001, rng.getrandbits(128 if v6 else 32)]),
                v6,
                rng.random() < 0.5,
                query_ns,
                response_ns,
                rng.choice([0, 53, 65535, rng.randrange(1, 65536)]),
            )
        )
    encoder, oracle = Encoder("eu", "gslbd 1.0"), Encoder("eu", "gslbd 1.0")
    for queries, responses in [(True, True), (True, False), (False, True)]:
        expected = []
        for query, response, ip, v6, tcp, query_ns, response_ns, port in batch:
            if queries:
                expected.append(oracle.message(AUTH_QUERY, ip, v6, tcp, query_ns, query, port=port))
            if responses and response is not None:
                expected.append(
                    oracle.message(
                        AUTH_RESPONSE, ip, v6, tcp, query_ns, None, response_ns, response, port=port
                    )
                )
        framed = b"".join(struct.pack(">I", len(m)) + m for m in expected)
        assert encoder.frames(batch, queries, responses) == framed
