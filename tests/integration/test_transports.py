"""The UDP and TCP listeners on real loopback sockets, with a small byte-level handler.

The handler answers a message with the same bytes and the QR bit set, raises for messages starting
with b"boom" and drops (None) messages starting with b"drop"; it records the client address it was
given. The transports are what is under test here; the real responder is tested end to end elsewhere.
"""

from __future__ import annotations

import asyncio
import errno
import socket
import struct
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import uvloop
from gslbd_harness import free_port, has_ipv6_loopback

from gslbd.model.config import ListenAddress
from gslbd.server import listeners as listeners_module
from gslbd.server.listeners import Listeners
from gslbd.server.stats import ServerStats

LOOPS = {"asyncio": None, "uvloop": uvloop.new_event_loop}


def dgram(body: bytes) -> bytes:
    """A datagram as long as a DNS header at least (the C UDP loop drops shorter ones, as DNS does)."""
    return body + bytes(12)


class ByteHandler:
    def __init__(self) -> None:
        self.seen: list[tuple[int, bool, bool]] = []

    def handle(self, data: bytes, src_ip: int, src_v6: bool, tcp: bool = False) -> bytes | None:
        self.seen.append((src_ip, src_v6, tcp))
        if data.startswith(b"boom"):
            raise ValueError("boom")
        if data.startswith(b"drop"):
            return None
        return bytes([data[0] | 0x80]) + data[1:] if data else b""


def run(loop_name: str, body: Callable[[], Awaitable[None]]) -> None:
    with asyncio.Runner(loop_factory=LOOPS[loop_name]) as runner:
        runner.run(asyncio.wait_for(body(), 30))


async def serving(handler: ByteHandler, host: str = "127.0.0.1", **kwargs: Any) -> tuple[Listeners, int]:
    listeners = Listeners(
        [ListenAddress(host, 0)], handler, tcp_idle_timeout=kwargs.pop("idle", 10.0), **kwargs
    )
    await listeners.start()
    return listeners, listeners.bound[0].port


def udp_exchange(host: str, port: int, payloads: list[bytes], timeout: float = 2.0) -> list[bytes]:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)  # room for every reply
        s.settimeout(timeout)
        for p in payloads:
            s.sendto(p, (host, port))
        out = []
        for _ in payloads:
            try:
                out.append(s.recvfrom(65535)[0])
            except TimeoutError:
                break
        return out


def frame(message: bytes) -> bytes:
    return struct.pack("!H", len(message)) + message


def read_frames(sock: socket.socket, count: int) -> list[bytes]:
    buf = b""
    out: list[bytes] = []
    while len(out) < count:
        chunk = sock.recv(65535)
        if not chunk:
            break
        buf += chunk
        while len(buf) >= 2 and len(buf) - 2 >= struct.unpack("!H", buf[:2])[0]:
            n = struct.unpack("!H", buf[:2])[0]
            out.append(buf[2 : 2 + n])
            buf = buf[2 + n :]
    return out


def closed_by_peer(sock: socket.socket, within: float) -> bool:
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


@pytest.mark.parametrize("loop_name", sorted(LOOPS))
def test_udp_answers_every_datagram_and_passes_the_client_address_as_an_int(loop_name: str) -> None:
    async def body() -> None:
        handler = ByteHandler()
        listeners, port = await serving(handler)
        try:
            replies = await asyncio.to_thread(
                udp_exchange, "127.0.0.1", port, [dgram(b"\x01\x02abc"), dgram(b"\x03\x04def")]
            )
        finally:
            await listeners.close()
        assert replies == [dgram(b"\x81\x02abc"), dgram(b"\x83\x04def")]
        assert handler.seen == [(0x7F000001, False, False)] * 2
        assert listeners.stats.udp_queries == 2
        assert listeners.stats.udp_responses == 2

    run(loop_name, body)


@pytest.mark.skipif(not has_ipv6_loopback(), reason="no ::1 on this machine")
def test_udp_and_tcp_listen_on_ipv6_with_v6_client_addresses() -> None:
    async def body() -> None:
        handler = ByteHandler()
        listeners, port = await serving(handler, host="::1")
        try:
            assert {str(b) for b in listeners.bound} == {f"udp://[::1]:{port}", f"tcp://[::1]:{port}"}
            replies = await asyncio.to_thread(udp_exchange, "::1", port, [dgram(b"\x00v6")])

            def over_tcp() -> list[bytes]:
                with socket.create_connection(("::1", port), timeout=2) as s:
                    s.sendall(frame(b"\x00tcp6"))
                    return read_frames(s, 1)

            tcp_replies = await asyncio.to_thread(over_tcp)
        finally:
            await listeners.close()
        assert replies == [dgram(b"\x80v6")]
        assert tcp_replies == [b"\x80tcp6"]
        assert handler.seen == [(1, True, False), (1, True, True)]

    run("uvloop", body)


