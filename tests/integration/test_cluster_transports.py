"""The other ways to reach Redis: rediss:// (TLS, a self-signed certificate made by openssl), unix://
(a socket file) and redis+sentinel:// (a real redis-sentinel that names the master)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from cluster_support import APP, ZONE, cluster_config, with_port
from redis_support import RedisProcess, SentinelProcess, running_redis

from gslbd.app.reconcile import probed_endpoints
from gslbd.clock import SystemClock
from gslbd.cluster import ClusterNode
from gslbd.config import load_config_text
from gslbd.state.status import ProbeResult
from gslbd.state.store import MemoryStateStore

HEALTH_A = f"gslb:health:{ZONE}:{APP}:192.0.2.10"


async def share_one_result(url: str) -> bool:
    """Start a node on `url`, win the lock of one endpoint and share a result; whether it connected."""
    config = load_config_text(with_port(cluster_config(url, 9, interval="1s")))
    assert config.cluster is not None
    node = ClusterNode(
        config.cluster.redis,
        SystemClock(),
        lambda e, r: None,
        lambda k, s: None,
        local_store=MemoryStateStore(),
    )
    endpoints = sorted(probed_endpoints(config).values(), key=lambda e: e.address)
    await node.start(config, endpoints)
    try:
        if not node.connected:
            return False
        assert await node.acquire(endpoints[0]) is True
        await node.publish(endpoints[0], ProbeResult(ok=True, detail="HTTP 200"))
        return True
    finally:
        await node.stop()


def test_rediss_urls_talk_tls_to_a_server_with_a_self_signed_certificate(tmp_path: Path) -> None:
    with running_redis(tmp_path, tls=True) as server:
        assert server.url.startswith("rediss://127.0.0.1:")
        assert asyncio.run(share_one_result(server.url)) is True
        assert server.client().get(HEALTH_A) == "1"
        # Without the CA the certificate is refused: a warning and local mode, never a crash.
        assert asyncio.run(share_one_result(server.url.split("?")[0])) is False


def test_unix_urls_use_the_socket_file(tmp_path: Path) -> None:
    with running_redis(tmp_path, unix=True) as server:
        assert server.url.startswith("unix:///")
        assert asyncio.run(share_one_result(server.url)) is True
        assert server.client().get(HEALTH_A) == "1"


def test_sentinel_urls_find_the_master_through_the_sentinel(tmp_path: Path) -> None:
    master = RedisProcess(tmp_path, name="master")
    master.start()
    sentinel = SentinelProcess(tmp_path, master)
    try:
        sentinel.start()
        url = f"redis+sentinel://127.0.0.1:{sentinel.port}/mymaster/0"
        assert asyncio.run(share_one_result(url)) is True
        assert master.client().get(HEALTH_A) == "1"
        # A sentinel that does not know the master name: unreachable, local mode.
        assert asyncio.run(share_one_result(f"redis+sentinel://127.0.0.1:{sentinel.port}/other/0")) is False
    finally:
        sentinel.kill()
        master.kill()
