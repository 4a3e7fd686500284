"""The UDP listener.

With the C extension `gslbd.wire._cfast` and a handler that has a C table (`handler.slot`, the
Responder's), each UDP socket gets a receiving thread that runs the C loop `UdpLoop`: recvmmsg, answer
from the C table, sendmmsg, all without the GIL; only the datagrams the table cannot answer are passed to
`handler.handle` (with the GIL, in the same thread). A datagram that cannot be a valid query (docs/wire.md,
*Malformed datagrams*) is answered (FORMERR, NOTIMP, BADVERS) or dropped by C as the slow path would, without
dnspython. With RRL or cookies on, the C table carries the responder's C guard (wire/cguard.py) and the
loop applies it to every answer C makes; only a guard in Python (no C guard) makes C leave every query
and C's answers to malformed datagrams to Python (`_guard_of`). With `log.dnstap` the listener is given
the dnstap wrapper (server/dnstap/tap.py); the C loop then answers with the Responder inside it and writes
every exchange of each batch, those Python answered included, into the dnstap sink's C ring
(`untapped`). A handler without a C table (a Responder with `native=False`, a test's handler) gets an
empty slot: the C loop passes every datagram to it. The handler only reads the answer table the control
plane swaps with one attribute store, so it is safe to call from that thread; the Responder's NOTIFY
hook hands work to the event loop (app/core.py).

`dns.threads: N`: a listener has N sockets of one SO_REUSEPORT group (`siblings`) and one C loop per
socket, each in its own thread, all over the one slot (table), guard and dnstap ring.

Only where the C extension is not built (or with `native=False`) the socket is registered with
`loop.add_reader` and each wake-up reads up to `BATCH` datagrams into one preallocated buffer with
`recvfrom_into` and sends each reply with `sendto` (asyncio's datagram transport allocates a 256 KiB
buffer for every datagram it reads, so it is not used). A reply that cannot be sent (full socket buffer,
unreachable client) is dropped and counted; an exception while answering one datagram is counted and the
listener goes on.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import struct
import threading
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

try:
    from gslbd.wire import _cfast
except ImportError:  # not compiled here: the asyncio reader answers
    _cfast = None  # type: ignore[assignment]
from gslbd.server.dnstap.tap import untapped
from gslbd.server.handler import Handler
from gslbd.server.sockets import address_to_int
from gslbd.server.stats import ServerStats, UdpReading
from gslbd.wire.guard import AnyGuard

log = logging.getLogger(__name__)

BATCH = 64  # datagrams handled per wakeup before yielding to the loop
# How long one blocking receive of the C loop waits at most (struct timeval: 0.2 s): bounds close().
_RCVTIMEO = struct.pack("ll", 0, 200_000)
MAX_DATAGRAM = 65535


class UdpListener:
    """Answers DNS over UDP on one bound socket."""

    def __init__(
        self,
        sock: socket.socket,
        handler: Handler,
        stats: ServerStats,
        *,
        native: bool | None = None,
        siblings: Sequence[socket.socket] = (),
    ) -> None:
        """`native`: answer in the C loop, from the handler's C table when it has one (default: wherever
        the C extension is built); False: the asyncio reader. `siblings`: more sockets of `sock`'s
        SO_REUSEPORT group (`dns.threads`), each answered by a C loop of its own; without the C loop they
        are closed (the kernel then gives `sock` all the datagrams)."""
        self._sock = sock
        answerer, tap = untapped(handler)
        slot: Any = None
        if _cfast is not None and native is not False:
            slot = getattr(answerer, "slot", None)
            if not isinstance(slot, _cfast.Slot):  # no C table: the C loop passes every datagram on
                slot = _cfast.Slot()
        self._slot: Any = slot
        self._siblings = list(siblings) if self._slot is not None else []
        if len(self._siblings) < len(siblings):
            for extra in siblings:
                extra.close()
            log.warning("dns.threads needs the C extension: one thread answers UDP on %s", self.sockname)
        self._natives: list[Any] = []  # the C loops (one per socket), while they run
        self._threads: list[threading.Thread] = []
        self._stopping = False
        # The C loop answers with the Responder itself and logs into the dnstap ring (`tap`) on its own.
        self._handler = answerer if self._slot is not None else handler
        self._tap: Any = tap if self._slot is not None else None
        self._stats = stats
        self._counters = stats.udp_counters() if self._slot is None else None
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
        """Start answering: a receiving thread running the C loop, or a reader on the loop."""
        self._loop = loop
        if self._slot is not None:
            assert _cfast is not None
            # One C loop per socket of the group, each with its own random state and counters (summed
            # by `stats`); they share the slot (table), the guard and the dnstap ring (docs/wire.md).
            for n, sock in enumerate([self._sock, *self._siblings]):
                sock.setblocking(True)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _RCVTIMEO)
                native = _cfast.UdpLoop(
                    sock.fileno(),
                    self._slot,
                    self._handler.handle,
                    self._log_failure,
                    native_seed(),
                    _guard_of(self._handler),
                    self._tap,
                )
                self._stats.add_udp_source(partial(_native_reading, native))
                self._natives.append(native)
                name = f"gslbd-udp-{self.sockname[1]}" + (f"-{n}" if self._siblings else "")
                thread = threading.Thread(target=native.run, name=name, daemon=True)
                self._threads.append(thread)
                thread.start()
        else:
            loop.add_reader(self._sock.fileno(), self._on_readable)

    def close(self) -> None:
        """Stop answering and close the socket."""
        self._stopping = True
        for native in self._natives:
            native.stop()
        for thread in self._threads:
            thread.join()
        if not self._threads and self._loop is not None and self._sock.fileno() >= 0:
            self._loop.remove_reader(self._sock.fileno())
        self._loop = None
        self._natives = []
        self._threads = []
        self._sock.close()
        for sibling in self._siblings:
            sibling.close()

    def loop_counters(self) -> list[UdpReading]:
        """Each C loop's counters (one per socket, in `ServerStats`' form); empty without the C loop."""
        return [_native_reading(native) for native in self._natives]

    def _handler_failed(self) -> None:
        assert self._counters is not None
        self._counters.handler_errors += 1
        if not self._error_logged:  # once per listener: a bug, not a per-query log
            self._error_logged = True
            log.exception("error while answering a UDP query (counted; further ones are not logged)")

    def _log_failure(self, error: BaseException) -> None:
        """The C loop's report of an exception from the handler (it counts them itself)."""
        if not self._error_logged:
            self._error_logged = True
            log.error(
                "error while answering a UDP query (counted; further ones are not logged)", exc_info=error
            )

    def _on_readable(self) -> None:
        assert self._counters is not None
        sock = self._sock
        recv = sock.recvfrom_into
        handle = self._handler.handle
        counters = self._counters
        view = self._view
        v6 = self._v6
        rcodes = counters.rcodes
        for _ in range(BATCH):
            try:
                n, addr = recv(self._buf)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                counters.udp_recv_errors += 1
                continue
            counters.udp_queries += 1
            try:
                reply = handle(bytes(view[:n]), address_to_int(addr[0], v6), v6, False)
            except Exception:
                self._handler_failed()
                continue
            if reply is None:
                counters.udp_dropped += 1
                continue
            try:
                sock.sendto(reply, addr)
            except OSError:
                counters.udp_send_errors += 1
                continue
            counters.udp_responses += 1
            if len(reply) > 3:
                rcodes[reply[3] & 15] += 1


