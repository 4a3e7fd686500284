"""A user-space UDP and TCP proxy on loopback that delays traffic by a fixed one-way time: a WAN in a box.

    routes = {("127.0.0.13", port): ("127.0.0.3", port)}
    with DelayProxy(routes, delay=0.12, sources={"127.0.0.2": "127.0.0.12"}) as proxy:
        ...  # asking 127.0.0.13:port reaches 127.0.0.3:port 120 ms later; the answer is back 120 ms later

Every route listens on its address for UDP and TCP and forwards to its target. Each direction is delayed
by `delay` seconds: every datagram, and every chunk of a TCP stream (kept in order; a new connection's
first bytes also wait for the handshake's round trip, as over a real path). `sources` maps a client's
address to the address the proxy sends from to the target, so that the target sees the client's "far"
address (a site that recognises its peers by address, for NOTIFY or transfers, sees the address it
has configured for that peer). The proxy runs its own event loop in a daemon thread; `udp_datagrams` and
`tcp_connections` count what it carried.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Mapping
from types import TracebackType

Address = tuple[str, int]


class DelayProxy:
    def __init__(
        self, routes: Mapping[Address, Address], delay: float, sources: Mapping[str, str] | None = None
    ) -> None:
        self.routes = dict(routes)
        self.delay = delay
        self.sources = dict(sources or {})
        self.udp_datagrams = 0
        self.tcp_connections = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="delay-proxy", daemon=True)
        self._closers: list[asyncio.BaseTransport | asyncio.AbstractServer] = []

    def __enter__(self) -> DelayProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def _source(self, client_host: str) -> tuple[str, int] | None:
        host = self.sources.get(client_host)
        return (host, 0) if host is not None else None

    async def _start(self) -> None:
        loop = asyncio.get_running_loop()
        for listen, target in self.routes.items():
            transport, _ = await loop.create_datagram_endpoint(
                lambda target=target: _UdpFront(self, target), local_addr=listen
            )
            self._closers.append(transport)
            server = await asyncio.start_server(
                lambda r, w, target=target: self._tcp(r, w, target), listen[0], listen[1]
            )
            self._closers.append(server)

    async def _stop(self) -> None:
        for closer in self._closers:
            closer.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # TCP

    async def _tcp(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, target: Address) -> None:
        self.tcp_connections += 1
        loop = asyncio.get_running_loop()
        opened = loop.time()
        client = writer.get_extra_info("peername")
        try:
            up_reader, up_writer = await asyncio.open_connection(
                target[0], target[1], local_addr=self._source(client[0])
            )
        except OSError:
            writer.close()
            return
        # a real path's handshake costs a round trip before the first byte leaves the client
        handshake = opened + 2 * self.delay
        with contextlib.suppress(OSError, asyncio.CancelledError):
            await asyncio.gather(
                self._pump(reader, up_writer, handshake), self._pump(up_reader, writer, handshake)
            )
        for w in (writer, up_writer):
            w.close()

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, not_before: float
    ) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def read() -> None:
            while True:
                data = await reader.read(65536)
                queue.put_nowait((max(loop.time(), not_before) + self.delay, data))
                if not data:
                    return

        async def write() -> None:
            while True:
                due, data = await queue.get()
                wait = due - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)  # the path's delay, not a synchronisation
                if not data:
                    with contextlib.suppress(OSError):
                        writer.write_eof()
                    return
                writer.write(data)
                await writer.drain()

        reading = asyncio.ensure_future(read())
        try:
            await write()
        finally:
            reading.cancel()


class _UdpFront(asyncio.DatagramProtocol):
    """The listening UDP socket of one route: one upstream socket per client address."""

    def __init__(self, proxy: DelayProxy, target: Address) -> None:
        self.proxy = proxy
        self.target = target
        self.transport: asyncio.DatagramTransport | None = None
        self.upstream: dict[Address, asyncio.Future[asyncio.DatagramTransport]] = {}
        self.opening: set[asyncio.Task[None]] = set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: Address) -> None:
        self.proxy.udp_datagrams += 1
        loop = asyncio.get_running_loop()
        client = (addr[0], addr[1])
        up = self.upstream.get(client)
        if up is None:
            up = loop.create_future()
            self.upstream[client] = up
            task = loop.create_task(self._open(client, up))
            self.opening.add(task)
            task.add_done_callback(self.opening.discard)
        loop.call_later(self.proxy.delay, self._forward, up, data)

    async def _open(self, client: Address, up: asyncio.Future[asyncio.DatagramTransport]) -> None:
        loop = asyncio.get_running_loop()
        try:
            transport, _ = await loop.create_datagram_endpoint(
                lambda: _UdpBack(self, client),
                local_addr=self.proxy._source(client[0]),
                remote_addr=self.target,
            )
        except OSError as exc:
            up.set_exception(exc)
            return
        self.proxy._closers.append(transport)
        up.set_result(transport)

    def _forward(self, up: asyncio.Future[asyncio.DatagramTransport], data: bytes) -> None:
        if up.done() and up.exception() is None:
            up.result().sendto(data)
        elif not up.done():
            up.add_done_callback(lambda f: None if f.exception() else f.result().sendto(data))

    def reply(self, client: Address, data: bytes) -> None:
        self.proxy.udp_datagrams += 1
        if self.transport is not None:
            asyncio.get_running_loop().call_later(self.proxy.delay, self.transport.sendto, data, client)


class _UdpBack(asyncio.DatagramProtocol):
    """An upstream UDP socket (connected to the target) for one client of a route."""

    def __init__(self, front: _UdpFront, client: Address) -> None:
        self.front = front
        self.client = client

    def datagram_received(self, data: bytes, addr: Address) -> None:
        self.front.reply(self.client, data)
