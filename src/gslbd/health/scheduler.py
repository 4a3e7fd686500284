"""Runs every endpoint's probe on its own interval: one asyncio task per endpoint with a check.

Each loop waits a small random delay first (so a start or reload does not fire every probe at once),
then probes, reports the result through `on_result`, and sleeps until interval x U(0.9, 1.1) after
the probe started. One probe per endpoint is in flight at a time and each is cut off at the check's
timeout; at most `max_in_flight` probes run at once over all endpoints (the rest wait their turn,
which matters only in the burst right after a start). `on_result` runs on the loop and must be
cheap (update a book, schedule a rebuild).

With a `gate` (cluster mode, gslbd.cluster) every cycle asks it first: `delay` places the cycles
(aligned on the wall clock, the same on every instance), `acquire` says whether this instance probes
now (False: another instance probes and the gate has fed what it shared), and `publish` shares every
probe made here. The result goes to `publish` first, and to `on_result` once it has been sent (or
after SHARE_FIRST at most): a changed verdict makes `on_result`'s caller rebuild its answers, which
takes milliseconds, and the other instances should not wait for that. Without a gate the scheduler
behaves as described above.

Load feedback (`endpoints[].load`, docs/policies/load.md) runs here too, never on the query path: with
`on_load`, `update_loads` keeps one loop per endpoint with a load source that GETs its URL every `every`
(+-10 %) cut off at `timeout` (health/load.py) and reports the figure, or why there is none, through
`on_load`. Garbage and unreachable URLs are counted (gslbd_load_fetches_total) and logged once per
endpoint until a good figure comes again.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from prometheus_client import Counter, Histogram

from gslbd import metrics
from gslbd.clock import Clock
from gslbd.health.load import Garbage, LoadFailed, fetch_load
from gslbd.health.probes import PROBES, Probe
from gslbd.health.probes.base import seconds
from gslbd.model.check import Check
from gslbd.model.service import Endpoint, EndpointKey
from gslbd.state.status import ProbeResult
from gslbd.types import CheckType

log = logging.getLogger(__name__)

JITTER = 0.1  # intervals vary by +-10 %
MAX_IN_FLIGHT = 1000  # probes running at once, all endpoints together (sockets, CPU bursts at start)
MAX_FIRST_DELAY = 1.0  # seconds: the first probe of a loop starts within min(this, interval)
SHARE_FIRST = 0.05  # seconds a result waits for the gate's publish before on_result gets it

OnResult = Callable[[Endpoint, ProbeResult], None]
# (endpoint, figure or None, why there is none): a load fetch finished (health/load.py)
OnLoad = Callable[[Endpoint, float | None, str], None]


class ProbeGate(Protocol):
    """Cluster mode's say in every probe cycle (implemented by gslbd.cluster.ClusterNode)."""

    def delay(self, endpoint: Endpoint, first: bool) -> float | None:
        """Seconds until the endpoint's next cycle; None for the scheduler's own (jittered) timing."""
        ...

    async def acquire(self, endpoint: Endpoint) -> bool:
        """True: probe here now. False: skip this cycle (another instance probes; the gate has fed
        any result it read). Must not raise."""
        ...

    async def publish(self, endpoint: Endpoint, result: ProbeResult) -> None:
        """A probe made here finished (`on_result` gets it right after): share it as the gate decides.
        Must not raise."""
        ...


class LoadGate(Protocol):
    """Cluster mode's say in every load fetch (gslbd.cluster.ClusterNode, cluster/loads.py)."""

    async def load_turn(self, endpoint: Endpoint) -> bool:
        """True: fetch here now; False: another instance fetches and shares. Must not raise."""
        ...

    async def publish_load(self, endpoint: Endpoint, figure: float) -> None:
        """A good figure fetched here: share it as the gate decides. Must not raise."""
        ...


def next_delay(interval: float, rng: random.Random) -> float:
    """The time from one probe's start to the next: interval +-10 %."""
    return interval * rng.uniform(1 - JITTER, 1 + JITTER)


def first_delay(interval: float, rng: random.Random) -> float:
    return rng.uniform(0, min(MAX_FIRST_DELAY, interval))


def _same_target(a: Endpoint, b: Endpoint) -> bool:
    """Whether b's loop can carry on from a's: same check and same probed address."""
    return a.check == b.check and a.probe_address == b.probe_address and a.kind == b.kind


class _Counters:
    """Prometheus children resolved once per check type (labels() per probe costs a lock)."""

    def __init__(self) -> None:
        self._by_type: dict[CheckType, tuple[Counter, Counter, Histogram]] = {}

    def record(self, kind: CheckType, result: ProbeResult) -> None:
        children = self._by_type.get(kind)
        if children is None:
            children = (
                metrics.PROBES.labels(kind.value, "success"),
                metrics.PROBES.labels(kind.value, "failure"),
                metrics.PROBE_DURATION.labels(kind.value),
            )
            self._by_type[kind] = children
        (children[0] if result.ok else children[1]).inc()
        children[2].observe(result.duration)


