"""The scheduler on a real event loop with short intervals: pacing, jitter, one probe in flight,
timeouts, reload semantics, cancellation and metrics. The probe is a recording stand-in so the
scheduler's own behaviour is what is measured."""

from __future__ import annotations

import asyncio
import itertools
import random
from dataclasses import dataclass, field, replace

from gslbd import metrics
from gslbd.clock import SystemClock
from gslbd.health.scheduler import HealthScheduler, first_delay, next_delay
from gslbd.model.check import Check
from gslbd.model.service import Endpoint
from gslbd.state.status import ProbeResult
from gslbd.types import CheckType, EndpointKind

SERVICE = "app.gslb.example.com."


def endpoint(address: str, interval: float = 0.2, timeout: float = 0.1, **check: object) -> Endpoint:
    return Endpoint(
        service=SERVICE,
        address=address,
        kind=EndpointKind.IPV4,
        site="eu",
        check=Check(name="web", type=CheckType.EXEC, interval=interval, timeout=timeout, **check),  # type: ignore[arg-type]
    )


@dataclass
class RecordingProbe:
    """Sleeps `delay`, answers `ok`, and records what the scheduler made it do."""

    delay: float = 0.0
    ok: bool = True
    starts: dict[str, list[float]] = field(default_factory=dict)
    tasks: dict[str, set[int]] = field(default_factory=dict)
    in_flight: int = 0
    max_in_flight: int = 0
    cancelled: int = 0

    async def run(self, ep: Endpoint, check: Check) -> ProbeResult:
        loop = asyncio.get_running_loop()
        self.starts.setdefault(ep.address, []).append(loop.time())
        self.tasks.setdefault(ep.address, set()).add(id(asyncio.current_task()))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.in_flight -= 1
        return ProbeResult(ok=self.ok, detail="stub", duration=self.delay)


def scheduler(
    probe: RecordingProbe, results: list[tuple[Endpoint, ProbeResult]], seed: int = 7
) -> HealthScheduler:
    return HealthScheduler(
        SystemClock(),
        random.Random(seed),
        lambda ep, result: results.append((ep, result)),
        probes={CheckType.EXEC: probe},
    )


def test_next_delay_stays_within_ten_percent_and_spreads() -> None:
    rng = random.Random(1)
    delays = [next_delay(10.0, rng) for _ in range(2000)]
    assert min(delays) >= 9.0
    assert max(delays) <= 11.0
    assert min(delays) < 9.1
    assert max(delays) > 10.9


def test_first_probe_comes_within_the_first_second_or_interval() -> None:
    rng = random.Random(2)
    assert all(0 <= first_delay(30.0, rng) <= 1.0 for _ in range(1000))
    assert all(0 <= first_delay(0.2, rng) <= 0.2 for _ in range(1000))


def test_probes_repeat_every_interval_with_jitter_on_a_real_loop() -> None:
    probe = RecordingProbe()
    results: list[tuple[Endpoint, ProbeResult]] = []

    async def body() -> float:
        s = scheduler(probe, results)
        began = asyncio.get_running_loop().time()
        await s.start([endpoint("192.0.2.1")])
        await asyncio.sleep(1.5)
        await s.stop()
        return began

    began = asyncio.run(body())
    starts = probe.starts["192.0.2.1"]
    assert 0 <= starts[0] - began <= 0.2 + 0.03  # the first probe comes within the first interval
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert len(gaps) >= 5
    assert all(0.18 - 0.005 <= gap <= 0.22 + 0.05 for gap in gaps), gaps
    assert len(results) == len(starts)
    assert all(r.ok and r.detail == "stub" for _, r in results)


def test_only_one_probe_is_in_flight_per_endpoint_even_when_probes_are_slow() -> None:
    probe = RecordingProbe(delay=0.09)  # almost the whole timeout, half the interval

    async def body() -> None:
        s = scheduler(probe, [])
        await s.start([endpoint("192.0.2.1", interval=0.1, timeout=0.095)])
        await asyncio.sleep(1.0)
        await s.stop()

    asyncio.run(body())
    assert probe.max_in_flight == 1
    assert len(probe.starts["192.0.2.1"]) >= 5


def test_a_probe_that_hangs_is_cut_off_at_the_timeout() -> None:
    probe = RecordingProbe(delay=30.0)
    results: list[tuple[Endpoint, ProbeResult]] = []

    async def body() -> float:
        s = scheduler(probe, results)
        await s.start([endpoint("192.0.2.1", interval=0.3, timeout=0.1)])
        while not results:
            await asyncio.sleep(0.01)
        reported = asyncio.get_running_loop().time()
        await s.stop()
        return reported

    reported = asyncio.run(body())
    (ep, result), *_ = results
    assert result.ok is False
    assert result.detail == "timeout after 0.1s"
    assert 0.1 <= result.duration < 0.4
    assert 0.1 <= reported - probe.starts["192.0.2.1"][0] < 0.4
    assert probe.cancelled >= 1  # the hanging probe was cancelled, not left running
    assert ep.address == "192.0.2.1"


