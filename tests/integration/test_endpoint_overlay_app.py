"""The endpoint overlay on a running App (POST/PATCH/DELETE /api/v1/services/{name}/endpoints): a change
is answered by DNS at once in one generation, probes start and stop with the endpoints, the overlay is
kept in the state file across a restart and a reload, invalid endpoints get 4xx with nothing changed,
and a change that breaks a safety rule gets 409 unless forced."""

from __future__ import annotations

import asyncio
import json
import logging
import random
import socket
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
from cluster_support import captured
from health_app_support import ThreadedBackend, addresses, dns_port, wait_for

from gslbd.app import App
from gslbd.clock import SystemClock
from gslbd.config import load_config

TOKEN = "overlay-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
ZONE = "gslb.example.com."
APP = f"app.{ZONE}"
WEB = f"web.{ZONE}"
CONFIG = f"""
version: 1
site: {{name: eu}}
dns: {{listen: ["127.0.0.1:0"], lame_duck: 0s}}
api: {{listen: "127.0.0.1:0", token: {TOKEN}}}
state: {{file: state.json}}
zones:
  - origin: {ZONE}
    nameservers: [{{name: ns1.{ZONE}, address: 127.0.0.1}}]
services:
  - name: {APP}
    check: none
    endpoints:
      - {{address: 192.0.2.10, site: eu}}
      - {{address: 198.51.100.10, site: us}}
  - name: {WEB}
    policy: weighted
    check: none
    endpoints:
      - {{address: 192.0.2.20, site: eu}}
      - {{address: 198.51.100.20, site: us}}
{{extra}}
"""

Body = Callable[[App, aiohttp.ClientSession], Awaitable[None]]


def write(tmp_path: Path, extra: str = "", text: str = CONFIG) -> Path:
    path = tmp_path / "gslbd.yaml"
    path.write_text(text.replace("{extra}", extra))
    return path


def run(path: Path, body: Body) -> None:
    async def main() -> None:
        app = App(load_config(str(path)), SystemClock(), random.Random(7))
        await app.start()
        try:
            async with aiohttp.ClientSession() as http:
                await body(app, http)
        finally:
            await app.stop()

    asyncio.run(main())


async def call(
    http: aiohttp.ClientSession, method: str, url: str, doc: object = None, auth: bool = True
) -> tuple[int, Any]:
    async with http.request(method, url, json=doc, headers=AUTH if auth else None) as r:
        return r.status, await r.json()


def endpoints_url(app: App, service: str = APP, address: str = "") -> str:
    assert app.api is not None
    return f"{app.api.url}/api/v1/services/{service}/endpoints" + (f"/{address}" if address else "")


