"""Locality names in a running App with real HTTP health checks: a zone's answer changes within 100 ms of
the verdict that causes it, and every locality answer comes from the fast path."""

from __future__ import annotations

import asyncio
import random
import time

import dns.asyncquery
import dns.message
import dns.rdatatype
from health_app_support import dns_port, wait_for

from gslbd.app import App
from gslbd.cli.demo_backends import Backend
from gslbd.clock import SystemClock
from gslbd.config import load_config_text

ORIGIN = "gslb.example.com."
APP = f"app.{ORIGIN}"
ZA = f"app.zone-a.region-1.{ORIGIN}"
ZB = f"app.zone-b.region-1.{ORIGIN}"
R1 = f"app.region-1.{ORIGIN}"
R2 = f"app.region-2.{ORIGIN}"
A_KEY = (APP, "192.0.2.10")


def config_text(a_port: int, b_port: int) -> str:
    check = "{type: http, port: %d, path: /healthz, interval: 200ms, timeout: 100ms, rise: 1, fall: 2}"
    return f"""
version: 1
site: {{name: eu, locality: {{region: region-1, zone: zone-a}}}}
sites:
  us: {{locality: {{region: region-2, zone: zone-c}}}}
dns: {{listen: ["127.0.0.1:0"], lame_duck: 0s}}
zones:
  - origin: {ORIGIN}
    nameservers: [{{name: ns1.{ORIGIN}, address: 127.0.0.1}}]
checks:
  a: {check % a_port}
  b: {check % b_port}
services:
  - name: app
    ttl: 5
    locality_names: true
    endpoints:
      - {{address: 192.0.2.10, check: a, probe_address: 127.0.0.1}}
      - {{address: 192.0.2.20, check: b, probe_address: 127.0.0.1,
          locality: {{region: region-1, zone: zone-b}}}}
"""


async def answer(port: int, name: str, rtype: str = "A") -> list[str]:
    query = dns.message.make_query(name, dns.rdatatype.from_text(rtype))
    reply = await dns.asyncquery.udp(query, "127.0.0.1", port=port, timeout=2.0)
    return [f"{rrset.name} {rrset.rdtype.name} {rd}" for rrset in reply.answer for rd in rrset]


def test_a_zone_answer_changes_within_100ms_of_the_verdict_and_never_takes_the_slow_path() -> None:
    async def body() -> None:
        a, b = Backend("a", "1"), Backend("b", "2")
        await a.start()
        await b.start()
        app = App(load_config_text(config_text(a.port, b.port)), SystemClock(), random.Random(5))
        await app.start()
        try:
            port = dns_port(app.bound)
            await wait_for(lambda: app.book.known(A_KEY) is not None)
            assert await answer(port, ZA) == [f"{ZA} A 192.0.2.10"]
            assert await answer(port, R2) == [
                f"{R2} CNAME {APP}",
                f"{APP} A 192.0.2.10",
                f"{APP} A 192.0.2.20",
            ]

            a.healthy = False
            failed_at = time.time()
            changed_at = 0.0
            while time.time() - failed_at < 5:
                if (await answer(port, ZA))[0] == f"{ZA} CNAME {R1}":
                    changed_at = time.time()
                    break
                await asyncio.sleep(0.005)
            status = app.book.status(A_KEY)
            assert status.healthy is False and status.last_change is not None
            assert 0 <= changed_at - status.last_change < 0.1
            assert await answer(port, ZA) == [f"{ZA} CNAME {R1}", f"{R1} A 192.0.2.20"]
            assert await answer(port, ZB) == [f"{ZB} A 192.0.2.20"]

            a.healthy = True
            await wait_for(lambda: app.book.status(A_KEY).healthy is True, timeout=3)
            await asyncio.sleep(0.1)
            assert await answer(port, ZA) == [f"{ZA} A 192.0.2.10"]
            for name in (ZA, ZB, R1, R2):
                for rtype in ("A", "AAAA", "MX"):
                    await answer(port, name, rtype)
            assert app.responder.slow_count == 0
        finally:
            await app.stop()
            await a.stop()
            await b.stop()

    asyncio.run(body())
