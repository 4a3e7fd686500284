"""The scheduler driving real http probes against a loopback server whose health is switched, with
results fed through the verdict machine as the app does."""

from __future__ import annotations

import asyncio
import random

from aiohttp import web
from probe_support import endpoint

from gslbd.clock import SystemClock
from gslbd.health.fsm import step
from gslbd.health.scheduler import HealthScheduler
from gslbd.model.service import Endpoint
from gslbd.state.status import EndpointStatus, ProbeResult
from gslbd.types import CheckType


def test_verdicts_follow_a_backend_that_fails_and_recovers() -> None:
    healthy = {"now": True}
    statuses: dict[str, EndpointStatus] = {}
    timeline: list[tuple[float, bool | None, str]] = []

    async def health(request: web.Request) -> web.Response:
        return web.Response(status=200 if healthy["now"] else 503, text="ok")

    async def body() -> None:
        loop = asyncio.get_running_loop()
        clock = SystemClock()

        def on_result(ep: Endpoint, result: ProbeResult) -> None:
            assert ep.check is not None
            before = statuses.get(ep.address, EndpointStatus())
            after = step(before, result, clock.wall(), ep.check.rise, ep.check.fall)
            statuses[ep.address] = after
            if after.healthy != before.healthy:
                timeline.append((loop.time(), after.healthy, after.last_change_reason))

        app = web.Application()
        app.add_routes([web.get("/healthz", health)])
        runner = web.AppRunner(app, shutdown_timeout=0.1)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        ep = endpoint(
            "192.0.2.10", probe_address="127.0.0.1", type=CheckType.HTTP, port=port, path="/healthz",
            interval=0.2, timeout=0.1, rise=2, fall=2,
        )  # fmt: skip
        scheduler = HealthScheduler(clock, random.Random(5), on_result)
        await scheduler.start([ep])
        while not timeline:
            await asyncio.sleep(0.01)
        healthy["now"] = False
        failed_at = loop.time()
        while len(timeline) < 2:
            await asyncio.sleep(0.01)
        healthy["now"] = True
        while len(timeline) < 3:
            await asyncio.sleep(0.01)
        await scheduler.stop()
        await runner.cleanup()
        # Down within fall (2) probes of the failure: at most 2 jittered intervals plus slack.
        assert timeline[1][0] - failed_at <= 2 * 0.22 + 0.1

    asyncio.run(body())
    assert [(up, reason) for _, up, reason in timeline] == [
        (True, "first check: HTTP 200"),
        (False, "2 consecutive failures: HTTP 503 (expected 2xx)"),
        (True, "2 consecutive successes: HTTP 200"),
    ]
