"""Random and mutated packets sent to a running gslbd over UDP and TCP: it keeps answering correctly."""

from __future__ import annotations

import socket
import struct

import dns.edns
import dns.flags
import dns.message
import dns.rcode
import dns.rdatatype
import pytest
from dns_config import ZONE
from gslbd_harness import Running
from hypothesis import given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.slow


def _valid_queries() -> list[bytes]:
    out = []
    for name, rtype, edns in [
        (f"app.{ZONE}", "A", False),
        (f"geo.{ZONE}", "A", True),
        (f"big.{ZONE}", "AAAA", True),
        (ZONE, "NS", False),
        (f"nope.{ZONE}", "TXT", True),
        ("example.org.", "A", False),
    ]:
        options = [dns.edns.ECSOption("10.1.0.0", 16)] if edns else []
        q = dns.message.make_query(
            name, dns.rdatatype.from_text(rtype), use_edns=0 if edns else False, options=options
        )
        out.append(q.to_wire())
    return out


VALID = _valid_queries()


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(VALID)))
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["flip", "set", "truncate", "insert", "counts"]))
        if not data:
            break
        pos = draw(st.integers(0, len(data) - 1))
        if kind == "flip":
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set":
            data[pos] = draw(st.integers(0, 255))
        elif kind == "truncate":
            del data[pos:]
        elif kind == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif len(data) >= 12:
            offset = draw(st.sampled_from([4, 6, 8, 10]))
            data[offset : offset + 2] = struct.pack("!H", draw(st.integers(0, 65535)))
    return bytes(data)


PACKETS = st.one_of(st.binary(max_size=700), mutated())


def assert_still_correct(server: Running) -> None:
    assert server.alive(), server.log()
    for tcp in (False, True):
        reply = server.ask(f"app.{ZONE}", "A", tcp=tcp)
        assert reply.rcode() == dns.rcode.NOERROR
        assert reply.flags & dns.flags.AA
        assert sorted(rd.to_text() for rd in reply.answer[0]) == ["192.0.2.1", "192.0.2.2"]


def test_udp_survives_random_and_mutated_packets(server: Running) -> None:
    sent_ids: set[int] = set()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)

        @settings(max_examples=300, database=None)
        @given(packet=PACKETS)
        def send(packet: bytes) -> None:
            if len(packet) >= 2:
                sent_ids.add(struct.unpack("!H", packet[:2])[0])
            sock.sendto(packet, (server.host, server.port))

        send()
        assert_still_correct(server)
        sock.settimeout(0.5)
        replies = []
        while True:
            try:
                replies.append(sock.recv(65535))
            except TimeoutError:
                break
    assert replies, "some of the packets deserve an answer (FORMERR at least)"
    for data in replies:
        ident, flags = struct.unpack("!HH", data[:4])
        assert flags & 0x8000, "every reply is a response"
        assert ident in sent_ids


def read_frame_or_close(sock: socket.socket) -> bytes | None:
    """The next framed reply, or None when the server closed the connection."""
    buf = b""
    while True:
        chunk = sock.recv(65535)
        if not chunk:
            return None
        buf += chunk
        if len(buf) >= 2 and len(buf) - 2 >= struct.unpack("!H", buf[:2])[0]:
            return buf[2:]


def test_tcp_survives_random_and_mutated_packets(server: Running) -> None:
    outcomes = {"answered": 0, "closed": 0}

    @settings(max_examples=150, database=None)
    @given(packet=PACKETS)
    def send(packet: bytes) -> None:
        with socket.create_connection((server.host, server.port), timeout=3) as sock:
            sock.sendall(struct.pack("!H", len(packet)) + packet)
            reply = read_frame_or_close(sock)  # never a hang: an answer, or the connection closes
        if reply is None:
            outcomes["closed"] += 1
            return
        outcomes["answered"] += 1
        ident, flags = struct.unpack("!HH", reply[:4])
        assert flags & 0x8000
        assert ident == struct.unpack("!H", packet[:2])[0]

    send()
    assert outcomes["answered"] > 0
    assert_still_correct(server)
