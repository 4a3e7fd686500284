"""The UDP listener.

asyncio's datagram transport allocates a 256 KiB buffer for every datagram it reads (an mmap/munmap
per query), so it is not used. With the C helper `gslbd.server._mmsg` (built at install time where a
compiler is available) each UDP socket gets a receiving thread of its own that blocks in `recvmmsg`
with the GIL released, takes up to 64 datagrams per system call, answers them with the handler and sends
all replies with one `sendmmsg`: no epoll round trip per wake-up, as in C servers. The handler is the
Responder, which only reads the answer table the control plane swaps with one attribute store, so it is
safe to call from that thread; its NOTIFY hook hands work to the event loop (app/core.py). Without the
helper, the socket is registered with `loop.add_reader` and each wake-up reads up to `BATCH` datagrams
into one preallocated buffer with `recvfrom_into` and sends each reply with `sendto`. A reply that
cannot be sent (full socket buffer, unreachable client) is dropped and counted; an exception while
answering one datagram is counted and the listener goes on.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
import threading

try:
    from gslbd.server import _mmsg
except ImportError:  # not compiled here: one system call per datagram
    _mmsg = None  # type: ignore[assignment]
from gslbd.server.handler import Handler
from gslbd.server.sockets import address_to_int
from gslbd.server.stats import ServerStats

log = logging.getLogger(__name__)

BATCH = 64  # datagrams handled per wakeup before yielding to the loop
# How long one blocking batched receive waits at most (struct timeval: 0.2 s): bounds close().
_RCVTIMEO = struct.pack("ll", 0, 200_000)
MAX_DATAGRAM = 65535


class UdpListener:
    """Answers DNS over UDP on one bound socket."""

    def __init__(
        self, sock: socket.socket, handler: Handler, stats: ServerStats, *, batched: bool | None = None
    ) -> None:
        """`batched`: use recvmmsg/sendmmsg (default: when the C helper is available)."""
        self._sock = sock
        self._batched = (_mmsg is not None) if batched is None else (batched and _mmsg is not None)
        self._thread: threading.Thread | None = None
        self._stopping = False
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
        """Start answering: a receiving thread (batched), or a reader on the loop."""
        self._loop = loop
        if self._batched:
            # Blocking receives in a thread of our own, the GIL released while waiting: no epoll
            # round trip per wake-up. SO_RCVTIMEO bounds each wait so that close() is noticed.
            self._sock.setblocking(True)
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _RCVTIMEO)
            self._thread = threading.Thread(
                target=self._serve_batched, name=f"gslbd-udp-{self.sockname[1]}", daemon=True
            )
            self._thread.start()
        else:
            loop.add_reader(self._sock.fileno(), self._on_readable)

    def close(self) -> None:
        """Stop answering and close the socket."""
        self._stopping = True
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        elif self._loop is not None and self._sock.fileno() >= 0:
            self._loop.remove_reader(self._sock.fileno())
        self._loop = None
        self._sock.close()

    def _serve_batched(self) -> None:
        """The receiving thread: up to 64 datagrams per recvmmsg, all replies in one sendmmsg."""
        assert _mmsg is not None
        recv_batch = _mmsg.recv_batch
        send_batch = _mmsg.send_batch
        fd = self._sock.fileno()
        buffer = bytearray(_mmsg.BATCH * _mmsg.BUFSIZE)
        limit = _mmsg.BATCH
        stats = self._stats
        rcodes = stats.udp_rcodes
        while not self._stopping:
            try:
                batch = recv_batch(fd, limit, buffer, True)
            except OSError:
                stats.udp_recv_errors += 1
                continue
            if not batch:
                continue  # the receive timeout passed: look at _stopping again
            handle = self._handler.handle
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