class HealthScheduler:
    """Probes endpoints until stopped. `probes` replaces the probe of a check type (tests, benches)."""

    def __init__(
        self,
        clock: Clock,
        rng: random.Random,
        on_result: OnResult,
        *,
        probes: Mapping[CheckType, Probe] | None = None,
        max_in_flight: int = MAX_IN_FLIGHT,
        gate: ProbeGate | None = None,
        on_load: OnLoad | None = None,
        load_gate: LoadGate | None = None,
    ) -> None:
        self._clock = clock
        self._on_load = on_load
        self._load_gate = load_gate
        self._loaded: dict[EndpointKey, Endpoint] = {}  # endpoints whose load is fetched
        self._load_tasks: dict[EndpointKey, asyncio.Task[None]] = {}
        self._load_failing: set[EndpointKey] = set()  # logged once until a good figure
        self._gate = gate
        self._rng = rng
        self._on_result = on_result
        self._probes: dict[CheckType, Probe] = {**PROBES, **(probes or {})}
        self._endpoints: dict[EndpointKey, Endpoint] = {}
        self._tasks: dict[EndpointKey, asyncio.Task[None]] = {}
        self._counters = _Counters()
        self._stopped = False
        self._slots = asyncio.Semaphore(max_in_flight)

    @property
    def scheduled(self) -> frozenset[EndpointKey]:
        """Keys of the endpoints being probed now."""
        return frozenset(self._tasks)

    async def start(self, endpoints: Sequence[Endpoint]) -> None:
        """Start a loop for every endpoint with a check."""
        self._stopped = False
        self.update(endpoints)

    def update(self, endpoints: Sequence[Endpoint]) -> None:
        """Make the probed set `endpoints` (a reload): loops of unchanged endpoints (same key, check
        and probed address) carry on, changed and new ones start afresh, removed ones are cancelled."""
        if self._stopped:
            return
        wanted = {ep.key: ep for ep in endpoints if ep.check is not None}
        for key in list(self._tasks):
            new = wanted.get(key)
            if new is None or not _same_target(self._endpoints[key], new):
                self._tasks.pop(key).cancel()
                del self._endpoints[key]
        for key, endpoint in wanted.items():
            self._endpoints[key] = endpoint  # unchanged loops report the newest Endpoint value
            if key not in self._tasks:
                self._tasks[key] = asyncio.create_task(self._loop(key), name=f"probe {key[1]} {key[0]}")

    def update_loads(self, endpoints: Sequence[Endpoint]) -> None:
        """Fetch the load of `endpoints` (those with a load source): loops of unchanged ones carry on,
        changed and new ones start afresh, removed ones are cancelled."""
        if self._stopped or self._on_load is None:
            return
        wanted = {ep.key: ep for ep in endpoints if ep.load is not None}
        for key in list(self._load_tasks):
            new = wanted.get(key)
            old = self._loaded[key]
            if new is None or new.load != old.load or new.probe_address != old.probe_address:
                self._load_tasks.pop(key).cancel()
                del self._loaded[key]
                self._load_failing.discard(key)
        for key, endpoint in wanted.items():
            self._loaded[key] = endpoint
            if key not in self._load_tasks:
                name = f"load {key[1]} {key[0]}"
                self._load_tasks[key] = asyncio.create_task(self._load_loop(key), name=name)

    @property
    def loads_fetched(self) -> frozenset[EndpointKey]:
        return frozenset(self._load_tasks)

    async def fetch_load_once(self, endpoint: Endpoint) -> tuple[float | None, str]:
        """One fetch of the endpoint's load with its timeout: (figure, "") or (None, why)."""
        source = endpoint.load
        if source is None:
            return None, "no load source"
        try:
            async with asyncio.timeout(source.timeout):
                return await fetch_load(endpoint, source), ""
        except TimeoutError:
            return None, f"timeout after {seconds(source.timeout)}"
        except LoadFailed as exc:
            return None, ("garbage: " if isinstance(exc, Garbage) else "") + str(exc)
        except Exception as exc:  # a fetch must not raise; if one does, the loop carries on
            return None, f"load fetch error: {type(exc).__name__}"

    async def _load_loop(self, key: EndpointKey) -> None:
        endpoint = self._loaded[key]
        source = endpoint.load
        assert source is not None
        await asyncio.sleep(first_delay(source.every, self._rng))
        while True:
            started = self._clock.monotonic()
            if await self._load_turn(endpoint):
                async with self._slots:
                    figure, why = await self.fetch_load_once(endpoint)
                self._report_load(self._loaded.get(key, endpoint), figure, why)
                if figure is not None and self._load_gate is not None:
                    await self._publish_load(endpoint, figure)
            spent = self._clock.monotonic() - started
            await asyncio.sleep(max(0.0, next_delay(source.every, self._rng) - spent))

    async def _load_turn(self, endpoint: Endpoint) -> bool:
        if self._load_gate is None:
            return True
        try:
            return await self._load_gate.load_turn(endpoint)
        except Exception:  # a gate must not raise; if one does, fetch here
            log.exception("load gate failed for %s %s", endpoint.service, endpoint.address)
            return True

    async def _publish_load(self, endpoint: Endpoint, figure: float) -> None:
        assert self._load_gate is not None
        try:
            await self._load_gate.publish_load(endpoint, figure)
        except Exception:
            log.exception("load gate failed to share %s %s", endpoint.service, endpoint.address)

    def _report_load(self, endpoint: Endpoint, figure: float | None, why: str) -> None:
        key = endpoint.key
        result = "ok" if figure is not None else "garbage" if why.startswith("garbage") else "unreachable"
        metrics.LOAD_FETCHES.labels(result).inc()
        if figure is None and key not in self._load_failing:
            self._load_failing.add(key)
            log.warning("load of %s %s not read: %s (the last good figure stays)", key[0], key[1], why)
        elif figure is not None and key in self._load_failing:
            self._load_failing.discard(key)
            log.info("load of %s %s read again: %g", key[0], key[1], figure)
        assert self._on_load is not None
        try:
            self._on_load(endpoint, figure, why)
        except Exception:
            log.exception("on_load failed for %s %s", endpoint.service, endpoint.address)

    async def stop(self) -> None:
        """Cancel every loop (and its probe in flight) and wait until they have ended."""
        self._stopped = True
        tasks = list(self._tasks.values()) + list(self._load_tasks.values())
        self._tasks.clear()
        self._endpoints.clear()
        self._load_tasks.clear()
        self._loaded.clear()
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def probe_once(self, endpoint: Endpoint) -> ProbeResult:
        """Run the endpoint's probe once with its timeout enforced (no report, no metrics)."""
        check = endpoint.check
        if check is None:
            return ProbeResult(ok=True, detail="no check")
        return await self._run(self._probes[check.type], endpoint, check)

    async def _run(self, probe: Probe, endpoint: Endpoint, check: Check) -> ProbeResult:
        started = self._clock.monotonic()
        try:
            async with asyncio.timeout(check.timeout):
                return await probe.run(endpoint, check)
        except TimeoutError:
            elapsed = self._clock.monotonic() - started
            return ProbeResult(ok=False, detail=f"timeout after {seconds(check.timeout)}", duration=elapsed)
        except Exception as exc:  # a probe must not raise; if one does, the loop carries on
            log.warning("%s probe of %s raised %r", check.type, endpoint.address, exc)
            return ProbeResult(ok=False, detail=f"probe error: {type(exc).__name__}")

    async def _loop(self, key: EndpointKey) -> None:
        endpoint = self._endpoints[key]
        check = endpoint.check
        assert check is not None
        probe = self._probes[check.type]
        await asyncio.sleep(self._delay(endpoint, check, None))
        while True:
            started = self._clock.monotonic()
            if await self._acquire(endpoint):
                async with self._slots:  # the timeout counts from the probe's own start, not the wait
                    result = await self._run(probe, endpoint, check)
                self._counters.record(check.type, result)
                await self._report(self._endpoints.get(key, endpoint), result)
            endpoint = self._endpoints.get(key, endpoint)
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                # Cancelled, but something awaited above swallowed it (Python 3.11's asyncio.wait_for
                # does when its inner task finishes at the same moment): end the loop anyway.
                raise asyncio.CancelledError
            await asyncio.sleep(self._delay(endpoint, check, self._clock.monotonic() - started))

    def _delay(self, endpoint: Endpoint, check: Check, spent: float | None) -> float:
        """Until the next cycle: the gate's aligned time, else interval +-10 % from the last start
        (`spent` is None before the first cycle: a random delay within the first second)."""
        if self._gate is not None:
            delay = self._gate.delay(endpoint, spent is None)
            if delay is not None:
                return max(0.0, delay)
        if spent is None:
            return first_delay(check.interval, self._rng)
        return max(0.0, next_delay(check.interval, self._rng) - spent)

    async def _report(self, endpoint: Endpoint, result: ProbeResult) -> None:
        """To the gate (sent first, see the module docstring), then to `on_result`."""
        sharing = None
        if self._gate is not None:
            sharing = asyncio.ensure_future(self._gate.publish(endpoint, result))
            try:
                await asyncio.wait({sharing}, timeout=SHARE_FIRST)
            except asyncio.CancelledError:
                sharing.cancel()
                raise
        try:
            self._on_result(endpoint, result)
        except Exception:
            log.exception("on_result failed for %s %s", endpoint.service, endpoint.address)
        if sharing is not None:
            try:
                await sharing
            except Exception:
                log.exception("probe gate failed to share %s %s", endpoint.service, endpoint.address)

    async def _acquire(self, endpoint: Endpoint) -> bool:
        if self._gate is None:
            return True
        try:
            return await self._gate.acquire(endpoint)
        except Exception:  # a gate must not raise; if one does, probe here
            log.exception("probe gate failed for %s %s", endpoint.service, endpoint.address)
            return True
