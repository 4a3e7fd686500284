"""Locality names through a real resolver: Unbound (stub-zone -> gslbd on loopback) follows the CNAME
chain zone -> region -> global to the closest healthy level, and sees changes once the TTL passes."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from gslbd_harness import Running, free_port, running_gslbd
from health_app_support import ThreadedBackend
from unbound_support import Resolver, chain, running_unbound, unbound_binary

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        unbound_binary() is None, reason="unbound is not installed (scripts/test installs it)"
    ),
]

ORIGIN = "gslb.example.com."
APP = f"app.{ORIGIN}"
ZA = f"app.zone-a.region-1.{ORIGIN}"
ZB = f"app.zone-b.region-1.{ORIGIN}"
R1 = f"app.region-1.{ORIGIN}"
ZC = f"app.zone-c.region-2.{ORIGIN}"
R2 = f"app.region-2.{ORIGIN}"
TOKEN = "locality-test-token"
TTL = 2


def config(api_port: int, backend_port: int) -> str:
    return f"""
version: 1
site: {{name: eu, locality: {{region: region-1, zone: zone-a}}}}
dns: {{listen: @LISTEN@, lame_duck: 0s}}
api: {{listen: "127.0.0.1:{api_port}", token: {TOKEN}}}
zones:
  - origin: {ORIGIN}
    negative_ttl: 1
    nameservers: [{{name: ns1.{ORIGIN}, address: 127.0.0.1}}]
checks:
  web: {{type: http, port: {backend_port}, path: /healthz, interval: 200ms, timeout: 150ms, rise: 1, fall: 2}}
services:
  - name: app
    ttl: {TTL}
    locality_names: true
    check: none
    endpoints:
      - {{address: 192.0.2.10, check: web, probe_address: 127.0.0.1}}
      - {{address: 192.0.2.20, locality: {{region: region-1, zone: zone-b}}}}
      - {{address: 198.51.100.30, locality: {{region: region-2, zone: zone-c}}}}
"""


@dataclass
class World:
    gslbd: Running
    resolver: Resolver
    backend: ThreadedBackend
    api_port: int

    def set_admin(self, address: str, state: str) -> None:
        url = f"http://127.0.0.1:{self.api_port}/api/v1/services/{APP}/endpoints/{address}/admin"
        request = urllib.request.Request(url, data=json.dumps({"state": state}).encode(), method="PUT")
        request.add_header("Authorization", f"Bearer {TOKEN}")
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=5) as response:
            assert response.status == 200

    def direct(self, name: str) -> list[str]:
        """What gslbd itself answers (no cache in between)."""
        return chain(self.gslbd.ask(name))

    def resolved(self, name: str) -> list[str]:
        """What a client of the resolver gets."""
        return chain(self.resolver.ask(name))

    def wait_resolved(self, name: str, expected: list[str], timeout: float) -> float:
        """Seconds until the resolver answers `expected` (fails after `timeout`)."""
        began = time.monotonic()
        seen: list[str] = []
        while time.monotonic() - began < timeout:
            seen = self.resolved(name)
            if seen == expected:
                return time.monotonic() - began
            time.sleep(0.05)
        raise AssertionError(f"{name}: still {seen} after {timeout}s, expected {expected}")


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    backend = ThreadedBackend()
    api_port = free_port()
    try:
        with (
            running_gslbd(tmp_path, config(api_port, backend.port), zone=ORIGIN) as gslbd,
            running_unbound(tmp_path, ORIGIN, gslbd.port) as resolver,
        ):
            yield World(gslbd, resolver, backend, api_port)
    finally:
        backend.close()


def test_a_zone_whose_shard_fails_resolves_to_the_regions_healthy_shards_and_back_after_recovery(
    world: World,
) -> None:
    assert world.resolved(ZA) == [f"{ZA} A 192.0.2.10"]
    world.backend.healthy = False  # a real HTTP backend fails its checks: down after 2 x 200 ms
    expected = [f"{ZA} CNAME {R1}", f"{R1} A 192.0.2.20"]
    world.wait_resolved(ZA, expected, timeout=2 * 0.2 * 1.1 + TTL + 3)
    world.backend.healthy = True
    world.wait_resolved(ZA, [f"{ZA} A 192.0.2.10"], timeout=0.2 * 1.1 + TTL + 3)


def test_a_region_with_no_healthy_shard_leads_to_the_global_answer(world: World) -> None:
    world.set_admin("198.51.100.30", "down")
    assert world.resolved(ZC) == [
        f"{ZC} CNAME {R2}",
        f"{R2} CNAME {APP}",
        f"{APP} A 192.0.2.10",
        f"{APP} A 192.0.2.20",
    ]
    assert world.resolved(R2) == [f"{R2} CNAME {APP}", f"{APP} A 192.0.2.10", f"{APP} A 192.0.2.20"]
    # A zone nobody declares does not exist.
    reply = world.resolver.ask(f"app.zone-x.region-2.{ORIGIN}")
    assert reply.rcode() == 3 and not reply.answer


def test_the_resolver_keeps_the_old_answer_up_to_the_ttl_then_follows_the_failure_and_the_recovery(
    world: World,
) -> None:
    assert world.resolved(ZB) == [f"{ZB} A 192.0.2.20"]  # now cached for TTL seconds
    world.set_admin("192.0.2.20", "down")
    changed = time.monotonic()
    assert world.direct(ZB) == [f"{ZB} CNAME {R1}", f"{R1} A 192.0.2.10"]  # gslbd: at once
    assert world.resolved(ZB) == [f"{ZB} A 192.0.2.20"]  # the resolver: from its cache
    world.wait_resolved(ZB, [f"{ZB} CNAME {R1}", f"{R1} A 192.0.2.10"], timeout=TTL + 2)
    assert time.monotonic() - changed <= TTL + 2
    world.set_admin("192.0.2.20", "obey")
    world.wait_resolved(ZB, [f"{ZB} A 192.0.2.20"], timeout=TTL + 2)
