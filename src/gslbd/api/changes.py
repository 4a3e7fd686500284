"""The change log the console shows: a bounded ring of recent verdicts, admin changes and reloads.

App records into it (through app.changes.ChangeRecorder); the API reads it (GET /api/v1/changes) and
is woken by it (GET /api/v1/events, Server-Sent Events). Every entry gets the next sequence number, so
a reader asks for "everything after seq N" and learns whether it missed some (the ring forgot them).

No asyncio here: listeners are plain callables run by `record`, on the thread that records (App
records on its event loop).
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

DEFAULT_CAPACITY = 1000


class ChangeKind(StrEnum):
    VERDICT = "verdict"  # a probed endpoint's verdict changed (up/down)
    ADMIN = "admin"  # an endpoint's run-time admin state was set (here or by another instance)
    RELOAD = "reload"  # the configuration was reloaded (state "applied") or a reload refused ("refused")
    PEERS = "peers"  # the endpoints learned from peer sites changed
    ENDPOINT = "endpoint"  # the endpoint overlay added, removed or patched an endpoint


@dataclass(frozen=True, slots=True)
class Change:
    """One entry. `time` is wall-clock Unix seconds. `service`/`address` name the endpoint (None for a
    reload or a peer change, which may touch every service). `state` is the new verdict ("up"/"down"),
    admin state ("up"/"down"/"obey") or reload result ("applied"/"refused"); `detail` says why."""

    seq: int
    time: float
    kind: ChangeKind
    state: str
    service: str | None = None
    address: str | None = None
    detail: str = ""

    @property
    def touches_all(self) -> bool:
        """True when any service may have changed (the reader should refetch everything)."""
        return self.service is None


Listener = Callable[[Change], None]


class ChangeLog:
    """The last `capacity` changes, oldest first, each with a sequence number from 1 up."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self._ring: deque[Change] = deque(maxlen=capacity)
        self._seq = itertools.count(1)
        self._last = 0
        self._listeners: list[Listener] = []

    @property
    def last_seq(self) -> int:
        """The sequence number of the newest change (0: none yet)."""
        return self._last

    def record(
        self,
        time: float,
        kind: ChangeKind,
        state: str,
        service: str | None = None,
        address: str | None = None,
        detail: str = "",
    ) -> Change:
        change = Change(next(self._seq), time, kind, state, service, address, detail)
        self._last = change.seq
        self._ring.append(change)
        for listener in list(self._listeners):
            listener(change)
        return change

    def since(self, seq: int, limit: int | None = None) -> tuple[Sequence[Change], bool]:
        """The changes after `seq`, oldest first (at most the newest `limit`), and whether some after
        `seq` are missing: forgotten by the ring or cut by `limit` (the reader should then refetch)."""
        newer = [c for c in self._ring if c.seq > seq] if seq < self._last else []
        missed = bool(newer) and newer[0].seq != seq + 1
        if not newer and seq < self._last:
            missed = True
        if limit is not None and len(newer) > limit:
            newer, missed = newer[len(newer) - limit :], True
        return newer, missed

    def recent(self, limit: int) -> Sequence[Change]:
        """The newest `limit` changes, newest first."""
        out: list[Change] = []
        for change in reversed(self._ring):
            if len(out) >= limit:
                break
            out.append(change)
        return out

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call `listener(change)` after every record; returns the function that unsubscribes."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe
