"""`type: push` checks: results that endpoints (or whatever watches them) send to the API.

    POST /api/v1/health/{service}/{address} {"ok": false, "detail": "disk full"}
        -> PushWatch.push: the result goes through the endpoint's verdict machine at once, as a probe
           result would (rise, fall, window apply), and the endpoint's ttl starts again
    no push for `ttl`
        -> a failed result ("no push within 30s"), and again after every further ttl without one

Nothing is probed: the scheduler and the cluster's probe lock leave push checks alone. The deadlines
live in a heap on the monotonic clock; `expire(now)` is what the timer runs (and what tests call
with a fake clock).
"""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Callable, Iterable, Mapping

from gslbd.clock import Clock
from gslbd.errors import NotPushed
from gslbd.health.probes.base import seconds
from gslbd.model.service import Endpoint, EndpointKey, unit_key
from gslbd.state.status import ProbeResult
from gslbd.types import CheckType

OnResult = Callable[[Endpoint, ProbeResult], None]
MAX_DETAIL = 200  # characters of a pushed detail that are kept


def is_push(endpoint: Endpoint) -> bool:
    return endpoint.check is not None and endpoint.check.type is CheckType.PUSH


def pushed_unit(endpoint: Endpoint, probed: Mapping[EndpointKey, Endpoint], check: str | None) -> Endpoint:
    """The push check (a unit, app/reconcile.py) of an endpoint with several `checks` that a push for
    it feeds: its only push check, or the one named `check`. NotPushed when there is none (or the
    name is not one of them, or several and none named)."""
    several = endpoint.checks
    names = several.names if several is not None else ()
    units = [
        unit
        for name in names
        if (unit := probed.get(unit_key(endpoint.key, name))) is not None and is_push(unit)
    ]
    what = f"{endpoint.service} {endpoint.address}"
    if not units:
        raise NotPushed(f"{what} has no push check among its checks ({', '.join(names)}) here")
    if check is not None:
        for unit in units:
            if unit.check is not None and unit.check.name == check:
                return unit
        pushed = ", ".join(u.check.name for u in units if u.check is not None)
        raise NotPushed(f"{what} has no push check {check!r} (its push checks: {pushed})")
    if len(units) > 1:
        pushed = ", ".join(u.check.name for u in units if u.check is not None)
        raise NotPushed(f'{what} has several push checks ({pushed}): name one with "check"')
    return units[0]


class PushWatch:
    """The push-checked endpoints of the current config and when each one's ttl ends."""

    def __init__(self, clock: Clock, on_result: OnResult) -> None:
        self._clock = clock
        self._on_result = on_result
        self._endpoints: dict[EndpointKey, Endpoint] = {}
        self._due: dict[EndpointKey, float] = {}  # monotonic time the ttl ends
        self._heap: list[tuple[float, EndpointKey]] = []  # (due, key), stale entries skipped
        self._timer: asyncio.TimerHandle | None = None
        self._running = False

    @property
    def watched(self) -> frozenset[EndpointKey]:
        return frozenset(self._endpoints)

    def update(self, endpoints: Iterable[Endpoint]) -> None:
        """Watch these endpoints (a start or reload): unchanged ones keep their deadline, new ones (or
        ones whose check changed) get a full ttl from now, others are forgotten."""
        now = self._clock.monotonic()
        wanted = {e.key: e for e in endpoints if is_push(e)}
        for key in list(self._endpoints):
            if key not in wanted or wanted[key].check != self._endpoints[key].check:
                del self._endpoints[key]
                self._due.pop(key, None)
        for key, endpoint in wanted.items():
            if key not in self._endpoints:
                self._arm(key, now + _ttl(endpoint))
            self._endpoints[key] = endpoint
        self._schedule()

    def start(self) -> None:
        self._running = True
        self._schedule()

    def stop(self) -> None:
        self._running = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def push(self, key: EndpointKey, ok: bool, detail: str) -> Endpoint:
        """A pushed result for `key`, through the verdict machine now; KeyError when `key` is not a
        push-checked endpoint of this config."""
        endpoint = self._endpoints.get(key)
        if endpoint is None:
            raise KeyError(key)
        text = " ".join(detail.split())[:MAX_DETAIL]
        self._arm(key, self._clock.monotonic() + _ttl(endpoint))
        self._schedule()
        self._on_result(endpoint, ProbeResult(ok=ok, detail=f"push: {text}" if text else "push"))
        return endpoint

    def expire(self, now: float) -> int:
        """Report a failure for every endpoint whose ttl ended by `now` and start its next ttl; how many."""
        count = 0
        while self._heap and self._heap[0][0] <= now:
            due, key = heapq.heappop(self._heap)
            if self._due.get(key) != due:
                continue  # pushed since, or gone
            endpoint = self._endpoints[key]
            ttl = _ttl(endpoint)
            self._arm(key, due + ttl if due + ttl > now else now + ttl)
            self._on_result(endpoint, ProbeResult(ok=False, detail=f"no push within {seconds(ttl)}"))
            count += 1
        return count

    def _arm(self, key: EndpointKey, due: float) -> None:
        self._due[key] = due
        heapq.heappush(self._heap, (due, key))
        if len(self._heap) > 4 * len(self._due) + 64:  # drop the stale entries now and then
            self._heap = [(d, k) for k, d in self._due.items()]
            heapq.heapify(self._heap)

    def _schedule(self) -> None:
        if not self._running:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while self._heap and self._due.get(self._heap[0][1]) != self._heap[0][0]:
            heapq.heappop(self._heap)
        if self._heap:
            delay = max(0.0, self._heap[0][0] - self._clock.monotonic())
            self._timer = asyncio.get_running_loop().call_later(delay, self._fire)

    def _fire(self) -> None:
        self._timer = None
        self.expire(self._clock.monotonic())
        self._schedule()


def _ttl(endpoint: Endpoint) -> float:
    assert endpoint.check is not None
    return endpoint.check.interval  # a push check's ttl (config/checks.py)