def _guard_of(handler: Handler) -> Callable[[bytes, bytes, int, bool], bytes | None] | None:
    """What the C loop calls with its answer to a malformed datagram while the handler's table leaves
    every query to Python (RRL or cookies on): the handler's current guard decides, as in `handle`."""
    if not hasattr(handler, "guard"):
        return None

    def guarded(query: bytes, reply: bytes, ip: int, v6: bool) -> bytes | None:
        guard: AnyGuard | None = getattr(handler, "guard", None)
        return reply if guard is None else guard.apply(query, reply, ip, v6, False)

    return guarded


def native_seed() -> int:
    """A seed for a C loop's random draws (weighted and random policies; the TCP answerer's too)."""
    return int.from_bytes(os.urandom(8), "big")


def _native_reading(native: Any) -> UdpReading:
    """A C loop's counters as `ServerStats` sums them."""
    counters: tuple[int, int, int, int, int, int, int, int, int, tuple[int, ...]] = native.counters()
    queries, responses, dropped, send_errors, recv_errors, errors, oversized, by_c, _, rcodes = counters
    events = {
        "udp_queries": queries,
        "udp_responses": responses,
        "udp_dropped": dropped,
        "udp_send_errors": send_errors,
        "udp_recv_errors": recv_errors,
        "udp_oversized": oversized,
        "udp_native_answers": by_c,
    }
    return events, errors, list(rcodes)
