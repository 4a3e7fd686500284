"""The health scheduler's probe gate (cluster mode's hook) on a real event loop: the gate places the
cycles, decides who probes, and gets every result made here before `on_result` does. The gate and the
probe are recording stand-ins, so the scheduler's own handling of the gate is what is measured."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field

from gslbd.clock import SystemClock
from gslbd.health.scheduler import SHARE_FIRST, HealthScheduler
from gslbd.model.check import Check
from gslbd.model.service import Endpoint
from gslbd.state.status import ProbeResult
from gslbd.types import CheckType, EndpointKind


def endpoint(address: str, interval: float = 0.1) -> Endpoint:
    return Endpoint(
        service="app.gslb.example.com.",
        address=address,
        kind=EndpointKind.IPV4,
        site="eu",
        check=Check(name="web", type=CheckType.EXEC, interval=interval, timeout=0.05),
    )


@dataclass
class Probe:
    runs: list[str] = field(default_factory=list)

    async def run(self, ep: Endpoint, check: Check) -> ProbeResult:
        self.runs.append(ep.address)
        return ProbeResult(ok=False, detail="stub")


@dataclass
class Gate:
    """Probes every other cycle, with cycles `every` seconds apart; records the order of events."""

    every: float = 0.05
    events: list[str] = field(default_factory=list)
    cycles: int = 0
    publish_delay: float = 0.0
    fail: bool = False

    def delay(self, endpoint: Endpoint, first: bool) -> float | None:
        return 0.0 if first else self.every

    async def acquire(self, endpoint: Endpoint) -> bool:
        self.cycles += 1
        if self.fail:
            raise RuntimeError("gate broken")
        self.events.append(f"acquire {self.cycles}")
        return self.cycles % 2 == 1

    async def publish(self, endpoint: Endpoint, result: ProbeResult) -> None:
        self.events.append("publish sent")
        await asyncio.sleep(self.publish_delay)
        self.events.append("publish done")


def run(gate: Gate, seconds: float) -> tuple[Probe, list[str]]:
    probe = Probe()

    async def body() -> None:
        scheduler = HealthScheduler(
            SystemClock(),
            random.Random(1),
            lambda ep, result: gate.events.append(f"on_result {result.detail}"),
            probes={CheckType.EXEC: probe},
            gate=gate,
        )
        await scheduler.start([endpoint("192.0.2.1")])
        await asyncio.sleep(seconds)
        await scheduler.stop()

    asyncio.run(body())
    return probe, gate.events


def test_the_gate_decides_which_cycles_probe_here_and_paces_them() -> None:
    gate = Gate(every=0.05)
    probe, events = run(gate, 0.5)
    assert gate.cycles >= 6  # 0.05 s apart, not the check's 0.1 s interval
    assert len(probe.runs) == (gate.cycles + 1) // 2  # only the cycles the gate gave to this instance
    assert events[:5] == ["acquire 1", "publish sent", "publish done", "on_result stub", "acquire 2"]
    assert events.count("on_result stub") == len(probe.runs)


def test_a_result_goes_to_the_gate_first_but_waits_for_it_only_briefly() -> None:
    gate = Gate(every=0.3, publish_delay=0.5)  # a Redis that takes half a second
    _, events = run(gate, 0.2)
    assert events[:3] == ["acquire 1", "publish sent", "on_result stub"]  # applied after SHARE_FIRST
    assert SHARE_FIRST <= 0.05


def test_a_gate_that_raises_lets_this_instance_probe() -> None:
    gate = Gate(every=0.05, fail=True)
    probe, events = run(gate, 0.3)
    assert len(probe.runs) == gate.cycles >= 4
    assert events.count("on_result stub") == len(probe.runs)
