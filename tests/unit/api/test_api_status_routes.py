"""Reading the API: services as JSON, one service by any spelling of its name, JSON 404s."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
from api_support import API, APP, T0, FakeControl, port_is_closed, serving


async def get(url: str) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.json()


def test_services_lists_every_service_with_health_admin_and_history_of_each_endpoint() -> None:
    async def body() -> None:
        async with serving(FakeControl()) as server:
            status, doc = await get(f"{server.url}/api/v1/services")
        assert status == 200
        assert [s["name"] for s in doc["services"]] == [APP, API]
        app = doc["services"][0]
        assert app["policy"] == "failover"
        assert app["endpoints_up"] == 2
        first, second, third = app["endpoints"]
        assert first == {
            "address": "192.0.2.1",
            "site": "eu",
            "region": "eu-west",
            "zone": "eu-west-1a",
            "check": "http",
            "health": "up",
            "admin": "obey",
            "effective_up": True,
            "last_check": {
                "time": T0 + 20,
                "at": "2023-11-14T22:13:40.000Z",
                "ok": True,
                "detail": "HTTP 200",
            },
            "last_change": {"time": T0, "at": "2023-11-14T22:13:20.000Z", "reason": "first check: HTTP 200"},
            "weight": 1,
            "source": "config",
            "patched": [],
        }
        assert app["removed"] == []
        assert (second["health"], second["effective_up"]) == ("down", False)
        assert second["last_change"]["reason"] == "3 consecutive failures: timeout after 2s"
        assert second["last_check"]["ok"] is False
        # Not probed: health unknown, counts as up, no history.
        assert (third["check"], third["health"], third["effective_up"]) == (None, "unknown", True)
        assert (third["last_check"], third["last_change"]) == (None, None)
        # Forced down in the config: the admin state shows it.
        api_endpoint = doc["services"][1]["endpoints"][0]
        assert (api_endpoint["admin"], api_endpoint["effective_up"]) == ("down", False)

    asyncio.run(body())


def test_one_service_is_found_by_absolute_name_name_without_dot_and_unique_first_label() -> None:
    async def body() -> None:
        async with serving(FakeControl()) as server:
            for spelling in (APP, APP.rstrip("."), "APP.gslb.example.com", "app"):
                status, doc = await get(f"{server.url}/api/v1/services/{spelling}")
                assert (status, doc["name"]) == (200, APP), spelling

    asyncio.run(body())


def test_unknown_service_is_a_json_404_naming_it() -> None:
    async def body() -> None:
        async with serving(FakeControl()) as server:
            status, doc = await get(f"{server.url}/api/v1/services/nope.gslb.example.com")
            assert (status, doc) == (404, {"error": "no service nope.gslb.example.com."})
            status, doc = await get(f"{server.url}/api/v1/services/nope.")
            assert (status, doc) == (404, {"error": "no service nope."})

    asyncio.run(body())


def test_unknown_api_route_and_wrong_method_answer_json_errors() -> None:
    async def body() -> None:
        async with serving(FakeControl()) as server, aiohttp.ClientSession() as session:
            async with session.get(f"{server.url}/api/v1/nothing") as response:
                assert (response.status, await response.json()) == (404, {"error": "Not Found"})
            async with session.delete(f"{server.url}/api/v1/services") as response:
                assert response.status == 405
                assert await response.json() == {"error": "Method Not Allowed"}
                assert response.headers["Allow"] == "GET,HEAD"

    asyncio.run(body())


def test_healthz_is_200_and_readyz_follows_control_ready() -> None:
    async def body() -> None:
        control = FakeControl()
        async with serving(control) as server, aiohttp.ClientSession() as session:
            async with session.get(f"{server.url}/healthz") as response:
                assert (response.status, await response.text()) == (200, "ok\n")
            async with session.get(f"{server.url}/readyz") as response:
                assert (response.status, await response.text()) == (200, "ready\n")
            control.ready = False  # start-up or lame duck
            async with session.get(f"{server.url}/readyz") as response:
                assert (response.status, await response.text()) == (503, "not ready\n")
            async with session.get(f"{server.url}/healthz") as response:
                assert response.status == 200

    asyncio.run(body())


def test_plain_status_page_at_status_shows_every_service_and_endpoint_state_escaped() -> None:
    async def body() -> None:
        control = FakeControl()
        old = control.statuses[(APP, "2001:db8::1")]
        control.statuses[(APP, "2001:db8::1")] = type(old)(
            healthy=False, last_change=T0, last_change_reason="body <b>bad</b> & worse"
        )
        async with (
            serving(control) as server,
            aiohttp.ClientSession() as session,
            session.get(f"{server.url}/status") as response,
        ):
            assert response.status == 200
            assert response.content_type == "text/html"
            page = await response.text()
        assert "<title>gslbd status</title>" in page
        assert f"<h2>{APP} " in page and f"<h2>{API} " in page
        assert "2 of 3 up" in page
        assert '<td class="down">down</td>' in page
        assert "body &lt;b&gt;bad&lt;/b&gt; &amp; worse" in page
        assert "<b>bad</b>" not in page
        assert "<script" not in page

    asyncio.run(body())


def test_server_binds_a_free_port_and_releases_it_on_stop() -> None:
    async def body() -> None:
        async with serving(FakeControl()) as server:
            port = server.port
            assert port > 0
            assert server.url == f"http://127.0.0.1:{port}"
            status, _ = await get(f"{server.url}/api/v1/services")
            assert status == 200
        assert port_is_closed(port)

    asyncio.run(body())
