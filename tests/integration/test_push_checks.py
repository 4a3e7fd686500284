"""Push checks on a running App: results POSTed to the API steer DNS at once, a silent pusher is down
after fall x ttl, and pushes the endpoint cannot take are refused with JSON errors."""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path
from typing import Any

import aiohttp
from test_api_app import TOKEN, ZONE, ask_a, eventually

from gslbd.app import App
from gslbd.config import load_config

APP = f"batch.{ZONE}"


def config_text(ttl: str) -> str:
    return f"""
version: 1
site: {{name: eu}}
dns: {{listen: ["127.0.0.1:0"]}}
api: {{listen: "127.0.0.1:0", token: {TOKEN}}}
zones:
  - origin: {ZONE}
    nameservers: [{{name: ns1.{ZONE}, address: 192.0.2.53}}]
checks:
  pushed: {{type: push, ttl: {ttl}, rise: 1, fall: 2}}
  web: {{type: tcp, port: 9, interval: 1h, timeout: 1s}}
services:
  - name: {APP}
    check: pushed
    endpoints:
      - {{address: 192.0.2.10}}
      - {{address: 192.0.2.11}}
      - {{address: 192.0.2.12, check: web}}
"""


def test_pushed_results_steer_the_answers_and_a_silent_pusher_goes_down_after_fall_ttls(
    tmp_path: Path,
) -> None:
    async def body() -> None:
        path = tmp_path / "gslbd.yaml"
        path.write_text(config_text("400ms"))
        app = App(load_config(str(path)), rng=random.Random(1))
        started = time.monotonic()  # the ttls count from the start
        await app.start()
        try:
            assert app.api is not None
            base, auth = app.api.url, {"Authorization": f"Bearer {TOKEN}"}
            dns_port = int(app.bound[0].rsplit(":", 1)[1])

            def reason_of(address: str) -> str:
                view = app.control.service(APP)
                assert view is not None
                return next(e for e in view.endpoints if e.address == address).last_change_reason

            async with aiohttp.ClientSession() as http:

                async def push(
                    address: str, doc: Any, headers: dict[str, str] | None = auth
                ) -> tuple[int, Any]:
                    url = f"{base}/api/v1/health/batch/{address}"
                    async with http.post(url, json=doc, headers=headers) as r:
                        return r.status, await r.json()

                status, doc = await push("192.0.2.10", {"ok": False, "detail": "queue full"})
                assert status == 200 and doc["endpoint"]["health"] == "down"  # the first result decides
                assert doc["endpoint"]["last_check"]["detail"] == "push: queue full"
                assert await asyncio.to_thread(ask_a, dns_port, APP) == ["192.0.2.11", "192.0.2.12"]
                status, doc = await push("192.0.2.10", {"ok": True})
                assert status == 200 and doc["endpoint"]["health"] == "up"  # rise 1
                assert "192.0.2.10" in await asyncio.to_thread(ask_a, dns_port, APP)

                # The pusher of .11 never speaks: its first result is the first missed ttl.
                async def eleven_gone() -> bool:
                    await push("192.0.2.10", {"ok": True})
                    return "192.0.2.11" not in await asyncio.to_thread(ask_a, dns_port, APP)

                await eventually(eleven_gone, timeout=5.0)
                assert time.monotonic() - started >= 0.4
                assert reason_of("192.0.2.11") == "first check: no push within 0.4s"

                # .10's pusher stops: fall (2) missed ttls after its last push, it is down.
                await push("192.0.2.10", {"ok": True})
                last = time.monotonic()

                async def ten_gone() -> bool:
                    return "192.0.2.10" not in await asyncio.to_thread(ask_a, dns_port, APP)

                await eventually(ten_gone, timeout=5.0)
                assert time.monotonic() - last >= 0.8
                assert reason_of("192.0.2.10") == "2 consecutive failures: no push within 0.4s"
                assert await asyncio.to_thread(ask_a, dns_port, APP) == ["192.0.2.12"]

                # What a push cannot do, each a JSON error.
                assert (await push("192.0.2.10", {"ok": True}, headers=None))[0] == 401
                assert await push("192.0.2.10", {"ok": "yes"}) == (
                    400,
                    {"error": 'the body must be JSON like {"ok": false, "detail": "disk full"}'},
                )
                assert await push("192.0.2.99", {"ok": True}) == (
                    404,
                    {"error": f"service {APP} has no endpoint 192.0.2.99"},
                )
                assert await push("192.0.2.12", {"ok": True}) == (
                    409,
                    {"error": f"{APP} 192.0.2.12 is checked by type tcp, not by a push check"},
                )
        finally:
            await app.stop()

    asyncio.run(body())
