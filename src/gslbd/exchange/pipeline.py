"""Many questions over one TCP connection to a peer nameserver (RFC 7766 6.2.1.1: pipelining).

A per-name poll asks two questions per service. Over UDP with a fixed number in flight a poll costs
(questions / in flight) round trips: 2,000 questions at 100 in flight across a 240 ms round trip are 4.8 s,
longer than the interval. Over one TCP connection the questions are written back to back and the replies
matched by ID in whatever order they come, so a poll costs about one round trip plus the time the peer
needs to answer; the kernel's flow control keeps a slow peer from being flooded.

`TcpPipe.ask_all` keeps at most `window` questions unanswered: the caller sizes it to the measured round
trip (`window_for`), the bandwidth-delay product of the rate the poll needs. A pipe fails as a whole
when no reply arrives for `timeout` seconds while questions are outstanding (the peer stopped answering:
a TCP server answers in order, so nothing behind a lost reply would come either), or when the connection
closes; the questions still open are then reported failed, and the caller asks them elsewhere.

dnspython's `dns.asyncquery.tcp`/`receive_tcp` read one reply per call and must be given the request's
TSIG MAC before the reply is read, which rules out out-of-order matching; the framing here is the two-byte
length of RFC 1035 4.2.2 and the replies are read by `wireformat.read_reply` like every exchange reply.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Container, Sequence
from typing import cast

from gslbd.exchange.transport import checked, sign
from gslbd.exchange.wireformat import BadReply, Question, Reply, with_id
from gslbd.model.config import ListenAddress
from gslbd.model.tsig import TsigKey

MIN_WINDOW = 128  # questions in flight on one connection, at least (a few kB)...
MAX_WINDOW = 4096  # ...and at most (a sixteenth of the ID space)
Outcome = Reply | str  # a reply, or why the question got none


def window_for(questions: int, rtt: float, budget: float) -> int:
    """How many questions to keep in flight so that `questions` take about `budget` seconds at a round
    trip of `rtt` seconds: the bandwidth-delay product, within [MIN_WINDOW, MAX_WINDOW]."""
    if budget <= 0:
        return MAX_WINDOW
    wanted = math.ceil(questions * max(rtt, 0.0) / budget)
    return max(MIN_WINDOW, min(MAX_WINDOW, wanted))


class TcpPipe(asyncio.Protocol):
    """One TCP connection to `server`, kept open across polls while the server keeps it open."""

    def __init__(self, server: ListenAddress, rng: random.Random) -> None:
        self.server = server
        self._next = rng.randrange(65536)
        self._transport: asyncio.Transport | None = None
        self._buf = bytearray()
        self._batch: _Batch | None = None

    @classmethod
    async def open(
        cls, server: ListenAddress, timeout: float, rng: random.Random, local_host: str | None = None
    ) -> TcpPipe:
        """A connection to `server` (from `local_host` when given). TimeoutError or OSError when none."""
        loop = asyncio.get_running_loop()
        local = (local_host, 0) if local_host is not None else None
        async with asyncio.timeout(timeout):
            _, pipe = await loop.create_connection(
                lambda: cls(server, rng), server.host, server.port, local_addr=local
            )
        return pipe

    @property
    def usable(self) -> bool:
        """Still connected (the server has not closed it)."""
        return self._transport is not None and not self._transport.is_closing()

    def close(self) -> None:
        transport, self._transport = self._transport, None
        if transport is not None:
            transport.abort()

    async def ask_all(
        self,
        questions: Sequence[Question],
        timeout: float,
        key: TsigKey | None = None,
        window: int = MIN_WINDOW,
    ) -> list[Outcome]:
        """Ask every question (signed with `key` when given: then every reply must be signed), at most
        `window` unanswered at a time. One outcome per question, in order."""
        if self._batch is not None:
            raise RuntimeError("one batch at a time on a pipe")
        batch = _Batch(self, questions, timeout, key, max(1, window))
        self._batch = batch
        try:
            if self.usable:
                batch.fill()
            else:
                batch.finish("the connection is closed")
            return await batch.done
        finally:
            batch.stop()
            self._batch = None

    def _new_id(self, busy: Container[int]) -> int:
        for _ in range(65536):
            qid = self._next
            self._next = (self._next + 1) & 0xFFFF
            if qid not in busy:
                return qid
        raise OSError("no free query ID")

    def _write(self, data: bytes) -> None:
        if self._transport is not None:
            self._transport.write(data)

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        if self._batch is not None:
            self._batch.finish(
                f"the connection closed ({exc})" if exc else "the server closed the connection"
            )

    def eof_received(self) -> bool:
        return False  # the server closes: so do we (connection_lost follows)

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        pos, end = 0, len(buf)
        frames: list[bytes] = []
        while end - pos >= 2:
            size = (buf[pos] << 8) | buf[pos + 1]
            if end - pos - 2 < size:
                break
            frames.append(bytes(buf[pos + 2 : pos + 2 + size]))
            pos += 2 + size
        if pos:
            del buf[:pos]
        if frames and self._batch is not None:
            self._batch.received(frames)


class _Batch:
    """The questions of one `ask_all`: what is in flight, the outcomes, the progress timer."""

    def __init__(
        self, pipe: TcpPipe, questions: Sequence[Question], timeout: float, key: TsigKey | None, window: int
    ) -> None:
        self.pipe = pipe
        self.questions = questions
        self.timeout = timeout
        self.key = key
        self.window = window
        self.loop = asyncio.get_running_loop()
        self.done: asyncio.Future[list[Outcome]] = self.loop.create_future()
        self.outcomes: list[Outcome | None] = [None] * len(questions)
        self.flying: dict[int, tuple[int, bytes]] = {}  # query ID -> (question index, request MAC)
        self.sent = 0
        self.answered = 0
        self.progress = self.loop.time()
        self.timer: asyncio.TimerHandle | None = None
        if not questions:
            self.done.set_result([])

    def fill(self) -> None:
        """Send questions until `window` are in flight (one write for all of them)."""
        out: list[bytes] = []
        while self.sent < len(self.questions) and len(self.flying) < self.window:
            index = self.sent
            self.sent += 1
            qid = self.pipe._new_id(self.flying)
            message, mac = sign(with_id(self.questions[index], qid), self.key)
            self.flying[qid] = (index, mac)
            out.append(len(message).to_bytes(2, "big"))
            out.append(message)
        if out:
            self.pipe._write(b"".join(out))
            if self.timer is None:
                self.progress = self.loop.time()
                self.timer = self.loop.call_later(self.timeout, self._check)

    def received(self, frames: list[bytes]) -> None:
        for data in frames:
            if len(data) < 2:
                continue
            entry = self.flying.pop(int.from_bytes(data[:2], "big"), None)
            if entry is None:  # a late reply to a question of an earlier batch
                continue
            index, mac = entry
            question = self.questions[index]
            try:
                self.outcomes[index] = checked(data, question, int.from_bytes(data[:2], "big"), self.key, mac)
            except BadReply as exc:
                self.outcomes[index] = str(exc) or "a reply that cannot be read"
            self.answered += 1
        self.progress = self.loop.time()
        if self.answered == len(self.questions):
            self._complete()
        else:
            self.fill()

    def finish(self, why: str) -> None:
        """The pipe failed: every question without an outcome gets `why`."""
        for index, outcome in enumerate(self.outcomes):
            if outcome is None:
                self.outcomes[index] = why
        self.flying.clear()
        self._complete()

    def stop(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _complete(self) -> None:
        self.stop()
        if not self.done.done():
            self.done.set_result([o if o is not None else "not asked" for o in self.outcomes])

    def _check(self) -> None:
        self.timer = None
        if self.done.done():
            return
        idle = self.loop.time() - self.progress
        if idle >= self.timeout:
            self.finish(f"timeout after {self.timeout:g}s")
            self.pipe.close()  # nothing queued behind the lost reply would come
            return
        self.timer = self.loop.call_later(self.timeout - idle, self._check)