def saved(tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "state.json"
    return json.loads(path.read_text()) if path.exists() else {}


def test_an_added_endpoint_is_answered_at_once_shown_as_overlay_and_saved(tmp_path: Path) -> None:
    async def body(app: App, http: aiohttp.ClientSession) -> None:
        port = dns_port(app.bound)
        assert await addresses(port, APP) == ["192.0.2.10", "198.51.100.10"]
        number = app.generation.number
        status, doc = await call(http, "POST", endpoints_url(app), {"address": "203.0.113.7", "site": "ap"})
        assert status == 201, doc
        assert (doc["service"], doc["address"], doc["op"], doc["warnings"]) == (APP, "203.0.113.7", "add", [])
        assert doc["generation"] == app.generation.number == number + 1
        assert (doc["endpoint"]["source"], doc["endpoint"]["site"]) == ("overlay", "ap")
        assert await addresses(port, APP) == ["192.0.2.10", "198.51.100.10", "203.0.113.7"]
        assert app.config.site_info("ap") is not None
        assert saved(tmp_path)["endpoints"] == {
            f"{APP}|203.0.113.7": {"op": "add", "endpoint": {"address": "203.0.113.7", "site": "ap"}}
        }
        assert app.api is not None
        status, shown = await call(http, "GET", f"{app.api.url}/api/v1/services/{APP}")
        assert [(e["address"], e["source"]) for e in shown["endpoints"]] == [
            ("192.0.2.10", "config"),
            ("198.51.100.10", "config"),
            ("203.0.113.7", "overlay"),
        ]
        _, log = await call(http, "GET", f"{app.api.url}/api/v1/changes")
        change = log["changes"][0]
        assert (change["kind"], change["state"], change["address"]) == ("endpoint", "added", "203.0.113.7")

    run(write(tmp_path), body)


def test_removing_endpoints_takes_them_out_of_dns_and_shows_the_removed_config_one(tmp_path: Path) -> None:
    async def body(app: App, http: aiohttp.ClientSession) -> None:
        port = dns_port(app.bound)
        status, doc = await call(http, "DELETE", endpoints_url(app, APP, "198.51.100.10"))
        assert (status, doc["op"]) == (200, "remove"), doc
        assert await addresses(port, APP) == ["192.0.2.10"]
        assert app.api is not None
        _, shown = await call(http, "GET", f"{app.api.url}/api/v1/services/app")
        assert [e["address"] for e in shown["endpoints"]] == ["192.0.2.10"]
        assert shown["removed"] == [
            {"address": "198.51.100.10", "site": "us", "weight": 1, "source": "config", "removed": True}
        ]
        assert saved(tmp_path)["endpoints"] == {f"{APP}|198.51.100.10": {"op": "remove"}}
        # an added endpoint removed again is forgotten; one neither has is a 404
        await call(http, "POST", endpoints_url(app), {"address": "2001:db8::7"})
        status, doc = await call(http, "DELETE", endpoints_url(app, APP, "2001:DB8:0::7"))
        assert (status, doc["address"]) == (200, "2001:db8::7")
        status, doc = await call(http, "DELETE", endpoints_url(app, APP, "203.0.113.99"))
        assert (status, doc) == (404, {"error": f"service {APP} has no endpoint 203.0.113.99"})
        # adding the removed config endpoint's address again restores it
        status, doc = await call(http, "POST", endpoints_url(app), {"address": "198.51.100.10"})
        assert status == 201, doc
        assert await addresses(port, APP) == ["192.0.2.10", "198.51.100.10"]
        assert "endpoints" not in saved(tmp_path)

    run(write(tmp_path), body)


async def drawn(port: int, name: str, queries: int) -> dict[str, int]:
    counts: dict[str, int] = {}
    for _ in range(queries):
        for address in await addresses(port, name):
            counts[address] = counts.get(address, 0) + 1
    return counts


def test_a_patched_weight_shifts_the_weighted_answers(tmp_path: Path) -> None:
    async def body(app: App, http: aiohttp.ClientSession) -> None:
        port = dns_port(app.bound)
        assert app.api is not None
        explain = f"{app.api.url}/api/v1/services/web/answer?client=192.0.2.1"
        _, answer = await call(http, "GET", explain)
        assert "192.0.2.20 1 (50.0%), 198.51.100.20 1 (50.0%)" in answer["explanation"]
        status, doc = await call(http, "PATCH", endpoints_url(app, WEB, "192.0.2.20"), {"weight": 9})
        assert status == 200, doc
        assert (doc["endpoint"]["weight"], doc["endpoint"]["patched"]) == (9, ["weight"])
        _, answer = await call(http, "GET", explain)
        assert "192.0.2.20 9 (90.0%), 198.51.100.20 1 (10.0%)" in answer["explanation"]
        # weight 0 never answers while another endpoint has a weight
        await call(http, "PATCH", endpoints_url(app, WEB, "198.51.100.20"), {"weight": 0})
        assert await drawn(port, WEB, 30) == {"192.0.2.20": 30}
        assert saved(tmp_path)["endpoints"][f"{WEB}|198.51.100.20"] == {"op": "patch", "set": {"weight": 0}}
        # null takes the key back to the config's
        await call(http, "PATCH", endpoints_url(app, WEB, "198.51.100.20"), {"weight": None})
        counts = await drawn(port, WEB, 60)
        assert counts.get("198.51.100.20", 0) > 0, counts

    run(write(tmp_path), body)


def test_an_invalid_endpoint_gets_422_naming_the_field_and_changes_nothing(tmp_path: Path) -> None:
    async def body(app: App, http: aiohttp.ClientSession) -> None:
        port = dns_port(app.bound)
        assert await addresses(port, APP) == ["192.0.2.10", "198.51.100.10"]  # the start's generations are in
        number = app.generation.number
        status, doc = await call(http, "POST", endpoints_url(app), {"address": "203.0.113.7", "weight": 5000})
        assert status == 422
        assert doc == {
            "error": "not changed: invalid endpoint: weight: must be between 0 and 1000, got 5000",
            "errors": [{"field": "weight", "message": "must be between 0 and 1000, got 5000"}],
        }
        status, doc = await call(
            http, "POST", endpoints_url(app), {"address": "203.0.113.7", "check": "nope"}
        )
        assert status == 422
        assert doc["errors"][0]["field"] == "check"
        assert doc["errors"][0]["message"].startswith("unknown check profile 'nope'")
        status, doc = await call(
            http, "PATCH", endpoints_url(app, APP, "192.0.2.10"), {"address": "192.0.2.11"}
        )
        assert status == 422
        status, doc = await call(http, "POST", endpoints_url(app), ["192.0.2.1"])
        assert status == 400
        assert doc["error"].startswith("the body must be an endpoint as in the config")
        status, doc = await call(http, "POST", endpoints_url(app), {"address": "192.0.2.10"})
        assert (status, doc["error"]) == (
            409,
            f"service {APP} has endpoint 192.0.2.10 already (in the config)",
        )
        status, doc = await call(http, "POST", endpoints_url(app, "nope"), {"address": "192.0.2.1"})
        assert (status, doc) == (404, {"error": "no service nope."})
        status, doc = await call(http, "PATCH", endpoints_url(app, APP, "203.0.113.99"), {"weight": 2})
        assert status == 404
        status, _ = await call(http, "POST", endpoints_url(app), {"address": "203.0.113.7"}, auth=False)
        assert status == 401
        assert app.generation.number == number
        assert await addresses(port, APP) == ["192.0.2.10", "198.51.100.10"]
        assert "endpoints" not in saved(tmp_path)

    run(write(tmp_path), body)


def test_a_removal_that_breaks_a_safety_rule_gets_409_unless_forced(tmp_path: Path) -> None:
    async def body(app: App, http: aiohttp.ClientSession) -> None:
        port = dns_port(app.bound)
        url = endpoints_url(app, APP, "198.51.100.10")
        status, doc = await call(http, "DELETE", url)
        assert status == 409, doc
        assert doc["rules"][0]["rule"] == "safety[0]"
        assert 'safety[0] (min_sites_up: 2, services: "app.*") would be broken' in doc["error"]
        assert await addresses(port, APP) == ["192.0.2.10", "198.51.100.10"]
        status, doc = await call(http, "DELETE", f"{url}?force=1")
        assert status == 200, doc
        assert await addresses(port, APP) == ["192.0.2.10"]

    run(write(tmp_path, 'safety:\n  - {min_sites_up: 2, services: "app.*"}\n'), body)


def test_the_overlay_is_kept_across_a_restart(tmp_path: Path) -> None:
    path = write(tmp_path)

    async def change(app: App, http: aiohttp.ClientSession) -> None:
        await call(http, "POST", endpoints_url(app), {"address": "203.0.113.7", "site": "us"})
        await call(http, "DELETE", endpoints_url(app, APP, "192.0.2.10"))
        await call(http, "PATCH", endpoints_url(app, WEB, "192.0.2.20"), {"weight": 0})

    async def check(app: App, http: aiohttp.ClientSession) -> None:
        port = dns_port(app.bound)
        assert await addresses(port, APP) == ["198.51.100.10", "203.0.113.7"]
        assert await drawn(port, WEB, 20) == {"198.51.100.20": 20}
        assert app.api is not None
        _, shown = await call(http, "GET", f"{app.api.url}/api/v1/services/{APP}")
        assert [(e["address"], e["source"]) for e in shown["endpoints"]] == [
            ("198.51.100.10", "config"),
            ("203.0.113.7", "overlay"),
        ]
        assert [e["address"] for e in shown["removed"]] == ["192.0.2.10"]

    run(path, change)
    run(path, check)  # a new App from the same config and state file


def test_a_reload_keeps_the_overlay_and_drops_what_the_new_config_makes_impossible(tmp_path: Path) -> None:
    path = write(tmp_path)

    async def body(app: App, http: aiohttp.ClientSession) -> None:
        port = dns_port(app.bound)
        await call(http, "POST", endpoints_url(app), {"address": "203.0.113.7"})
        await call(http, "POST", endpoints_url(app, WEB), {"address": "203.0.113.8"})
        await call(http, "POST", endpoints_url(app), {"address": "203.0.113.9"})
        # the new file: web is gone, app lists 203.0.113.9 itself and has one more endpoint
        changed = CONFIG.replace(
            "      - {address: 198.51.100.10, site: us}\n",
            "      - {address: 198.51.100.10, site: us}\n"
            "      - {address: 198.51.100.11, site: us}\n"
            "      - {address: 203.0.113.9, site: eu}\n",
        )
        changed = changed[: changed.index(f"  - name: {WEB}")] + "{extra}\n"
        write(tmp_path, text=changed)
        with captured("gslbd.app.endpoints") as records:
            assert app.api is not None
            status, doc = await call(http, "POST", f"{app.api.url}/api/v1/reload")
        assert (status, doc) == (200, {"applied": True, "errors": []})
        assert await addresses(port, APP) == [
            "192.0.2.10",
            "198.51.100.10",
            "198.51.100.11",
            "203.0.113.7",
            "203.0.113.9",
        ]
        assert sorted(records.messages(logging.WARNING)) == [
            f"endpoint overlay: add of {APP} 203.0.113.9 dropped: the config has this endpoint now",
            f"endpoint overlay: add of {WEB} 203.0.113.8 dropped: the config has no service {WEB}",
        ]
        assert saved(tmp_path)["endpoints"] == {
            f"{APP}|203.0.113.7": {"op": "add", "endpoint": {"address": "203.0.113.7"}}
        }

    run(path, body)


def test_probes_start_for_an_added_endpoint_and_stop_when_it_is_removed(tmp_path: Path) -> None:
    backend = ThreadedBackend()
    backend.healthy = False
    try:

        async def body(app: App, http: aiohttp.ClientSession) -> None:
            port = dns_port(app.bound)
            check = {"type": "http", "port": backend.port, "interval": "200ms", "timeout": "100ms", "fall": 1}
            endpoint = {"address": "203.0.113.7", "check": check, "probe_address": "127.0.0.1"}
            status, doc = await call(http, "POST", endpoints_url(app), endpoint)
            assert status == 201, doc
            key = (APP, "203.0.113.7")
            assert key in app.generation.resolved.probed
            await wait_for(lambda: app.book.status(key).healthy is False)
            assert await addresses(port, APP) == ["192.0.2.10", "198.51.100.10"]
            backend.healthy = True
            await wait_for(lambda: app.book.status(key).healthy is True, 5.0)
            await wait_for(lambda: "203.0.113.7" in app.generation.count(APP).up_addresses)  # type: ignore[union-attr]
            assert "203.0.113.7" in await addresses(port, APP)
            await call(http, "DELETE", endpoints_url(app, APP, "203.0.113.7"))
            assert key not in app.generation.resolved.probed
            assert await addresses(port, APP) == ["192.0.2.10", "198.51.100.10"]

        run(write(tmp_path), body)
    finally:
        backend.close()


def test_with_an_overlay_a_restart_still_starts_from_the_kept_verdicts(tmp_path: Path) -> None:
    """The overlay's config is applied at start before the first probe: an endpoint whose check starts
    down (`initial: down`) still starts from the verdict the last run kept, not from `initial`."""
    silent = socket.socket()  # accepts connections (the kernel does) and never answers: probes time out
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        port = silent.getsockname()[1]
        check = f"{{type: http, port: {port}, interval: 1s, timeout: 900ms, initial: down}}"
        first = "    check: none\n    endpoints:\n      - {address: 192.0.2.10, site: eu}"
        checked = (
            f"    check: {check}\n    endpoints:\n"
            "      - {address: 192.0.2.10, site: eu, probe_address: 127.0.0.1}"
        )
        us = "      - {address: 198.51.100.10, site: us}"
        text = CONFIG.replace(first, checked, 1).replace(us, us[:-1] + ", check: none}", 1)
        (tmp_path / "state.json").write_text(
            json.dumps(
                {
                    "admin": {},
                    "verdicts": {f"{APP}|192.0.2.10": {"up": True, "checked": time.time()}},
                    "endpoints": {f"{APP}|192.0.2.10": {"op": "patch", "set": {"weight": 2}}},
                }
            )
        )

        async def body(app: App, http: aiohttp.ClientSession) -> None:
            status = app.book.status((APP, "192.0.2.10"))
            assert status.healthy is True, status
            assert status.last_change_reason.startswith("kept from before the restart: up")
            assert app.endpoints.patched((APP, "192.0.2.10")) == ("weight",)

        run(write(tmp_path, text=text), body)
    finally:
        silent.close()
