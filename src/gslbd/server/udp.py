"""The UDP listener.

asyncio's datagram transport allocates a 256 KiB buffer for every datagram it reads (an mmap/munmap
per query). This listener instead registers its non-blocking socket with `loop.add_reader` and, on
each wakeup, drains the socket itself. With the C helper `gslbd.server._mmsg` (built at install time
where a compiler is available) it moves up to 64 datagrams per system call each way (recvmmsg and
sendmmsg), the way C servers do; without it, it reads up to `BATCH` datagrams into one preallocated
buffer with `recvfrom_into` and sends each reply with `sendto`. A reply that cannot be sent (full socket
buffer, unreachable client) is dropped and counted; an exception while answering one datagram is counted
and the listener goes on.
"""

from __future__ import annotations

import asyncio
import logging
import socket

try:
    from gslbd.server import _mmsg
except ImportError:  # not compiled here: one system call per datagram
    _mmsg = None  # type: ignore[assignment]
from gslbd.server.handler import Handler
from gslbd.server.sockets import address_to_int
from gslbd.server.stats import ServerStats

log = logging.getLogger(__name__)

BATCH = 64  # datagrams handled per wakeup before yielding to the loop
MAX_DATAGRAM = 65535


class UdpListener:
    """Answers DNS over UDP on one bound socket."""

    def __init__(
        self, sock: socket.socket, handler: Handler, stats: ServerStats, *, batched: bool | None = None
    ) -> None:
        """`batched`: use recvmmsg/sendmmsg (default: when the C helper is available)."""
        self._sock = sock
        self._batched = (_mmsg is not None) if batched is None else (batched and _mmsg is not None)
        self._handler = handler
        self._stats = stats
        self._v6 = sock.family == socket.AF_INET6
        self._buf = bytearray(MAX_DATAGRAM)
        self._view = memoryview(self._buf)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._error_logged = False

    @property
    def sockname(self) -> tuple[str, int]:
        name = self._sock.getsockname()
        return (name[0], name[1])

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start answering: register the socket with the loop."""
        self._loop = loop
        callback = self._on_readable_batched if self._batched else self._on_readable
        loop.add_reader(self._sock.fileno(), callback)

    def close(self) -> None:
        """Stop answering and close the socket."""
        if self._loop is not None and self._sock.fileno() >= 0:
            self._loop.remove_reader(self._sock.fileno())
        self._loop = None
        self._sock.close()

    def _on_readable_batched(self) -> None:
        assert _mmsg is not None
        recv_batch = _mmsg.recv_batch
        send_batch = _mmsg.send_batch
        fd = self._sock.fileno()
        handle = self._handler.handle
        stats = self._stats
        rcodes = stats.udp_rcodes
        limit = _mmsg.BATCH
        for _ in range(4):  # at most 4 x 64 datagrams per wakeup, then let the loop run other work
            try:
                batch = recv_batch(fd, limit)
            except OSError:
                stats.udp_recv_errors += 1
                return
            if not batch:
                return
            stats.udp_queries += len(batch)
            replies: list[tuple[bytes, bytes]] = []
            for data, peer, ip, v6 in batch:
                try:
                    reply = handle(data, ip, v6, False)
                except Exception:
                    self._handler_failed()
                    continue
                if reply is None:
                    stats.udp_dropped += 1
                    continue
                replies.append((reply, peer))
                if len(reply) > 3:
                    rcodes[reply[3] & 15] += 1
            if replies:
                sent = send_batch(fd, replies)
                stats.udp_responses += sent
                stats.udp_send_errors += len(replies) - sent
            if len(batch) < limit:
                return  # the socket is drained: no failing receive to prove it

    def _handler_failed(self) -> None:
        self._stats.handler_errors += 1
        if not self._error_logged:  # once per listener: a bug, not a per-query log
            self._error_logged = True
            log.exception("error while answering a UDP query (counted; further ones are not logged)")

    def _on_readable(self) -> None:
        sock = self._sock
        recv = sock.recvfrom_into
        handle = self._handler.handle
        stats = self._stats
        view = self._view
        v6 = self._v6
        rcodes = stats.udp_rcodes
        for _ in range(BATCH):
            try:
                n, addr = recv(self._buf)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                stats.udp_recv_errors += 1
                continue
            stats.udp_queries += 1
            try:
                reply = handle(bytes(view[:n]), address_to_int(addr[0], v6), v6, False)
            except Exception:
                self._handler_failed()
                continue
            if reply is None:
                stats.udp_dropped += 1
                continue
            try:
                sock.sendto(reply, addr)
            except OSError:
                stats.udp_send_errors += 1
                continue
            stats.udp_responses += 1
            if len(reply) > 3:
                rcodes[reply[3] & 15] += 1
