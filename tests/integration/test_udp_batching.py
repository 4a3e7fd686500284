"""The UDP listener answers the same with the C loop (recvmmsg/sendmmsg; a handler without a C table gets
every datagram) and with the asyncio reader of builds without the C extension (recvfrom/sendto)."""

from __future__ import annotations

import asyncio
import socket
import struct

import pytest
from gslbd_harness import has_ipv6_loopback

from gslbd.model.config import ListenAddress
from gslbd.server import udp
from gslbd.server.sockets import bind_udp
from gslbd.server.stats import ServerStats


class EchoHandler:
    """Replies with the query, QR set, and records the client address it was given."""

    def __init__(self) -> None:
        self.clients: set[tuple[int, bool]] = set()

    def handle(self, data: bytes, src_ip: int, src_v6: bool, tcp: bool = False) -> bytes | None:
        self.clients.add((src_ip, src_v6))
        if data.startswith(b"boom"):
            raise ValueError("boom")
        if data.startswith(b"drop"):
            return None
        return bytes([data[0] | 0x80]) + data[1:]


def exchange(host: str, port: int, payloads: list[bytes]) -> list[bytes]:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)
        s.settimeout(2)
        for p in payloads:
            s.sendto(p, (host, port))
        out = []
        try:
            while len(out) < len(payloads):
                out.append(s.recvfrom(65535)[0])
        except TimeoutError:
            pass
        return out


def run_burst(host: str, native: bool) -> tuple[list[bytes], ServerStats, EchoHandler]:
    async def body() -> tuple[list[bytes], ServerStats, EchoHandler]:
        handler = EchoHandler()
        stats = ServerStats()
        sock = bind_udp(ListenAddress(host, 0))
        listener = udp.UdpListener(sock, handler, stats, native=native)
        listener.start(asyncio.get_running_loop())
        port = listener.sockname[1]
        payloads = [struct.pack("!H", i) + b"q" * 20 for i in range(300)] + [
            b"boom" + bytes(12),
            b"drop" + bytes(12),
        ]
        try:
            replies = await asyncio.to_thread(exchange, host, port, payloads)
        finally:
            listener.close()
        return replies, stats, handler

    return asyncio.run(body())


@pytest.mark.parametrize("native", [True, False], ids=["c-loop", "asyncio"])
def test_every_datagram_of_a_burst_is_answered_in_both_modes(native: bool) -> None:
    replies, stats, handler = run_burst("127.0.0.1", native)
    assert sorted(replies) == sorted(
        bytes([0x80 | (i >> 8)]) + bytes([i & 0xFF]) + b"q" * 20 for i in range(300)
    )
    assert stats.udp_queries == 302
    assert stats.udp_responses == 300
    assert stats.udp_dropped == 1
    assert stats.handler_errors == 1
    assert handler.clients == {(0x7F000001, False)}


@pytest.mark.skipif(not has_ipv6_loopback(), reason="no ::1 here")
@pytest.mark.parametrize("native", [True, False], ids=["c-loop", "asyncio"])
def test_ipv6_clients_are_answered_and_located_in_both_modes(native: bool) -> None:
    replies, _, handler = run_burst("::1", native)
    assert len(replies) == 300
    assert handler.clients == {(1, True)}


def test_the_c_loop_is_built_where_the_tests_run() -> None:
    # The benchmark figures are for the C loop; CI must exercise the same code.
    assert udp._cfast is not None


def test_a_second_server_on_a_taken_address_fails_instead_of_sharing_it() -> None:
    first = bind_udp(ListenAddress("127.0.0.1", 0))
    try:
        with pytest.raises(OSError):
            bind_udp(ListenAddress("127.0.0.1", first.getsockname()[1]))
        # Worker processes opt in to sharing (SO_REUSEPORT on every socket of the group).
        shared = bind_udp(ListenAddress("127.0.0.1", 0), reuse_port=True)
        twin = bind_udp(ListenAddress("127.0.0.1", shared.getsockname()[1]), reuse_port=True)
        twin.close()
        shared.close()
    finally:
        first.close()
