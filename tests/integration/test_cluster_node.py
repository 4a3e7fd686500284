"""ClusterNode against a real redis-server: the lock, the keys with their values and TTLs, the message
on the channel, the start-up seed, sync_mode none, admin states, and Redis going away and coming back.
The nodes' `feed` records what would go into the rise/fall machines; the probes are not run here."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster_support import APP, ZONE, captured, cluster_config, with_port
from gslbd_harness import free_port
from health_app_support import wait_for
from redis_support import RedisProcess, next_message, running_redis

from gslbd.app.reconcile import probed_endpoints
from gslbd.clock import SystemClock
from gslbd.cluster import ClusterNode
from gslbd.config import load_config_text
from gslbd.metrics import REGISTRY
from gslbd.model.config import Config
from gslbd.model.service import Endpoint, EndpointKey
from gslbd.state.status import ProbeResult
from gslbd.state.store import MemoryStateStore
from gslbd.types import AdminState

A = (APP, "192.0.2.10")
LOCK_A = f"gslb:lock:{ZONE}:{APP}:192.0.2.10"
HEALTH_A = f"gslb:health:{ZONE}:{APP}:192.0.2.10"


@dataclass
class Fed:
    results: list[tuple[str, bool, str]] = field(default_factory=list)
    admin: list[tuple[EndpointKey, AdminState]] = field(default_factory=list)

    def feed(self, endpoint: Endpoint, result: ProbeResult) -> None:
        self.results.append((endpoint.address, result.ok, result.detail))

    def on_admin(self, key: EndpointKey, state: AdminState) -> None:
        self.admin.append((key, state))


def config_for(url: str, **kwargs: Any) -> Config:
    return load_config_text(with_port(cluster_config(url, 9, **kwargs)))


def endpoints(config: Config) -> list[Endpoint]:
    return sorted(probed_endpoints(config).values(), key=lambda e: e.address)


@contextlib.asynccontextmanager
async def nodes(
    config: Config, count: int, timeout: float = 1.0
) -> AsyncIterator[list[tuple[ClusterNode, Fed]]]:
    assert config.cluster is not None
    made = []
    for i in range(count):
        fed = Fed()
        node = ClusterNode(
            config.cluster.redis,
            SystemClock(),
            fed.feed,
            fed.on_admin,
            local_store=MemoryStateStore(),
            instance_id=f"node-{i}",
            timeout=timeout,
        )
        made.append((node, fed))
    try:
        for node, _ in made:
            await node.start(config, endpoints(config))
        yield made
    finally:
        for node, _ in made:
            await node.stop()


def sample(name: str, labels: dict[str, str] | None = None) -> float:
    return REGISTRY.get_sample_value(name, labels or {}) or 0.0


async def race(members: Sequence[tuple[ClusterNode, Fed]], endpoint: Endpoint) -> list[bool]:
    return list(await asyncio.gather(*(node.acquire(endpoint) for node, _ in members)))


def test_one_of_three_instances_wins_the_lock_and_the_others_skip_the_probe(tmp_path: Path) -> None:
    async def body(server: RedisProcess) -> None:
        config = config_for(server.url, interval="10s")
        ep = endpoints(config)[0]
        client = server.client()
        client.set(HEALTH_A, "1", px=20_000)  # an earlier cycle's result: the losers do not fall back
        async with nodes(config, 3) as members:
            skipped = sample("gslbd_cluster_probes_skipped_total")
            won = await race(members, ep)
            assert won.count(True) == 1
            winner = members[won.index(True)][0]
            assert client.get(LOCK_A) == winner.instance_id
            assert 4_900 < client.pttl(LOCK_A) <= 5_000  # max(10 s / 2, 2 s)
            assert sample("gslbd_cluster_probes_skipped_total") == skipped + 2
            # In the same cycle nobody else gets it, however often they ask.
            for _ in range(3):
                assert await race([m for m in members if m[0] is not winner], ep) == [False, False]

    with running_redis(tmp_path) as server:
        asyncio.run(body(server))


def test_the_lock_lives_2s_for_short_intervals_and_its_holder_keeps_it_cycle_after_cycle(
    tmp_path: Path,
) -> None:
    async def body(server: RedisProcess) -> None:
        config = config_for(server.url, interval="500ms")
        ep = endpoints(config)[0]
        client = server.client()
        client.set(HEALTH_A, "1", px=1_000)
        async with nodes(config, 2) as members:
            won = await race(members, ep)
            assert won.count(True) == 1
            winner = members[won.index(True)][0]
            assert 1_900 < client.pttl(LOCK_A) <= 2_000
            await asyncio.sleep(0.6)  # the next cycle: the 2 s lock is still there
            client.set(HEALTH_A, "1", px=1_000)
            again = await race(members, ep)
            assert members[again.index(True)][0] is winner
            assert again.count(True) == 1
            assert 1_900 < client.pttl(LOCK_A) <= 2_000  # renewed by its holder

    with running_redis(tmp_path) as server:
        asyncio.run(body(server))


def test_the_winner_writes_1_or_0_for_two_intervals_and_publishes_the_json_update(tmp_path: Path) -> None:
    async def body(server: RedisProcess) -> None:
        config = config_for(server.url, interval="3s")
        ep = endpoints(config)[0]
        client = server.client()
        listener = client.pubsub(ignore_subscribe_messages=True)
        listener.subscribe("gslb:health:updates")
        async with nodes(config, 1) as [(node, _)]:
            assert await node.acquire(ep) is True
            await node.publish(ep, ProbeResult(ok=False, detail="HTTP 503"))
            assert client.get(HEALTH_A) == "0"
            assert 5_900 < client.pttl(HEALTH_A) <= 6_000
            message = next_message(listener)
            assert message is not None
            assert message["channel"] == "gslb:health:updates"
            assert message["data"] == (
                '{"zone":"gslb.example.com.","fqdn":"app.gslb.example.com.","address":"192.0.2.10","alive":false}'
            )
            assert await node.acquire(ep) is True  # its own lock
            await node.publish(ep, ProbeResult(ok=True, detail="HTTP 200"))
            assert client.get(HEALTH_A) == "1"
        listener.close()

    with running_redis(tmp_path) as server:
        asyncio.run(body(server))


def test_a_loser_feeds_the_shared_result_once_whether_read_or_received(tmp_path: Path) -> None:
    async def body(server: RedisProcess) -> None:
        config = config_for(server.url, interval="1s")
        ep = endpoints(config)[0]
        async with nodes(config, 2) as [(first, first_fed), (second, second_fed)]:
            assert await first.acquire(ep) is True
            await first.publish(ep, ProbeResult(ok=False, detail="HTTP 503"))
            await wait_for(lambda: len(second_fed.results) == 1, timeout=2.0)
            assert second_fed.results == [("192.0.2.10", False, "via redis: down")]
            # The second instance's own cycle: the lock is taken, the key holds the same result.
            assert await second.acquire(ep) is False
            await asyncio.sleep(0.05)
            assert second_fed.results == [("192.0.2.10", False, "via redis: down")]
            assert first_fed.results == []  # its own echo is not fed back to it

    with running_redis(tmp_path) as server:
        asyncio.run(body(server))


def test_a_loser_that_finds_no_shared_result_probes_itself_without_publishing(tmp_path: Path) -> None:
    async def body(server: RedisProcess) -> None:
        config = config_for(server.url, interval="1s")
        ep = endpoints(config)[0]
        client = server.client()
        async with nodes(config, 2) as [(first, _), (second, _)]:
            assert await first.acquire(ep) is True
            assert await second.acquire(ep) is True  # no health key yet: probe locally
            await second.publish(ep, ProbeResult(ok=False, detail="HTTP 503"))
            assert client.get(HEALTH_A) is None  # a fallback probe is not shared
            assert client.get(LOCK_A) == "node-0"

    with running_redis(tmp_path) as server:
        asyncio.run(body(server))


def test_start_seeds_each_endpoint_from_its_health_key(tmp_path: Path) -> None:
    async def body(server: RedisProcess) -> None:
        config = config_for(server.url, interval="5s")
        client = server.client()
        client.set(HEALTH_A, "0", px=10_000)
        client.set(f"gslb:health:{ZONE}:{APP}:192.0.2.11", "1", px=10_000)
        with captured("gslbd.cluster") as logs:
            async with nodes(config, 1) as [(node, fed)]:
                assert fed.results == [
                    ("192.0.2.10", False, "via redis: down"),
                    ("192.0.2.11", True, "via redis: up"),
                ]  # 192.0.2.12 has no key: it keeps its local initial state
                assert node.connected
                # The seeded cycle is not fed a second time by the same result.
                assert await node.acquire(endpoints(config)[0]) is True  # no lock holder: ours
        assert "cluster: 2 of 3 endpoints started from the health shared in Redis" in logs.messages()

    with running_redis(tmp_path) as server:
        asyncio.run(body(server))


def test_sync_mode_none_everyone_probes_writes_and_publishes_but_goes_by_its_own_probes(
    tmp_path: Path,
) -> None:
    async def body(server: RedisProcess) -> None:
        config = config_for(server.url, interval="1s", sync_mode="none")
        ep = endpoints(config)[0]
        client = server.client()
        async with nodes(config, 3) as members:
            assert await race(members, ep) == [True, True, True]
            listener = client.pubsub(ignore_subscribe_messages=True)
            listener.subscribe("gslb:health:updates")
            for node, _ in members:
                await node.publish(ep, ProbeResult(ok=False, detail="HTTP 503"))
            received = [next_message(listener) for _ in members]
            assert all(m is not None and '"alive":false' in m["data"] for m in received)
            assert client.get(HEALTH_A) == "0"
            assert client.get(LOCK_A) is None  # no lock taken
            await asyncio.sleep(0.1)
            assert all(fed.results == [] for _, fed in members)
            listener.close()

    with running_redis(tmp_path) as server:
        asyncio.run(body(server))


def test_admin_states_set_at_one_instance_reach_the_others_and_stay_in_redis(tmp_path: Path) -> None:
    async def body(server: RedisProcess) -> None:
        config = config_for(server.url)
        client = server.client()
        async with nodes(config, 2) as [(first, first_fed), (_, second_fed)]:
            first.store.save_admin(A, AdminState.DOWN)
            await wait_for(lambda: second_fed.admin == [(A, AdminState.DOWN)], timeout=1.0)
            assert client.hgetall("gslb:admin") == {"app.gslb.example.com.|192.0.2.10": "down"}
            await asyncio.sleep(0.05)
            assert first_fed.admin == []  # its own echo
        async with nodes(config, 1) as [(later, _)]:  # an instance started afterwards
            assert later.store.load_admin() == {A: AdminState.DOWN}

    with running_redis(tmp_path) as server:
        asyncio.run(body(server))


def test_redis_down_at_start_warns_once_probes_locally_and_joins_when_redis_comes(tmp_path: Path) -> None:
    async def body(server: RedisProcess) -> None:
        config = config_for(server.url, interval="1s")
        ep = endpoints(config)[0]
        errors = sample("gslbd_redis_errors_total", {"operation": "connect"})
        with captured("gslbd.cluster") as logs:
            async with nodes(config, 1, timeout=0.5) as [(node, _)]:
                assert not node.connected
                assert sample("gslbd_redis_connected") == 0
                assert await node.acquire(ep) is True
                node.store.save_admin(A, AdminState.DOWN)  # kept until Redis is there
                await asyncio.sleep(0.5)  # a few reconnect attempts
                assert sample("gslbd_redis_errors_total", {"operation": "connect"}) > errors + 1
                await asyncio.to_thread(server.start)
                await wait_for(lambda: node.connected, timeout=5.0)
                assert sample("gslbd_redis_connected") == 1
                client = server.client()
                await wait_for(lambda: client.hget("gslb:admin", f"{APP}|192.0.2.10") == "down", timeout=1.0)
        warnings = logs.messages(logging.WARNING)
        assert len(warnings) == 1
        assert warnings[0] == (
            f"cluster: Redis at {server.url} is unreachable (connection refused); "
            "probing locally and reconnecting in the background"
        )
        assert f"cluster: Redis at {server.url} is reachable again; sharing health" in logs.messages()

    server = RedisProcess(tmp_path)
    try:
        asyncio.run(body(server))
    finally:
        server.kill()


def test_an_unreachable_address_costs_the_start_at_most_the_timeout(tmp_path: Path) -> None:
    async def body() -> None:
        config = config_for(f"redis://127.0.0.1:{free_port()}/0")
        loop = asyncio.get_running_loop()
        began = loop.time()
        async with nodes(config, 1, timeout=0.5) as [(node, fed)]:
            assert loop.time() - began < 1.0
            assert not node.connected
            assert fed.results == []

    asyncio.run(body())


def test_redis_killed_later_warns_once_and_the_node_comes_back_when_it_restarts(tmp_path: Path) -> None:
    async def body(server: RedisProcess) -> None:
        config = config_for(server.url, interval="1s")
        ep = endpoints(config)[0]
        with captured("gslbd.cluster") as logs:
            async with nodes(config, 1, timeout=0.5) as [(node, _)]:
                assert node.connected
                await asyncio.to_thread(server.kill)
                await wait_for(lambda: not node.connected, timeout=2.0)
                for _ in range(5):  # every cycle probes locally, no more warnings
                    assert await node.acquire(ep) is True
                await asyncio.to_thread(server.start)
                await wait_for(lambda: node.connected, timeout=5.0)
                assert await node.acquire(ep) is True  # takes the lock on the new server
                assert server.client().get(LOCK_A) == "node-0"
        warnings = logs.messages(logging.WARNING)
        assert len(warnings) == 1
        assert warnings[0].startswith(f"cluster: lost Redis at {server.url} (subscribe: ")

    with running_redis(tmp_path) as server:
        asyncio.run(body(server))


def test_stop_releases_only_the_locks_this_instance_holds(tmp_path: Path) -> None:
    async def body(server: RedisProcess) -> None:
        config = config_for(server.url, interval="1s")
        a, b, _ = endpoints(config)
        client = server.client()
        client.set(f"gslb:lock:{ZONE}:{APP}:192.0.2.11", "someone-else", px=5_000)
        async with nodes(config, 1) as [(node, _)]:
            assert await node.acquire(a) is True
            assert await node.acquire(b) is True  # no health key: falls back, holds nothing
        assert client.get(LOCK_A) is None
        assert client.get(f"gslb:lock:{ZONE}:{APP}:192.0.2.11") == "someone-else"

    with running_redis(tmp_path) as server:
        asyncio.run(body(server))


def test_a_wrong_password_is_reported_like_an_unreachable_redis(tmp_path: Path) -> None:
    async def body(server: RedisProcess) -> None:
        good = config_for(server.url.replace("redis://", "redis://:secret@"))
        bad = config_for(server.url.replace("redis://", "redis://:wrong@"))
        with captured("gslbd.cluster") as logs:
            async with nodes(good, 1) as [(node, _)]:
                assert node.connected
            async with nodes(bad, 1) as [(node, _)]:
                assert not node.connected
        warning = logs.messages(logging.WARNING)[0]
        assert "redis://:***@127.0.0.1" in warning
        assert "wrong" not in warning
        assert "AuthenticationError" in warning

    with running_redis(tmp_path, password="secret") as server:
        asyncio.run(body(server))