@pytest.mark.parametrize("loop_name", sorted(LOOPS))
def test_udp_listener_survives_a_handler_exception_and_counts_it(loop_name: str) -> None:
    async def body() -> None:
        handler = ByteHandler()
        listeners, port = await serving(handler)
        try:
            lost = await asyncio.to_thread(udp_exchange, "127.0.0.1", port, [dgram(b"boom")], 0.3)
            dropped = await asyncio.to_thread(udp_exchange, "127.0.0.1", port, [dgram(b"drop")], 0.3)
            after = await asyncio.to_thread(udp_exchange, "127.0.0.1", port, [dgram(b"\x00ok")])
        finally:
            await listeners.close()
        assert lost == []
        assert dropped == []
        assert after == [dgram(b"\x80ok")]
        assert listeners.stats.handler_errors == 1
        assert listeners.stats.udp_dropped == 1

    run(loop_name, body)


def test_udp_burst_of_500_datagrams_is_drained_and_answered() -> None:
    async def body() -> None:
        handler = ByteHandler()
        listeners, port = await serving(handler)
        payloads = [dgram(struct.pack("!H", i) + b"q") for i in range(500)]
        try:
            replies = await asyncio.to_thread(udp_exchange, "127.0.0.1", port, payloads)
        finally:
            await listeners.close()
        assert sorted(replies) == sorted(bytes([p[0] | 0x80]) + p[1:] for p in payloads)

    run("uvloop", body)


@pytest.mark.parametrize("loop_name", sorted(LOOPS))
def test_tcp_answers_pipelined_queries_in_order_even_when_split_across_reads(loop_name: str) -> None:
    async def body() -> None:
        handler = ByteHandler()
        listeners, port = await serving(handler)
        messages = [b"\x01first", b"\x02second", b"\x03third" * 100]
        stream = b"".join(frame(m) for m in messages)

        def client() -> tuple[list[bytes], list[bytes]]:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
                s.sendall(stream)  # all three before reading any answer
                first = read_frames(s, 3)
                for i in range(len(stream)):  # then one byte at a time
                    s.sendall(stream[i : i + 1])
                return first, read_frames(s, 3)

        try:
            at_once, byte_by_byte = await asyncio.to_thread(client)
        finally:
            await listeners.close()
        expected = [bytes([m[0] | 0x80]) + m[1:] for m in messages]
        assert at_once == expected
        assert byte_by_byte == expected
        assert listeners.stats.tcp_queries == 6
        assert listeners.stats.tcp_connections == 1

    run(loop_name, body)


def test_tcp_closes_a_connection_idle_for_the_timeout_but_not_an_active_one() -> None:
    async def body() -> None:
        handler = ByteHandler()
        listeners, port = await serving(handler, idle=0.5)

        def client() -> tuple[bool, bool, float]:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
                for _ in range(4):  # busy for 1.2 s, longer than the timeout, with gaps of 0.3 s
                    s.sendall(frame(b"\x00ping"))
                    assert read_frames(s, 1) == [b"\x80ping"]
                    time.sleep(0.3)
                open_while_busy = not closed_by_peer(s, 0.05)
                started = time.monotonic()
                closed = closed_by_peer(s, 3.0)
                return open_while_busy, closed, time.monotonic() - started

        try:
            open_while_busy, closed, waited = await asyncio.to_thread(client)
        finally:
            await listeners.close()
        assert open_while_busy
        assert closed
        assert waited < 1.0
        assert listeners.stats.tcp_idle_closed == 1

    run("uvloop", body)


def test_tcp_connection_cap_closes_the_longest_idle_connection() -> None:
    async def body() -> None:
        handler = ByteHandler()
        listeners, port = await serving(handler, max_tcp_connections=2)

        def client() -> tuple[bool, bool, list[bytes]]:
            first = socket.create_connection(("127.0.0.1", port), timeout=2)
            time.sleep(0.05)
            second = socket.create_connection(("127.0.0.1", port), timeout=2)
            second.sendall(frame(b"\x00two"))
            read_frames(second, 1)
            third = socket.create_connection(("127.0.0.1", port), timeout=2)
            third.sendall(frame(b"\x00three"))
            answer = read_frames(third, 1)
            result = closed_by_peer(first, 2.0), closed_by_peer(second, 0.2), answer
            for s in (first, second, third):
                s.close()
            return result

        try:
            first_closed, second_closed, answer = await asyncio.to_thread(client)
        finally:
            await listeners.close()
        assert first_closed
        assert not second_closed
        assert answer == [b"\x80three"]
        assert listeners.stats.tcp_evicted == 1

    run("uvloop", body)


