"""The console's routes: the page and its files, summary counts, paged and filtered rows, the answer a
client gets, the change log and the event stream (bounded, ended by stop)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest
from api_support import API, APP, T0, FakeControl, serving
from health_app_support import wait_for

from gslbd.api.changes import ChangeKind, ChangeLog
from gslbd.api.control import ClusterView, PeerView
from gslbd.api.events import change_event
from gslbd.api.server import ApiServer
from gslbd.model.config import ListenAddress


async def get(url: str) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        kind = response.content_type
        return response.status, await (response.json() if kind == "application/json" else response.text())


def run(body: Any) -> None:
    asyncio.run(body())


def test_root_serves_the_console_page_and_its_script_and_style_from_the_package() -> None:
    async def body() -> None:
        async with serving(FakeControl()) as server, aiohttp.ClientSession() as session:
            async with session.get(f"{server.url}/") as response:
                assert (response.status, response.content_type) == (200, "text/html")
                page = await response.text()
            async with session.get(f"{server.url}/console/console.js") as response:
                assert (response.status, response.content_type) == (200, "text/javascript")
                script = await response.text()
            async with session.get(f"{server.url}/console/console.css") as response:
                assert (response.status, response.content_type) == (200, "text/css")
            async with session.get(f"{server.url}/console/../server.py") as response:
                assert response.status == 404
            async with session.get(f"{server.url}/console/nope.js") as response:
                assert response.status == 404
        assert '<script src="/console/console.js" defer></script>' in page
        assert 'new EventSource("/api/v1/events")' in script
        assert "sessionStorage" in script
        assert "innerHTML" not in script  # server values go in as text only

    run(body)


def test_service_rows_are_counted_filtered_by_words_and_state_and_paged() -> None:
    async def body() -> None:
        control = FakeControl()
        async with serving(control) as server:
            status, doc = await get(f"{server.url}/api/v1/service-rows")
            assert status == 200
            assert doc["total"] == 2 and (doc["offset"], doc["limit"]) == (0, 100)
            app, api = doc["rows"]
            assert app == {
                "name": APP,
                "policy": "failover",
                "state": "degraded",
                "endpoints": 3,
                "endpoints_up": 2,
                "unhealthy": 1,
                "admin_down": 0,
                "admin_up": 0,
            }
            assert (api["state"], api["admin_down"]) == ("down", 1)
            assert doc["counts"] == {
                "services": {"total": 2, "up": 0, "degraded": 1, "down": 1},
                "endpoints": {"total": 4, "up": 2, "down": 2, "admin_down": 1, "admin_up": 0},
            }
            # Words match the name, an endpoint's address or its site; every word must match.
            for query, names in (
                ("app", [APP]),
                ("198.51", [API]),
                ("us", [APP, API]),
                ("us 2001:db8", [APP]),
                ("nothing-like-it", []),
            ):
                _, doc = await get(f"{server.url}/api/v1/service-rows?q={query}")
                assert [r["name"] for r in doc["rows"]] == names, query
                assert doc["counts"]["services"]["total"] == 2  # counts are of everything
            _, doc = await get(f"{server.url}/api/v1/service-rows?state=down")
            assert [r["name"] for r in doc["rows"]] == [API]
            _, doc = await get(f"{server.url}/api/v1/service-rows?state=admin")
            assert [r["name"] for r in doc["rows"]] == [API]
            _, doc = await get(f"{server.url}/api/v1/service-rows?offset=1&limit=1")
            assert (doc["total"], [r["name"] for r in doc["rows"]]) == (2, [API])
            for bad in ("state=sideways", "limit=0", "limit=501", "offset=-1", "offset=x"):
                status, doc = await get(f"{server.url}/api/v1/service-rows?{bad}")
                assert status == 400 and doc["error"], bad

    run(body)


def test_summary_counts_peers_with_heartbeat_age_and_the_cluster_link() -> None:
    async def body() -> None:
        control = FakeControl()
        control.peer_views = [
            PeerView(name="us", state="fresh", heartbeat=T0, heartbeat_age=2.5, endpoints=3),
            PeerView(name="ap", state="stale", detail="no answer within 30s"),
        ]
        control.cluster_view = ClusterView("redis://10.0.0.5:6379/0", True, "gslb1:1:abc", "lock", members=3)
        control.log.record(T0, ChangeKind.VERDICT, "down", APP, "2001:db8::1")
        async with serving(control) as server:
            status, doc = await get(f"{server.url}/api/v1/summary")
        assert status == 200
        assert (doc["ready"], doc["seq"]) == (True, 1)
        assert doc["services"] == {"total": 2, "up": 0, "degraded": 1, "down": 1}
        peers = doc["peers"]
        assert (peers["total"], peers["fresh"], peers["stale"]) == (2, 1, 1)
        assert [(p["name"], p["state"], p["heartbeat_age"]) for p in peers["sites"]] == [
            ("us", "fresh", 2.5),
            ("ap", "stale", None),
        ]
        assert doc["cluster"] == {
            "redis": "redis://10.0.0.5:6379/0",
            "connected": True,
            "instance_id": "gslb1:1:abc",
            "sync_mode": "lock",
            "members": 3,
        }

    run(body)


def test_answer_asks_control_for_an_address_or_a_subnet_as_ecs_and_refuses_bad_questions() -> None:
    async def body() -> None:
        control = FakeControl()
        async with serving(control) as server:
            status, doc = await get(f"{server.url}/api/v1/services/app/answer?client=10.1.2.3")
            assert status == 200
            assert (doc["name"], doc["type"], doc["client"], doc["rcode"]) == (
                APP,
                "A",
                "10.1.2.3",
                "NOERROR",
            )
            assert doc["answer"] == [f"{APP} 30 IN A 192.0.2.1"]
            status, doc = await get(f"{server.url}/api/v1/services/{APP}/answer?client=10.2.3.4/16&type=aaaa")
            assert (status, doc["client"], doc["type"]) == (200, "10.2.0.0/16", "AAAA")
            for query, message in (
                ("", "client is required"),
                ("client=banana", "not an IP address or a subnet"),
                ("client=10.0.0.1&type=BOGUS", "unknown type 'BOGUS'"),
            ):
                status, doc = await get(f"{server.url}/api/v1/services/app/answer?{query}")
                assert status == 400 and message in doc["error"], query
            status, doc = await get(f"{server.url}/api/v1/services/nope/answer?client=10.0.0.1")
            assert (status, doc["error"]) == (404, "no service nope.")
        assert control.answers == [
            (APP, "A", "10.1.2.3", None),
            (APP, "AAAA", "10.2.0.0", "10.2.0.0/16"),
        ]

    run(body)


def test_changes_are_listed_newest_last_and_since_says_when_the_ring_forgot_some() -> None:
    async def body() -> None:
        control = FakeControl()  # a ring of 50
        for i in range(60):
            control.log.record(
                T0 + i, ChangeKind.VERDICT, "down" if i % 2 else "up", APP, "192.0.2.1", f"#{i}"
            )
        async with serving(control) as server:
            _, doc = await get(f"{server.url}/api/v1/changes")
            assert (doc["seq"], doc["missed"], len(doc["changes"])) == (60, False, 50)
            assert [c["seq"] for c in doc["changes"]][:2] == [11, 12]
            first = doc["changes"][0]
            assert first == {
                "seq": 11,
                "time": T0 + 10,
                "at": "2023-11-14T22:13:30.000Z",
                "kind": "verdict",
                "state": "up",
                "service": APP,
                "address": "192.0.2.1",
                "detail": "#10",
            }
            _, doc = await get(f"{server.url}/api/v1/changes?since=58")
            assert ([c["seq"] for c in doc["changes"]], doc["missed"]) == ([59, 60], False)
            _, doc = await get(f"{server.url}/api/v1/changes?since=3")
            assert doc["missed"] is True and doc["changes"][0]["seq"] == 11
            _, doc = await get(f"{server.url}/api/v1/changes?since=60")
            assert (doc["changes"], doc["missed"]) == ([], False)
            status, _ = await get(f"{server.url}/api/v1/changes?since=-1")
            assert status == 400

    run(body)


async def next_event(stream: aiohttp.StreamReader) -> tuple[str, dict[str, Any], str]:
    """(event name, data, id) of the next event, skipping comments and the retry line."""
    fields: dict[str, str] = {}
    while True:
        line = (await asyncio.wait_for(stream.readline(), 5)).decode().rstrip("\n")
        if not line:
            if "event" in fields:
                return fields["event"], json.loads(fields["data"]), fields.get("id", "")
            continue
        if line.startswith(":"):
            continue
        key, _, value = line.partition(": ")
        fields[key] = value


def test_event_stream_says_hello_then_one_change_event_per_burst_naming_the_services() -> None:
    async def body() -> None:
        control = FakeControl()
        control.log.record(T0, ChangeKind.ADMIN, "down", API, "198.51.100.7", "by api")
        async with (
            serving(control) as server,
            aiohttp.ClientSession() as session,
            session.get(f"{server.url}/api/v1/events") as response,
        ):
            assert response.content_type == "text/event-stream"
            assert await next_event(response.content) == ("hello", {"seq": 1}, "1")
            # A burst of verdicts: one event (they arrive within the coalescing window).
            control.log.record(T0 + 1, ChangeKind.VERDICT, "down", APP, "192.0.2.1", "HTTP 503")
            control.log.record(T0 + 1, ChangeKind.VERDICT, "down", APP, "2001:db8::1", "timeout")
            name, data, event_id = await next_event(response.content)
            assert (name, event_id) == ("change", "3")
            assert (data["seq"], data["all"], data["missed"], data["services"]) == (3, False, False, [APP])
            assert [c["address"] for c in data["changes"]] == ["192.0.2.1", "2001:db8::1"]
            # A reload may change any service.
            control.log.record(T0 + 2, ChangeKind.RELOAD, "applied", detail="gslbd.yaml")
            name, data, _ = await next_event(response.content)
            assert (name, data["all"], data["services"]) == ("change", True, [])

    run(body)


def test_a_reconnecting_browser_gets_what_it_missed_since_last_event_id() -> None:
    async def body() -> None:
        control = FakeControl()
        for i in range(3):
            control.log.record(T0 + i, ChangeKind.VERDICT, "up", APP, "192.0.2.1")
        async with (
            serving(control) as server,
            aiohttp.ClientSession() as session,
            session.get(f"{server.url}/api/v1/events", headers={"Last-Event-ID": "1"}) as response,
        ):
            assert (await next_event(response.content))[0] == "hello"
            name, data, event_id = await next_event(response.content)
        assert (name, event_id, [c["seq"] for c in data["changes"]]) == ("change", "3", [2, 3])

    run(body)


def test_event_streams_are_bounded_and_end_when_the_server_stops() -> None:
    async def body() -> None:
        control = FakeControl()
        server = ApiServer(control, ListenAddress("127.0.0.1", 0), None, max_event_clients=2)
        await server.start()
        async with aiohttp.ClientSession() as session:
            first = await session.get(f"{server.url}/api/v1/events")
            second = await session.get(f"{server.url}/api/v1/events")
            assert (await next_event(first.content))[0] == "hello"
            assert (await next_event(second.content))[0] == "hello"
            async with session.get(f"{server.url}/api/v1/events") as third:
                assert third.status == 503
                assert third.headers["Retry-After"] == "5"
                assert "at most 2" in (await third.json())["error"]
            assert server.events.open == 2
            second.close()
            # The closed stream's slot is given back when the server notices (at its next write).
            control.log.record(T0, ChangeKind.VERDICT, "up", APP, "192.0.2.1")
            assert (await next_event(first.content))[0] == "change"
            await wait_for(lambda: server.events.open == 1)
            began = asyncio.get_running_loop().time()
            await server.stop()
            assert await asyncio.wait_for(first.content.read(), 5) == b""  # the stream ended
            assert asyncio.get_running_loop().time() - began < 1.0
            first.close()

    run(body)


def test_change_event_names_at_most_200_services_else_all() -> None:
    log = ChangeLog()
    for i in range(201):
        log.record(T0, ChangeKind.VERDICT, "down", f"s{i}.{APP}", "192.0.2.1")
    changes, missed = log.since(0)
    data = change_event(log.last_seq, list(changes), missed)
    assert (data["all"], data["services"], len(data["changes"])) == (True, [], 50)
    data = change_event(log.last_seq, list(changes)[:200], missed)
    assert data["all"] is False and len(data["services"]) == 200


@pytest.mark.parametrize("capacity", [0, -1])
def test_change_log_needs_room_for_one_change(capacity: int) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        ChangeLog(capacity)
