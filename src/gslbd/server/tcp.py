"""The TCP listener: DNS messages framed by a two-byte length (RFC 1035 4.2.2, RFC 7766).

A connection may carry several queries, also pipelined (sent before the previous answer arrived); they
are answered in the order they came. A connection that has sent nothing for `idle_timeout` seconds is
closed; only a complete message counts as activity, so a client that trickles bytes is closed too.
Every connection is admitted into a `ConnectionBudget` (gslbd.limits) shared by all the TCP listeners
of the process and the admin API: when it is full, the connection active least recently is aborted
(oldest first, O(1)) so that the new client is served. A message the handler drops (None) closes its
connection, since a TCP client would otherwise wait for an answer that never comes. The listen
backlog is `backlog` (`dns.tcp_backlog`).

With the C extension and a handler that has a C table (`handler.slot`, the Responder's), the listener
answers from that table in C, as the UDP loop does: one call of `_cfast.TcpAnswerer.answer` per read
answers every complete message of the connection's buffer, framed, until it meets one it leaves to
Python (what the UDP loop leaves to Python: docs/wire.md); `handler.handle` answers that one, in its
place, and C goes on after it. So the answers keep the order of the queries and every counter counts
what the one-message-at-a-time loop counted (`tcp_native_answers`: the ones C answered).

With `log.dnstap` the listener is given the dnstap wrapper (server/dnstap/tap.py); with a C table it
answers as above with the Responder inside the wrapper, the C answerer writes what C answers (and drops)
into the dnstap sink's C ring, and the listener writes what the Responder answers (`_answer_one`), so
each TCP exchange is logged once, marked TCP. Without a C table every message goes through the wrapper.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from time import time_ns
from typing import Any, cast

try:
    from gslbd.wire import _cfast
except ImportError:  # not compiled here: every message goes to handler.handle
    _cfast = None  # type: ignore[assignment]
from gslbd.limits import ConnectionBudget, process_budget
from gslbd.server.dnstap.tap import untapped
from gslbd.server.handler import Handler
from gslbd.server.sockets import address_to_int
from gslbd.server.stats import ServerStats
from gslbd.server.udp import native_seed
from gslbd.wire.transfer import Framed

log = logging.getLogger(__name__)

DEFAULT_IDLE_TIMEOUT = 10.0
DEFAULT_BACKLOG = 1024
MAX_MESSAGE = 65535


class TcpListener:
    """Answers DNS over TCP on one bound, listening socket."""

    def __init__(
        self,
        sock: socket.socket,
        handler: Handler,
        stats: ServerStats,
        *,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        budget: ConnectionBudget | None = None,
        backlog: int = DEFAULT_BACKLOG,
        native: bool | None = None,
    ) -> None:
        """`budget`: shared with the other listeners (default: the process's, gslbd.limits). `native`:
        answer from the handler's C table (default: when the handler has one)."""
        self._sock = sock
        self.handler = handler
        self.stats = stats
        self.idle_timeout = idle_timeout
        self.budget = budget if budget is not None else process_budget()
        self.backlog = backlog
        self.v6 = sock.family == socket.AF_INET6
        self.connections: dict[_DnsStream, None] = {}  # this listener's, to close them at the end
        self._server: asyncio.AbstractServer | None = None
        self.sockname: tuple[str, int] = cast(tuple[str, int], tuple(sock.getsockname()[:2]))
        self.error_logged = False
        answerer, ring = untapped(handler)
        slot = getattr(answerer, "slot", None)
        self.native: Any = None  # answers from the handler's C table (see the module's docstring)
        self.ring: Any = None  # the dnstap ring the Responder's answers go into, with `native`
        if _cfast is not None and isinstance(slot, _cfast.Slot) and native is not False:
            self.native = _cfast.TcpAnswerer(slot, native_seed(), ring)
            self.handler = answerer
            self.ring = ring

    async def start(self) -> None:
        """Start accepting connections."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _DnsStream(self, loop), sock=self._sock, backlog=self.backlog
        )

    async def close(self) -> None:
        """Stop accepting, close every open connection."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for conn in list(self.connections):
            conn.close()
        if server is not None:
            await server.wait_closed()
        else:
            self._sock.close()

    def admit(self, conn: _DnsStream) -> None:
        """Track a new connection; the budget closes the least recently active ones when full."""
        self.stats.tcp_evicted += self.budget.admit(conn, "dns")
        self.connections[conn] = None
        self.stats.tcp_connections += 1

    def forget(self, conn: _DnsStream) -> None:
        self.connections.pop(conn, None)
        self.budget.forget(conn)


class _DnsStream(asyncio.Protocol):
    """One client connection."""

    def __init__(self, listener: TcpListener, loop: asyncio.AbstractEventLoop) -> None:
        self._listener = listener
        self._loop = loop
        self._transport: asyncio.Transport | None = None
        self._buf = bytearray()
        self._ip = 0
        self._port = 0  # the client's, for dnstap
        self._timer: asyncio.TimerHandle | None = None
        self.last_activity = loop.time()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        try:
            self._ip = address_to_int(peer[0], self._listener.v6)
            self._port = int(peer[1])
        except (OSError, TypeError, IndexError, ValueError):
            self._ip = self._port = 0
        self._listener.admit(self)
        self._timer = self._loop.call_later(self._listener.idle_timeout, self._check_idle)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._transport = None
        self._listener.forget(self)

    def pause_writing(self) -> None:
        # The client is not reading its answers: stop reading its queries until it catches up.
        if self._transport is not None:
            self._transport.pause_reading()

    def resume_writing(self) -> None:
        if self._transport is not None:
            self._transport.resume_reading()

    def eof_received(self) -> bool:
        return False  # every complete query is answered already; close after the answers are flushed

    def close(self) -> None:
        """Abort the connection (evicted, or the listener closes): a client that does not read its
        answers must not keep the descriptor while the kernel waits to flush them."""
        if self._transport is not None:
            self._transport.abort()

    def _check_idle(self) -> None:
        self._timer = None
        if self._transport is None:
            return
        idle = self._loop.time() - self.last_activity
        timeout = self._listener.idle_timeout
        if idle >= timeout:
            self._listener.stats.tcp_idle_closed += 1
            self._transport.close()
            return
        self._timer = self._loop.call_later(timeout - idle, self._check_idle)

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        listener = self._listener
        replies: list[bytes] = []
        native = listener.native
        if native is None:
            pos, close = self._answer_python(0, replies)
        else:
            pos, close = self._answer_native(native, replies)
        if pos:
            del buf[:pos]
            self.last_activity = self._loop.time()
            listener.budget.touch(self)
        transport = self._transport
        if transport is None:
            return
        if replies:
            transport.write(b"".join(replies))
        if close:
            transport.close()

    def _answer_native(self, native: Any, replies: list[bytes]) -> tuple[int, bool]:
        """Answer the buffer's complete messages from the C table, those it declines with the handler.
        Returns where the unconsumed rest starts and whether to close the connection."""
        buf = self._buf
        stats = self._listener.stats
        v6 = self._listener.v6
        rcodes = stats.tcp_rcodes
        pos = 0
        while True:
            try:
                out, pos_after, answered, by_rcode, pending = native.answer(
                    buf, pos, self._ip, v6, self._port
                )
            except MemoryError:  # C could not grow its output: Python answers the rest
                return self._answer_python(pos, replies)
            pos = pos_after
            if answered:
                stats.tcp_queries += answered
                stats.tcp_responses += answered
                stats.tcp_native_answers += answered
                for rcode, count in by_rcode:
                    rcodes[rcode] += count
                replies.append(out)
            if pending is None:
                return pos, False
            if pending is False:  # not a query: dropped, as handler.handle drops it
                stats.tcp_queries += 1
                return pos, True
            if not self._answer_one(pending, replies):
                return pos, True

    def _answer_python(self, pos: int, replies: list[bytes]) -> tuple[int, bool]:
        """Answer the buffer's complete messages from `pos` with the handler, one by one."""
        buf = self._buf
        end = len(buf)
        while end - pos >= 2:
            size = (buf[pos] << 8) | buf[pos + 1]
            if end - pos - 2 < size:
                break
            message = bytes(buf[pos + 2 : pos + 2 + size])
            pos += 2 + size
            if not self._answer_one(message, replies):
                return pos, True
        return pos, False

    def _answer_one(self, message: bytes, replies: list[bytes]) -> bool:
        """The handler's answer to one message, framed into `replies`; False: close the connection."""
        listener = self._listener
        stats = listener.stats
        stats.tcp_queries += 1
        ring = listener.ring
        t_query = time_ns() if ring is not None else 0
        try:
            reply = listener.handler.handle(message, self._ip, listener.v6, True)
        except Exception:
            stats.tcp_handler_errors += 1
            if not listener.error_logged:
                listener.error_logged = True
                log.exception("error while answering a TCP query (counted; further ones are not logged)")
            reply = None
        if ring is not None:
            ring.put(message, reply, self._ip, listener.v6, True, t_query, time_ns(), self._port)
        if isinstance(reply, Framed):  # a zone transfer: several messages, already framed
            replies.append(reply)
            stats.tcp_responses += 1
            return True
        if reply is None or len(reply) > MAX_MESSAGE:
            return False
        replies.append(len(reply).to_bytes(2, "big"))
        replies.append(reply)
        stats.tcp_responses += 1
        if len(reply) > 3:
            stats.tcp_rcodes[reply[3] & 15] += 1
        return True
