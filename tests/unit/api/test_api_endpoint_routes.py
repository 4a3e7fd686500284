"""The endpoint overlay's routes before they reach the instance: the token is checked first (403 without
one configured, 401 without or with a wrong one) and a body that is not a JSON object, a `force` that is
not a boolean or a DELETE body other than {"force": ...} is a 400."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest
from api_support import APP, TOKEN, FakeControl, serving

AUTH = {"Authorization": f"Bearer {TOKEN}"}


async def send(
    method: str, path: str, data: str | None, headers: dict[str, str] | None, token: str | None = TOKEN
) -> tuple[int, Any]:
    async with (
        serving(FakeControl(), token) as server,
        aiohttp.ClientSession() as session,
        session.request(method, f"{server.url}{path}", data=data, headers=headers) as response,
    ):
        return response.status, await response.json()


ADD = f"/api/v1/services/{APP}/endpoints"
ONE = f"/api/v1/services/{APP}/endpoints/192.0.2.1"


@pytest.mark.parametrize(("method", "path"), [("POST", ADD), ("PATCH", ONE), ("DELETE", ONE)])
def test_without_a_configured_token_every_endpoint_change_is_403(method: str, path: str) -> None:
    status, doc = asyncio.run(send(method, path, '{"address": "192.0.2.9"}', AUTH, token=None))
    assert status == 403
    assert doc["error"].startswith("state-changing calls are disabled because no API token is configured")


@pytest.mark.parametrize(("method", "path"), [("POST", ADD), ("PATCH", ONE), ("DELETE", ONE)])
def test_without_or_with_a_wrong_token_every_endpoint_change_is_401(method: str, path: str) -> None:
    assert asyncio.run(send(method, path, "{}", None))[0] == 401
    wrong = {"Authorization": "Bearer nope"}
    assert asyncio.run(send(method, path, "{}", wrong)) == (401, {"error": "wrong bearer token"})


@pytest.mark.parametrize(
    ("method", "path", "data", "error"),
    [
        (
            "POST",
            ADD,
            "[1]",
            "the body must be an endpoint as in the config, JSON like "
            '{"address": "192.0.2.10", "site": "eu"}',
        ),
        ("POST", ADD, "not json", "the body must be an endpoint as in the config"),
        (
            "PATCH",
            ONE,
            '"weight"',
            'the body must be JSON like {"weight": 5}: the keys of the endpoint to replace',
        ),
        ("PATCH", ONE, '{"weight": 2, "force": "yes"}', "force must be true or false, got 'yes'"),
        ("DELETE", ONE, '{"weight": 2}', 'the body, when sent, must be JSON like {"force": true}'),
        ("DELETE", ONE + "?force=maybe", None, "force must be 1 or 0, got 'maybe'"),
    ],
)
def test_a_body_that_is_not_a_change_is_400(method: str, path: str, data: str | None, error: str) -> None:
    status, doc = asyncio.run(send(method, path, data, AUTH))
    assert status == 400
    assert doc["error"].startswith(error)


def test_a_change_reaches_the_instance_with_the_service_found_the_address_normalized_and_force() -> None:
    async def body() -> tuple[list[tuple[int, Any]], FakeControl]:
        control = FakeControl()
        answers = []
        async with serving(control) as server, aiohttp.ClientSession() as session:
            for method, path, doc in (
                ("POST", "/api/v1/services/app/endpoints", {"address": "2001:DB8::9", "site": "us"}),
                ("PATCH", "/api/v1/services/app/endpoints/2001:DB8:0::1?force=1", {"weight": 4}),
                ("DELETE", "/api/v1/services/app/endpoints/192.0.2.1", None),
                ("DELETE", "/api/v1/services/app/endpoints/192.0.2.1", {"force": True}),
            ):
                async with session.request(method, f"{server.url}{path}", json=doc, headers=AUTH) as r:
                    answers.append((r.status, await r.json()))
        return answers, control

    answers, control = asyncio.run(body())
    assert [status for status, _ in answers] == [201, 200, 200, 200]
    assert answers[1][1]["endpoint"]["address"] == "2001:db8::1"  # the endpoint as GET shows it after
    assert control.endpoint_changes == [
        ("add", APP, "2001:db8::9", {"address": "2001:DB8::9", "site": "us"}, False),
        ("patch", APP, "2001:db8::1", {"weight": 4}, True),
        ("remove", APP, "192.0.2.1", {}, False),
        ("remove", APP, "192.0.2.1", {}, True),
    ]
