"""What an endpoint's verdict is before its first result, and the verdicts a single node keeps.

    seed(book, resolved, kept, now)   every probed target without a status yet starts from its kept
                                      verdict (the state file's, when younger than KEEP_INTERVALS of
                                      its check's interval plus SAVE_EVERY), else from its check's
                                      `initial`: `down` records a provisional down, `up` records
                                      nothing (no verdict counts as up). The first result decides.
    VerdictSaver                      writes every verdict with the time of its latest result to the
                                      state file: SAVE_SOON after a verdict changed, every SAVE_EVERY
                                      while running, and once when the node stops (docs/health.md).

Cluster mode keeps no verdicts in the file: a new instance starts from Redis (docs/cluster.md).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from gslbd.app.checksets import recombine
from gslbd.app.generation import Resolved
from gslbd.errors import StateError
from gslbd.health.fsm import initial
from gslbd.model.service import Endpoint, EndpointKey
from gslbd.state.book import HealthBook
from gslbd.state.status import EndpointStatus
from gslbd.state.store import FileStateStore, KeptVerdict

log = logging.getLogger(__name__)

KEEP_INTERVALS = 3  # a kept verdict younger than this many check intervals (+ SAVE_EVERY) is used
SAVE_EVERY = 10.0  # seconds between saves while running (the check times move on)
SAVE_SOON = 1.0  # seconds from a changed verdict to its save (changes in that time are saved together)


def starting(endpoint: Endpoint, kept: KeptVerdict | None, now: float) -> EndpointStatus | None:
    """The status an endpoint starts from before its first result; None: no verdict (counts as up)."""
    check = endpoint.check
    if check is None:
        return None
    if kept is not None:
        age = now - kept.checked
        if 0 <= age <= KEEP_INTERVALS * check.interval + SAVE_EVERY:
            state = "up" if kept.up else "down"
            why = f"kept from before the restart: {state}, checked {age:.0f}s before"
            return initial(kept.up, now, why, kept.checked)
    if not check.initial:
        return initial(False, now, "initial: down (no check result yet)")
    return None


def seed(book: HealthBook, resolved: Resolved, kept: Mapping[EndpointKey, KeptVerdict], now: float) -> int:
    """Give every probed target that has no status its starting one (for every endpoint sharing its
    probe; a check of an endpoint with several: that check's), then combine the verdicts of endpoints
    with several checks; the number of targets seeded."""
    seeded = 0
    for key, group in resolved.targets.items():
        if book.known(key) is not None:
            continue
        status = starting(resolved.probed[key], kept.get(key), now)
        if status is None:
            continue
        for member in group:
            if resolved.probed[key].unit:  # one check of several: combined below
                book.record_check(member, status)
            else:
                book.record(member, status)
        seeded += 1
    recombine(book, resolved.probed, now)  # endpoints with several checks (app/checksets.py)
    return seeded


def current(book: HealthBook) -> dict[EndpointKey, KeptVerdict]:
    """Every verdict that came from a result, with the time of the latest result (a kept verdict not
    yet followed by a result keeps its own time; `initial: down` has none and is not kept)."""
    return {
        key: KeptVerdict(status.healthy, status.last_check)
        for key, status in book.statuses().items()
        if status.healthy is not None and status.last_check is not None
    }


class VerdictSaver:
    """Keeps the book's verdicts in a FileStateStore (writes run in a thread: at 100,000 endpoints a
    save is a few megabytes). A failed save is logged once until one succeeds again."""

    def __init__(self, store: FileStateStore, book: HealthBook) -> None:
        self._store = store
        self._book = book
        self._soon: asyncio.TimerHandle | None = None
        self._tick: asyncio.TimerHandle | None = None
        self._writing: asyncio.Task[None] | None = None
        self._failing = False

    def start(self) -> None:
        self._tick = asyncio.get_running_loop().call_later(SAVE_EVERY, self._periodic)

    def changed(self) -> None:
        """A verdict changed: saved within SAVE_SOON."""
        if self._soon is None and self._tick is not None:
            self._soon = asyncio.get_running_loop().call_later(SAVE_SOON, self._save_soon)

    def _save_soon(self) -> None:
        self._soon = None
        self._save()

    def _periodic(self) -> None:
        self._tick = asyncio.get_running_loop().call_later(SAVE_EVERY, self._periodic)
        self._save()

    def _save(self) -> None:
        if self._writing is not None and not self._writing.done():
            return  # the next tick saves what this one would have
        verdicts = current(self._book)
        self._writing = asyncio.ensure_future(asyncio.to_thread(self._write, verdicts))

    def _write(self, verdicts: Mapping[EndpointKey, KeptVerdict]) -> None:
        try:
            self._store.save_verdicts(verdicts)
        except StateError as exc:
            if not self._failing:
                log.warning("verdicts not kept: %s (retried every %gs)", exc, SAVE_EVERY)
            self._failing = True
            return
        if self._failing:
            log.info("verdicts kept again in %s", self._store.path)
        self._failing = False

    async def close(self) -> None:
        """Stop saving and save once more, now."""
        for handle in (self._soon, self._tick):
            if handle is not None:
                handle.cancel()
        self._soon = self._tick = None
        if self._writing is not None:
            await self._writing
        self._write(current(self._book))