def test_tcp_closes_the_connection_when_a_message_is_dropped_or_fails() -> None:
    async def body() -> None:
        handler = ByteHandler()
        listeners, port = await serving(handler)

        def client(message: bytes) -> tuple[list[bytes], bool]:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
                s.sendall(frame(b"\x00before") + frame(message) + frame(b"\x00after"))
                got = read_frames(s, 3)
                return got, closed_by_peer(s, 2.0)

        try:
            dropped = await asyncio.to_thread(client, b"drop")
            failed = await asyncio.to_thread(client, b"boom")
        finally:
            await listeners.close()
        assert dropped == ([b"\x80before"], True)
        assert failed == ([b"\x80before"], True)
        assert listeners.stats.handler_errors == 1

    run("uvloop", body)


def test_listeners_bind_udp_and_tcp_on_the_same_port_and_close_them() -> None:
    async def body() -> None:
        handler = ByteHandler()
        listeners, port = await serving(handler)
        assert {str(b) for b in listeners.bound} == {f"udp://127.0.0.1:{port}", f"tcp://127.0.0.1:{port}"}
        await listeners.close()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()

    run("uvloop", body)


def test_a_bind_error_leaves_nothing_listening() -> None:
    async def body() -> None:
        handler = ByteHandler()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        listeners = Listeners(
            [ListenAddress("127.0.0.1", port), ListenAddress("192.0.2.1", port)],
            handler,
            tcp_idle_timeout=1.0,
            stats=ServerStats(),
        )
        with pytest.raises(OSError):
            await listeners.start()
        assert listeners.bound == ()
        # The first address was released again: a plain (non-reuseport) socket can take it.
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as again:
            again.bind(("127.0.0.1", port))

    run("asyncio", body)


@pytest.mark.parametrize("any_port", [True, False], ids=["any-port", "fixed-port"])
def test_with_threads_a_second_server_on_the_address_is_still_refused(any_port: bool) -> None:
    """`threads: 2` puts each address's UDP sockets in one SO_REUSEPORT group, but a second server on the
    same address (threads or not) gets "address in use" as with one socket, not a share of the queries."""

    async def body() -> None:
        fixed = 0 if any_port else free_port()
        first = Listeners([ListenAddress("127.0.0.1", fixed)], ByteHandler(), tcp_idle_timeout=1.0, threads=2)
        await first.start()
        try:
            taken = first.bound[0].port
            assert [b.proto for b in first.bound] == ["udp", "tcp"] and first.bound[1].port == taken
            for threads in (1, 2):
                second = Listeners(
                    [ListenAddress("127.0.0.1", taken)], ByteHandler(), tcp_idle_timeout=1.0, threads=threads
                )
                with pytest.raises(OSError) as caught:
                    await second.start()
                assert caught.value.errno == errno.EADDRINUSE and second.bound == ()
        finally:
            await first.close()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as again:  # every socket of the group closed
            again.bind(("127.0.0.1", taken))

    run("asyncio", body)


def test_any_port_skips_a_port_whose_tcp_side_is_already_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """Port 0: UDP picks the port and TCP follows; an outgoing TCP connection may already hold that port
    (both use the ephemeral range), so the pair is tried again on another port instead of failing."""
    taken = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    taken.bind(("127.0.0.1", 0))
    taken_port = taken.getsockname()[1]
    real_bind_udp = listeners_module.bind_udp_group
    offered: list[int] = []

    def bind_udp_first_on_taken_port(
        addr: ListenAddress, count: int, *, reuse_port: bool = False
    ) -> list[socket.socket]:
        wanted = ListenAddress(addr.host, taken_port) if not offered else addr
        socks = real_bind_udp(wanted, count, reuse_port=reuse_port)
        offered.append(socks[0].getsockname()[1])
        return socks

    monkeypatch.setattr(listeners_module, "bind_udp_group", bind_udp_first_on_taken_port)

    async def body() -> None:
        listeners = Listeners([ListenAddress("127.0.0.1", 0)], ByteHandler(), tcp_idle_timeout=1.0)
        await listeners.start()
        try:
            ports = {b.port for b in listeners.bound}
            # the next port offered can be taken too (the suite's own outgoing connections share the
            # ephemeral range): the pair is tried again until one binds, and the last one offered serves
            assert offered[0] == taken_port and len(offered) >= 2
            assert ports == {offered[-1]} and taken_port not in ports
        finally:
            await listeners.close()

    try:
        run("asyncio", body)
    finally:
        taken.close()


def test_a_fixed_port_whose_tcp_side_is_taken_fails_and_releases_udp() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]

        async def body() -> None:
            listeners = Listeners([ListenAddress("127.0.0.1", port)], ByteHandler(), tcp_idle_timeout=1.0)
            with pytest.raises(OSError):
                await listeners.start()
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as again:
                again.bind(("127.0.0.1", port))

        run("asyncio", body)
