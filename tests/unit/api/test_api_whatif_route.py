"""POST /api/v1/whatif: the body is checked before the control is asked; refusals keep their status."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
from api_support import TOKEN, FakeControl, serving

USAGE = 'the body must be JSON like {"admin": ["site=eu down"], "seed": 0}'


def post(control: FakeControl, body: Any, token: str | None = TOKEN) -> tuple[int, Any]:
    async def run() -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with (
            serving(control) as server,
            aiohttp.ClientSession() as http,
            http.post(f"{server.url}/api/v1/whatif", json=body, headers=headers) as response,
        ):
            return response.status, await response.json()

    return asyncio.run(run())


def test_changes_and_seed_reach_the_control_and_its_figures_come_back() -> None:
    control = FakeControl()
    assert post(control, {"admin": ["site=eu down", "address=192.0.2.1 up"], "seed": 3}) == (
        200,
        {"replayed": 0},
    )
    assert post(control, {"admin": ["site=us down"]})[0] == 200
    assert control.whatifs == [(["site=eu down", "address=192.0.2.1 up"], 3), (["site=us down"], 0)]


def test_bad_bodies_are_refused_without_asking_the_control() -> None:
    control = FakeControl()
    for body in (
        {},
        {"admin": []},
        {"admin": "site=eu down"},
        {"admin": [1]},
        [],
        {"admin": ["x"], "seed": "1"},
    ):
        assert post(control, body) == (400, {"error": USAGE}), body
    assert post(control, {"admin": ["site=eu down"], "seed": True}) == (400, {"error": USAGE})
    assert post(control, {"admin": ["site=eu down"]}, token=None)[0] == 401
    assert control.whatifs == []


def test_a_refusal_keeps_its_status_and_text() -> None:
    assert post(FakeControl(), {"admin": ["refuse"]}) == (409, {"error": "nothing to replay"})
