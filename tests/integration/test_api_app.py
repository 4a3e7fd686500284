"""The admin API of a real App: health from real HTTP probes, admin changes that reach DNS, reload,
readiness and the DNS counters in /metrics."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import aiohttp
import dns.message
import dns.query
from aiohttp import web

from gslbd.app import App
from gslbd.config import load_config

TOKEN = "integration-token"
ZONE = "gslb.example.com."
APP = f"app.{ZONE}"


def config_text(backend_port: int, extra_service: str = "") -> str:
    return f"""
version: 1
site: {{name: eu}}
dns: {{listen: ["127.0.0.1:0"]}}
api: {{listen: "127.0.0.1:0", token: {TOKEN}}}
zones:
  - origin: {ZONE}
    nameservers: [{{name: ns1.{ZONE}, address: 192.0.2.53}}]
checks:
  web: {{type: http, port: {backend_port}, path: /healthz, interval: 500ms, timeout: 250ms, rise: 1, fall: 1}}
sites:
  us: {{}}
services:
  - name: app.{ZONE}
    check: web
    endpoints:
      - {{address: 127.0.0.1, site: eu}}
      - {{address: 127.0.0.2, site: us}}
{extra_service}"""


async def start_backend() -> tuple[web.AppRunner, int, dict[str, int]]:
    """An HTTP backend on 127.0.0.1 and 127.0.0.2 (one port): /healthz answers the status set per host."""
    answers = {"127.0.0.1": 200, "127.0.0.2": 200}

    async def healthz(request: web.Request) -> web.Response:
        host = request.transport.get_extra_info("sockname")[0] if request.transport else "?"
        return web.Response(status=answers.get(host, 500), text="ok")

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    first = web.TCPSite(runner, "127.0.0.1", 0)
    await first.start()
    port = int(runner.addresses[0][1])
    await web.TCPSite(runner, "127.0.0.2", port).start()
    return runner, port, answers


def ask_a(port: int, name: str) -> list[str]:
    reply = dns.query.udp(dns.message.make_query(name, "A"), "127.0.0.1", port=port, timeout=3)
    return sorted(rd.to_text() for rrset in reply.answer for rd in rrset)


async def eventually(check: Any, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        if await check():
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


def test_api_of_a_running_app_shows_probes_steers_dns_and_reloads(tmp_path: Path) -> None:
    async def body() -> None:
        runner, backend_port, answers = await start_backend()
        path = tmp_path / "gslbd.yaml"
        path.write_text(config_text(backend_port))
        app = App(load_config(str(path)), rng=random.Random(3))
        await app.start()
        try:
            assert app.api is not None
            base = app.api.url
            dns_port = int(app.bound[0].rsplit(":", 1)[1])
            auth = {"Authorization": f"Bearer {TOKEN}"}
            async with aiohttp.ClientSession() as http:

                async def service() -> dict[str, Any]:
                    async with http.get(f"{base}/api/v1/services/{APP}") as r:
                        assert r.status == 200
                        doc: dict[str, Any] = await r.json()
                        return doc

                async with http.get(f"{base}/readyz") as r:
                    assert r.status == 200

                async def both_probed_up() -> bool:
                    return [e["health"] for e in (await service())["endpoints"]] == ["up", "up"]

                await eventually(both_probed_up)
                first = (await service())["endpoints"][0]
                assert first["last_check"]["ok"] is True
                assert first["last_check"]["detail"].startswith("HTTP 200")
                assert first["last_change"]["reason"].startswith("first check")

                # The us backend fails: the API tells why, and DNS stops answering it.
                answers["127.0.0.2"] = 503

                async def us_down() -> bool:
                    return (await service())["endpoints"][1]["health"] == "down"

                await eventually(us_down)
                us = (await service())["endpoints"][1]
                assert us["effective_up"] is False
                assert "503" in us["last_change"]["reason"]
                assert await asyncio.to_thread(ask_a, dns_port, APP) == ["127.0.0.1"]

                # An admin forces it up anyway, then the eu endpoint down.
                url = f"{base}/api/v1/services/app/endpoints/127.0.0.2/admin"
                async with http.put(url, json={"state": "up"}) as r:
                    assert r.status == 401
                async with http.put(url, json={"state": "up"}, headers=auth) as r:
                    assert r.status == 200
                    assert (await r.json())["endpoint"]["effective_up"] is True
                assert await asyncio.to_thread(ask_a, dns_port, APP) == ["127.0.0.1", "127.0.0.2"]
                url = f"{base}/api/v1/services/app/endpoints/127.0.0.1/admin"
                async with http.put(url, json={"state": "down"}, headers=auth) as r:
                    assert r.status == 200
                assert await asyncio.to_thread(ask_a, dns_port, APP) == ["127.0.0.2"]

                # Reload: a broken file is refused with its errors, a good one is applied.
                path.write_text("version: 1\nservices: 12\n")
                async with http.post(f"{base}/api/v1/reload", headers=auth) as r:
                    assert r.status == 422
                    refused = await r.json()
                    assert refused["applied"] is False
                    assert refused["errors"]
                    assert all(str(path) in line for line in refused["errors"])
                extra = f"  - name: new.{ZONE}\n    check: none\n    endpoints: [{{address: 192.0.2.77}}]\n"
                path.write_text(config_text(backend_port, extra))
                async with http.post(f"{base}/api/v1/reload", headers=auth) as r:
                    assert (r.status, await r.json()) == (200, {"applied": True, "errors": []})
                async with http.get(f"{base}/api/v1/services") as r:
                    names = [s["name"] for s in (await r.json())["services"]]
                assert names == [APP, f"new.{ZONE}"]
                assert await asyncio.to_thread(ask_a, dns_port, f"new.{ZONE}") == ["192.0.2.77"]

                async with http.get(f"{base}/metrics") as r:
                    text = await r.text()
                assert 'gslbd_dns_server_events_total{event="udp_queries"}' in text
                assert 'gslbd_dns_queries_total{rcode="NOERROR",transport="udp"}' in text
                assert 'gslbd_dns_policy_answers_total{policy="round_robin"}' in text
                assert 'gslbd_health_probes_total{result="success",type="http"}' in text
                assert f'gslbd_health_endpoints_up{{service="{APP}"}}' in text

                # Lame duck: not ready, still alive.
                app.lame_duck()
                async with http.get(f"{base}/readyz") as r:
                    assert r.status == 503
                async with http.get(f"{base}/healthz") as r:
                    assert r.status == 200
        finally:
            await app.stop()
            await runner.cleanup()

    asyncio.run(body())
