"""Shared probe cycles (pure): when each endpoint's cycle starts, and which raw results to feed.

Every instance runs an endpoint's cycle at the same wall-clock moments: offset + k x interval, where
the offset is a hash of the endpoint key (the same on every instance, spread over the interval so
that 1,000 endpoints do not all probe at once). So the instances ask for the lock within milliseconds
of each other and the lock, which lives max(interval/2, 2 s), covers the whole race: one probe per
endpoint and interval in total.

A raw result belongs to the cycle it was made in. Cycle k of an endpoint spans
[start_k - interval/4, start_k + 3 x interval/4): a result published a few milliseconds after the
probe started (or read from Redis later in the cycle) counts for cycle k even with some clock skew
between hosts. The ledger feeds at most one result per endpoint and cycle into the rise/fall machine,
whether it arrives by pub/sub, by reading the health key, or from a probe here, so an instance that
both reads the key and receives the message does not count one probe twice.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

from gslbd.cluster.keys import health_ttl
from gslbd.model.service import EndpointKey

EARLY = 0.25  # a cycle starts this share of an interval before its nominal start


def cycle_offset(key: EndpointKey, interval: float) -> float:
    """Where in each interval the endpoint's cycle starts, in [0, interval): stable across processes
    and hosts (a hash of "<fqdn>|<address>", not Python's per-process hash())."""
    digest = hashlib.blake2b(f"{key[0]}|{key[1]}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64 * interval


def cycle_of(wall: float, interval: float, offset: float) -> int:
    """The number of the cycle a moment (Unix seconds) belongs to."""
    return math.floor((wall - offset) / interval + EARLY)


def cycle_start(cycle: int, interval: float, offset: float) -> float:
    return offset + cycle * interval


def until_next_cycle(wall: float, interval: float, offset: float) -> float:
    """Seconds from `wall` to the start of the next cycle (never the one `wall` belongs to, so a loop
    that woke a little early does not run the same cycle twice)."""
    return cycle_start(cycle_of(wall, interval, offset) + 1, interval, offset) - wall


@dataclass(slots=True)
class _Entry:
    interval: float
    offset: float
    fed: int | None = None  # the last cycle a result was fed for
    newest: float | None = None  # wall time of the newest result seen
    echo: tuple[bool, float] | None = None  # our last own publication: (alive, wall)


class Ledger:
    """Per endpoint: its cycle timing, the last cycle fed, the newest result, our own last publication."""

    def __init__(self) -> None:
        self._entries: dict[EndpointKey, _Entry] = {}

    def track(self, key: EndpointKey, interval: float) -> None:
        """Follow an endpoint probed every `interval` seconds (a changed interval starts afresh)."""
        entry = self._entries.get(key)
        if entry is None or entry.interval != interval:
            self._entries[key] = _Entry(interval, cycle_offset(key, interval))

    def retain(self, keys: set[EndpointKey]) -> None:
        for key in [k for k in self._entries if k not in keys]:
            del self._entries[key]

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def delay(self, key: EndpointKey, wall: float) -> float | None:
        """Seconds until the endpoint's next cycle; None for an endpoint not tracked."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        return until_next_cycle(wall, entry.interval, entry.offset)

    def cycle(self, key: EndpointKey, wall: float) -> int:
        entry = self._entries[key]
        return cycle_of(wall, entry.interval, entry.offset)

    def claim(self, key: EndpointKey, wall: float) -> bool:
        """A result made or seen at `wall` is about to be fed: True (and remembered) when nothing was fed
        for its cycle yet; False for a second result of one cycle, or an endpoint not tracked."""
        entry = self._entries.get(key)
        if entry is None:
            return False
        cycle = cycle_of(wall, entry.interval, entry.offset)
        self.seen(key, wall)
        if entry.fed is not None and cycle <= entry.fed:
            return False
        entry.fed = cycle
        return True

    def seen(self, key: EndpointKey, wall: float) -> None:
        """A result for the endpoint exists as of `wall` (for the age of the newest result)."""
        entry = self._entries.get(key)
        if entry is not None and (entry.newest is None or wall > entry.newest):
            entry.newest = wall

    def newest(self, key: EndpointKey) -> float | None:
        entry = self._entries.get(key)
        return entry.newest if entry is not None else None

    def published(self, key: EndpointKey, alive: bool, wall: float) -> None:
        """We are publishing a result: its echo on our own subscription is to be ignored."""
        entry = self._entries.get(key)
        if entry is not None:
            entry.echo = (alive, wall)

    def unpublished(self, key: EndpointKey) -> None:
        entry = self._entries.get(key)
        if entry is not None:
            entry.echo = None

    def is_echo(self, key: EndpointKey, alive: bool, wall: float) -> bool:
        """Is a message our own publication coming back? (Once: the next one is not.)"""
        entry = self._entries.get(key)
        if entry is None or entry.echo is None:
            return False
        sent_alive, sent_at = entry.echo
        if sent_alive != alive or wall - sent_at > entry.interval / 2:
            return False
        entry.echo = None
        return True

    def forget_echoes(self) -> None:
        """After a reconnect: publications made before it will not come back."""
        for entry in self._entries.values():
            entry.echo = None

    def written_at(self, key: EndpointKey, wall: float, pttl_ms: int) -> float:
        """When the health key was written, from its remaining TTL (PTTL) read at `wall`."""
        entry = self._entries[key]
        if pttl_ms < 0:
            return wall
        return wall - (health_ttl(entry.interval) - pttl_ms / 1000)
