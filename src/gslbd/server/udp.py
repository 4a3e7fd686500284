"""The UDP listener.

asyncio's datagram transport allocates a 256 KiB buffer for every datagram it reads (an mmap/munmap
per query). This listener instead registers its non-blocking socket with `loop.add_reader` and, on
each wakeup, drains up to `BATCH` datagrams into one preallocated buffer with `recvfrom_into`, answers
each with the handler and sends the reply straight away with `sendto`. A reply that cannot be sent
(full socket buffer, unreachable client) is dropped and counted; an exception while answering one
datagram is counted and the listener goes on.
"""

from __future__ import annotations

import asyncio
import logging
import socket

from gslbd.server.handler import Handler
from gslbd.server.sockets import address_to_int
from gslbd.server.stats import ServerStats

log = logging.getLogger(__name__)

BATCH = 64  # datagrams handled per wakeup before yielding to the loop
MAX_DATAGRAM = 65535


class UdpListener:
    """Answers DNS over UDP on one bound socket."""

    def __init__(self, sock: socket.socket, handler: Handler, stats: ServerStats) -> None:
        self._sock = sock
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
        loop.add_reader(self._sock.fileno(), self._on_readable)

    def close(self) -> None:
        """Stop answering and close the socket."""
        if self._loop is not None and self._sock.fileno() >= 0:
            self._loop.remove_reader(self._sock.fileno())
        self._loop = None
        self._sock.close()

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
                stats.handler_errors += 1
                if not self._error_logged:  # once per listener: a bug, not a per-query log
                    self._error_logged = True
                    log.exception("error while answering a UDP query (counted; further ones are not logged)")
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
