"""The dnstap hook: a Handler that wraps the Responder, queues each exchange, and answers unchanged.

The listeners are given this wrapper instead of the Responder only when `log.dnstap` is set, so with
dnstap off the query path has no extra branch at all. With it on, each query costs two clock reads, a
length check and a deque append (no wake-up); encoding and writing happen on the sink's thread (sink.py).

A UDP listener whose Responder has a C table does not call the wrapper: it runs the C loop with the
Responder itself (`inner`) and the sink's C ring (`ring`), and the loop writes every exchange it receives,
those Python answers included, into the ring (wire/_tap.c). A TCP listener whose Responder has a C table
does not call it either: its C answerer writes what C answers into the ring and the listener writes what
the Responder answers (server/tcp.py). Only the Python UDP loops and TCP without a C table call `handle`.
"""

from __future__ import annotations

from time import time_ns
from typing import Any

from gslbd import __version__
from gslbd.model.config import Config
from gslbd.server.dnstap.message import Encoder
from gslbd.server.dnstap.sink import DnstapSink
from gslbd.server.handler import Handler
from gslbd.server.stats import ServerStats


class DnstapHandler:
    """Answers with `inner` and hands (query, response, client, times) to `sink`; drops and counts when
    the sink's queue is full."""

    __slots__ = ("_capacity", "_inner", "_queue", "_stats", "inner", "ring")

    def __init__(self, inner: Handler, sink: DnstapSink) -> None:
        self.inner = inner  # what the C UDP loop answers with, writing into `ring` itself (server/udp.py)
        self.ring = sink.ring
        self._inner = inner
        self._queue = sink.queue
        self._capacity = sink.capacity
        self._stats = sink.stats

    def handle(self, data: bytes, src_ip: int, src_v6: bool, tcp: bool = False) -> bytes | None:
        t_query = time_ns()
        reply = self._inner.handle(data, src_ip, src_v6, tcp)
        queue = self._queue
        if len(queue) < self._capacity:
            queue.append((data, reply, src_ip, src_v6, tcp, t_query, time_ns(), 0))  # the port: not known
        else:
            self._stats.dnstap_dropped += 1
        return reply


def untapped(handler: Handler) -> tuple[Handler, Any]:
    """(the handler inside the dnstap wrapper, the wrapper's C ring) when `handler` is the wrapper and the
    C extension is there: the C loops call the inner handler and write every exchange into the ring
    themselves, so each is logged once; else (`handler`, None)."""
    if isinstance(handler, DnstapHandler) and handler.ring is not None:
        return handler.inner, handler.ring
    return handler, None


def with_dnstap(
    handler: Handler, config: Config, stats: ServerStats, worker: int | None = None
) -> tuple[Handler, DnstapSink | None]:
    """`handler` itself when `log.dnstap` is off; else a DnstapHandler around it and its sink, started.
    The dnstap identity is the site's name, the version "gslbd <version>". To a file, worker process
    `worker` (from 1) writes FILE.<worker>: processes never write one file together."""
    tap = config.log.dnstap
    if tap is None:
        return handler, None
    encoder = Encoder(config.site.name, f"gslbd {__version__}")
    path = tap.path if tap.file is None or worker is None else f"{tap.file}.{worker}"
    sink = DnstapSink(
        path, encoder, stats, queries=tap.queries, responses=tap.responses, to_file=tap.file is not None
    )
    sink.start()
    return DnstapHandler(handler, sink), sink
