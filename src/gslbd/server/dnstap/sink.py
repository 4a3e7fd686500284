"""The dnstap writer: bounded queues filled by the query path, emptied by a thread of its own.

The query path in Python (DnstapHandler: TCP, the Python UDP loops) only appends a tuple to a deque, or
counts a drop when it holds `capacity` entries already; the C UDP loops write their exchanges into `ring`
(`_cfast.TapRing`, wire/_tap.c: `capacity` entries, `capacity * RING_BYTES` bytes), which counts what
does not fit itself; the writer adds those to `dnstap_dropped`. Neither wakes the writer (a wake-up per
query costs more than the append). The writer
thread looks at both every `FLUSH_INTERVAL` seconds when it found them empty, encodes the entries into
Frame Streams data frames and writes them in batches. When the reader is not there (not yet,
or gone), the writer retries every `RETRY` seconds while the queue fills up to its bound, and the query
path counts what does not fit; entries lost with a broken connection are counted too. Nothing here ever
blocks the query path.
"""

from __future__ import annotations

import collections
import logging
import socket
import threading
from typing import Any

try:
    from gslbd.wire import _cfast
except ImportError:  # not compiled here: no C loop, the Python path alone logs
    _cfast = None  # type: ignore[assignment]
from gslbd.server.dnstap.fstrm import FileWriter, FrameStreamError, close_writer, open_writer
from gslbd.server.dnstap.message import Encoder
from gslbd.server.stats import ServerStats

log = logging.getLogger(__name__)

CAPACITY = 10_000  # queued exchanges at most
BATCH = 256  # exchanges encoded per write
RETRY = 1.0  # seconds between connection attempts
IO_TIMEOUT = 5.0  # seconds a handshake or a write to the reader may take
FLUSH_INTERVAL = 0.02  # seconds the writer sleeps when it found the queue empty (the log's extra delay)
RING_BYTES = 1024  # bytes of the C ring per entry (a query and its answer: ~100-600 bytes; pages on use)
RING_MIN_BYTES = 1 << 17  # room for the largest exchange: a 4 KiB query and a 64 KiB response

# (query, response or None, client ip, v6, tcp, query time ns, response time ns, client port or 0)
Entry = tuple[bytes, bytes | None, int, bool, bool, int, int, int]


class DnstapSink:
    """Writes the exchanges the query path queues to the Frame Streams reader at `path`, or with
    `to_file` appends them to the file at `path` (fstrm.FileWriter)."""

    def __init__(
        self,
        path: str,
        encoder: Encoder,
        stats: ServerStats,
        *,
        queries: bool = True,
        responses: bool = True,
        capacity: int = CAPACITY,
        to_file: bool = False,
    ) -> None:
        self.path = path
        self.to_file = to_file
        self.queue: collections.deque[Entry] = collections.deque()
        self.capacity = capacity
        self.stats = stats
        self._encoder = encoder
        self._queries = queries
        self._responses = responses
        # The C UDP loops' exchanges (None where the C extension is not compiled).
        self.ring: Any = (
            None
            if _cfast is None
            else _cfast.TapRing(capacity, max(capacity * RING_BYTES, RING_MIN_BYTES), queries, responses)
        )
        self._ring_dropped = 0  # the ring's drops already added to stats.dnstap_dropped
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | FileWriter | None = None
        self._outage_logged = False

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="gslbd-dnstap", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = IO_TIMEOUT) -> None:
        """Write what is queued (when connected), end the stream with STOP/FINISH, stop the thread. What
        could not be written is counted as dropped."""
        self._halt.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    # -- the writer thread -----------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            self._count_ring_drops()
            if self._sock is None and not self._connect():
                if self._halt.wait(RETRY):
                    break
                continue
            batch = self._take()
            if not batch:
                if self._halt.is_set():
                    break
                self._halt.wait(FLUSH_INTERVAL)
                continue
            self._write(batch)
        self._finish()

    def _take(self) -> list[Entry]:
        """Up to BATCH entries of the Python queue and up to BATCH of the C ring."""
        queue = self.queue
        batch = [queue.popleft() for _ in range(min(BATCH, len(queue)))]
        if self.ring is not None:
            batch += self.ring.drain(BATCH)
        return batch

    def _count_ring_drops(self) -> None:
        if self.ring is not None:
            dropped = self.ring.counts()[1]
            self.stats.dnstap_dropped += dropped - self._ring_dropped
            self._ring_dropped = dropped

    def _connect(self) -> bool:
        try:
            self._sock = FileWriter(self.path) if self.to_file else open_writer(self.path, IO_TIMEOUT)
        except (OSError, FrameStreamError) as exc:
            if not self._outage_logged:
                self._outage_logged = True
                log.warning(
                    "dnstap: cannot write to %s (%s); retrying every %gs, queries that do not fit the "
                    "queue are dropped and counted",
                    self.path,
                    exc,
                    RETRY,
                    extra={"event": "dnstap", "state": "disconnected", "socket": self.path},
                )
            return False
        self._outage_logged = False
        self.stats.dnstap_connects += 1
        log.info(
            "dnstap: writing to %s",
            self.path,
            extra={"event": "dnstap", "state": "connected", "socket": self.path},
        )
        return True

    def _write(self, batch: list[Entry]) -> None:
        sock = self._sock
        if sock is None:
            self.stats.dnstap_dropped += len(batch)
            return
        frames = self._encoder.frames(batch, self._queries, self._responses)
        try:
            sock.sendall(frames)
        except OSError as exc:
            self.stats.dnstap_dropped += len(batch)
            sock.close()
            self._sock = None
            self._outage_logged = True
            log.warning(
                "dnstap: writing to %s failed (%s); reconnecting",
                self.path,
                exc,
                extra={"event": "dnstap", "state": "disconnected", "socket": self.path},
            )
            return
        self.stats.dnstap_written += len(batch)

    def _finish(self) -> None:
        sock, self._sock = self._sock, None
        left = len(self.queue)
        self.queue.clear()
        if self.ring is not None:
            self._count_ring_drops()
            while drained := self.ring.drain(BATCH):
                left += len(drained)
        self.stats.dnstap_dropped += left
        if isinstance(sock, FileWriter):
            sock.close()
        elif sock is not None:
            close_writer(sock)
