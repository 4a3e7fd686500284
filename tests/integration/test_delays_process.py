"""failover_delay / failback_delay and the health-driven TTL in a real `gslbd serve`, with HTTP backends
on loopback: killing the preferred site's backend moves the failover answer only once failover_delay has
passed, reviving it moves the answer back only after failback_delay; a service with `ttl: {max, min}`
answers the TTL of docs/health.md's formula (fall x interval while up, rise x interval while down)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from gslbd_harness import Running, free_port, running_gslbd
from health_app_support import ThreadedBackend, http_get, wait_until

ZONE = "gslb.example.com."
APP = f"app.{ZONE}"
ADAPTIVE = f"adaptive.{ZONE}"
CAPPED = f"capped.{ZONE}"
EU, US = "192.0.2.10", "198.51.100.10"
FAILOVER_DELAY, FAILBACK_DELAY = 2.0, 3.0
# The verdict comes within one interval (200 ms x 1.1) plus the probe's timeout after the kill; the
# rebuild after the hold ends within ~100 ms; a loaded machine gets a second more.
DETECTION = 0.22 + 0.15 + 0.1 + 1.0


def delay_config(eu: ThreadedBackend, us: ThreadedBackend, api: int, workers: int) -> str:
    check = "type: http, path: /healthz, interval: 200ms, timeout: 150ms, rise: 1, fall: 1"
    return f"""
version: 1
site: {{name: eu}}
dns: {{listen: @LISTEN@, lame_duck: 0s, workers: {workers}}}
api: {{listen: "127.0.0.1:{api}"}}
zones:
  - origin: {ZONE}
    nameservers: [{{name: ns1.{ZONE}, address: 127.0.0.1}}]
checks:
  eu: {{port: {eu.port}, {check}}}
  us: {{port: {us.port}, {check}}}
services:
  - name: {APP}
    policy: failover
    failover_order: [eu, us]
    failover_delay: {FAILOVER_DELAY:g}s
    failback_delay: {FAILBACK_DELAY:g}s
    endpoints:
      - {{address: {EU}, site: eu, check: eu, probe_address: 127.0.0.1}}
      - {{address: {US}, site: us, check: us, probe_address: 127.0.0.1}}
"""


def addresses(server: Running, name: str = APP) -> list[str]:
    reply = server.ask(name)
    return sorted(rd.to_text() for rrset in reply.answer for rd in rrset)


def first_time(server: Running, want: list[str], since: float, timeout: float) -> float:
    """Seconds from `since` until the answer is first `want` (polled every 20 ms by wait_until)."""
    seen: list[float] = []

    def now_answered() -> bool:
        if addresses(server) == want:
            seen.append(time.monotonic())
            return True
        return False

    wait_until(now_answered, timeout=timeout)
    return seen[0] - since


@pytest.mark.parametrize("workers", [1, 2])  # with 2, worker processes build the answers themselves
def test_the_answer_moves_only_after_failover_delay_and_back_only_after_failback_delay(
    tmp_path: Path, workers: int
) -> None:
    eu, us = ThreadedBackend(), ThreadedBackend()
    api = free_port()
    try:
        with running_gslbd(tmp_path, delay_config(eu, us, api, workers), zone=ZONE) as server:
            wait_until(lambda: addresses(server) == [EU])
            killed = time.monotonic()
            eu.close()
            moved = first_time(server, [US], killed, timeout=FAILOVER_DELAY + DETECTION + 5)
            assert FAILOVER_DELAY <= moved <= FAILOVER_DELAY + DETECTION
            revived = time.monotonic()
            eu = ThreadedBackend(eu.port)

            def explained() -> str:
                url = f"http://127.0.0.1:{api}/api/v1/services/{APP}/answer?client=203.0.113.5"
                status, body = http_get(url)
                assert status == 200, body
                return str(body["explanation"])

            # The live explain (the console's, `gslbd explain`'s text) says the failback is held.
            wait_until(lambda: "failback held until" in explained(), timeout=FAILBACK_DELAY)
            back = first_time(server, [EU], revived, timeout=FAILBACK_DELAY + DETECTION + 5)
            assert FAILBACK_DELAY <= back <= FAILBACK_DELAY + DETECTION
            assert server.alive()
    finally:
        eu.close()
        us.close()


def ttl_config(backend: ThreadedBackend, workers: int) -> str:
    return f"""
version: 1
site: {{name: eu}}
dns: {{listen: @LISTEN@, lame_duck: 0s, workers: {workers}}}
zones:
  - origin: {ZONE}
    nameservers: [{{name: ns1.{ZONE}, address: 127.0.0.1}}]
checks:
  web: {{type: http, port: {backend.port}, path: /healthz, interval: 1s, timeout: 300ms, rise: 2, fall: 3}}
services:
  - name: {ADAPTIVE}
    ttl: {{max: 300, min: 1}}
    check: web
    endpoints: [{{address: {EU}, probe_address: 127.0.0.1}}]
  - name: {CAPPED}
    ttl: {{max: 2, min: 1}}
    check: web
    endpoints: [{{address: {US}, probe_address: 127.0.0.1}}]
"""


def ttl(server: Running, name: str) -> int:
    reply = server.ask(name)
    assert reply.answer, reply
    return int(reply.answer[0].ttl)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_health_driven_ttl_is_within_min_and_max_and_follows_the_formula(
    tmp_path: Path, workers: int
) -> None:
    backend = ThreadedBackend()
    try:
        with running_gslbd(tmp_path, ttl_config(backend, workers), zone=ZONE) as server:
            seen: set[int] = set()

            def answered(want: int) -> bool:
                now = ttl(server, ADAPTIVE)
                seen.add(now)
                return now == want

            # Up after its first result: fall x interval - whole seconds since that result = 3 x 1 - 0.
            wait_until(lambda: answered(3))
            wait_until(lambda: ttl(server, CAPPED) == 2)  # 3 after its own first result, at most max 2
            backend.healthy = False
            # Down after 3 failures: rise x interval = 2 x 1 (the next 2 successes bring it back).
            wait_until(lambda: answered(2), timeout=15)
            assert ttl(server, CAPPED) == 2  # 2 x 1 while down, as before
            # Before the first result: the next one decides at once (1 x interval = 1).
            assert seen <= {1, 3, 2}
            assert all(1 <= value <= 300 for value in seen)
    finally:
        backend.close()
