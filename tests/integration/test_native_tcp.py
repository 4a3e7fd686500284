"""TCP answered by the C table on real loopback sockets (server/tcp.py, `_cfast.TcpAnswerer`): one
pipelined connection gets its answers in order, only what C declines reaches Python, and the counters are
those of the Python path, with several connections at once."""

from __future__ import annotations

import asyncio
import socket
import struct
from concurrent.futures import ThreadPoolExecutor

import dns.message
import dns.rcode
import pytest
from test_native_udp import APP, Counting, a_query, responder, status_query

from gslbd.limits import ConnectionBudget
from gslbd.model.config import ListenAddress
from gslbd.server.handler import Handler
from gslbd.server.sockets import bind_tcp
from gslbd.server.stats import ServerStats
from gslbd.server.tcp import TcpListener
from gslbd.wire import ctable as ct

pytestmark = pytest.mark.skipif(not ct.AVAILABLE, reason="gslbd.wire._cfast is not compiled here")


def pipelined(port: int, payloads: list[bytes]) -> list[bytes]:
    """Send every payload on one connection without waiting, then read as many answers."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"".join(struct.pack("!H", len(p)) + p for p in payloads))
        buf = b""
        out: list[bytes] = []
        while len(out) < len(payloads):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
            while len(buf) >= 2 and len(buf) >= 2 + struct.unpack("!H", buf[:2])[0]:
                size = struct.unpack("!H", buf[:2])[0]
                out.append(buf[2 : 2 + size])
                buf = buf[2 + size :]
        return out


def serve_and_ask(
    handler: Handler, stats: ServerStats, batches: list[list[bytes]], native: bool
) -> list[list[bytes]]:
    """A started TCP listener on loopback; each batch pipelined on a connection of its own, in parallel."""

    async def body() -> list[list[bytes]]:
        listener = TcpListener(
            bind_tcp(ListenAddress("127.0.0.1", 0)),
            handler,
            stats,
            budget=ConnectionBudget(64),
            native=native,
        )
        assert (listener.native is not None) == native
        await listener.start()
        try:
            loop = asyncio.get_running_loop()
            with ThreadPoolExecutor(len(batches)) as pool:
                asks = [loop.run_in_executor(pool, pipelined, listener.sockname[1], b) for b in batches]
                return list(await asyncio.gather(*asks))
        finally:
            await listener.close()

    with asyncio.Runner() as runner:
        return runner.run(asyncio.wait_for(body(), 60))


def test_a_pipelined_connection_is_answered_by_c_in_order_and_only_the_rest_reaches_python() -> None:
    handler = Counting(responder(native=True))
    stats = ServerStats()
    payloads = [a_query(i) for i in range(500)]
    payloads[100:100] = [status_query(1000), status_query(1001)]
    (replies,) = serve_and_ask(handler, stats, [payloads], native=True)
    answers = [dns.message.from_wire(r) for r in replies]
    assert [a.id for a in answers] == [struct.unpack("!H", p[:2])[0] for p in payloads]
    assert [a.rcode() for a in answers[100:102]] == [dns.rcode.NOTIMP] * 2
    firsts = [next(iter(a.answer[0])).address for a in answers if a.id < 1000]
    assert len(set(firsts[:3])) == 3 and firsts[3::3] == firsts[: len(firsts[3::3]) * 3 : 3]  # round robin
    assert handler.calls == 2
    assert (stats.tcp_queries, stats.tcp_responses, stats.tcp_native_answers) == (502, 502, 500)
    assert stats.tcp_rcodes[0] == 500 and stats.tcp_rcodes[4] == 2
    assert handler.inner.policy_answers()["round_robin"] == 500


@pytest.mark.parametrize("native", [True, False], ids=["c", "python"])
def test_counters_are_exact_over_several_connections_at_once(native: bool) -> None:
    handler = Counting(responder(native=native))
    stats = ServerStats()
    got = serve_and_ask(handler, stats, [[a_query(i) for i in range(800)] for _ in range(4)], native)
    assert [len(r) for r in got] == [800] * 4
    assert all(dns.message.from_wire(r).answer[0].name.to_text() == APP for rs in got for r in rs)
    assert stats.tcp_queries == stats.tcp_responses == stats.tcp_rcodes[0] == 3200
    assert stats.tcp_native_answers == (3200 if native else 0)
    assert handler.calls == (0 if native else 3200)
    assert handler.inner.policy_answers()["round_robin"] == 3200