def test_endpoints_without_a_check_are_not_scheduled() -> None:
    probe = RecordingProbe()
    unchecked = replace(endpoint("192.0.2.2"), check=None)

    async def body() -> frozenset[tuple[str, str]]:
        s = scheduler(probe, [])
        await s.start([endpoint("192.0.2.1"), unchecked])
        scheduled = s.scheduled
        await asyncio.sleep(0.5)
        await s.stop()
        return scheduled

    assert asyncio.run(body()) == {(SERVICE, "192.0.2.1")}
    assert set(probe.starts) == {"192.0.2.1"}


def test_update_keeps_unchanged_loops_restarts_changed_starts_new_and_cancels_removed() -> None:
    probe = RecordingProbe()
    results: list[tuple[Endpoint, ProbeResult]] = []
    kept = endpoint("192.0.2.1")
    changed = endpoint("192.0.2.2")
    removed = endpoint("192.0.2.3")

    async def body() -> None:
        s = scheduler(probe, results)
        await s.start([kept, changed, removed])
        await asyncio.sleep(0.6)
        removed_before = len(probe.starts["192.0.2.3"])
        new_check = replace(changed.check, path="/other") if changed.check else None
        s.update([replace(kept, weight=5), replace(changed, check=new_check), endpoint("192.0.2.4")])
        assert s.scheduled == {(SERVICE, a) for a in ("192.0.2.1", "192.0.2.2", "192.0.2.4")}
        await asyncio.sleep(0.6)
        await s.stop()
        assert len(probe.starts["192.0.2.3"]) == removed_before

    asyncio.run(body())
    assert len(probe.tasks["192.0.2.1"]) == 1  # the same loop went on probing
    assert len(probe.tasks["192.0.2.2"]) == 2  # a new loop for the new check
    assert len(probe.starts["192.0.2.4"]) >= 2
    late_kept = [ep for ep, _ in results if ep.address == "192.0.2.1"][-1]
    assert late_kept.weight == 5  # reports carry the newest endpoint value


def test_stop_cancels_the_probe_in_flight_and_ends_every_loop() -> None:
    probe = RecordingProbe(delay=0.25)

    async def body() -> None:
        s = scheduler(probe, [])
        await s.start([endpoint("192.0.2.1", interval=2.0, timeout=1.0)])
        while probe.in_flight == 0:
            await asyncio.sleep(0.01)
        await s.stop()
        assert s.scheduled == frozenset()
        count = len(probe.starts["192.0.2.1"])
        await asyncio.sleep(0.3)
        assert len(probe.starts["192.0.2.1"]) == count

    asyncio.run(body())
    assert probe.cancelled == 1
    assert probe.in_flight == 0


def test_a_failing_result_callback_does_not_stop_probing() -> None:
    probe = RecordingProbe()

    def explode(ep: Endpoint, result: ProbeResult) -> None:
        raise RuntimeError("boom")

    async def body() -> None:
        s = HealthScheduler(SystemClock(), random.Random(3), explode, probes={CheckType.EXEC: probe})
        await s.start([endpoint("192.0.2.1", interval=0.1, timeout=0.05)])
        await asyncio.sleep(0.5)
        await s.stop()

    asyncio.run(body())
    assert len(probe.starts["192.0.2.1"]) >= 3


def test_every_probe_is_counted_by_type_and_result_and_timed() -> None:
    def sample(name: str, labels: dict[str, str]) -> float:
        return metrics.REGISTRY.get_sample_value(name, labels) or 0.0

    ok_before = sample("gslbd_health_probes_total", {"type": "exec", "result": "success"})
    fail_before = sample("gslbd_health_probes_total", {"type": "exec", "result": "failure"})
    timed_before = sample("gslbd_health_probe_duration_seconds_count", {"type": "exec"})
    good, bad = RecordingProbe(), RecordingProbe(ok=False)
    results: list[tuple[Endpoint, ProbeResult]] = []

    async def body() -> None:
        a = scheduler(good, results)
        b = scheduler(bad, results)
        await a.start([endpoint("192.0.2.1", interval=0.1, timeout=0.05)])
        await b.start([endpoint("192.0.2.2", interval=0.1, timeout=0.05)])
        await asyncio.sleep(0.45)
        await a.stop()
        await b.stop()

    asyncio.run(body())
    oks = sum(1 for _, r in results if r.ok)
    fails = len(results) - oks
    assert oks >= 2 and fails >= 2
    assert sample("gslbd_health_probes_total", {"type": "exec", "result": "success"}) - ok_before == oks
    assert sample("gslbd_health_probes_total", {"type": "exec", "result": "failure"}) - fail_before == fails
    assert sample("gslbd_health_probe_duration_seconds_count", {"type": "exec"}) - timed_before == len(
        results
    )


def test_max_in_flight_bounds_probes_over_all_endpoints_without_eating_their_timeout() -> None:
    probe = RecordingProbe(delay=0.05)
    results: list[tuple[Endpoint, ProbeResult]] = []

    async def body() -> None:
        s = HealthScheduler(
            SystemClock(),
            random.Random(4),
            lambda ep, r: results.append((ep, r)),
            probes={CheckType.EXEC: probe},
            max_in_flight=2,
        )
        await s.start([endpoint(f"192.0.2.{i}", interval=0.2, timeout=0.08) for i in range(1, 9)])
        await asyncio.sleep(0.8)
        await s.stop()

    asyncio.run(body())
    assert probe.max_in_flight == 2
    assert len(results) >= 8
    assert all(r.ok for _, r in results)  # waiting for a slot never counted as timeout
