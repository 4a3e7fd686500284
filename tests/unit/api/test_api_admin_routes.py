"""Changing state through the API: admin state per endpoint and reload, behind a bearer token."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
from api_support import APP, TOKEN, FakeControl, serving

from gslbd.api.server import NO_TOKEN_MESSAGE
from gslbd.types import AdminState

VALID = "valid states: obey | up | down"


async def call(
    method: str, url: str, *, token: str | None = TOKEN, json: Any = None, data: str | None = None
) -> tuple[int, Any, dict[str, str]]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, url, headers=headers, json=json, data=data) as response,
    ):
        return response.status, await response.json(), dict(response.headers)


def admin_url(base: str, name: str, address: str) -> str:
    return f"{base}/api/v1/services/{name}/endpoints/{address}/admin"


def test_admin_down_is_applied_and_shown_by_the_next_read() -> None:
    async def body() -> None:
        control = FakeControl()
        async with serving(control) as server:
            url = admin_url(server.url, "app.gslb.example.com", "192.0.2.1")
            status, doc, _ = await call("PUT", url, json={"state": "down"})
            assert status == 200
            assert (doc["service"], doc["address"], doc["state"]) == (APP, "192.0.2.1", "down")
            assert (doc["endpoint"]["admin"], doc["endpoint"]["effective_up"]) == ("down", False)
            assert control.admin == {(APP, "192.0.2.1"): AdminState.DOWN}
            _, app, _ = await call("GET", f"{server.url}/api/v1/services/{APP}")
            assert app["endpoints_up"] == 1
            # obey hands the endpoint back to its checks.
            status, doc, _ = await call("PUT", url, json={"state": "OBEY"})
            assert (status, doc["state"], doc["endpoint"]["effective_up"]) == (200, "obey", True)

    asyncio.run(body())


def test_admin_addresses_are_matched_in_normal_form() -> None:
    async def body() -> None:
        control = FakeControl()
        async with serving(control) as server:
            status, doc, _ = await call(
                "PUT", admin_url(server.url, "app", "2001:DB8:0::1"), json={"state": "up"}
            )
            assert (status, doc["address"], doc["endpoint"]["effective_up"]) == (200, "2001:db8::1", True)
            status, doc, _ = await call(
                "PUT", admin_url(server.url, "app", "backup.example.net"), json={"state": "down"}
            )
            assert (status, doc["address"]) == (200, "backup.example.net.")
        assert control.admin == {
            (APP, "2001:db8::1"): AdminState.UP,
            (APP, "backup.example.net."): AdminState.DOWN,
        }

    asyncio.run(body())


def test_state_changes_without_or_with_a_wrong_token_are_401() -> None:
    async def body() -> None:
        control = FakeControl()
        async with serving(control) as server:
            url = admin_url(server.url, APP, "192.0.2.1")
            status, doc, headers = await call("PUT", url, token=None, json={"state": "down"})
            assert (status, doc) == (
                401,
                {"error": "missing bearer token: send 'Authorization: Bearer <token>'"},
            )
            assert headers["WWW-Authenticate"] == 'Bearer realm="gslbd"'
            status, doc, _ = await call("PUT", url, token="guess", json={"state": "down"})
            assert (status, doc) == (401, {"error": "wrong bearer token"})
            status, doc, _ = await call("POST", f"{server.url}/api/v1/reload", token=None)
            assert status == 401
            # The token is checked before anything else: unknown names do not leak through a 404.
            status, _, _ = await call("PUT", admin_url(server.url, "nope", "1.2.3.4"), token=None, json={})
            assert status == 401
        assert (control.admin, control.reloads) == ({}, 0)

    asyncio.run(body())


def test_state_changes_are_refused_with_403_when_no_token_is_configured() -> None:
    async def body() -> None:
        control = FakeControl()
        async with serving(control, token=None) as server:
            status, doc, _ = await call(
                "PUT", admin_url(server.url, APP, "192.0.2.1"), json={"state": "down"}
            )
            assert (status, doc) == (403, {"error": NO_TOKEN_MESSAGE})
            assert "set api.token or api.token_file" in doc["error"]
            status, doc, _ = await call("POST", f"{server.url}/api/v1/reload", token="anything")
            assert (status, doc) == (403, {"error": NO_TOKEN_MESSAGE})
            # Reading needs no token.
            status, _, _ = await call("GET", f"{server.url}/api/v1/services", token=None)
            assert status == 200
        assert (control.admin, control.reloads) == ({}, 0)

    asyncio.run(body())


def test_bad_admin_bodies_are_400_listing_the_valid_states() -> None:
    async def body() -> None:
        control = FakeControl()
        async with serving(control) as server:
            url = admin_url(server.url, APP, "192.0.2.1")
            shape = f'the body must be JSON like {{"state": "down"}}; {VALID}'
            for kwargs in ({"data": "down"}, {"data": ""}, {"json": ["down"]}, {"json": {"State": "down"}}):
                status, doc, _ = await call("PUT", url, **kwargs)
                assert (status, doc) == (400, {"error": shape}), kwargs
            status, doc, _ = await call("PUT", url, json={"state": "off"})
            assert (status, doc) == (400, {"error": f"unknown state 'off'; {VALID}"})
        assert control.admin == {}

    asyncio.run(body())


def test_admin_for_an_unknown_service_or_endpoint_is_404() -> None:
    async def body() -> None:
        async with serving(FakeControl()) as server:
            status, doc, _ = await call(
                "PUT", admin_url(server.url, "nope", "192.0.2.1"), json={"state": "up"}
            )
            assert (status, doc) == (404, {"error": "no service nope."})
            status, doc, _ = await call("PUT", admin_url(server.url, APP, "192.0.2.99"), json={"state": "up"})
            assert (status, doc) == (404, {"error": f"service {APP} has no endpoint 192.0.2.99"})

    asyncio.run(body())


def test_reload_answers_applied_or_422_with_every_error() -> None:
    async def body() -> None:
        control = FakeControl()
        async with serving(control) as server:
            url = f"{server.url}/api/v1/reload"
            status, doc, _ = await call("POST", url)
            assert (status, doc) == (200, {"applied": True, "errors": []})
            control.reload_errors = [
                "gslbd.yaml:12: services.app.policy: unknown policy 'nearest'",
                "gslbd.yaml:20: checks.web.timeout: must be less than interval",
            ]
            status, doc, _ = await call("POST", url)
            assert (status, doc) == (422, {"applied": False, "errors": control.reload_errors})
        assert control.reloads == 2

    asyncio.run(body())
