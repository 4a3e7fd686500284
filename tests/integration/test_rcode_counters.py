"""The listeners count responses by transport and rcode (read by the metrics collector)."""

from __future__ import annotations

import asyncio
import socket
import struct

from gslbd.model.config import ListenAddress
from gslbd.server.listeners import Listeners
from gslbd.server.stats import ServerStats


class RcodeHandler:
    """Answers with a 12-byte header whose rcode is the query's first byte (tiny replies too). The UDP
    queries are a header long: the C loop drops a shorter datagram before any handler sees it."""

    def handle(self, data: bytes, src_ip: int, src_v6: bool, tcp: bool = False) -> bytes | None:
        if data.startswith(b"short"):
            return b"\x80"
        return b"\x00\x01\x80" + bytes([data[0]]) + bytes(8)


def test_responses_are_counted_by_transport_and_rcode() -> None:
    async def body() -> ServerStats:
        stats = ServerStats()
        listeners = Listeners(
            [ListenAddress("127.0.0.1", 0)], RcodeHandler(), tcp_idle_timeout=5, stats=stats
        )
        await listeners.start()
        port = listeners.bound[0].port
        loop = asyncio.get_running_loop()

        def exchange() -> None:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.settimeout(2)
                for payload in (b"\x03", b"\x03", b"\x00", b"short"):
                    s.sendto(payload.ljust(12, b"\x00"), ("127.0.0.1", port))
                    s.recv(100)
            with socket.create_connection(("127.0.0.1", port), timeout=2) as t:
                t.sendall(struct.pack("!H", 1) + b"\x05")
                t.recv(100)

        await loop.run_in_executor(None, exchange)
        await listeners.close()
        return stats

    stats = asyncio.run(body())
    assert stats.responses_by_rcode() == {("udp", 3): 2, ("udp", 0): 1, ("tcp", 5): 1}
    assert stats.udp_responses == 4
