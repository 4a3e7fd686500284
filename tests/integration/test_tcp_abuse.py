"""Abuse over TCP: 2,000 reconnecting slow clients against a gslbd whose open-file limit is 1,024.

The clients (in a process of their own) connect, send one byte of a length prefix and wait; when gslbd
closes them (the connection budget is full, or they idled too long) they reconnect at once. Meanwhile
new clients that send whole queries must be answered with p99 below 50 ms, the admin API must stay
reachable, and the budget being hit must be logged (once, not per connection) and counted.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import resource
import shutil
import socket
import statistics
import struct
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path

import dns.message
import dns.rcode
import pytest
from gslbd_harness import Running, free_port, start_gslbd
from health_app_support import wait_until

from gslbd.model.config import ListenAddress
from gslbd.server.listeners import Listeners

pytestmark = pytest.mark.slow

ZONE = "gslb.example.com."
SWARM = 2000
PROBES = 200
OPEN_FILES = 1024  # gslbd's budget: 1024 less a reserve of 128 = 896 connections

CONFIG = f"""
version: 1
dns:
  listen: @LISTEN@
  tcp_idle_timeout: 2s
api: {{listen: "127.0.0.1:@API@"}}
zones:
  - origin: {ZONE}
    nameservers: [{{name: ns1.{ZONE}, address: 192.0.2.53}}]
services:
  - {{name: app.{ZONE}, check: none, endpoints: [{{address: 192.0.2.1}}]}}
"""


async def _slow_client(port: int, connects: Synchronized[int]) -> None:
    while True:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.01)  # the accept queue was full: try again shortly
            continue
        with connects.get_lock():
            connects.value += 1
        try:
            writer.write(b"\x00")  # half a length prefix, and nothing more
            await reader.read(1)  # returns (or raises) when gslbd closes us
        except OSError:
            pass
        finally:
            writer.transport.abort()


async def _swarm(port: int, seconds: float, connects: Synchronized[int]) -> None:
    tasks = [asyncio.create_task(_slow_client(port, connects)) for _ in range(SWARM)]
    await asyncio.sleep(seconds)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def swarm_main(port: int, seconds: float, connects: Synchronized[int]) -> None:
    """The slow clients' process: bounded in time, it stops by itself."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 2 * SWARM + 256)), hard))
    asyncio.run(_swarm(port, seconds, connects))


def probe(port: int, query: bytes) -> float:
    """Connect, ask, read the answer: seconds taken."""
    started = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(struct.pack("!H", len(query)) + query)
        head = s.recv(2, socket.MSG_WAITALL)
        size = struct.unpack("!H", head)[0]
        body = s.recv(size, socket.MSG_WAITALL)
    elapsed = time.perf_counter() - started
    assert dns.message.from_wire(body).rcode() == dns.rcode.NOERROR
    return elapsed


def metrics(api: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{api}/metrics", timeout=5) as response:
        return str(response.read().decode())


def metric(text: str, prefix: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(prefix))


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[Running, int]]:
    api = free_port()
    running = start_gslbd(tmp_path, CONFIG.replace("@API@", str(api)), zone=ZONE, open_files=OPEN_FILES)
    try:
        yield running, api
    finally:
        running.kill()


def test_new_clients_keep_p99_under_50ms_under_2000_reconnecting_slow_clients(
    server: tuple[Running, int],
) -> None:
    running, api = server
    query = dns.message.make_query(f"app.{ZONE}", "A").to_wire()
    ctx = multiprocessing.get_context("fork")
    connects = ctx.Value("q", 0)
    swarm = ctx.Process(target=swarm_main, args=(running.port, 30.0, connects), daemon=True)
    swarm.start()
    try:
        wait_until(lambda: connects.value >= SWARM, timeout=20.0)
        evicted = 'gslbd_connection_budget_evictions_total{listener="dns"}'
        wait_until(lambda: metric(metrics(api), evicted) > 0, timeout=10.0)
        latencies = []
        for _ in range(PROBES):
            latencies.append(probe(running.port, query))
        churn = connects.value
        health = urllib.request.urlopen(f"http://127.0.0.1:{api}/healthz", timeout=5).read()
    finally:
        swarm.kill()
        swarm.join(10)
    p50 = statistics.median(latencies)
    p99 = sorted(latencies)[int(len(latencies) * 0.99) - 1]
    text = metrics(api)
    print(
        f"slow-client swarm: {churn} connects, {metric(text, evicted):.0f} evicted; "
        f"new clients p50 {p50 * 1e3:.1f} ms, p99 {p99 * 1e3:.1f} ms"
    )
    assert p99 < 0.050
    assert health == b"ok\n"
    assert metric(text, evicted) > SWARM - 896
    assert metric(text, 'gslbd_dns_server_events_total{event="tcp_evicted"}') > 0
    assert metric(text, "gslbd_connection_budget_connections") == 896
    assert running.log().count("connection budget of 896 (open-file limit 1024) is full") == 1


def listen_backlog(port: int) -> int:
    """The backlog of the TCP socket listening on `port` (Send-Q of a listening socket in `ss`)."""
    out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[2])


@pytest.mark.skipif(shutil.which("ss") is None, reason="ss (iproute2) is not installed")
@pytest.mark.parametrize("backlog", [None, 77])
def test_tcp_listens_with_the_configured_backlog(backlog: int | None) -> None:
    class Echo:
        def handle(self, data: bytes, src_ip: int, src_v6: bool, tcp: bool = False) -> bytes | None:
            return data

    async def body() -> int:
        kwargs = {} if backlog is None else {"tcp_backlog": backlog}
        listeners = Listeners([ListenAddress("127.0.0.1", 0)], Echo(), tcp_idle_timeout=1.0, **kwargs)
        await listeners.start()
        try:
            return await asyncio.to_thread(listen_backlog, listeners.bound[0].port)
        finally:
            await listeners.close()

    assert asyncio.run(body()) == (backlog or 1024)  # asyncio's create_server alone would make it 100
